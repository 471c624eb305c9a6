"""IndexService: the index files of a store, RocketMQ's ``store/index/IndexService``.

It keeps the files oldest first and creates the next one when the last is full (each file is an ``IndexFile``,
``broker.store.index_file``), indexes the UNIQ_KEY and KEYS of dispatched messages, answers queries by key newest
file first, and forgets what recovery cut or retention deleted.

Threads: one writer (the dispatcher) calls ``build_index``; any number of readers call ``query`` at the same time;
a clean-up thread may call ``delete_expired`` and a flush thread ``flush``. ``load``, ``truncate``,
``destroy_all`` and ``close`` are for start-up, recovery and shutdown, while the dispatcher is stopped.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from broker.common.clock import now_ms
from broker.common.errors import StoreError
from broker.common.message import TRANSACTION_MASK, TRANSACTION_ROLLBACK_TYPE, transaction_type
from broker.store.index_file import IndexFile
from broker.store.layout import INDEX_FILE_NAME_LENGTH, index_file_name

log = logging.getLogger(__name__)

MAX_MSGS_NUM_BATCH = 64  # MessageStoreConfig.maxMsgsNumBatch: the most offsets one query returns


class IndexedMessage(Protocol):
    """What indexing reads of a message (a dispatch request)."""

    topic: str
    keys: list[str]
    uniq_key: str | None
    commit_log_offset: int
    store_timestamp: int
    sys_flag: int


def build_key(topic: str, key: str) -> str:
    """IndexService.buildKey: keys are indexed per topic."""
    return f"{topic}#{key}"


@dataclass(slots=True)
class QueryOffsetResult:
    """IndexService.queryOffset's answer: the offsets found, newest first, and how far the index reaches."""

    phy_offsets: list[int] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0


