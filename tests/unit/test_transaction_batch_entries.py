"""END_TRANSACTION_BATCH handles kept as bytes: what a sink task makes from a prepared send's answer
(``encode_end_batch_entries``) and what its driver joins (``join_end_batch_body``) are the bytes
``encode_end_batch_body`` writes for the same handles."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.common.errors import LocalProtocolError, MalformedBody
from broker.common.message import offset_msg_ids
from broker.remoting import transaction_batch
from broker.remoting.transaction_batch import (
    END_TRANSACTION_BATCH_MAX,
    decode_end_batch_body,
    decode_end_batch_columns,
    encode_end_batch_body,
    encode_end_batch_entries,
    join_end_batch_body,
)

HOSTS = (bytes([127, 0, 0, 1]) + (10911).to_bytes(4, "big"), bytes(range(16)) + (10911).to_bytes(4, "big"))


@settings(max_examples=200, deadline=None)
@given(host=st.sampled_from(HOSTS), first=st.integers(0, 2**62),
       halves=st.lists(st.tuples(st.integers(0, 2**63 - 1), st.text(min_size=1, max_size=40)), min_size=1,
                       max_size=300),
       cut=st.integers(1, 300))
def test_entries_from_an_answer_are_the_body_of_those_handles(host, first, halves, cut):
    """IPv4 and IPv6 store hosts, any offsets and UNIQ_KEYs (non-ASCII too); a body joined from runs cut anywhere
    is the body of all the handles."""
    offsets, uniqs = [h[0] for h in halves], [h[1] for h in halves]
    ids = offset_msg_ids(host, offsets)
    handles = [(offset, first + i, uniq) for i, (offset, uniq) in enumerate(halves)]
    cut = min(cut, len(halves))
    runs = [encode_end_batch_entries(ids[:cut], first, uniqs[:cut]),
            encode_end_batch_entries(ids[cut:], first + cut, uniqs[cut:])]
    assert join_end_batch_body(len(halves), runs) == encode_end_batch_body(handles)


def test_what_is_no_answer_is_refused():
    ids = offset_msg_ids(HOSTS[0], [100, 200])
    uniq = "7F0000011F9018B4AAC2000000000001"
    with pytest.raises(ValueError, match="offsetMsgIds for"):
        encode_end_batch_entries(ids, 0, [uniq])
    with pytest.raises(ValueError, match="not offset message ids"):
        encode_end_batch_entries([ids[0], ids[1][:-2]], 0, [uniq, uniq])  # two widths
    with pytest.raises(ValueError, match="not offset message ids"):
        encode_end_batch_entries(["ABCD"], 0, [uniq])
    with pytest.raises(ValueError):
        encode_end_batch_entries(["Z" * 32], 0, [uniq])  # no hex
    entries = encode_end_batch_entries(ids[:1], 0, [uniq])
    for count in (0, END_TRANSACTION_BATCH_MAX + 1):
        with pytest.raises(LocalProtocolError, match="1 to 1024"):
            join_end_batch_body(count, [entries])


def _columns_or_fault(decode: object, buf: bytes) -> object:
    try:
        return decode(buf)
    except MalformedBody as err:
        return err.reason


@pytest.mark.parametrize("c", [True, False], ids=["c", "python"])
@settings(max_examples=150, deadline=None)
@given(handles=st.lists(st.tuples(st.integers(-2**63, 2**63 - 1), st.integers(-2**63, 2**63 - 1),
                                  st.text(max_size=40)), min_size=1, max_size=8), cut=st.integers(0, 60))
def test_the_brokers_columns_are_the_handles(c, handles, cut):
    """What the broker reads (three columns, no object per handle) is what ``decode_end_batch_body`` reads, with
    the C loop and without it, a body cut short refused with the same reason."""
    body = encode_end_batch_body(handles)
    saved = transaction_batch._decode_end_batch_handles_c
    try:
        if not c:
            transaction_batch._decode_end_batch_handles_c = None
        for buf in (body, body[: len(body) - cut % len(body)]):
            columns = _columns_or_fault(decode_end_batch_columns, buf)
            rows = _columns_or_fault(decode_end_batch_body, buf)
            assert columns == (tuple(zip(*rows, strict=True)) if isinstance(rows, list) else rows)
    finally:
        transaction_batch._decode_end_batch_handles_c = saved
