"""Each loop of broker/_speedups.c against its Python twin (what runs where the extension was not built): the same
bytes written, the same values returned, the same inputs refused."""

from __future__ import annotations

import zlib
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker import _speedups  # built in place by pip install -e .
from broker.common import message as message_module
from broker.common import message_batch
from broker.common import record as record_layout
from broker.common.errors import CorruptRecord, LocalProtocolError, MalformedBody
from broker.common.message import SysFlag, encode_properties, pack_host
from broker.common.message_batch import BatchMessage, _decode_batch_items_py, decode_batch_body, encode_batch_item
from broker.common.record import _check_records_py, decode_record, encode_blank, iter_records
from broker.remoting import command, transaction_batch
from broker.remoting.codes import LanguageCode, RequestCode, SerializeType
from broker.remoting.command import _encode_rocketmq_header_py, _rocketmq_header_fields_py
from broker.remoting.frame import Frame
from broker.store import commit_log, dispatch, index_file
from broker.store.commit_log import StoreMessage, _encoded_properties, _pack_records_py
from broker.store.layout import index_file_size
from connector import records

pytestmark = pytest.mark.smoke  # the C loops and their Python twins, on every interpreter .ci/run tries

pack_c = _speedups.pack_records

HOST_V4 = pack_host("10.0.0.7", 54321)
HOST_V6 = pack_host("2001:db8::7", 10911)
STORE_TS = 1_700_000_000_123


def test_the_store_uses_the_c_loops():
    assert commit_log.pack_records is _speedups.pack_records
    assert dispatch.scan_records is _speedups.scan_records
    assert index_file.put_index_entries is _speedups.put_index_entries
    assert message_module.java_hash is _speedups.java_hash
    assert record_layout.check_records is _speedups.check_records
    assert command.rocketmq_header_fields is _speedups.rocketmq_header_fields
    assert command.encode_rocketmq_header is _speedups.encode_rocketmq_header
    assert message_batch._decode_batch_items_c is _speedups.decode_batch_items
    assert transaction_batch._decode_end_batch_handles_c is _speedups.decode_end_batch_handles
    assert records.pull_columns is _speedups.pull_columns  # its twin test: tests/unit/test_records.py


# -- crc32 and java_hash ---------------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=5000), skip=st.integers(0, 15), value=st.integers(0, 2**32 - 1))
def test_crc32_is_zlibs(data, skip, value):
    view = memoryview(data)[skip:]  # every alignment
    assert _speedups.crc32(view, value) == zlib.crc32(view, value)
    assert _speedups.crc32(view) == zlib.crc32(view)


@settings(max_examples=500, deadline=None)
@given(text=st.text(max_size=60) | st.text(alphabet=st.characters(min_codepoint=0x80), max_size=8))
def test_java_hash_is_the_python_twins(text):
    assert _speedups.java_hash(text) == message_module._java_hash_py(text)


def test_java_hash_counts_utf16_units():
    assert _speedups.java_hash("") == 0
    assert _speedups.java_hash("TagA") == 2598919  # "TagA".hashCode() in Java
    assert _speedups.java_hash("\U0001F600") == 0xD83D * 31 + 0xDE00  # one code point, two UTF-16 units


# -- pack_records ----------------------------------------------------------------------------------------------------


messages = st.builds(
    StoreMessage,
    topic=st.sampled_from(["T", "TopicTest", "é" * 70, "t" * 127, "L" * 128, "%RETRY%g"]),
    queue_id=st.integers(0, 7),
    body=st.binary(max_size=300),
    properties=st.dictionaries(st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "a"]), st.text(min_size=1, max_size=8),
                               max_size=3),
    flag=st.integers(-(2**31), 2**31 - 1),
    sys_flag=st.sampled_from([0, int(SysFlag.TRANSACTION_PREPARED), int(SysFlag.TRANSACTION_COMMIT),
                              int(SysFlag.TRANSACTION_ROLLBACK), int(SysFlag.COMPRESSED), int(SysFlag.BORNHOST_V6)]),
    born_timestamp=st.integers(0, 2**62),
    born_host=st.sampled_from([HOST_V4, HOST_V6]),
    reconsume_times=st.integers(0, 16),
    prepared_transaction_offset=st.integers(0, 2**40),
)


def with_encoded(msg: StoreMessage, producer_bytes: bool) -> StoreMessage:
    if producer_bytes:  # a batch item: the producer's bytes, kept as they are (no trailing separator here)
        msg.encoded_properties = encode_properties(msg.properties).encode().rstrip(b"\x02")
    return msg


