"""CommitLog records cross-checked against Apache RocketMQ's own Java codec (tests/java/codec/CodecOracle.java).

Both directions run every case through one JVM each: records we encode must be decoded field for field by
MessageDecoder.decode (with its body CRC check on), and the records Java writes (MessageDecoder.encode for V1, the
store's MessageExtEncoder for V2) must decode identically with ours and be byte-identical to what we encode.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from broker.common.message import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_PREPARED_TYPE,
    SysFlag,
    encode_properties,
    offset_msg_id,
    pack_host,
    parse_host,
)
from broker.common.record import MessageRecord, MessageVersion, body_crc, encode_record, iter_records
from tests.javatools import JavaProgram

pytestmark = pytest.mark.java

FOUR_MIB = 4 * 1024 * 1024  # MessageStoreConfig.maxMessageSize: the largest body the broker accepts
V4_BORN, V4_STORE = ("192.0.2.10", 53012), ("198.51.100.7", 10911)
V6_BORN, V6_STORE = ("2001:db8::1:10", 61000), ("2001:db8:85a3::8a2e:370:7334", 10911)
PROPERTIES = {
    PROPERTY_KEYS: "order-1 order-2",
    PROPERTY_TAGS: "TagA",
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "7F00000100002A9F0000000000000001",
    PROPERTY_WAIT_STORE_MSG_OK: "true",
    "CITY": "Zürich 東京 😀",
}


@dataclass(frozen=True, slots=True)
class Case:
    """One message: what both sides encode, and what both sides must decode."""

    name: str
    topic: str
    born_host: tuple[str, int] = V4_BORN
    store_host: tuple[str, int] = V4_STORE
    body: bytes = b"hello rocketmq"
    properties: dict[str, str] = field(default_factory=dict)
    queue_id: int = 3
    flag: int = 7
    queue_offset: int = 42
    commit_log_offset: int = 5 * 1024**3 + 17  # past 2^32: both halves of the long matter
    extra_sys_flag: int = 0
    born_timestamp: int = 1_700_000_000_123
    store_timestamp: int = 1_700_000_000_456
    reconsume_times: int = 2
    prepared_transaction_offset: int = 123_456_789

    @property
    def sys_flag(self) -> int:
        flag = self.extra_sys_flag
        if ":" in self.born_host[0]:
            flag |= SysFlag.BORNHOST_V6
        if ":" in self.store_host[0]:
            flag |= SysFlag.STOREHOSTADDRESS_V6
        return int(flag)

    @property
    def version(self) -> MessageVersion:
        return MessageVersion.for_topic(self.topic.encode())

    def encode(self) -> bytes:
        return encode_record(
            topic=self.topic.encode(),
            queue_id=self.queue_id,
            body=self.body,
            properties=encode_properties(self.properties).encode(),
            flag=self.flag,
            sys_flag=self.sys_flag,
            born_timestamp=self.born_timestamp,
            born_host=pack_host(*self.born_host),
            store_host=pack_host(*self.store_host),
            store_timestamp=self.store_timestamp,
            queue_offset=self.queue_offset,
            commit_log_offset=self.commit_log_offset,
            reconsume_times=self.reconsume_times,
            prepared_transaction_offset=self.prepared_transaction_offset,
        )

    def spec(self) -> dict[str, Any]:
        """The CodecOracle encode spec: hosts as text, body in base64."""
        return {
            "magic": self.version.name,
            "topic": self.topic,
            "body": base64.b64encode(self.body).decode(),
            "properties": self.properties,
            "queueId": self.queue_id,
            "flag": self.flag,
            "queueOffset": self.queue_offset,
            "commitLogOffset": self.commit_log_offset,
            "sysFlag": self.sys_flag,
            "bornTimestamp": self.born_timestamp,
            "bornHost": _host_text(self.born_host),
            "storeTimestamp": self.store_timestamp,
            "storeHost": _host_text(self.store_host),
            "reconsumeTimes": self.reconsume_times,
            "preparedTransactionOffset": self.prepared_transaction_offset,
        }

    def expected(self) -> dict[str, Any]:
        """Every field a decoder must report, in the oracle's names; hosts packed, the body as (length, digest)."""
        store_host = pack_host(*self.store_host)
        return {
            "magic": self.version.name,
            "storeSize": len(self.encode()),
            "bodyCRC": body_crc(self.body),
            "queueId": self.queue_id,
            "flag": self.flag,
            "queueOffset": self.queue_offset,
            "commitLogOffset": self.commit_log_offset,
            "sysFlag": self.sys_flag,
            "bornTimestamp": self.born_timestamp,
            "bornHost": pack_host(*self.born_host),
            "storeTimestamp": self.store_timestamp,
            "storeHost": store_host,
            "reconsumeTimes": self.reconsume_times,
            "preparedTransactionOffset": self.prepared_transaction_offset,
            "body": _digest(self.body),
            "topic": self.topic,
            "properties": self.properties,
            "msgId": offset_msg_id(store_host, self.commit_log_offset),
        }


