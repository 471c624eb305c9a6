"""Client message types: the UNIQ_KEY format, Message properties, decoding pulled records, batches, validation."""

from __future__ import annotations

import re
import struct
import time
import zlib

import pytest

from broker.client.message import (
    COMPRESSION_ZLIB_TYPE,
    Message,
    MessageBatch,
    MessageExt,
    MessageQueue,
    check_message,
    check_topic,
    decode_messages,
    encode_batch,
    set_uniq_id,
)
from broker.common.errors import MQClientError
from broker.common.message import (
    SysFlag,
    UniqIdGenerator,
    create_uniq_id,
    encode_properties,
    pack_host,
    uniq_id_ip,
    uniq_id_pid,
    uniq_id_time_ms,
)
from broker.common.message_batch import decode_batch_body
from broker.common.record import encode_record
from broker.remoting.codes import ResponseCode

HEX32 = re.compile(r"[0-9A-F]{32}")


def _month_start_ms(now_ms: int) -> int:
    t = time.localtime(now_ms / 1000)
    return int(time.mktime((t.tm_year, t.tm_mon, 1, 0, 0, 0, 0, 0, -1)) * 1000)


# -- UNIQ_KEY ----------------------------------------------------------------------------------------------------------


def test_uniq_id_layout_is_message_client_id_setter() -> None:
    now = 1_700_000_123_456
    gen = UniqIdGenerator(ip=bytes([10, 1, 2, 3]), pid=0x12345, seed=0xCAFEBABE)
    uniq = gen.create(now)
    assert HEX32.fullmatch(uniq)
    raw = bytes.fromhex(uniq)
    ip, pid, loader, span, counter = struct.unpack(">4sHIIH", raw)
    assert (ip, pid, loader, counter) == (bytes([10, 1, 2, 3]), 0x2345, 0xCAFEBABE, 0)
    assert span == now - _month_start_ms(now)
    assert gen.create(now)[-4:] == "0001"


def test_uniq_id_counter_wraps_at_16_bits() -> None:
    gen = UniqIdGenerator(ip=bytes(4), pid=1, seed=1)
    now = 1_700_000_000_000
    ids = [gen.create(now) for _ in range(0x10001)]
    assert ids[0xFFFF][-4:] == "FFFF" and ids[0x10000][-4:] == "0000"
    assert len(set(ids)) == 0x10000


def test_uniq_id_round_trips_ip_pid_and_time() -> None:
    now = 1_700_000_123_456
    uniq = UniqIdGenerator(ip=bytes([192, 168, 1, 20]), pid=4242, seed=7).create(now)
    assert uniq_id_ip(uniq) == "192.168.1.20"
    assert uniq_id_pid(uniq) == 4242
    assert uniq_id_time_ms(uniq, now + 5_000) == now


def test_uniq_id_ipv6_is_56_hex_digits() -> None:
    uniq = UniqIdGenerator(ip=bytes(range(16)), pid=1, seed=1).create(1_700_000_000_000)
    assert len(uniq) == 56 and uniq_id_ip(uniq) == "1:203:405:607:809:a0b:c0d:e0f"


def test_process_uniq_ids_are_unique_and_well_formed() -> None:
    ids = {create_uniq_id() for _ in range(1000)}
    assert len(ids) == 1000 and all(HEX32.fullmatch(i) for i in ids)


def test_set_uniq_id_keeps_an_existing_one() -> None:
    msg = Message("T", b"x", properties={"UNIQ_KEY": "ABC"})
    assert set_uniq_id(msg) == "ABC"
    fresh = Message("T", b"x")
    assert set_uniq_id(fresh) == fresh.properties["UNIQ_KEY"]


# -- Message -----------------------------------------------------------------------------------------------------------


def test_message_properties_as_java_sets_them() -> None:
    msg = Message("T", b"x", tags="TagA", keys=["k1", "k2"], wait_store_msg_ok=False)
    assert msg.properties == {"TAGS": "TagA", "KEYS": "k1 k2", "WAIT": "false"}
    assert Message("T", b"x").properties == {"WAIT": "true"}
    msg.delay_time_level = 3
    assert msg.delay_time_level == 3 and msg.properties["DELAY"] == "3"


def test_message_queue_to_string_is_javas() -> None:
    mq = MessageQueue("T", "broker-a", 3)
    assert str(mq) == "MessageQueue [topic=T, brokerName=broker-a, queueId=3]"
    assert sorted([MessageQueue("T", "b", 1), MessageQueue("T", "a", 2), MessageQueue("S", "z", 0)])[0].topic == "S"
    assert MessageQueue.from_json(mq.to_json()) == mq


# -- decoding pulled records -------------------------------------------------------------------------------------------


def _record(body: bytes, *, offset: int, sys_flag: int = 0, props: dict[str, str] | None = None) -> bytes:
    return encode_record(topic=b"T", queue_id=2, body=body, properties=encode_properties(props or {}).encode(),
                         sys_flag=sys_flag, born_timestamp=111, born_host=pack_host("10.0.0.1", 5555),
                         store_host=pack_host("127.0.0.1", 10911), store_timestamp=222, queue_offset=offset,
                         commit_log_offset=offset * 1000)


