"""Golden bytes and round trips for the on-disk layouts (broker/store/layout.py)."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.common import record as record_layout
from broker.common.errors import CorruptRecord
from broker.common.message import SysFlag, pack_host
from broker.store import layout

BORN = pack_host("10.0.0.7", 54321)
STORE = pack_host("192.168.1.2", 10911)
STORE6 = pack_host("::1", 10911)


def test_record_golden_bytes_v1_ipv4():
    body = b"hello"
    props = b"KEYS\x01k1\x02TAGS\x01TagA\x02"
    got = record_layout.encode_record(
        topic=b"TopicTest", queue_id=3, body=body, properties=props, flag=7, sys_flag=0, born_timestamp=1000,
        born_host=BORN, store_host=STORE, store_timestamp=2000, queue_offset=42, commit_log_offset=4096,
        reconsume_times=1, prepared_transaction_offset=9,
    )
    size = 84 + 4 + 5 + 1 + 9 + 2 + len(props)
    want = b"".join([
        struct.pack(">i", size),  # TOTALSIZE
        bytes.fromhex("DAA320A7"),  # MAGICCODE V1
        struct.pack(">i", zlib.crc32(body) & 0x7FFFFFFF),  # BODYCRC
        struct.pack(">i", 3),  # QUEUEID
        struct.pack(">i", 7),  # FLAG
        struct.pack(">q", 42),  # QUEUEOFFSET
        struct.pack(">q", 4096),  # PHYSICALOFFSET
        struct.pack(">i", 0),  # SYSFLAG
        struct.pack(">q", 1000),  # BORNTIMESTAMP
        bytes([10, 0, 0, 7]) + struct.pack(">i", 54321),  # BORNHOST
        struct.pack(">q", 2000),  # STORETIMESTAMP
        bytes([192, 168, 1, 2]) + struct.pack(">i", 10911),  # STOREHOSTADDRESS
        struct.pack(">i", 1),  # RECONSUMETIMES
        struct.pack(">q", 9),  # PREPARED TRANSACTION OFFSET
        struct.pack(">i", 5) + body,  # BODY
        bytes([9]) + b"TopicTest",  # TOPIC, 1-byte length
        struct.pack(">h", len(props)) + props,  # PROPERTIES
    ])
    assert got == want
    assert record_layout.record_size(got) == size


def test_record_v2_and_ipv6_lengths():
    topic = b"t" * 200
    got = record_layout.encode_record(topic=topic, queue_id=0, body=b"", properties=b"", born_host=BORN,
                               store_host=STORE6, sys_flag=SysFlag.STOREHOSTADDRESS_V6)
    assert struct.unpack_from(">I", got, 4)[0] == 0xDAA320AB
    assert len(got) == 84 + 12 + 4 + 2 + 200 + 2
    record = record_layout.decode_record(got)
    assert record.version is record_layout.MessageVersion.V2
    assert record.topic == "t" * 200
    assert record.store_host == STORE6
    assert record.msg_id == (STORE6 + bytes(8)).hex().upper()


# Property text: any character UTF-8 can encode except the properties separators.
_PROP_CHARS = st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",))


@given(
    topic=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=300),
    body=st.binary(max_size=2000),
    props=st.dictionaries(st.text(_PROP_CHARS, min_size=1, max_size=10), st.text(_PROP_CHARS, min_size=1, max_size=20),
                          max_size=5),
    queue_id=st.integers(0, 2**31 - 1),
    offsets=st.tuples(st.integers(0, 2**62), st.integers(0, 2**62)),
    v6=st.booleans(),
)
def test_record_round_trip(topic, body, props, queue_id, offsets, v6):
    from broker.common.message import encode_properties

    store = STORE6 if v6 else STORE
    sys_flag = SysFlag.STOREHOSTADDRESS_V6 if v6 else 0
    data = record_layout.encode_record(topic=topic.encode(), queue_id=queue_id, body=body,
                                properties=encode_properties(props).encode(), born_host=BORN, store_host=store,
                                sys_flag=sys_flag, queue_offset=offsets[0], commit_log_offset=offsets[1])
    record = record_layout.decode_record(data)
    assert (record.topic, record.body, record.properties) == (topic, body, props)
    assert (record.queue_offset, record.commit_log_offset, record.queue_id) == (*offsets, queue_id)
    assert record.store_size == len(data)
    kind = record_layout.RecordKind.MESSAGE
    assert record_layout.check_record(data, 0, len(data)) == record_layout.RecordCheck(kind, len(data))


def test_check_record_finds_blank_torn_and_bad_crc():
    data = record_layout.encode_record(topic=b"T", queue_id=0, body=b"payload", properties=b"", born_host=BORN,
                                store_host=STORE)
    blank = record_layout.encode_blank(64) + bytes(56)
    assert record_layout.check_record(blank, 0, 64) == record_layout.RecordCheck(record_layout.RecordKind.BLANK, 64)
    assert record_layout.check_record(blank, 0, 100).kind is record_layout.RecordKind.END  # a BLANK must fill the file
    assert record_layout.check_record(data[:-3], 0, len(data) - 3).kind is record_layout.RecordKind.END  # torn
    bad_crc = bytearray(data)
    bad_crc[90] ^= 0x01  # a body byte
    assert record_layout.check_record(bad_crc, 0, len(data)).kind is record_layout.RecordKind.END
    assert record_layout.check_record(bytes(200), 0, 200).kind is record_layout.RecordKind.END  # zeros: end of data


def test_decode_rejects_inconsistent_lengths():
    data = bytearray(record_layout.encode_record(topic=b"T", queue_id=0, body=b"abc", properties=b"", born_host=BORN,
                                          store_host=STORE))
    struct.pack_into(">i", data, 0, len(data) + 4)
    with pytest.raises(CorruptRecord, match="TOTALSIZE"):
        record_layout.decode_record(bytes(data) + bytes(4))


def test_iter_records_reads_a_pull_body():
    records = [record_layout.encode_record(topic=b"T", queue_id=0, body=bytes([i]) * i, properties=b"", born_host=BORN,
                                    store_host=STORE, queue_offset=i) for i in range(5)]
    assert [r.queue_offset for r in record_layout.iter_records(b"".join(records))] == list(range(5))


def test_consume_queue_unit_golden():
    unit = layout.encode_cq_unit(0x0102030405060708, 300, -5)
    assert unit == bytes.fromhex("0102030405060708") + (300).to_bytes(4, "big") + (-5).to_bytes(8, "big", signed=True)
    assert layout.decode_cq_unit(unit) == (0x0102030405060708, 300, -5)
    assert layout.cq_pos(3) == 60 and layout.cq_index(60) == 3


def test_index_and_checkpoint_golden():
    header = layout.IndexHeader(1, 2, 3, 4, 5, 6)
    assert layout.encode_index_header(header) == struct.pack(">qqqqii", 1, 2, 3, 4, 5, 6)
    assert layout.INDEX_HEADER_SIZE == 40 and layout.INDEX_ENTRY_SIZE == 20
    assert layout.index_file_size(5_000_000, 20_000_000) == 40 + 5_000_000 * 4 + 20_000_000 * 20
    cp = layout.encode_checkpoint(layout.Checkpoint(1, 2, 3, 4, 5))
    assert len(cp) == 4096 and cp[:40] == struct.pack(">qqqqq", 1, 2, 3, 4, 5) and not any(cp[40:])
    assert layout.decode_checkpoint(cp) == (1, 2, 3, 4, 5)


def test_offset_file_name():
    assert layout.offset_file_name(1073741824) == "00000000001073741824"


@given(topic=st.text(min_size=1, max_size=200).filter(lambda t: len(t.encode()) <= 300),
       body=st.binary(max_size=300),
       props=st.dictionaries(st.text("ABCKEYS_", min_size=1, max_size=8), st.text(min_size=1, max_size=40),
                             max_size=4),
       born_v6=st.booleans(), store_v6=st.booleans(), queue_offset=st.integers(0, 2**40),
       store_timestamp=st.integers(0, 2**45))
def test_dispatch_fields_agree_with_decode_record(topic, body, props, born_v6, store_v6, queue_offset,
                                                  store_timestamp):
    """The dispatch decoder reads the same fields as the full decoder, for V1/V2 topics and both host sizes."""
    from broker.common.message import encode_properties

    sys_flag = (SysFlag.BORNHOST_V6 if born_v6 else 0) | (SysFlag.STOREHOSTADDRESS_V6 if store_v6 else 0)
    record = record_layout.encode_record(
        topic=topic.encode(), queue_id=5, body=body, properties=encode_properties(props).encode(),
        sys_flag=int(sys_flag), born_host=pack_host("::2", 1) if born_v6 else BORN,
        store_host=STORE6 if store_v6 else STORE, store_timestamp=store_timestamp, queue_offset=queue_offset,
        commit_log_offset=777)
    buf = memoryview(bytes(10) + record)
    decoded = record_layout.decode_record(buf, 10)
    fields = record_layout.dispatch_fields(buf, 10)
    assert fields == (decoded.store_size, 5, queue_offset, 777, int(sys_flag), store_timestamp, topic,
                      encode_properties(props))


def test_dispatch_fields_blank_even_in_the_last_eight_bytes():
    blank = record_layout.encode_blank(8)
    assert record_layout.dispatch_fields(memoryview(bytes(100) + blank), 100) is None
    assert record_layout.dispatch_fields(memoryview(record_layout.encode_blank(200) + bytes(192)), 0) is None
    with pytest.raises(CorruptRecord):
        record_layout.dispatch_fields(memoryview(bytes(100) + b"\x00\x00\x00\x08junk"), 100)


def test_index_entries_written_at_once_equal_one_by_one():
    entries = [(1656969516, 100, 0, 0), (-5, 2**40, 3, 1), (0, 7, 2**31 - 1, 2)]
    one = bytearray(100)
    for i, entry in enumerate(entries):
        layout.write_index_entry(one, 20 + 20 * i, *entry)
    many = bytearray(100)
    layout.write_index_entries(many, 20, entries)
    assert many == one
    assert layout.encode_cq_units([(9, 1, 2, 3), (10, 4, 5, -6)]) == (layout.encode_cq_unit(1, 2, 3)
                                                                      + layout.encode_cq_unit(4, 5, -6))