def pack_both(msgs, *, room=1 << 20, next_offsets=None, store_host=HOST_V4, base=4096):
    results = []
    for pack in (pack_c, _pack_records_py):
        buf = bytearray(room + 16)
        offsets = dict(next_offsets or {})
        try:
            out = pack(buf, 16, room, base, msgs, STORE_TS, store_host, 1024, 1024 + 400, offsets,
                       _encoded_properties)
        except ValueError as err:
            out = ("refused", *err.args)
        results.append((out, bytes(buf), offsets))
    return results


@settings(max_examples=300, deadline=None)
@given(msgs=st.lists(messages, max_size=6), producer_bytes=st.lists(st.booleans(), min_size=6, max_size=6),
       store_host=st.sampled_from([HOST_V4, HOST_V6]))
def test_pack_records_c_and_python_write_the_same(msgs, producer_bytes, store_host):
    msgs = [with_encoded(m, p) for m, p in zip(msgs, producer_bytes, strict=False)]
    next_offsets = {("TopicTest", 1): 41, ("T", 0): 7}
    (c_out, c_buf, c_offsets), (py_out, py_buf, py_offsets) = pack_both(msgs, next_offsets=next_offsets,
                                                                         store_host=store_host)
    assert c_out == py_out
    assert c_buf == py_buf
    assert c_offsets == py_offsets == next_offsets  # the caller commits ``pending``, the packer never does
    total, queue_offsets, record_offsets, pending = c_out
    records = list(iter_records(memoryview(c_buf)[16:16 + total]))
    assert [r.commit_log_offset for r in records] == record_offsets
    assert [r.queue_offset for r in records] == queue_offsets
    assert [r.body for r in records] == [m.body for m in msgs]
    assert all(r.store_timestamp == STORE_TS and r.store_host == store_host for r in records)
    for key, next_offset in pending.items():
        taken = [r.queue_offset for r, m in zip(records, msgs, strict=True)
                 if (m.topic, m.queue_id) == key and not m.sys_flag & 0x4]
        assert taken == list(range(next_offset - len(taken), next_offset))


def test_pack_records_writes_nothing_that_does_not_fit():
    msgs = [StoreMessage("TopicTest", 0, b"x" * 100)]
    for out, buf, _ in pack_both(msgs, room=120):
        assert out[0] > 120 and out[1:] == (None, None, None)
        assert buf == bytes(len(buf))


@pytest.mark.parametrize("msg, status, reason", [
    (StoreMessage("T", 0, b"x" * 1025), "MESSAGE_ILLEGAL", "message body is 1025 bytes, maxMessageSize is 1024"),
    (StoreMessage("T", 0, b"", encoded_properties=b"k" * 32768), "PROPERTIES_SIZE_EXCEEDED",
     "properties are 32768 bytes, at most 32767 are allowed"),
    (StoreMessage("T", 0, b"x" * 1000, {"k": "v" * 400}), "MESSAGE_ILLEGAL", "message is 1495 bytes stored, at most "
                                                                             "1424 fit"),
    (StoreMessage("T", 0, b"", born_host=b"\x01\x02"), "MESSAGE_ILLEGAL",
     "born host must be 8 (IPv4) or 20 (IPv6) packed bytes"),
    (StoreMessage("t" * 32768, 0, b""), "MESSAGE_ILLEGAL", "topic is 32768 bytes, at most 32767 fit"),
])
def test_pack_records_both_refuse_what_cannot_be_stored(msg, status, reason):
    ok = StoreMessage("T", 0, b"fine")
    for out, buf, _ in pack_both([ok, msg]):
        assert out == ("refused", status, reason)
        assert buf == bytes(len(buf))


def test_pack_records_a_record_decodes_as_packed():
    msg = StoreMessage("TopicTest", 3, b"hello", {"KEYS": "k1", "TAGS": "TagA"}, flag=9, born_timestamp=5,
                       born_host=HOST_V6, reconsume_times=2)
    (out, buf, _), _ = pack_both([msg], next_offsets={("TopicTest", 3): 12})
    record = decode_record(memoryview(buf)[16:16 + out[0]])
    assert (record.topic, record.queue_id, record.queue_offset, record.commit_log_offset, record.flag) == \
        ("TopicTest", 3, 12, 4096, 9)
    assert record.properties == {"KEYS": "k1", "TAGS": "TagA"}
    assert record.sys_flag == int(SysFlag.BORNHOST_V6)
    assert (record.born_host, record.store_host, record.reconsume_times) == (HOST_V6, HOST_V4, 2)


