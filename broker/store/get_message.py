"""getMessage: what a pull reads of one ConsumeQueue, and whether the reader has fallen behind memory.

The unfiltered pull takes the units in bulk and the CommitLog runs they name as views of the mapped files; a filtered
one walks unit by unit, first on the tagsCode, then on the record. ``MessageStore.get_message`` answers the offset
checks and calls ``collect``.
"""

from __future__ import annotations

import os
from typing import Protocol

from broker.store.commit_log import CommitLog
from broker.store.config import MessageStoreConfig
from broker.store.consume_queue import BLANK_UNIT, ConsumeQueue, is_blank
from broker.store.layout import CQ_UNIT, CQ_UNIT_SIZE
from broker.store.results import GetMessageResult, GetMessageStatus

MAX_PULL_MSG_SIZE = 128 * 1024 * 1024
# A pull scans at most this many ConsumeQueue units past filtered-out messages (Java: maxFilterMessageSize, 16000
# bytes of units).
MAX_FILTER_UNITS = 16000 // CQ_UNIT_SIZE


def total_physical_memory_size() -> int:
    """StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE: the machine's memory in bytes (24 GiB when the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 24 * 1024 ** 3


def suggest_pulling_from_slave(max_offset_py: int, max_phy_offset_pulling: int, ratio_percent: int,
                               total_memory: int) -> bool:
    """getMessage's suggestPullingFromSlave: what is left behind the last record a pull looked at is more than
    ``ratio_percent`` (accessMessageInMemoryMaxRatio) of memory, so the reader is reading from disk.

    Examples:
        >>> suggest_pulling_from_slave(10_000, 5_000, 40, 10_000), suggest_pulling_from_slave(10_000, 5_000, 60, 10_000)
        (True, False)
    """
    return max_offset_py - max_phy_offset_pulling > int(total_memory * (ratio_percent / 100.0))


class MessageFilter(Protocol):
    """Decides which messages a pull returns: first on the ConsumeQueue tagsCode, then on the whole record."""

    def is_matched_by_consume_queue(self, tags_code: int) -> bool: ...

    def is_matched_by_commit_log(self, record: bytes) -> bool: ...

    @property
    def match_all(self) -> bool:
        """Every message matches: the pull may skip both checks."""


def collect(commit_log: CommitLog, config: MessageStoreConfig, cq: ConsumeQueue, offset: int, max_msg_nums: int,
        max_size: int, message_filter: MessageFilter | None, result: GetMessageResult) -> int:
    """Fill ``result``; returns the CommitLog offset of the last unit looked at (Java's maxPhyOffsetPulling)."""
    if message_filter is None or message_filter.match_all:
        pulling = _collect_spans(commit_log, config, cq, offset, max_msg_nums, max_size, result)
        if pulling is not None:
            return pulling
    scan = max(MAX_FILTER_UNITS, max_msg_nums)
    total = 0
    pulling = 0
    skip_below = -1  # after a removed record: skip units until the next CommitLog file
    for index, unit in enumerate(cq.iter_units(offset, scan), start=offset):
        if result.buffers and _batch_full(config, unit.size, max_msg_nums, max_size, total, len(result.buffers)):
            break
        pulling = unit.commit_log_offset
        result.next_begin_offset = index + 1
        if unit.commit_log_offset < skip_below or is_blank(unit):
            continue
        if message_filter is not None and not message_filter.is_matched_by_consume_queue(unit.tags_code):
            continue
        data = commit_log.read(unit.commit_log_offset, unit.size)
        if data is None:
            if not result.buffers:
                result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
            file_size = config.mapped_file_size_commit_log
            skip_below = unit.commit_log_offset + file_size - unit.commit_log_offset % file_size
            continue
        if message_filter is not None and not message_filter.is_matched_by_commit_log(data):
            continue
        result.buffers.append(data)
        result.queue_offsets.append(index)
        result.status = GetMessageStatus.FOUND
        total += len(data)
    return pulling

def _collect_spans(commit_log: CommitLog, config: MessageStoreConfig, cq: ConsumeQueue, offset: int,
                   max_msg_nums: int, max_size: int, result: GetMessageResult) -> int | None:
    """The unfiltered pull in bulk: the units read at once, and each run of records that lie back to back in one
    CommitLog file taken as one view of the mapped file, not copied (a producer's batch is such a run). Returns the
    last record's CommitLog offset; None, with ``result`` untouched, when a unit is blank or a record is gone: the
    unit-by-unit path knows what to do then. The walk over the units is ``cq_runs`` (in C): a pull takes at most 32
    units by default (maxTransferCountOnMessageInMemory), and for so few, numpy's per-call costs made this a third of
    a pull, and a loop of plain ints about half a microsecond a message."""
    raw = cq.read_units(offset, max(1, min(max_msg_nums, config.max_transfer_count_on_message_in_memory)))
    if not raw:
        return None
    byte_cap = min(max_size, config.max_transfer_bytes_on_message_in_memory)
    found = cq_runs(raw, byte_cap, config.mapped_file_size_commit_log)
    if found is None:
        return None
    runs, offsets = found
    if offsets[0] < commit_log.min_offset:
        return None
    buffers = commit_log.read_views(runs)
    if not buffers:
        return None
    count = runs[len(buffers)][0] if len(buffers) < len(runs) else len(offsets)  # up to the first run gone
    result.buffers = buffers
    result.queue_offsets = list(range(offset, offset + count))
    result.next_begin_offset = offset + count
    result.status = GetMessageStatus.FOUND
    return offsets[count - 1]


Run = tuple[int, int, int]
"""Records back to back in one CommitLog file: (index of its first record in the pull, CommitLog offset, length)."""


def _cq_runs_py(raw: bytes, byte_cap: int, file_size: int) -> tuple[list[Run], list[int]] | None:
    """The Python twin of ``_speedups.cq_runs``: the runs of the records the units ``raw`` name, taken while their
    sizes add up to at most ``byte_cap`` (the first always), and each record's CommitLog offset; None when a unit is
    blank (the unit-by-unit path skips those)."""
    if file_size <= 0:
        raise ValueError("file_size must be positive")
    offsets: list[int] = []
    runs: list[list[int]] = []
    total = 0
    run_end = -1
    for phys, size, _ in CQ_UNIT.iter_unpack(raw[:len(raw) - len(raw) % CQ_UNIT_SIZE]):
        if size == BLANK_UNIT.size:
            return None
        total += size
        if offsets and total > byte_cap:
            break
        if offsets and phys == run_end and phys % file_size:  # back to back, and not the first of the next file
            runs[-1][2] += size
        else:
            runs.append([len(offsets), phys, size])
        offsets.append(phys)
        run_end = phys + size
    return [(first, phys, length) for first, phys, length in runs], offsets


try:
    from broker._speedups import cq_runs
except ImportError:  # built without a C compiler: the same runs, slower
    cq_runs = _cq_runs_py


def _batch_full(config: MessageStoreConfig, size: int, max_msg_nums: int, max_size: int, total: int,
            count: int) -> bool:
    return (count >= max_msg_nums or total + size > max_size
            or total + size > config.max_transfer_bytes_on_message_in_memory
            or count >= config.max_transfer_count_on_message_in_memory)