def _host_text(host: tuple[str, int]) -> str:
    ip, port = host
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def _digest(body: bytes) -> tuple[int, str]:
    """Bodies are compared by length and SHA-256 so a failing 4 MiB case prints a short diff."""
    return len(body), hashlib.sha256(body).hexdigest()


def _random_cases(count: int, seed: int = 20240611) -> list[Case]:
    """Seeded variety on top of the named cases: host families, topic lengths around the V1/V2 switch, unicode."""
    rng = random.Random(seed)
    alphabet = "abcXYZ019 _-=;:,./é東😀"
    cases = []
    for i in range(count):
        properties = {
            f"k{j}{rng.choice(alphabet)}": "".join(rng.choices(alphabet, k=rng.randint(1, 12)))
            for j in range(rng.randint(0, 6))
        }
        cases.append(
            Case(
                name=f"random-{i}",
                topic="".join(rng.choices("ABCxyz019_-%|", k=rng.choice([1, 20, 126, 127, 128, 129, 255, 300]))),
                born_host=rng.choice([V4_BORN, V6_BORN, ("::1", rng.randint(0, 65535))]),
                store_host=rng.choice([V4_STORE, V6_STORE, ("127.0.0.1", rng.randint(0, 65535))]),
                body=rng.randbytes(rng.choice([0, 1, 100, 5000])),
                properties=properties,
                queue_id=rng.randint(0, 1023),
                flag=rng.randint(-(2**31), 2**31 - 1),
                queue_offset=rng.randint(0, 2**63 - 1),
                commit_log_offset=rng.randint(0, 2**63 - 1),
                extra_sys_flag=rng.choice([0, SysFlag.MULTI_TAGS, TRANSACTION_PREPARED_TYPE]),
                born_timestamp=rng.randint(0, 2**63 - 1),
                store_timestamp=rng.randint(0, 2**63 - 1),
                reconsume_times=rng.randint(0, 16),
                prepared_transaction_offset=rng.randint(-1, 2**40),
            )
        )
    return cases


LONG_TOPIC = "LongTopic_" + "x" * 150  # 160 bytes: needs V2's two-byte topic length
BIG_BODY = random.Random(4).randbytes(FOUR_MIB)

CASES = [
    Case("v1-ipv4-properties", "TopicTest", properties=PROPERTIES),
    Case("v1-ipv4-empty-body-no-properties", "TopicTest", body=b""),
    Case("v1-ipv6-properties", "TopicTest", V6_BORN, V6_STORE, properties=PROPERTIES),
    Case("v1-ipv6-empty-body-no-properties", "TopicTest", V6_BORN, V6_STORE, body=b""),
    Case("v1-born-ipv6-store-ipv4", "TopicTest", V6_BORN, V4_STORE, properties=PROPERTIES),
    Case("v1-born-ipv4-store-ipv6", "TopicTest", V4_BORN, V6_STORE, properties=PROPERTIES),
    Case("v1-topic-127-bytes", "t" * 127, properties=PROPERTIES),
    Case("v1-prepared-transaction", "TopicTest", properties=PROPERTIES, extra_sys_flag=TRANSACTION_PREPARED_TYPE),
    Case("v1-4mib-body", "TopicTest", body=BIG_BODY, properties=PROPERTIES),
    Case("v2-topic-128-bytes", "t" * 128, properties=PROPERTIES),
    Case("v2-ipv4-properties", LONG_TOPIC, properties=PROPERTIES),
    Case("v2-ipv4-empty-body-no-properties", LONG_TOPIC, body=b""),
    Case("v2-ipv6-properties", LONG_TOPIC, V6_BORN, V6_STORE, properties=PROPERTIES),
    Case("v2-ipv6-empty-body-no-properties", LONG_TOPIC, V6_BORN, V6_STORE, body=b""),
    Case("v2-born-ipv4-store-ipv6", LONG_TOPIC, V4_BORN, V6_STORE, properties=PROPERTIES),
    Case("v2-4mib-body-ipv6", LONG_TOPIC, V6_BORN, V6_STORE, body=BIG_BODY, properties=PROPERTIES),
    *_random_cases(24),
]
IDS = [case.name for case in CASES]


@functools.cache
def ours() -> list[bytes]:
    """Our encoding of every case; built on first use so an encoder bug fails tests rather than collection."""
    return [case.encode() for case in CASES]


