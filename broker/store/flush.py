"""Background services of the store, one class each: CommitLog flush (async interval or sync group commit),
ConsumeQueue/index flush with the checkpoint, and retention (RocketMQ's CleanCommitLogService and
CleanConsumeQueueService)."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable

from broker.store.checkpoint import StoreCheckpoint
from broker.store.commit_log import CommitLog
from broker.store.config import MessageStoreConfig
from broker.store.consume_queue import ConsumeQueueStore
from broker.store.dispatch import DispatchService
from broker.store.index_service import IndexService
from broker.store.mapped_file import PAGE_SIZE
from broker.store.service_thread import ServiceThread

log = logging.getLogger(__name__)


class FlushRealTimeService(ServiceThread):
    """ASYNC_FLUSH: force the CommitLog every flushIntervalCommitLog ms once flushCommitLogLeastPages pages are dirty,
    and everything at least every flushCommitLogThoroughInterval ms."""

    name = "FlushRealTimeService"

    def __init__(self, config: MessageStoreConfig, commit_log: CommitLog, checkpoint: StoreCheckpoint) -> None:
        super().__init__()
        self.interval = config.flush_interval_commit_log / 1000
        self.config = config
        self.commit_log = commit_log
        self.checkpoint = checkpoint
        self._last_thorough = time.monotonic()

    def run_once(self) -> None:
        now = time.monotonic()
        thorough = (now - self._last_thorough) * 1000 >= self.config.flush_commit_log_thorough_interval
        if thorough:
            self._last_thorough = now
        elif self.commit_log.queue.unflushed_bytes() < self.config.flush_commit_log_least_pages * PAGE_SIZE:
            return
        flush_commit_log(self.commit_log, self.checkpoint)


def flush_commit_log(commit_log: CommitLog, checkpoint: StoreCheckpoint) -> int:
    store_ts = commit_log.last_store_timestamp
    flushed = commit_log.queue.flush()
    if store_ts:
        checkpoint.update(physic_msg_timestamp=store_ts)
    return flushed


class GroupCommitService:
    """SYNC_FLUSH: a put returns once its bytes are on disk. The putting thread flushes itself, under a lock; puts
    that arrive during a flush wait for the lock and then mostly find their bytes flushed already (group commit).
    Java hands each put to a flush thread and back; in Python every hand-off waits for the GIL as well."""

    def __init__(self, commit_log: CommitLog, checkpoint: StoreCheckpoint) -> None:
        self.commit_log = commit_log
        self.checkpoint = checkpoint
        self._lock = threading.Lock()

    def wait_flushed(self, next_offset: int, timeout: float) -> bool:
        """Flush the CommitLog up to at least ``next_offset`` unless that is done already; False when the flush
        lock was not free within ``timeout`` seconds (then the put is stored but not confirmed on disk)."""
        if not self._lock.acquire(timeout=timeout):
            return False
        try:
            if self.commit_log.queue.flushed_offset >= next_offset:
                return True
            return flush_commit_log(self.commit_log, self.checkpoint) >= next_offset
        finally:
            self._lock.release()


class FlushConsumeQueueService(ServiceThread):
    """Forces ConsumeQueues and the index, then records in the checkpoint how far they are safe."""

    name = "FlushConsumeQueueService"

    def __init__(self, config: MessageStoreConfig, consume_queues: ConsumeQueueStore, index: IndexService | None,
                 dispatch: DispatchService, checkpoint: StoreCheckpoint) -> None:
        super().__init__()
        self.interval = config.flush_interval_consume_queue / 1000
        self.consume_queues = consume_queues
        self.index = index
        self.dispatch = dispatch
        self.checkpoint = checkpoint

    def run_once(self) -> None:
        store_ts = self.dispatch.last_store_timestamp  # taken first: the files hold at least that much
        self.consume_queues.flush_all()
        updates = {"logics_msg_timestamp": store_ts} if store_ts else {}
        if self.index is not None:
            # Only a full index file is safe to name: after a crash, newer ones are destroyed and rebuilt.
            full_index_ts = self.index.flush()
            if full_index_ts:
                updates["index_msg_timestamp"] = full_index_ts
        self.checkpoint.update(**updates)
        self.checkpoint.flush()


def disk_usage_percent(path: str) -> float:
    usage = shutil.disk_usage(path)
    return 100.0 * usage.used / usage.total if usage.total else 0.0


def is_it_time_to_do(when: str, now: float) -> bool:
    """``when`` names hours of the day ("04;05"); is ``now`` (local time) in one of them (UtilAll.isItTimeToDo,
    which DLedger's DLedgerUtils repeats)."""
    hours = {int(h) for h in when.split(";") if h.strip().isdigit()}
    return time.localtime(now).tm_hour in hours


class CleanCommitLogService(ServiceThread):
    """Retention: deletes CommitLog files older than fileReservedTime at the deleteWhen hours or when the disk is
    fuller than diskMaxUsedSpaceRatio; above diskSpaceCleanForciblyRatio (with cleanFileForciblyEnable) deletes the
    oldest files even if young; above diskSpaceWarningLevelRatio the store refuses writes. Derived files below the
    new minimum go with them."""

    name = "CleanCommitLogService"
    MAX_MANUAL_DELETE_FILE_TIMES = 20  # rounds a DELETE_EXPIRED_COMMITLOG request lasts
    keep_last_file = True  # the file being written stays, however old

    def __init__(self, config: MessageStoreConfig, commit_log: CommitLog, dispatch: DispatchService,
                 disk_usage: Callable[[str], float] = disk_usage_percent,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.interval = config.clean_resource_interval / 1000
        self.config = config
        self.commit_log = commit_log
        self.dispatch = dispatch
        self.disk_usage = disk_usage
        self.clock = clock
        self.disk_full = False  # writes are refused while True
        self.manual_delete_requests = 0  # rounds left that delete expired files whatever the hour

    def execute_delete_files_manually(self) -> None:
        """DELETE_EXPIRED_COMMITLOG (Java's executeDeleteFilesManually): the next 20 rounds, one every
        cleanResourceInterval, delete what is older than fileReservedTime outside the deleteWhen hours too."""
        self.manual_delete_requests = self.MAX_MANUAL_DELETE_FILE_TIMES
        log.info("executeDeleteFilesManually was invoked")

    def run_once(self) -> int:
        """One retention round; returns how many CommitLog files it deleted."""
        usage = self.disk_usage(self.config.commit_log_dir)
        self.disk_full = usage >= self.config.disk_space_warning_level_ratio
        forcibly = usage >= self.config.disk_space_clean_forcibly_ratio and self.config.clean_file_forcibly_enable
        space_full = usage >= self.config.disk_max_used_space_ratio
        manual = self.manual_delete_requests > 0
        if not (is_it_time_to_do(self.config.delete_when, self.clock()) or space_full or manual):
            return 0
        if manual:
            self.manual_delete_requests -= 1
        deleted = self.delete_expired(self.config.file_reserved_time * 3600 * 1000, clean_at_once=forcibly)
        if deleted:
            self.clean_derived()
        return deleted

    def delete_expired(self, reserved_ms: float, *, clean_at_once: bool) -> int:
        """Never what has not been dispatched."""
        return len(self.commit_log.queue.delete_expired(reserved_ms, self.clock(), clean_at_once=clean_at_once,
                                                        end=self.dispatch.reput_from_offset,
                                                        keep_last=self.keep_last_file))

    def clean_derived(self) -> None:
        """CleanConsumeQueueService: ConsumeQueue and index files that only point below the CommitLog minimum,
        deleted by their writer, the dispatch thread's or process's."""
        self.dispatch.delete_expired(self.commit_log.min_offset)