# -- scan_records ----------------------------------------------------------------------------------------------------


def packed(msgs, size=1 << 16):
    buf = bytearray(size)
    total, *_ = pack_c(buf, 0, size, 1 << 30, msgs, STORE_TS, HOST_V4, 1024, 1424, {}, _encoded_properties)
    return buf, total


NAMES = dispatch.DISPATCH_PROPERTIES


@settings(max_examples=200, deadline=None)
@given(msgs=st.lists(messages, min_size=1, max_size=8), producer_bytes=st.lists(st.booleans(), min_size=8,
                                                                               max_size=8),
       max_records=st.integers(1, 9), blank=st.booleans(),
       names=st.lists(st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY", "a", "DELAY", "KEY"]), unique=True, max_size=5))
def test_scan_records_c_and_python_read_the_same(msgs, producer_bytes, max_records, blank, names):
    msgs = [with_encoded(m, p) for m, p in zip(msgs, producer_bytes, strict=False)]
    buf, total = packed(msgs)
    limit = total
    if blank:
        buf[total:total + 8] = encode_blank(100)
        limit = total + 100
    names = tuple(names)
    c = _speedups.scan_records(buf, 0, limit, max_records, names)
    assert c == dispatch._scan_records_py(memoryview(buf), 0, limit, max_records, names)
    records, pos, stopped_at_blank = c
    assert len(records) == min(len(msgs), max_records)
    assert stopped_at_blank == (blank and max_records > len(msgs))
    for record, decoded in zip(records, iter_records(memoryview(buf)[:total], body=False), strict=False):
        wanted = {name: value for name, value in decoded.properties.items() if name in names}
        assert record == (decoded.store_size, decoded.queue_id, decoded.queue_offset, decoded.commit_log_offset,
                          decoded.sys_flag, decoded.store_timestamp, decoded.topic, wanted)


def test_scan_records_read_only_the_properties_named_the_last_value_of_each():
    """A transactional record's dozen properties: dispatch gets the three or four it reads, as Java's decoder would
    read them (the last of a repeated name wins, an empty name or value is no entry)."""
    props = (b"WAIT\x01true\x02TRAN_MSG\x01true\x02TAGS\x01first\x02UNIQ_KEY\x01AB12\x02TAGS\x01second\x02"
             b"KEYS\x01\x02\x01x\x02REAL_TOPIC\x01T\x02")
    buf, total = packed([StoreMessage("T", 0, b"body", encoded_properties=props)])
    for scan in (_speedups.scan_records, dispatch._scan_records_py):
        records, pos, _ = scan(memoryview(buf), 0, total, 10, NAMES)
        assert pos == total
        assert records[0][7] == {"TAGS": "second", "UNIQ_KEY": "AB12"}
        assert scan(memoryview(buf), 0, total, 10, ())[0][0][7] == {}


def test_scan_records_refuse_names_that_are_not_ascii_str():
    buf, total = packed([StoreMessage("T", 0, b"body", {"TAGS": "a"})])
    for names in (("TAGS", b"KEYS"), ("TAGS", "KÉYS")):
        with pytest.raises(TypeError, match="names must be ASCII str"):
            _speedups.scan_records(buf, 0, total, 10, names)
    with pytest.raises(TypeError):
        _speedups.scan_records(buf, 0, total, 10, ["TAGS"])


@settings(max_examples=200, deadline=None)
@given(msgs=st.lists(messages, min_size=1, max_size=6), cut=st.integers(0, 10_000))
def test_scan_records_stop_before_a_record_not_whole_yet(msgs, cut):
    """A slave's CommitLog may end inside a record (the master sends slices): the scan stops before it, unhurt."""
    buf, total = packed(msgs)
    limit = cut % (total + 1)
    c = _speedups.scan_records(buf, 0, limit, 10, NAMES)
    assert c == dispatch._scan_records_py(memoryview(buf), 0, limit, 10, NAMES)
    records, pos, _ = c
    assert pos <= limit and pos == sum(r[0] for r in records)
    whole = list(iter_records(memoryview(buf)[:total], body=False))
    assert len(records) == sum(1 for r in whole if r.commit_log_offset + r.store_size - (1 << 30) <= limit)


@pytest.mark.parametrize("damage", ["magic", "size", "topic_utf8", "properties_utf8", "short"])
def test_scan_records_both_refuse_what_is_not_a_record(damage):
    msgs = [StoreMessage("TopicTest", 0, b"first"), StoreMessage("TopicTest", 1, b"second", {"a": "b", "TAGS": "t"})]
    buf, total = packed(msgs)
    second = int.from_bytes(buf[:4], "big")  # where the second record starts
    if damage == "magic":
        buf[second + 4:second + 8] = b"\x00\x00\x00\x01"
    elif damage == "size":
        buf[second:second + 4] = (len(buf) * 2).to_bytes(4, "big")
    elif damage == "topic_utf8":
        buf[second + 88 + len(b"second") + 4 + 1] = 0xFF  # the topic's first byte
    elif damage == "properties_utf8":  # in the value of a property dispatch does not read: still not a record
        buf[second + 88 + len(b"second") + 4 + 1 + len(b"TopicTest") + 2 + 2] = 0xFF
    else:
        buf = buf[:second + 5]
    for scan in (_speedups.scan_records, dispatch._scan_records_py):
        with pytest.raises(ValueError) as err:
            scan(memoryview(buf), 0, len(buf), 10, NAMES)
        assert err.value.args[0] == second


# -- put_index_entries -----------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=40), start=st.integers(1, 3),
       begin=st.sampled_from([0, STORE_TS - 5000]), steps=st.lists(st.integers(0, 3000), min_size=40, max_size=40))
def test_put_index_entries_c_and_python_write_the_same(keys, start, begin, steps):
    slot_num, index_num = 7, 60  # few slots: chains and reused slots
    timestamps = [STORE_TS + sum(steps[:i]) for i in range(len(keys))]
    items = [(f"T#{k}", 1000 + 97 * i, ts) for i, (k, ts) in enumerate(zip(keys, timestamps, strict=False))]
    outs = []
    for put in (_speedups.put_index_entries, index_file._put_index_entries_py):
        buf = bytearray(index_file_size(slot_num, index_num))
        first = put(buf, slot_num, start, begin, 77, items[:len(items) // 2])  # a second call follows the chains
        second = put(buf, slot_num, first[0], first[2], first[3], items[len(items) // 2:])
        outs.append((first, second, bytes(buf)))
    assert outs[0] == outs[1]
    assert outs[0][1][0] == start + len(items)


def test_scan_records_both_refuse_a_record_shorter_than_its_fixed_fields():
    record = bytearray(88)  # long enough for IPv4 hosts, but its SYSFLAG says both hosts are IPv6 (24 bytes more)
    record[:8] = (88).to_bytes(4, "big") + (0xDAA320A7).to_bytes(4, "big")
    record[36:40] = int(SysFlag.BORNHOST_V6 | SysFlag.STOREHOSTADDRESS_V6).to_bytes(4, "big")
    for scan in (_speedups.scan_records, dispatch._scan_records_py):
        with pytest.raises(ValueError) as err:
            scan(memoryview(bytes(record)), 0, 88, 10, NAMES)
        assert err.value.args[0] == 0


# -- check_records ---------------------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(msgs=st.lists(messages, min_size=1, max_size=6), blank=st.booleans(), flips=st.lists(
    st.tuples(st.integers(0, 4000), st.integers(1, 255)), max_size=2), cut=st.integers(0, 64))
def test_check_records_c_and_python_agree(msgs, blank, flips, cut):
    buf, total = packed(msgs, size=8192)
    limit = total + 200 if blank else total + 64
    if blank:
        buf[total:total + 8] = encode_blank(200)
    for at, xor in flips:  # damage: a CRC, a length, a magic, a UTF-8 byte, or nothing that matters
        if at < limit:
            buf[at] ^= xor
    limit -= cut  # a torn end
    c = _speedups.check_records(bytes(buf), 0, limit)
    assert c == _check_records_py(memoryview(bytes(buf)), 0, limit)
    if not flips and not cut:
        assert c == ((limit, True) if blank else (total, False))


def test_check_records_stops_at_a_bad_crc():
    msgs = [StoreMessage("TopicTest", 0, b"a" * 300), StoreMessage("TopicTest", 0, b"b" * 300)]
    buf, total = packed(msgs)
    first = int.from_bytes(buf[:4], "big")
    buf[first + 88 + 10] ^= 1  # a byte of the second body
    assert _speedups.check_records(bytes(buf), 0, total) == (first, False)


# -- the ROCKETMQ remoting header -------------------------------------------------------------------------------------

texts = st.text(max_size=12) | st.sampled_from(["", "a", "TopicTest", "\ud800x", "東京😀", "k" * 40])
int16s = st.integers(-(2**15), 2**15 - 1)
int32s = st.integers(-(2**31), 2**31 - 1)
header_fields = st.tuples(
    int16s | st.sampled_from([int(RequestCode.SEND_MESSAGE_V2), 2**15, -(2**15) - 1]),  # code
    st.sampled_from(list(LanguageCode)),
    int16s,  # version
    int32s | st.sampled_from([2**31, -(2**31) - 1]),  # opaque
    int32s,  # flag
    st.none() | texts,  # remark
    st.dictionaries(texts, texts, max_size=6),  # extFields
)


def encode_either(encode, fields):
    try:
        return encode(*fields)
    except LocalProtocolError:
        return "refused"


@settings(max_examples=500, deadline=None)
@given(fields=header_fields)
def test_encode_rocketmq_header_c_writes_what_python_writes_or_leaves_it_to_python(fields):
    python = encode_either(_encode_rocketmq_header_py, fields)
    c = _speedups.encode_rocketmq_header(*fields)
    if python == "refused":
        assert c is None  # the Python twin names what does not fit
    else:
        assert c == python
        assert _speedups.rocketmq_header_fields(c) == _rocketmq_header_fields_py(c)


def test_encode_rocketmq_header_c_leaves_what_is_not_plain_to_python():
    fields = [int(RequestCode.SEND_MESSAGE_V2), LanguageCode.JAVA, 0, 1, 0, None, {"topic": "T"}]
    assert _speedups.encode_rocketmq_header(*fields) == _encode_rocketmq_header_py(*fields)
    for at, odd in [(6, {"topic": 1}), (6, {b"topic": "T"}), (0, 1.5), (5, b"remark"), (6, {"k" * 0x8000: "v"})]:
        assert _speedups.encode_rocketmq_header(*fields[:at], odd, *fields[at + 1:]) is None
    mapping = [*fields[:6], MappingProxyType({"topic": "T"})]  # a Mapping, not a dict: Python's to encode
    assert _speedups.encode_rocketmq_header(*mapping) is None
    assert _encode_rocketmq_header_py(*mapping) == _speedups.encode_rocketmq_header(*fields)


@settings(max_examples=500, deadline=None)
@given(fields=header_fields, cut=st.integers(0, 200),
       flips=st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=3))
def test_rocketmq_header_fields_c_and_python_read_the_same(fields, cut, flips):
    header = encode_either(_encode_rocketmq_header_py, fields)
    if header == "refused":
        return
    damaged = bytearray(header[: len(header) - cut % (len(header) + 1)])
    for at, value in flips:  # lengths that run past the end or are negative, bytes that are not UTF-8
        if at < len(damaged):
            damaged[at] = value
    for data in (header, bytes(damaged)):
        assert _speedups.rocketmq_header_fields(data) == _rocketmq_header_fields_py(data)


def test_rocketmq_header_fields_reads_java_bytes():
    """A SEND_MESSAGE_V2 header as the Java client writes it (RocketMQSerializable.rocketMQProtocolEncode); an entry
    with an empty value is read as absent, as Java reads it as null."""
    prefix = b"\x01\x36" b"\x00" b"\x01\xdb" b"\x00\x00\x00\x07" b"\x00\x00\x00\x00" b"\x00\x00\x00\x00"
    entries = b"\x00\x01b\x00\x00\x00\x09TopicTest" b"\x00\x01e\x00\x00\x00\x013"
    header = prefix + b"\x00\x00\x00\x1f" + entries + b"\x00\x01k\x00\x00\x00\x00"
    assert _speedups.rocketmq_header_fields(header) == (310, 0, 475, 7, 0, None, {"b": "TopicTest", "e": "3"})
    assert _rocketmq_header_fields_py(header) == _speedups.rocketmq_header_fields(header)
    cmd = command.decode(Frame(SerializeType.ROCKETMQ, header, b"body"))
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.remark) == (310, LanguageCode.JAVA, 475, 7, None)
    assert command._encode_rocketmq_header(cmd) == prefix + b"\x00\x00\x00\x18" + entries


# -- the SEND_BATCH_MESSAGE body --------------------------------------------------------------------------------------


def _batch_outcome(buf):
    """What message_batch makes of a body with the C loop, and with its Python twin alone."""
    try:
        got = ("ok", message_batch.decode_batch_items(buf))
    except CorruptRecord as err:
        got = ("corrupt", str(err))
    try:
        twin = ("ok", _decode_batch_items_py(buf))
    except CorruptRecord as err:
        twin = ("corrupt", str(err))
    return got, twin


batch_items = st.lists(st.tuples(
    st.binary(max_size=300),
    st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=4),  # empty names or values, \x01, non-ASCII
    st.integers(-2**31, 2**31 - 1)), max_size=6)


