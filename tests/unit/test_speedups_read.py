"""The unfiltered pull's walk over its ConsumeQueue units (broker/_speedups_read.c's cq_runs) against its Python twin:
the same runs and offsets for units back to back, apart, across a CommitLog file's end, past the byte cap, and None
at a blank unit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker import _speedups
from broker.store import get_message
from broker.store.consume_queue import BLANK_UNIT
from broker.store.get_message import _cq_runs_py
from broker.store.layout import CQ_UNIT

pytestmark = pytest.mark.smoke

FILE_SIZE = 4096


def test_the_store_uses_the_c_twin():
    assert get_message.cq_runs is _speedups.cq_runs


def units(records: list[tuple[int, int, bool]]) -> bytes:
    """Units of records laid out from offset 3000: (size, gap before it, blank instead)."""
    out, phys = [], 3000
    for size, gap, blank in records:
        phys += gap
        out.append(CQ_UNIT.pack(*BLANK_UNIT) if blank else CQ_UNIT.pack(phys, size, 7))
        phys += size
    return b"".join(out)


@settings(max_examples=400, deadline=None)
@given(records=st.lists(st.tuples(st.integers(1, 700), st.sampled_from([0, 0, 0, 5, 1096]),
                                  st.sampled_from([False] * 12 + [True])), max_size=40),
       byte_cap=st.integers(1, 20_000), trailing=st.integers(0, 19))
def test_cq_runs_c_and_python_take_the_same_runs(records, byte_cap, trailing):
    raw = units(records) + b"\x01" * trailing  # a unit cut short is not read
    got, twin = _speedups.cq_runs(raw, byte_cap, FILE_SIZE), _cq_runs_py(raw, byte_cap, FILE_SIZE)
    assert got == twin
    if twin is not None:  # the runs cover the records taken, in order
        runs, offsets = twin
        assert [first for first, _, _ in runs] == sorted({first for first, _, _ in runs})
        assert sum(length for _, _, length in runs) == sum(size for size, _, _ in records[:len(offsets)])


def test_cq_runs_of_a_pull():
    """Three records back to back, one apart, one starting the next CommitLog file: three runs; the byte cap stops
    before the record that passes it, but never before the first."""
    raw = b"".join(CQ_UNIT.pack(phys, size, 0) for phys, size in
                   [(100, 10), (110, 20), (130, 30), (500, 40), (4056, 40), (4096, 50)])
    runs, offsets = _speedups.cq_runs(raw, 1 << 20, FILE_SIZE)
    assert runs == [(0, 100, 60), (3, 500, 40), (4, 4056, 40), (5, 4096, 50)]
    assert offsets == [100, 110, 130, 500, 4056, 4096]
    assert _speedups.cq_runs(raw, 35, FILE_SIZE) == ([(0, 100, 30)], [100, 110])
    assert _speedups.cq_runs(raw, 1, FILE_SIZE) == ([(0, 100, 10)], [100])
    assert _speedups.cq_runs(raw + CQ_UNIT.pack(*BLANK_UNIT), 1 << 20, FILE_SIZE) is None
    assert _speedups.cq_runs(b"", 100, FILE_SIZE) == ([], [])
    with pytest.raises(ValueError, match="file_size"):
        _speedups.cq_runs(raw, 100, 0)