def test_cases_cover_the_issue() -> None:
    """The matrix the issue asks for is really there (guards against a case list edited down)."""
    assert {case.version for case in CASES} == {MessageVersion.V1, MessageVersion.V2}
    for version in MessageVersion:
        mine = [case for case in CASES if case.version is version]
        assert any(c.sys_flag & SysFlag.BORNHOST_V6 and c.sys_flag & SysFlag.STOREHOSTADDRESS_V6 for c in mine)
        assert any(not c.sys_flag & (SysFlag.BORNHOST_V6 | SysFlag.STOREHOSTADDRESS_V6) for c in mine)
        assert any(not c.properties for c in mine) and any(c.properties == PROPERTIES for c in mine)
        assert any(not c.body for c in mine) and any(len(c.body) == FOUR_MIB for c in mine)


def _java_fields(decoded: dict[str, Any]) -> dict[str, Any]:
    """CodecOracle's JSON in the form of Case.expected(). Java leaves body and properties null when absent."""
    body = base64.b64decode(decoded["body"]) if decoded["body"] is not None else b""
    return {
        **decoded,
        "bornHost": pack_host(*parse_host(decoded["bornHost"])),
        "storeHost": pack_host(*parse_host(decoded["storeHost"])),
        "body": _digest(body),
        "properties": decoded["properties"] or {},
    }


def _our_fields(record: MessageRecord) -> dict[str, Any]:
    return {
        "magic": record.version.name,
        "storeSize": record.store_size,
        "bodyCRC": record.body_crc,
        "queueId": record.queue_id,
        "flag": record.flag,
        "queueOffset": record.queue_offset,
        "commitLogOffset": record.commit_log_offset,
        "sysFlag": record.sys_flag,
        "bornTimestamp": record.born_timestamp,
        "bornHost": record.born_host,
        "storeTimestamp": record.store_timestamp,
        "storeHost": record.store_host,
        "reconsumeTimes": record.reconsume_times,
        "preparedTransactionOffset": record.prepared_transaction_offset,
        "body": _digest(record.body or b""),
        "topic": record.topic,
        "properties": record.properties,
        "msgId": record.msg_id,
    }


def _first_difference(a: bytes, b: bytes) -> int | None:
    if a == b:
        return None
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))


# -- ours -> Java -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def java_decoded(codec_oracle: JavaProgram, tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """MessageDecoder's view of all cases, encoded by us and concatenated as in a CommitLog file."""
    log = tmp_path_factory.mktemp("codec") / "ours.commitlog"
    log.write_bytes(b"".join(ours()))
    done = codec_oracle.run("decode", log)
    return [json.loads(line) for line in done.stdout.decode().splitlines()]


def test_java_decodes_every_record_we_write(java_decoded: list[dict[str, Any]]) -> None:
    errors = [d["error"] for d in java_decoded if "error" in d]
    assert not errors
    assert len(java_decoded) == len(CASES)


@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_java_decodes_our_record_field_for_field(java_decoded: list[dict[str, Any]], index: int) -> None:
    assert index < len(java_decoded), "Java stopped decoding before this record"
    assert _java_fields(java_decoded[index]) == CASES[index].expected()


# -- Java -> ours -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def java_encoded(codec_oracle: JavaProgram, tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The records Java writes for all cases, concatenated."""
    work = tmp_path_factory.mktemp("codec")
    spec, out = work / "spec.json", work / "java.commitlog"
    spec.write_text(json.dumps([case.spec() for case in CASES], ensure_ascii=False), encoding="utf-8")
    codec_oracle.run("encode", spec, out)
    return Path(out).read_bytes()


@pytest.fixture(scope="module")
def our_view_of_java(java_encoded: bytes) -> list[MessageRecord]:
    return list(iter_records(java_encoded))


def test_we_decode_every_record_java_writes(our_view_of_java: list[MessageRecord]) -> None:
    assert len(our_view_of_java) == len(CASES)


@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_we_decode_java_record_field_for_field(our_view_of_java: list[MessageRecord], index: int) -> None:
    record = our_view_of_java[index]
    assert _our_fields(record) == CASES[index].expected()


@pytest.mark.parametrize("index", range(len(CASES)), ids=IDS)
def test_java_record_bytes_equal_ours(java_encoded: bytes, index: int) -> None:
    """Same fields in, same bytes out: the strongest form of 'byte-for-byte RocketMQ's layout'."""
    start = sum(map(len, ours()[:index]))
    mine = ours()[index]
    difference = _first_difference(mine, java_encoded[start : start + len(mine)])
    assert difference is None, f"first differing byte: {difference}"


def test_offset_msg_id_matches_java(java_decoded: list[dict[str, Any]], our_view_of_java: list[MessageRecord]) -> None:
    """offsetMsgId from both sides: Java's createMessageId and our offset_msg_id over the same store host/offset."""
    assert [d["msgId"] for d in java_decoded] == [r.msg_id for r in our_view_of_java]
    assert [d["msgId"] for d in java_decoded] == [
        offset_msg_id(pack_host(*c.store_host), c.commit_log_offset) for c in CASES
    ]