def test_decode_messages_reads_every_field() -> None:
    body = _record(b"one", offset=7, props={"TAGS": "A", "UNIQ_KEY": "U1"}) + _record(b"two", offset=8)
    first, second = decode_messages(body, "broker-a")
    assert (first.topic, first.body, first.queue_id, first.queue_offset, first.tags) == ("T", b"one", 2, 7, "A")
    assert (first.born_host, first.store_host, first.store_timestamp) == ("10.0.0.1:5555", "127.0.0.1:10911", 222)
    assert first.msg_id == "U1" and first.broker_name == "broker-a"
    assert first.offset_msg_id == "7F00000100002A9F0000000000001B58"
    assert second.msg_id == second.offset_msg_id  # no UNIQ_KEY: the offset id stands in, as in Java
    assert second.message_queue == MessageQueue("T", "broker-a", 2)


def test_decode_inflates_a_zlib_body_and_clears_the_flag() -> None:
    payload = b"x" * 10_000
    for flag in (SysFlag.COMPRESSED, SysFlag.COMPRESSED | COMPRESSION_ZLIB_TYPE):
        (msg,) = decode_messages(_record(zlib.compress(payload), offset=0, sys_flag=int(flag)))
        assert msg.body == payload and not msg.sys_flag & SysFlag.COMPRESSED


def test_an_lz4_body_is_left_compressed() -> None:
    flag = int(SysFlag.COMPRESSED) | (0x1 << 8)
    (msg,) = decode_messages(_record(b"lz4-bytes", offset=0, sys_flag=flag))
    assert msg.body == b"lz4-bytes" and msg.sys_flag & SysFlag.COMPRESSED
    assert isinstance(msg, MessageExt)


# -- batches and validation --------------------------------------------------------------------------------------------


def test_batch_body_is_message_decoder_encode_messages() -> None:
    msgs = [Message("T", b"a", tags="x"), Message("T", b"bb", flag=5)]
    body = encode_batch(msgs)
    # Hand-built from MessageDecoder.encodeMessage: size, magic 0, crc 0, flag, body, properties
    props = encode_properties(msgs[0].properties).encode()
    first = struct.pack(">iiiii", 20 + 1 + 2 + len(props), 0, 0, 0, 1) + b"a" + struct.pack(">h", len(props)) + props
    assert body.startswith(first)
    decoded = decode_batch_body(body)
    assert [(m.body, m.flag, m.properties) for m in decoded] == [(b"a", 0, msgs[0].properties),
                                                                  (b"bb", 5, msgs[1].properties)]


def test_message_batch_stamps_ids_and_checks_members() -> None:
    msgs = [Message("T", b"a"), Message("T", b"b")]
    batch = MessageBatch(msgs)
    assert all(HEX32.fullmatch(m.uniq_id) for m in msgs) and batch.uniq_id not in {m.uniq_id for m in msgs}
    assert decode_batch_body(batch.body)[1].properties["UNIQ_KEY"] == msgs[1].uniq_id
    with pytest.raises(MQClientError, match="same"):
        MessageBatch([Message("T", b"a"), Message("U", b"b")])
    with pytest.raises(MQClientError, match="Retry Group"):
        MessageBatch([Message("%RETRY%g", b"a")])
    delayed = Message("T", b"a")
    delayed.delay_time_level = 2
    with pytest.raises(MQClientError, match="TimeDelayLevel"):
        MessageBatch([delayed])
    with pytest.raises(MQClientError, match="waitStoreMsgOK"):
        MessageBatch([Message("T", b"a"), Message("T", b"b", wait_store_msg_ok=False)])


@pytest.mark.parametrize("topic,text", [
    ("", "The specified topic is blank"),
    ("a" * 128, "longer than topic max length 127"),
    ("a/b", r"The specified topic\[a/b\] contains illegal characters"),
    ("SCHEDULE_TOPIC_XXXX", r"Sending message to topic\[SCHEDULE_TOPIC_XXXX\] is forbidden"),
])
def test_check_topic_texts(topic: str, text: str) -> None:
    with pytest.raises(MQClientError, match=text):
        check_topic(topic)


@pytest.mark.parametrize("body,text", [
    (b"", "the message body length is zero"),
    (b"x" * (4 * 1024 * 1024 + 1), "the message body size over max value, MAX: 4194304"),
])
def test_check_message_body(body: bytes, text: str) -> None:
    with pytest.raises(MQClientError, match=text) as info:
        check_message(Message("T", body))
    assert info.value.code == ResponseCode.MESSAGE_ILLEGAL
    check_message(Message("T", b"x" * 4 * 1024 * 1024))


def test_a_body_flagged_compressed_that_does_not_inflate_is_kept_as_stored() -> None:
    from broker.client.message import _decompress

    body, flag = _decompress(b"not zlib", 0x1, 1234)
    assert body == b"not zlib" and flag & 0x1