@settings(max_examples=400, deadline=None)
@given(items=batch_items, cut=st.integers(0, 400),
       flips=st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), max_size=3))
def test_decode_batch_items_c_and_python_read_the_same(items, cut, flips):
    """The C loop gives what the twin gives, and leaves every malformed body to it (the same CorruptRecord):
    lengths past the end or negative, TOTALSIZE that disagrees, a cut block, properties that are not UTF-8."""
    body = b"".join(encode_batch_item(data, encode_properties(props).encode(), flag) for data, props, flag in items)
    damaged = bytearray(body[: len(body) - cut % (len(body) + 1)])
    for at, value in flips:
        if at < len(damaged):
            damaged[at] = value
    for buf in (body, bytes(damaged), memoryview(bytes(damaged))):
        got, twin = _batch_outcome(buf)
        assert got == twin
        c = _speedups.decode_batch_items(buf)
        assert (c is None) == (twin[0] == "corrupt")
    got, _ = _batch_outcome(body)
    assert [BatchMessage(*item) for item in got[1]] == decode_batch_body(body)


def _end_batch_outcome(buf):
    try:
        got = ("ok", transaction_batch.decode_end_batch_body(buf))
    except MalformedBody as err:
        got = ("malformed", err.reason)
    try:
        twin = ("ok", transaction_batch._decode_end_batch_body_py(buf))
    except MalformedBody as err:
        twin = ("malformed", err.reason)
    return got, twin