class IndexService:
    """The index files of a store, oldest first; the last one takes new keys.

    ``build_index`` skips a message it has already indexed: one before the last file's end phy offset (Java's
    check) and also the very message at that offset, which Java would index a second time when the log is
    re-dispatched after a restart.

    Examples:
        >>> service = IndexService(config.index_dir, config.max_hash_slot_num, config.max_index_num)
        >>> service.load(last_exit_ok=True, checkpoint_index_timestamp=checkpoint.index_msg_timestamp)
        >>> service.build_index("TopicTest", ["order-1"], "7F0000010001...", commit_log_offset=0,
        ...                     store_timestamp=1700000000000)
        >>> service.query("TopicTest", "order-1", 32, 0, 2**63 - 1).phy_offsets
        [0]
    """

    def __init__(self, index_dir: str, slot_num: int, index_num: int, *, max_num_cap: int = MAX_MSGS_NUM_BATCH,
                 clock_ms: Callable[[], int] = now_ms) -> None:
        self.index_dir = index_dir
        self.slot_num = slot_num
        self.index_num = index_num
        self.max_num_cap = max_num_cap
        self._clock_ms = clock_ms
        self._files: list[IndexFile] = []  # replaced, never mutated in place, so readers may take a snapshot
        self._lock = threading.Lock()  # serialises changes to the file list
        # Commit log offset of the newest message whose keys are all in the index; -1: none known.
        self._indexed_through = -1
        # Where ``load`` destroyed indexed messages; ``truncate`` reports it (see there).
        self._lost_from: int | None = None

    # -- start-up -----------------------------------------------------------------------------------------------

    def load(self, last_exit_ok: bool, checkpoint_index_timestamp: int) -> None:
        """Open the files in name (= creation) order. After an unclean exit a file that ends after the checkpoint's
        indexMsgTimestamp may be partly lost, so it is destroyed and rebuilt by re-dispatch (IndexService.load);
        the next ``truncate`` includes its begin phy offset in the offset it returns."""
        if not os.path.isdir(self.index_dir):
            return
        names = sorted(n for n in os.listdir(self.index_dir) if n.isdigit() and len(n) == INDEX_FILE_NAME_LENGTH)
        kept: list[IndexFile] = []
        dropped_begin: list[int] = []
        for name in names:
            try:
                f = IndexFile.open(os.path.join(self.index_dir, name), self.slot_num, self.index_num)
            except StoreError as err:
                log.warning("ignoring index file: %s", err)
                continue
            if not last_exit_ok and f.end_timestamp > checkpoint_index_timestamp:
                log.info("destroying %s: it ends after the checkpoint (%d > %d)", f.path, f.end_timestamp,
                         checkpoint_index_timestamp)
                if f.has_entries:
                    dropped_begin.append(f.begin_phy_offset)
                f.destroy()
                continue
            kept.append(f)
        with self._lock:
            self._files = self._files + kept
        self._indexed_through = self._derive_indexed_through(dropped_begin)
        if dropped_begin:
            self._lost_from = min(dropped_begin)

    def _derive_indexed_through(self, dropped_begin: list[int]) -> int:
        """What the files say is fully indexed: the last file's end phy offset (once it holds or inherits an
        entry), unless a dropped file began at or before it, i.e. that message's keys were split across a roll."""
        if not self._files:
            return -1
        last = self._files[-1]
        through = last.end_phy_offset if last.has_entries or last.end_phy_offset > 0 else -1
        if through >= 0 and (last.is_write_full or not last.has_entries):
            # The last message of a full file (or the one an empty file inherits) may have had keys in a next file
            # that is gone now (destroyed by a start that was then killed, so dropped_begin cannot tell): index
            # that message again, as Java does.
            through -= 1
        if dropped_begin:
            through = min(through, min(dropped_begin) - 1)
        return through

    # -- writing ------------------------------------------------------------------------------------------------

    def build_index(self, topic: str, keys: list[str], uniq_key: str | None, commit_log_offset: int,
                    store_timestamp: int, *, sys_flag: int = 0) -> None:
        """Index the UNIQ_KEY and every KEYS entry of one message (IndexService.buildIndex). As in Java, a file
        is created even for a message with nothing to index, PREPARED messages are indexed (under the half topic
        they are stored in) and ROLLBACK messages are not."""
        index_file = self._writable_file()
        if commit_log_offset <= self._indexed_through or commit_log_offset < index_file.end_phy_offset:
            return
        if transaction_type(sys_flag) != TRANSACTION_ROLLBACK_TYPE:
            if uniq_key is not None:
                index_file = self._put_key(index_file, build_key(topic, uniq_key), commit_log_offset,
                                           store_timestamp)
            for key in keys:
                if key:
                    index_file = self._put_key(index_file, build_key(topic, key), commit_log_offset,
                                               store_timestamp)
        self._indexed_through = commit_log_offset

    def build_index_batch(self, messages: Sequence[IndexedMessage]) -> None:
        """``build_index`` for consecutive messages in CommitLog order, the keys of all written together per file
        (``IndexFile.put_keys``): the same entries, slots and headers, with a fraction of the calls."""
        if not messages:
            return
        index_file = self._writable_file()
        skip_through = max(self._indexed_through, index_file.end_phy_offset - 1)
        items: list[tuple[str, int, int]] = []
        for msg in messages:
            offset = msg.commit_log_offset
            if offset <= skip_through or msg.sys_flag & TRANSACTION_MASK == TRANSACTION_ROLLBACK_TYPE:
                continue
            prefix = f"{msg.topic}#"
            if msg.uniq_key is not None:
                items.append((prefix + msg.uniq_key, offset, msg.store_timestamp))
            for key in msg.keys:
                if key:
                    items.append((prefix + key, offset, msg.store_timestamp))
        while items:
            put = index_file.put_keys(items)
            items = items[put:]
            if items:
                log.info("index file %s is full, creating another one", index_file.path)
                index_file = self._writable_file()
        self._indexed_through = max(self._indexed_through, messages[-1].commit_log_offset)

    def _put_key(self, index_file: IndexFile, key: str, phy_offset: int, store_timestamp: int) -> IndexFile:
        while not index_file.put_key(key, phy_offset, store_timestamp):
            log.info("index file %s is full, creating another one", index_file.path)
            index_file = self._writable_file()
        return index_file

    def _writable_file(self) -> IndexFile:
        """The last file, or a new one continuing it when it is full or there is none (getAndCreateLastIndexFile)."""
        files = self._files
        if files and not files[-1].is_write_full:
            return files[-1]
        prev = files[-1] if files else None
        os.makedirs(self.index_dir, exist_ok=True)
        ms = self._clock_ms()
        while True:
            path = os.path.join(self.index_dir, index_file_name(ms))
            try:
                f = IndexFile.create(path, self.slot_num, self.index_num,
                                     prev.end_phy_offset if prev else 0, prev.end_timestamp if prev else 0)
                break
            except FileExistsError:
                ms += 1  # two files in one millisecond (tiny files): Java would reopen the first, we move on
            except OSError as err:
                raise StoreError(f"cannot create index file {path}: {err}") from err
        with self._lock:
            self._files = self._files + [f]
        return f

    # -- another process writes ----------------------------------------------------------------------------------

    @property
    def indexed_through(self) -> int:
        return self._indexed_through

    def follow(self, names: list[str] | None, indexed_through: int) -> None:
        """Take the view of the index's writer in another process (the dispatch process): its files by name, when
        they changed (None: they did not), and how far it indexed. The headers of the files not full yet are read
        again."""
        if names is not None:
            with self._lock:
                known = {f.file_name: f for f in self._files}
                files = []
                for name in names:
                    f = known.pop(name, None)
                    if f is None:
                        try:
                            f = IndexFile.open(os.path.join(self.index_dir, name), self.slot_num, self.index_num)
                        except FileNotFoundError:
                            continue  # deleted again since the report
                    files.append(f)
                self._files = files
            for f in known.values():
                f.release()
        for f in self._files:
            if not f.is_write_full:  # a full file never changes again
                f.load_header()
        self._indexed_through = indexed_through

    # -- reading ------------------------------------------------------------------------------------------------

    def query(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryOffsetResult:
        """Offsets of messages with ``key`` stored in [begin, end], newest file first (IndexService.queryOffset)."""
        max_num = min(max_num, self.max_num_cap)
        result = QueryOffsetResult()
        files = self._files
        if not files:
            return result
        result.index_last_update_timestamp = files[-1].end_timestamp
        result.index_last_update_phyoffset = files[-1].end_phy_offset
        idx_key = build_key(topic, key)
        offsets = result.phy_offsets
        for f in reversed(files):
            if f.is_time_matched(begin, end):
                offsets.extend(f.select_phy_offsets(idx_key, max_num - len(offsets), begin, end))
            if f.begin_timestamp < begin or len(offsets) >= max_num:
                break
        return result

    @property
    def last_update_timestamp(self) -> int:
        files = self._files
        return files[-1].end_timestamp if files else 0

    @property
    def last_end_phy_offset(self) -> int:
        files = self._files
        return files[-1].end_phy_offset if files else 0

    @property
    def files(self) -> list[IndexFile]:
        """A snapshot of the files, oldest first."""
        return list(self._files)

    # -- maintenance --------------------------------------------------------------------------------------------

    def flush(self) -> int:
        """Force changed files to disk. Returns the end timestamp of the newest full file (0: none), which the
        checkpoint may record as indexMsgTimestamp: Java records it only for full files, because after an
        unclean exit ``load`` destroys every file ending later and the CommitLog recovery re-dispatches from that
        time on, which must cover the destroyed files whole."""
        files = self._files
        for f in files:
            if f.is_dirty:
                f.flush()
        for f in reversed(files):
            if f.is_write_full:
                return f.end_timestamp
        return 0

    def delete_expired(self, min_commit_log_offset: int) -> int:
        """Destroy the leading files whose entries all point before ``min_commit_log_offset`` (deleted CommitLog
        files); never the last file. Returns how many were destroyed (IndexService.deleteExpiredFile)."""
        with self._lock:
            files = self._files
            expired: list[IndexFile] = []
            for f in files[:-1]:
                if f.end_phy_offset >= min_commit_log_offset:
                    break
                expired.append(f)
            self._files = files[len(expired):]
        for f in expired:
            f.destroy()
        return len(expired)

    def truncate(self, commit_log_end: int) -> int:
        """Forget entries for messages at or after ``commit_log_end`` (recovery cut the CommitLog there).

        RocketMQ's format cannot drop single entries (they are chained through slots), so every file with an
        entry at or beyond the cut is destroyed whole. Returns the commit log offset from which messages must be
        dispatched again to rebuild what those files held below the cut: the begin phy offset of the oldest
        destroyed file with entries, or ``commit_log_end`` when nothing below it was lost. A message whose keys
        were split across a file roll may then have its first keys indexed twice (harmless: queries check keys).

        Files that ``load`` destroyed after an unclean exit count too: a checkpoint whose indexMsgTimestamp is
        newer than the last full file's end (Java records only full files) would otherwise let the CommitLog
        recovery start re-dispatch after the begin of a destroyed file. Recovery calls this once after ``load``.
        """
        with self._lock:
            files = self._files
            keep = 0
            while keep < len(files) and files[keep].end_phy_offset < commit_log_end:
                keep += 1
            dropped = files[keep:]
            self._files = files[:keep]
        rebuild_from = commit_log_end
        if self._lost_from is not None:
            rebuild_from, self._lost_from = min(rebuild_from, self._lost_from), None
        for f in dropped:
            if f.has_entries:
                rebuild_from = min(rebuild_from, f.begin_phy_offset)
            f.destroy()
        if dropped:
            log.info("truncated index at %d: destroyed %d file(s), rebuild from %d", commit_log_end, len(dropped),
                     rebuild_from)
        self._indexed_through = min(self._indexed_through, rebuild_from - 1)
        return rebuild_from

    def destroy_all(self) -> None:
        """Delete every index file, before rebuilding the index from the CommitLog."""
        with self._lock:
            files, self._files = self._files, []
        for f in files:
            f.destroy()
        self._indexed_through = -1

    def close(self) -> None:
        with self._lock:
            files, self._files = self._files, []
        for f in files:
            f.close()
