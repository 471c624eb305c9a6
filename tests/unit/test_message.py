"""The shared message vocabulary: properties codec, Java hash codes, hosts and message ids."""

from __future__ import annotations

import types

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.common import message


def test_properties_round_trip_and_java_rules():
    props = {"KEYS": "a b", "TAGS": "TagA", "UNIQ_KEY": "7F0000010001"}
    text = message.encode_properties(props)
    assert text == "KEYS\x01a b\x02TAGS\x01TagA\x02UNIQ_KEY\x017F0000010001\x02"
    assert message.decode_properties(text) == props
    # string2messageProperties drops entries with an empty key or value and tolerates a missing last separator.
    assert message.decode_properties("\x01v\x02k\x01\x02a\x01b") == {"a": "b"}
    assert message.encode_properties({"a": None, "b": "1"}) == "b\x011\x02"


def _formatted(properties: dict) -> str:
    """The encoder as it was written before it took pairs and joined in C: one f-string per entry."""
    return "".join([f"{k}\x01{v}\x02" for k, v in properties.items() if v is not None])


@given(st.dictionaries(st.text(max_size=8), st.none() | st.text(max_size=12) | st.integers(), max_size=6))
def test_encode_properties_writes_what_formatting_each_entry_did(properties):
    """The same string from a dict, from any other mapping and from its pairs, whatever the values."""
    expected = _formatted(properties)
    assert message.encode_properties(properties) == expected
    assert message.encode_properties(types.MappingProxyType(properties)) == expected
    assert message.encode_properties(list(properties.items())) == expected
    assert message.encode_properties(tuple(properties.items())) == expected


def test_encode_properties_keeps_repeated_pairs_in_order():
    pairs = [("WAIT", "true"), ("KEYS", "k"), ("WAIT", "false"), ("DELAY", None)]
    text = message.encode_properties(pairs)
    assert text == "WAIT\x01true\x02KEYS\x01k\x02WAIT\x01false\x02"
    assert text == "".join(message.encode_properties([pair]) for pair in pairs)  # parts concatenate
    assert message.decode_properties(text) == {"WAIT": "false", "KEYS": "k"}
    assert message.encode_properties([]) == message.encode_properties(None) == message.encode_properties({}) == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("hello", 99162322),
        ("TagA", 2598919),
        ("TopicTest#KEY1", sum(ord(c) * 31 ** (13 - i) for i, c in enumerate("TopicTest#KEY1")) % 2**32 - 2**32),
        ("é", 233),
        ("\U0001F600", 0xD83D * 31 + 0xDE00),  # a surrogate pair, as Java's UTF-16 String sees it
    ],
)
def test_java_hash(text, expected):
    assert message.java_hash(text) == expected


def test_tags_code_and_keys():
    assert message.tags_code(None) == 0 and message.tags_code("TagA") == 2598919
    assert message.split_keys("k1  k2 ") == ["k1", "k2"] and message.split_keys(None) == []


def test_hosts_and_offset_msg_id():
    v4 = message.pack_host("127.0.0.1", 10911)
    assert v4 == bytes([127, 0, 0, 1, 0, 0, 0x2A, 0x9F])
    assert message.format_host(v4) == "127.0.0.1:10911"
    v6 = message.pack_host("::1", 80)
    assert len(v6) == 20 and message.format_host(v6) == "[::1]:80"
    assert message.parse_host("[::1]:80") == ("::1", 80)
    msg_id = message.offset_msg_id(v4, 1024)
    assert msg_id == "7F00000100002A9F0000000000000400"
    assert message.decode_offset_msg_id(msg_id) == (v4, 1024)
    offsets = [0, 1024, 2**40 + 7, 2**63 - 1, -1, -(2**63)]
    for host in (v4, v6):
        assert message.offset_msg_ids(host, offsets) == [message.offset_msg_id(host, o) for o in offsets]
    with pytest.raises(ValueError, match="not an offset message id"):
        message.decode_offset_msg_id("ABCD")


@given(st.sampled_from([("127.0.0.1", 10911), ("::1", 80), ("10.1.2.3", 0)]),
       st.lists(st.integers(-(2**63), 2**63 - 1), max_size=40))
def test_offset_msg_ids_text_joins_what_offset_msg_id_makes_one_by_one(host, offsets):
    packed = message.pack_host(*host)
    assert message.offset_msg_ids_text(packed, offsets) == ",".join(message.offset_msg_id(packed, o) for o in offsets)


def test_decode_message_id_names_the_store_host():
    v6 = message.pack_host("::1", 10911)
    assert message.decode_message_id(message.offset_msg_id(v6, 7)) == ("[::1]:10911", 7)
    assert message.decode_message_id("7F00000100002A9F0000000000000400") == ("127.0.0.1:10911", 1024)
    with pytest.raises(ValueError, match="port .* out of range"):
        message.decode_message_id("C00002026AE2CDAADC5980A562820002")  # a UNIQ_KEY
    with pytest.raises(ValueError):
        message.decode_message_id("not hex")


def test_parse_group_of_retry_topics():
    from broker.common.validation import parse_group, retry_topic

    assert parse_group(retry_topic("GID")) == "GID"
    assert parse_group("%RETRY%GID+TopicTest") == "GID"  # POP retry v2
    assert parse_group("%RETRY%a+b+c") == "a+b+c"  # more than one "+": not a POP retry topic