@settings(max_examples=400, deadline=None)
@given(handles=st.lists(st.tuples(st.integers(-2**63, 2**63 - 1), st.integers(-2**63, 2**63 - 1),
                                  st.text(max_size=40)), min_size=1, max_size=8),
       cut=st.integers(0, 60), flips=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)), max_size=3))
def test_decode_end_batch_handles_c_and_python_read_the_same(handles, cut, flips):
    """END_TRANSACTION_BATCH bodies, whole and damaged (cut, bytes changed: counts out of range, lengths past the
    end, msgIds that are not UTF-8, bytes left over): the C loop gives what the twin gives, and leaves every
    malformed body to it."""
    body = transaction_batch.encode_end_batch_body(handles)
    damaged = bytearray(body[: len(body) - cut % (len(body) + 1)])
    for at, value in flips:
        if at < len(damaged):
            damaged[at] = value
    for buf in (body, bytes(damaged), memoryview(bytes(damaged))):
        got, twin = _end_batch_outcome(buf)
        assert got == twin
        c = _speedups.decode_end_batch_handles(buf, transaction_batch.END_TRANSACTION_BATCH_MAX)
        assert (c is None) == (twin[0] == "malformed")
    assert _end_batch_outcome(body)[0] == ("ok", [transaction_batch.TransactionHandle(*h) for h in handles])


def test_decode_batch_items_reads_what_java_writes():
    """Two messages as MessageDecoder.encodeMessages writes them; an entry with an empty value is dropped from the
    dict but kept in the stored bytes, and a raw properties field that is not UTF-8 is refused by both."""
    props = b"UNIQ_KEY\x01AB\x02TAGS\x01\x02"
    block = (b"\x00\x00\x00" + bytes([20 + 3 + 2 + len(props)]) + b"\x00" * 8 + b"\x00\x00\x00\x05"
             + b"\x00\x00\x00\x03abc" + bytes([0, len(props)]) + props)
    items = _speedups.decode_batch_items(block + block)
    assert items == [(b"abc", {"UNIQ_KEY": "AB"}, 5, props)] * 2
    assert message_batch.decode_batch_items(block) == _decode_batch_items_py(block) == items[:1]
    bad = block.replace(b"AB", b"\xff\xfe")
    assert _speedups.decode_batch_items(bad) is None
    with pytest.raises(CorruptRecord, match="batch message"):
        message_batch.decode_batch_items(bad)
    assert _speedups.decode_batch_items(b"") == []
