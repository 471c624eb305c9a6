"""The prepared batch encoded ahead (broker/_speedups_batch.c's half_batch_records and set_prepared_offsets) against
their Python twins, and records encoded ahead in a put (pack_records) against the messages they stand for: the same
bytes as the general path (half_batch_messages' messages packed by the CommitLog), or None where C leaves the batch to
it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker import _speedups
from broker.common.message import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    encode_properties,
    pack_host,
)
from broker.common.message_batch import BatchMessage, decode_batch_body, encode_batch_body, encode_batch_item
from broker.common.record import decode_record
from broker.server.transaction import batch as half_batch
from broker.server.transaction.batch import HalfBatchOrigin, RecordLimits, half_batch_messages
from broker.store.commit_log import _encoded_properties, _pack_records_py

pytestmark = pytest.mark.smoke

GROUP = "RMQ_SINK_orders"
STORE_HOST = pack_host("10.0.0.9", 10911)
HOST_V6 = pack_host("2001:db8::7", 10911)
ADDED = {"MSG_REGION": "DefaultRegion", "TRACE_ON": "true", PROPERTY_CLUSTER: "DefaultCluster"}
LIMITS = RecordLimits(STORE_HOST, 600, 600 + 400)
STORE_TS = 1_700_000_000_321


def test_the_broker_uses_the_c_twins():
    assert half_batch._half_batch_records is _speedups.half_batch_records
    assert half_batch.set_prepared_offsets is _speedups.set_prepared_offsets


def item_properties(i: int, extra: dict[str, str], group: str = GROUP) -> dict[str, str]:
    return {PROPERTY_TRANSACTION_PREPARED: "true", PROPERTY_PRODUCER_GROUP: group,
            PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: f"7F00000100002A9F0000000{i:05d}", **extra}


extras = st.dictionaries(
    st.sampled_from(["KEYS", "TAGS", "order", "ü", PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS, PROPERTY_DELAY_TIME_LEVEL,
                     PROPERTY_CLUSTER, "REAL_TOPIC", "TRANSACTION_CHECK_TIMES"]),
    st.text(max_size=6), max_size=3)
items = st.lists(st.tuples(st.binary(max_size=700), extras, st.integers(-(2**31), 2**31 - 1)), min_size=1,
                 max_size=5)


def both(body: bytes, origin: HalfBatchOrigin, group: str = GROUP, limits: RecordLimits = LIMITS):
    args = half_batch._record_args(body, origin, group, ADDED, limits)
    return _speedups.half_batch_records(*args), half_batch._half_batch_records_py(*args)


def as_bytes(found):
    return None if found is None else ([bytes(h) for h in found[0]], [bytes(c) for c in found[1]], *found[2:])


@settings(max_examples=400, deadline=None)
@given(rows=items, topic=st.sampled_from(["Orders", "é" * 70, "t" * 128]), queue_id=st.integers(0, 7),
       born_host=st.sampled_from([pack_host("10.1.2.3", 4567), HOST_V6]), store_host=st.sampled_from([STORE_HOST,
                                                                                                       HOST_V6]),
       sys_flag=st.sampled_from([0x4, 0x4 | 0x1]), twin_uniq=st.booleans(), odd=st.sampled_from(
           ["", "group", "tran", "no-separator", "empty-value"]))
def test_half_batch_records_c_and_python_make_the_same(rows, topic, queue_id, born_host, store_host, sys_flag,
                                                        twin_uniq, odd):
    body = b"".join(encode_batch_item(data, encode_properties(item_properties(
        0 if twin_uniq and i == 1 else i, extra)).encode(), flag) for i, (data, extra, flag) in enumerate(rows))
    if odd == "group":
        body += encode_batch_item(b"x", encode_properties(item_properties(99, {}, "other")).encode())
    elif odd == "tran":
        body += encode_batch_item(b"x", encode_properties({**item_properties(99, {}),
                                                           PROPERTY_TRANSACTION_PREPARED: "TRUE"}).encode())
    elif odd == "no-separator":
        body += encode_batch_item(b"x", encode_properties(item_properties(99, {})).encode()[:-1])
    elif odd == "empty-value":
        body += encode_batch_item(b"x", encode_properties(item_properties(99, {})).encode() + b"KEYS\x01\x02")
    origin = HalfBatchOrigin(topic, queue_id, sys_flag, 1_700_000_000_000, born_host, 2)
    c_found, py_found = both(body, origin, limits=RecordLimits(store_host, 600, 1000))
    assert as_bytes(c_found) == as_bytes(py_found)
    if c_found is not None:  # the general path's messages, packed by the CommitLog, are these bytes
        assert all(type(c) is bytearray for c in c_found[1])
        halves, commits = half_batch_messages(decode_batch_body(body), origin, ADDED)
        assert c_found[0] == [packed(h, store_host) for h in halves]
        assert [bytes(c) for c in c_found[1]] == [packed(c, store_host) for c in commits]


def packed(msg, store_host: bytes) -> bytes:
    buf = bytearray(4096)
    total = _pack_records_py(buf, 0, len(buf), 0, [msg], 0, store_host, 10**6, 10**6, {}, _encoded_properties)[0]
    return bytes(buf[:total])


def test_half_batch_records_leave_the_uncommon_to_the_general_path():
    origin = HalfBatchOrigin("Orders", 1, 0x4, 1, pack_host("10.1.2.3", 4567), 0)
    common = BatchMessage(b"row", item_properties(1, {PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: "120"}))
    found = both(encode_batch_body([common]), origin)
    assert found[0] is not None and as_bytes(found[0]) == as_bytes(found[1])
    assert found[0][2:] == ([common.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]], ["120"])
    for odd in ({PROPERTY_DELAY_TIME_LEVEL: "0"}, {PROPERTY_CLUSTER: "theirs"}, {"TRANSACTION_CHECK_TIMES": "1"},
                {PROPERTY_PRODUCER_GROUP: "other"}, {PROPERTY_TRANSACTION_PREPARED: "false"}):
        msg = BatchMessage(b"row", {**common.properties, **odd})
        assert both(encode_batch_body([common, msg]), origin) == (None, None), odd
    big = BatchMessage(b"x" * (LIMITS.max_body + 1), item_properties(2, {}))
    assert both(encode_batch_body([common, big]), origin) == (None, None)
    assert both(encode_batch_body([common])[:-1], origin) == (None, None)  # malformed: the general path names it
    assert both(b"", origin) == (None, None)


def test_records_encoded_ahead_are_stamped_by_their_put():
    """A put of records encoded ahead (and messages beside them) writes what a put of the messages writes."""
    origin = HalfBatchOrigin("Orders", 3, 0x4, 1_700_000_000_000, pack_host("10.1.2.3", 4567), 0)
    rows = [BatchMessage(f"row-{i}".encode(), item_properties(i, {"KEYS": f"k{i}"})) for i in range(3)]
    found = half_batch.half_batch_records(encode_batch_body(rows), origin, GROUP, ADDED, LIMITS)
    assert found is not None
    halves, commits = half_batch_messages(decode_batch_body(encode_batch_body(rows)), origin, ADDED)
    offsets = [100_000 + 1000 * i for i in range(3)]
    _speedups.set_prepared_offsets(found.commits, offsets)
    twin = [bytearray(c) for c in found.commits]
    half_batch._set_prepared_offsets_py(twin, offsets)
    assert twin == found.commits
    for commit, offset in zip(commits, offsets, strict=True):
        commit.prepared_transaction_offset = offset
    next_offsets = {("Orders", 3): 17, ("RMQ_SYS_TRANS_HALF_TOPIC", 0): 5}
    outputs = []
    for pack, msgs in ((_speedups.pack_records, [*found.halves, *found.commits]),
                       (_pack_records_py, [*found.halves, *found.commits]),
                       (_speedups.pack_records, [*halves, *commits])):
        buf = bytearray(8192)
        out = pack(buf, 8, 8000, 4096, msgs, STORE_TS, STORE_HOST, LIMITS.max_body, LIMITS.max_record,
                   dict(next_offsets), _encoded_properties)
        outputs.append((out, bytes(buf)))
    assert outputs[0] == outputs[1] == outputs[2]
    (total, queue_offsets, record_offsets, pending), data = outputs[0]
    assert queue_offsets == [5, 6, 7, 17, 18, 19]
    assert pending == {("Orders", 3): 20, ("RMQ_SYS_TRANS_HALF_TOPIC", 0): 8}
    pos = 8
    for offset in record_offsets:
        record = decode_record(data, pos)
        assert (record.commit_log_offset, record.store_timestamp, record.store_host) == (offset, STORE_TS, STORE_HOST)
        pos += record.store_size
    assert [decode_record(data, 8 + o - 4096).prepared_transaction_offset for o in record_offsets[3:]] == offsets


def test_a_malformed_record_encoded_ahead_is_refused_by_both():
    origin = HalfBatchOrigin("Orders", 0, 0x4, 1, pack_host("10.1.2.3", 4567), 0)
    found = half_batch.half_batch_records(encode_batch_body([BatchMessage(b"r", item_properties(1, {}))]), origin,
                                          GROUP, ADDED, LIMITS)
    assert found is not None
    for bad in (found.halves[0][:-1], found.halves[0] + b"\0", b"\0" * 100):
        for pack in (_speedups.pack_records, _pack_records_py):
            with pytest.raises(TypeError):
                pack(bytearray(4096), 0, 4000, 0, [bad], STORE_TS, STORE_HOST, 600, 1000, {}, _encoded_properties)
    for pack in (_speedups.pack_records, _pack_records_py):  # made for an IPv4 store host, put by an IPv6 one
        with pytest.raises(TypeError):
            pack(bytearray(4096), 0, 4000, 0, [found.halves[0]], STORE_TS, HOST_V6, 600, 1000, {}, _encoded_properties)
