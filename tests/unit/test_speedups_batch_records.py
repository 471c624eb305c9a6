"""A plain batch's records encoded ahead (broker/_speedups_batch.c's batch_records) against their Python twin, and
against the general path they stand in for: the same CommitLog bytes as a StoreMessage per item packed by a put, or
None where C leaves the batch to that path (which names what is wrong); and the batch's offsetMsgIds
(offset_msg_ids_text) against theirs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker import _speedups
from broker.common import message
from broker.common.errors import CorruptRecord
from broker.common.message import SysFlag, encode_properties, pack_host
from broker.common.message_batch import decode_batch_items, encode_batch_item
from broker.store import commit_log
from broker.store.commit_log import StoreMessage, _encode_batch_ahead_py, _encoded_properties, _pack_records_py

pytestmark = pytest.mark.smoke

STORE_HOST = pack_host("10.0.0.9", 10911)
HOST_V6 = pack_host("2001:db8::7", 10911)
BORN_HOST = pack_host("10.0.0.7", 54321)
STORE_TS = 1_700_000_000_321
MAX_BODY, MAX_RECORD = 600, 600 + 400


def test_the_broker_uses_the_c_twins():
    assert commit_log._batch_records is _speedups.batch_records
    assert message.offset_msg_ids_text is _speedups.offset_msg_ids_text


def packed(msgs: list, store_host: bytes, base: int = 4096) -> bytes:
    """What a put writes for ``msgs`` (StoreMessages or records encoded ahead) at physical offset ``base``."""
    args = (base, msgs, STORE_TS, store_host, MAX_BODY, MAX_RECORD, {}, _encoded_properties)
    size = _pack_records_py(bytearray(), 0, 0, *args)[0]
    buf = bytearray(size)
    _pack_records_py(buf, 0, size, *args)
    return bytes(buf)


items = st.lists(st.tuples(st.binary(max_size=700),
                           st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=3),
                           st.integers(-(2**31), 2**31 - 1)), max_size=5)


@settings(max_examples=300, deadline=None)
@given(items=items, topic=st.sampled_from(["Orders", "T" * 200]), queue_id=st.integers(0, 7),
       sys_flag=st.sampled_from([0, int(SysFlag.MULTI_TAGS), int(SysFlag.BORNHOST_V6)]),
       born_host=st.sampled_from([BORN_HOST, HOST_V6]), store_host=st.sampled_from([STORE_HOST, HOST_V6]),
       reconsume=st.integers(0, 16), cut=st.integers(0, 40),
       flips=st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 255)), max_size=2))
def test_batch_records_c_and_python_encode_what_the_put_of_store_messages_writes(items, topic, queue_id, sys_flag,
                                                                                  born_host, store_host, reconsume,
                                                                                  cut, flips):
    """Whole and damaged bodies (cut, bytes changed), V1 and V2 topics, IPv4 and IPv6 hosts, bodies over the limit:
    C and its twin give the same records or both None; a put of the records writes the bytes a put of the items'
    StoreMessages writes; None exactly where the general path refuses the body or an item."""
    body = b"".join(encode_batch_item(data, encode_properties(props).encode(), flag) for data, props, flag in items)
    damaged = bytearray(body[: len(body) - cut % (len(body) + 1)])
    for at, value in flips:
        if at < len(damaged):
            damaged[at] = value
    for buf in (body, bytes(damaged)):
        args = (buf, topic.encode(), queue_id, sys_flag, 1_700_000_000_000, born_host, reconsume, store_host,
                MAX_BODY, MAX_RECORD)
        c, twin = _speedups.batch_records(*args), _encode_batch_ahead_py(*args)
        assert c == twin
        try:
            decoded = decode_batch_items(buf)
            msgs = [StoreMessage(topic, queue_id, data, props, flag, sys_flag, 1_700_000_000_000, born_host,
                                 reconsume, encoded_properties=encoded) for data, props, flag, encoded in decoded]
            general = packed(msgs, store_host) if msgs else None
        except (CorruptRecord, ValueError):  # the body is malformed; an item the put refuses
            general = None
        assert (c is None) == (general is None)
        if c is not None:
            assert all(isinstance(record, bytearray) for record in c)
            assert packed(c, store_host) == general


def test_batch_records_of_a_java_body():
    """Two items as MessageDecoder.encodeMessages writes them, one property with an empty value kept in the stored
    bytes as written; a properties field that is not UTF-8 and an empty body are left to the general path."""
    props = b"UNIQ_KEY\x01AB\x02TAGS\x01\x02"
    body = encode_batch_item(b"abc", props, 5) + encode_batch_item(b"de", props, 0)
    records = _speedups.batch_records(body, b"Orders", 3, 0, 1_700_000_000_000, BORN_HOST, 0, STORE_HOST, MAX_BODY,
                                      MAX_RECORD)
    assert records is not None and len(records) == 2
    assert records[0].endswith(bytes([0, len(props)]) + props) and b"abc" in records[0]
    batch = StoreMessage("Orders", 3, body, {}, 0, 0, 1_700_000_000_000, BORN_HOST, 0)
    assert commit_log.encode_batch_ahead(batch, STORE_HOST, MAX_BODY, MAX_RECORD) == records
    for bad in (body.replace(b"AB", b"\xff\xfe"), b""):
        assert _speedups.batch_records(bad, b"Orders", 3, 0, 0, BORN_HOST, 0, STORE_HOST, MAX_BODY, MAX_RECORD) is None


@settings(max_examples=200, deadline=None)
@given(host=st.sampled_from([STORE_HOST, HOST_V6]), offsets=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=20))
def test_offset_msg_ids_text_c_and_python_write_the_same(host, offsets):
    """A batch's offsetMsgIds as its send response carries them: each the upper-case hex of the store host and the
    offset (negative ones as Java's long), comma-joined; each decodes back to its offset."""
    text = _speedups.offset_msg_ids_text(host, offsets)
    assert text == message._offset_msg_ids_text_py(host, offsets)
    assert [message.decode_offset_msg_id(msg_id) for msg_id in message.offset_msg_ids(host, offsets)] == [
        (host, offset) for offset in offsets]
