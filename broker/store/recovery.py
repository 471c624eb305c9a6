"""Recovery at start: make the CommitLog end at its last valid record and every index agree with it.

A clean restart (no abort file) validates the last three CommitLog files. After a crash (abort file present) the
scan starts at the newest file whose first record is older than what the checkpoint says is safely on disk, and
everything from there is dispatched again. Either way: records are checked by magic, lengths and body CRC, the torn
tail is cut (and zeroed), ConsumeQueue units and index files beyond the valid end are dropped, and the returned
offset is where dispatch must resume to rebuild what is missing.
"""

from __future__ import annotations

import logging

from broker.common.record import check_records
from broker.store.checkpoint import StoreCheckpoint
from broker.store.commit_log import CommitLog
from broker.store.consume_queue import ConsumeQueueStore
from broker.store.index_service import IndexService

log = logging.getLogger(__name__)

NORMAL_RECOVERY_FILES = 3


def valid_end(commit_log: CommitLog, start: int) -> int:
    """Offset just past the last valid record (or BLANK) reachable from ``start``: file by file, while each ends
    with a BLANK filler."""
    end = start
    while (mf := commit_log.queue.find(end)) is not None:
        pos, blank = check_records(mf.buffer, end - mf.file_from_offset, mf.wrote_position)
        end = mf.file_from_offset + pos
        if not blank:
            break
    return end


def crash_start_offset(commit_log: CommitLog, checkpoint: StoreCheckpoint, index_enabled: bool) -> int:
    """The start of the newest file whose first record is older than the checkpoint's safe time."""
    safe = checkpoint.min_timestamp_index() if index_enabled else checkpoint.min_timestamp()
    files = commit_log.queue.files
    for mf in reversed(files):
        first = commit_log.first_store_timestamp(mf)
        if first and first <= safe:
            return mf.file_from_offset
    return files[0].file_from_offset if files else 0


def recover(commit_log: CommitLog, consume_queues: ConsumeQueueStore, index: IndexService | None,
            checkpoint: StoreCheckpoint, *, last_exit_ok: bool) -> int:
    """Recover all three structures; returns the CommitLog offset from which dispatch must run again."""
    consume_queues.recover()
    files = commit_log.queue.files
    if last_exit_ok:
        start = files[max(len(files) - NORMAL_RECOVERY_FILES, 0)].file_from_offset if files else 0
    else:
        start = crash_start_offset(commit_log, checkpoint, index is not None)
    end = valid_end(commit_log, start)
    torn = commit_log.read(end, 8)
    if torn is not None and any(torn):
        log.warning("CommitLog valid data ends at %d; the bytes after it are cut", end)
    commit_log.queue.truncate(end)
    consume_queues.truncate_dirty(end)
    reput_from = consume_queues.max_physic_offset if last_exit_ok else start
    if index is not None:
        reput_from = min(reput_from, index.truncate(end))
        if not index.files:  # no index at all (deleted, or never built): build it from the whole CommitLog
            reput_from = commit_log.min_offset
    reput_from = max(min(reput_from, end), commit_log.min_offset)
    log.info("recovered %s: CommitLog ends at %d, dispatching again from %d",
             "after a clean shutdown" if last_exit_ok else "after a crash", end, reput_from)
    return reput_from
