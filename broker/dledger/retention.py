"""Retention in DLedger mode: every member deletes its own expired data files, as DLedger's CleanSpaceService does.

DLedger's side (``CleanSpaceService``, DLedgerMmapFileStore's thread of that name, a round every 100 ms): the disk
usage of the store root and of the data folder, the higher one, against DLedgerConfig's ratios:
- above ``diskSpaceRatioToCheckExpired`` (0.70), or at a ``deleteWhen`` hour ("04"): data files not modified for
  ``fileReservedHours`` (72) go, oldest first, 10 a round at most, never the last one;
- above ``diskSpaceRatioToForceClean`` (0.85, never taken below 0.50) with ``enableDiskForceClean`` (true), the
  oldest go however young;
- above that ratio + 0.05 (0.95 at most) the disk is full: appends as leader or follower fail with DISK_FULL.
After a deletion the store's ledgerBeginIndex is the first entry of the first data file left, and index files wholly
below that entry's unit go too (reviseLedgerBeginIndex, MmapFileList.resetOffset). A follower behind the leader's
first entry is caught up as DLedger does it: the leader's COMPARE finds no entry in common and TRUNCATEs the
follower at its own first entry, which the follower takes as the start of a new log (its old files deleted).

The broker's side (``DLedgerCleanCommitLogService``), as Apache's DLedgerCommitLog sets it up: ``fileReservedHours`` =
``fileReservedTime`` + 1, ``deleteWhen`` = ``deleteWhen``, ``enableDiskForceClean`` = ``cleanFileForciblyEnable``,
``diskSpaceRatioToCheckExpired`` = ``diskMaxUsedSpaceRatio`` / 100 (``diskSpaceRatioToForceClean`` keeps DLedger's
default), read again every cleanResourceInterval (refreshConfig). While files of the plain CommitLog written before
DLedger mode are left, DLedger deletes nothing (disableDeleteDledger: ten years' reservation, no forced clean) and the
broker's CommitLog retention deletes those, the last one included. ConsumeQueue and index files follow the minimum
offset (CleanConsumeQueueService) whoever moved it. Unlike Apache's, a member deletes no data file that its broker
has not dispatched nor its group committed.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.store.flush import CleanCommitLogService, disk_usage_percent, is_it_time_to_do

if TYPE_CHECKING:
    from broker.dledger.store import DLedgerMmapFileStore
    from broker.store.commit_log import CommitLog
    from broker.store.config import MessageStoreConfig
    from broker.store.dispatch import DispatchService

log = logging.getLogger(__name__)

CLEAN_SPACE_INTERVAL_MS = 100  # CleanSpaceService's waitForRunning(100)
HOUR_MS = 3600 * 1000
DISABLED_RESERVED_HOURS = 24 * 365 * 10  # disableDeleteDledger


@dataclass(frozen=True, slots=True)
class RetentionSettings:
    """DLedgerConfig's retention keys, DLedger's defaults."""

    file_reserved_hours: int = 72
    delete_when: str = "04"
    disk_space_ratio_to_check_expired: float = 0.70
    disk_space_ratio_to_force_clean: float = 0.85
    enable_disk_force_clean: bool = True

    @property
    def force_clean_ratio(self) -> float:
        return max(self.disk_space_ratio_to_force_clean, 0.50)

    @property
    def disk_full_ratio(self) -> float:
        return min(self.disk_space_ratio_to_force_clean + 0.05, 0.95)

    @classmethod
    def from_store_config(cls, store: MessageStoreConfig) -> RetentionSettings:
        """What Apache's DLedgerCommitLog passes on from the broker's keys."""
        return cls(file_reserved_hours=store.file_reserved_time + 1, delete_when=store.delete_when,
                   disk_space_ratio_to_check_expired=store.disk_max_used_space_ratio / 100,
                   enable_disk_force_clean=store.clean_file_forcibly_enable)

    def disabled(self) -> RetentionSettings:
        """disableDeleteDledger: nothing is old enough, nothing is forced."""
        return dataclasses.replace(self, file_reserved_hours=DISABLED_RESERVED_HOURS, enable_disk_force_clean=False)


class CleanSpaceService:
    """One member's data file retention, a round at a time (``run_once``), run by its DLedgerServer.

    ``deletable_end``: the data offset no deleted file may reach past. The store never deletes past its committed
    entries anyway; the broker narrows it to what it has dispatched."""

    def __init__(self, store: DLedgerMmapFileStore, settings: RetentionSettings, store_base_dir: str,
                 disk_usage: Callable[[str], float] = disk_usage_percent,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.settings = settings
        self.store_base_dir = store_base_dir
        self.disk_usage = disk_usage
        self.clock = clock
        self.deletable_end: Callable[[], int] = lambda: store.committed_pos

    def disk_ratio(self) -> float:
        """The fuller of the store root's and the data folder's disks, as a fraction."""
        paths = [p for p in (self.store_base_dir, self.store.data.queue.directory) if os.path.isdir(p)]
        return max((self.disk_usage(p) for p in paths), default=0.0) / 100

    def run_once(self) -> int:
        """One round; returns how many data files it deleted."""
        settings, store, now = self.settings, self.store, self.clock()
        ratio = self.disk_ratio()
        store.disk_full = ratio > settings.disk_full_ratio
        force = ratio > settings.force_clean_ratio and settings.enable_disk_force_clean
        if not (is_it_time_to_do(settings.delete_when, now) or ratio > settings.disk_space_ratio_to_check_expired):
            return 0
        count = store.delete_expired_files(settings.file_reserved_hours * HOUR_MS, now, clean_at_once=force,
                                           end=self.deletable_end())
        if count or force or store.disk_full:
            log.info("%s: clean space deleted %d files (forced=%s, disk full=%s, disk ratio %.2f); the log begins at "
                     "%d", store.member_state.self_id, count, force, store.disk_full, ratio, store.ledger_begin_index)
        return count


class DLedgerCleanCommitLogService(CleanCommitLogService):
    """The broker's retention in DLedger mode (DLedgerCommitLog.deleteExpiredFile and CleanConsumeQueueService):
    ``commit_log`` is the plain CommitLog written before DLedger mode; ``min_offset`` is the whole log's minimum."""

    keep_last_file = False  # the old CommitLog is written no more: its last file goes too

    def __init__(self, config: MessageStoreConfig, commit_log: CommitLog, dispatch: DispatchService,
                 clean_space: CleanSpaceService, min_offset: Callable[[], int],
                 disk_usage: Callable[[str], float] = disk_usage_percent,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(config, commit_log, dispatch, disk_usage, clock)
        self.clean_space = clean_space
        self.min_offset = min_offset
        self.last_physical_min_offset = 0

    def run_once(self) -> int:
        settings = RetentionSettings.from_store_config(self.config)
        old_files_left = bool(self.commit_log.queue.files)
        self.clean_space.settings = settings.disabled() if old_files_left else settings
        deleted = super().run_once() if old_files_left else 0
        self.clean_derived()  # every round: DLedger deletes on its own
        return deleted

    def clean_derived(self) -> None:
        min_offset = self.min_offset()
        if min_offset > self.last_physical_min_offset:
            self.dispatch.delete_expired(min_offset)
            self.last_physical_min_offset = min_offset
