"""Request signing against the signatures Apache's own ``AclClientRPCHook`` computed (4.9.8 and 5.5.0 gave the same
ones): the content rebuilt from a request's ext fields and body, the Base64 HmacSHA1, and the broker-side check."""

from __future__ import annotations

import dataclasses

import pytest

from broker.remoting.codes import RequestCode
from broker.remoting.command import create_request
from broker.remoting.signing import (
    SessionCredentials,
    calculate_signature,
    sign_request,
    signature,
    signature_matches,
    signed_content,
)

QUERY_A = {"AccessKey": "rocketmq2", "_UNIQUE_KEY_QUERY": "false", "beginTimestamp": "0",
           "endTimestamp": "1700000000000", "key": "order-1", "maxNum": "32", "topic": "TopicTest"}
SEND_C = {"a": "PG", "b": "T", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1700000000000", "h": "0",
          "i": "UNIQ_KEY\x01ABC\x02", "j": "0", "k": "false", "m": "false", "AccessKey": "rocketmq2"}

# (ext fields, body, signature) computed by the Java hook with secret 12345678
GOLDEN = [
    pytest.param(QUERY_A, b"", "LdavQJQl5/Ef+p9sp6Fdif2Q/o8=", id="A-query-with-unique-flag"),
    pytest.param({k: v for k, v in QUERY_A.items() if k != "_UNIQUE_KEY_QUERY"}, b"", "cA3Jkc+1Ig7syW1ywDH27+C/fo8=",
                 id="A'-query-without-unique-flag"),
    pytest.param({"AccessKey": "rocketmq2", "SecurityToken": "tok", "a": "ProducerGroupA", "b": "TopicTest", "e": "0"},
                 b"Hello RocketMQ", "/EyChHGyFYSwSQcCzexAZqYyvzY=", id="B-send-with-token"),
    pytest.param(SEND_C, b"x", "xGhmAOdnaPr1VB/WMXkVv662vuc=", id="C-send-v2-header"),
]


@pytest.mark.parametrize(("fields", "body", "expected"), GOLDEN)
def test_signatures_match_the_java_hook(fields: dict[str, str], body: bytes, expected: str) -> None:
    assert signature(fields, body, "12345678") == expected
    assert len(expected) == 28


def test_content_is_the_values_in_key_order_then_the_body() -> None:
    fields = {"b": "TopicTest", "AccessKey": "rocketmq2", "e": "0", "SecurityToken": "tok", "a": "ProducerGroupA",
              "Signature": "ignored"}
    assert signed_content(fields, b"Hello RocketMQ") == b"rocketmq2tokProducerGroupATopicTest0Hello RocketMQ"
    assert signed_content(fields, (b"Hello ", memoryview(b"RocketMQ"))) == signed_content(fields, b"Hello RocketMQ")


def test_keys_sort_by_utf16_code_units_as_java_does() -> None:
    # U+10000 is the surrogate pair D800 DC00 in UTF-16, which sorts before U+FFFD; code points say the opposite
    assert signed_content({"\U00010000": "1", "\ufffd": "2"}, None) == b"12"
    # an ASCII key among them (an ASCII-only request takes the shorter path to the same order)
    assert signed_content({"\ufffd": "3", "b": "1", "\U00010000": "2"}, None) == b"123"
    assert signed_content({"b": "3", "AccessKey": "1", "a": "2"}, None) == b"123"


def test_a_request_signed_by_the_client_passes_the_broker_check_and_a_changed_one_does_not() -> None:
    request = create_request(RequestCode.QUERY_MESSAGE, {k: v for k, v in QUERY_A.items() if k != "AccessKey"})
    signed = sign_request(request, SessionCredentials("rocketmq2", "12345678"))
    assert signed.ext_fields["AccessKey"] == "rocketmq2"
    assert signed.ext_fields["Signature"] == "LdavQJQl5/Ef+p9sp6Fdif2Q/o8="
    assert "SecurityToken" not in signed.ext_fields
    assert signature_matches(signed, "12345678")
    assert not signature_matches(signed, "87654321")
    tampered = dict(signed.ext_fields, maxNum="33")
    assert not signature_matches(dataclasses.replace(signed, ext_fields=tampered), "12345678")
    unsigned = dict(signed.ext_fields)
    del unsigned["Signature"]
    assert not signature_matches(dataclasses.replace(signed, ext_fields=unsigned), "12345678")


def test_a_signature_with_a_lone_surrogate_does_not_match() -> None:
    """Found by bench/fuzz_preauth.py: a JSON header read without orjson keeps the escape \\ud800 as a lone surrogate,
    and encoding the received Signature for the comparison raised UnicodeEncodeError before authentication."""
    request = sign_request(create_request(RequestCode.QUERY_MESSAGE, {"topic": "T"}),
                           SessionCredentials("rocketmq2", "12345678"))
    forged = dict(request.ext_fields, Signature="\ud800" + request.ext_fields["Signature"][1:])
    assert not signature_matches(dataclasses.replace(request, ext_fields=forged), "12345678")


def test_an_old_client_did_not_sign_the_unique_key_flag() -> None:
    """A 5.x broker rebuilds the content without _UNIQUE_KEY_QUERY for a request of version <= 399 (V4_9_3)."""
    request = create_request(RequestCode.QUERY_MESSAGE, QUERY_A, version=399)
    old = dict(QUERY_A, Signature="cA3Jkc+1Ig7syW1ywDH27+C/fo8=")
    assert signature_matches(dataclasses.replace(request, ext_fields=old), "12345678")
    assert calculate_signature(signed_content(QUERY_A, b"", version=400), "12345678") == "LdavQJQl5/Ef+p9sp6Fdif2Q/o8="


def test_credentials_need_both_keys_and_keep_the_secret_out_of_repr() -> None:
    with pytest.raises(ValueError, match="access key and a secret key"):
        SessionCredentials("ak", "")
    assert "12345678" not in repr(SessionCredentials("ak", "12345678"))

