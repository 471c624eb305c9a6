"""IndexFile and IndexService: the message-key index, byte for byte RocketMQ's ``store/index`` format.

The byte layout (40-byte header, hash slots, 20-byte entries) is defined in ``broker.store.layout``; this module only
decides what goes where. Each key ``topic#key`` hashes to a slot that holds the number of the newest entry with that
slot; every entry points to the previous one of its slot, so a lookup walks a chain from newest to oldest.

Threads: one writer (the dispatcher) calls ``build_index``; any number of readers call ``query`` at the same time;
a clean-up thread may call ``delete_expired`` and a flush thread ``flush``. ``load``, ``truncate``,
``destroy_all`` and ``close`` are for start-up, recovery and shutdown, while the dispatcher is stopped.
"""

from __future__ import annotations

import logging
import mmap
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from broker.common.errors import StoreError
from broker.common.message import TRANSACTION_MASK, TRANSACTION_ROLLBACK_TYPE, java_hash, transaction_type
from broker.store.layout import (
    INDEX_FILE_NAME_LENGTH,
    decode_index_entry,
    decode_index_header,
    index_entry_pos,
    index_file_name,
    index_file_size,
    read_index_slot,
    write_index_entries,
    write_index_entry,
    write_index_header,
    write_index_slot,
)
from broker.store.mapped_file import map_address, populate_write, sync_map

log = logging.getLogger(__name__)

INVALID_INDEX = 0  # entry 0 is never used, so 0 in a slot or a prevIndex means "none"
_INT_MAX = 0x7FFFFFFF
MAX_MSGS_NUM_BATCH = 64  # MessageStoreConfig.maxMsgsNumBatch: the most offsets one query returns


def index_key_hash(key: str) -> int:
    """IndexFile.indexKeyHashMethod: abs(String.hashCode()), where abs(Integer.MIN_VALUE) stays negative -> 0."""
    h = java_hash(key)
    return 0 if h == -0x80000000 else abs(h)


def _put_index_entries_py(buf, slot_num: int, number: int, begin_timestamp: int, begin_phy_offset: int,
                          items: list[tuple[str, int, int]]) -> tuple[int, int, int, int]:
    """Entries for ``items`` (key, phy_offset, store_timestamp) from entry ``number`` on, all of which must fit, and
    the slots they head: (the next entry number, how many slots were empty, the header's begin timestamp and begin
    offset, which the first entry of a file sets). The entries are packed and written at once, then the slots.
    ``_speedups.put_index_entries`` does the same in C."""
    heads: dict[int, int] = {}  # slot -> newest entry number, for slots changed here
    entries: list[tuple[int, int, int, int]] = []
    first, new_slots = number, 0
    for key, phy_offset, store_timestamp in items:
        key_hash = index_key_hash(key)
        slot = key_hash % slot_num
        prev = heads.get(slot)
        if prev is None:
            prev = read_index_slot(buf, slot)
            if prev <= INVALID_INDEX or prev > number:
                prev = INVALID_INDEX
                new_slots += 1
        time_diff = 0 if begin_timestamp <= 0 else min(max((store_timestamp - begin_timestamp) // 1000, 0), _INT_MAX)
        entries.append((key_hash, phy_offset, time_diff, prev))
        if number <= 1:  # after the time difference, as Java's putKey
            begin_phy_offset, begin_timestamp = phy_offset, store_timestamp
        heads[slot] = number
        number += 1
    write_index_entries(buf, index_entry_pos(slot_num, first), entries)
    for slot, head in heads.items():
        write_index_slot(buf, slot, head)
    return number, new_slots, begin_timestamp, begin_phy_offset


try:
    from broker._speedups import put_index_entries
except ImportError:  # built without a C compiler
    put_index_entries = _put_index_entries_py


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


class IndexFile:
    """One index file, mapped whole. Header fields live in attributes and are written through to the mapping on
    every ``put_key``, so the bytes match what RocketMQ's IndexHeader setters leave behind.

    Examples:
        >>> f = IndexFile.create(path, slot_num=4, index_num=16)
        >>> f.put_key("TopicTest#order-1", phy_offset=0, store_timestamp=1700000000000)
        True
        >>> f.select_phy_offsets("TopicTest#order-1", 32, 0, 2**63 - 1)
        [0]
    """

    def __init__(self, path: str, slot_num: int, index_num: int, *, create: bool) -> None:
        self.path = path
        self.slot_num = slot_num
        self.index_num = index_num
        self.file_size = index_file_size(slot_num, index_num)
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(path, flags, 0o644)
        try:
            size = os.fstat(fd).st_size
            if create:
                os.ftruncate(fd, self.file_size)
            elif size != self.file_size:
                raise StoreError(f"index file {path} is {size} bytes, expected {self.file_size} "
                                 f"for {slot_num} slots and {index_num} entries")
            self._mm: mmap.mmap | None = mmap.mmap(fd, self.file_size, mmap.MAP_SHARED,
                                                   mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        self._address = map_address(self._mm)  # for msync/madvise without the GIL
        # Guards the mapping's lifetime against readers and the flusher; the writer never needs it (see module doc).
        self._life = threading.Lock()
        self._dirty = False
        self.index_count = 0
        self.load_header()

    def load_header(self) -> None:
        """The attributes from the header bytes: at open, and where another process writes the file (the dispatch
        process) after each of its steps. The entries and slots a header counts are written before it."""
        if self._mm is None:
            return
        header = decode_index_header(self._mm)
        count = max(header.index_count, 1)  # IndexHeader.load: indexCount <= 0 -> 1
        self.begin_timestamp = header.begin_timestamp
        self.end_timestamp = header.end_timestamp
        self.begin_phy_offset = header.begin_phy_offset
        self.end_phy_offset = header.end_phy_offset
        self.hash_slot_count = header.hash_slot_count
        if count != self.index_count:
            self._dirty = self.index_count > 0  # not at open: a follower flushes what the writer added
            self.index_count = count

    @classmethod
    def create(cls, path: str, slot_num: int, index_num: int, end_phy_offset: int = 0,
               end_timestamp: int = 0) -> IndexFile:
        """A new file continuing after a full one: its begin/end start at the previous file's end values (Java's
        constructor sets them only when > 0). The counts stay 0 on disk until the first key, as in Java."""
        f = cls(path, slot_num, index_num, create=True)
        if end_phy_offset > 0:
            f.begin_phy_offset = f.end_phy_offset = end_phy_offset
        if end_timestamp > 0:
            f.begin_timestamp = f.end_timestamp = end_timestamp
        write_index_header(f._mm, f.begin_timestamp, f.end_timestamp, f.begin_phy_offset, f.end_phy_offset, 0, 0)
        f._dirty = True
        # Keys land in random slots, so the slot table (20 MB by default) takes a page fault per page while the file
        # is young; fault it in now, in a thread and without the GIL, rather than in the dispatch thread.
        threading.Thread(target=f._prefault_slots, name="IndexFilePrefault", daemon=True).start()
        return f

    def _prefault_slots(self) -> None:
        with self._life:  # close and destroy wait: the map must not go away under madvise
            if self._mm is not None:
                populate_write(self._address, 0, index_entry_pos(self.slot_num, 0))

    @classmethod
    def open(cls, path: str, slot_num: int, index_num: int) -> IndexFile:
        return cls(path, slot_num, index_num, create=False)

    def __repr__(self) -> str:
        return f"IndexFile({self.path!r}, count={self.index_count}, end_phy={self.end_phy_offset})"

    @property
    def file_name(self) -> str:
        return os.path.basename(self.path)

    @property
    def is_write_full(self) -> bool:
        return self.index_count >= self.index_num

    @property
    def has_entries(self) -> bool:
        return self.index_count > 1

    def is_time_matched(self, begin: int, end: int) -> bool:
        """Whether [begin, end] overlaps the file's [beginTimestamp, endTimestamp] (IndexFile.isTimeMatched)."""
        b, e = self.begin_timestamp, self.end_timestamp
        return (begin < b and end > e) or b <= begin <= e or b <= end <= e

    def put_key(self, key: str, phy_offset: int, store_timestamp: int) -> bool:
        """Append one entry and make it the head of its slot's chain; False when the file is full."""
        number = self.index_count
        if number >= self.index_num:
            return False
        mm = self._mm
        key_hash = index_key_hash(key)
        slot = key_hash % self.slot_num
        prev = read_index_slot(mm, slot)
        if prev <= INVALID_INDEX or prev > number:
            prev = INVALID_INDEX
        write_index_entry(mm, index_entry_pos(self.slot_num, number), key_hash, phy_offset,
                          self._time_diff(store_timestamp), prev)
        write_index_slot(mm, slot, number)
        if number <= 1:
            self.begin_phy_offset = phy_offset
            self.begin_timestamp = store_timestamp
        if prev == INVALID_INDEX:
            self.hash_slot_count += 1
        self.end_phy_offset = phy_offset
        self.end_timestamp = store_timestamp
        # Readers check slot values against index_count, so it grows only after the entry and slot are written.
        self.index_count = number + 1
        self._dirty = True
        self.write_header()
        return True

    def put_keys(self, items: list[tuple[str, int, int]]) -> int:
        """``put_key(key, phy_offset, store_timestamp)`` for each item, leaving the same bytes, in one call
        (``put_index_entries``). Returns how many were put: fewer than all when the file got full."""
        room = self.index_num - self.index_count
        if len(items) > room:
            items = items[:max(room, 0)]
        if not items:
            return 0
        number, new_slots, self.begin_timestamp, self.begin_phy_offset = put_index_entries(
            self._mm, self.slot_num, self.index_count, self.begin_timestamp, self.begin_phy_offset, items)
        self.hash_slot_count += new_slots
        _, self.end_phy_offset, self.end_timestamp = items[-1]
        # Readers check slot values against index_count, so it grows only after the entries and slots are written.
        self.index_count = number
        self._dirty = True
        self.write_header()
        return len(items)

    def write_header(self) -> None:
        """The header bytes from the attributes, as RocketMQ's IndexHeader setters leave them after a put."""
        if self.index_count > 1 and self._mm is not None:
            write_index_header(self._mm, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                               self.end_phy_offset, self.hash_slot_count, self.index_count)

    def _time_diff(self, store_timestamp: int) -> int:
        """Seconds since beginTimestamp, clamped to [0, Integer.MAX_VALUE]; 0 while the file has no begin time.
        (Java divides toward zero, Python floors; they differ only below zero, which is clamped anyway.)"""
        begin = self.begin_timestamp
        if begin <= 0:
            return 0
        diff = (store_timestamp - begin) // 1000
        return _INT_MAX if diff > _INT_MAX else max(diff, 0)

    def select_phy_offsets(self, key: str, max_num: int, begin: int, end: int) -> list[int]:
        """Commit log offsets of entries whose hash equals ``key``'s and whose time is in [begin, end], newest
        first, at most ``max_num``. Like Java, the walk stops at the first entry older than ``begin``, and
        entries of other keys with the same hash are returned too (the caller checks the messages' keys)."""
        result: list[int] = []
        key_hash = index_key_hash(key)
        with self._life:
            mm = self._mm
            if mm is None:
                return result
            count, begin_timestamp, slot_num = self.index_count, self.begin_timestamp, self.slot_num
            number = read_index_slot(mm, key_hash % slot_num)
            if number <= INVALID_INDEX or number > count or count <= 1:
                return result
            while len(result) < max_num:
                hash_read, phy_offset, time_diff, prev = decode_index_entry(mm, index_entry_pos(slot_num, number))
                if time_diff < 0:
                    break
                time_read = begin_timestamp + time_diff * 1000
                if hash_read == key_hash and begin <= time_read <= end:
                    result.append(phy_offset)
                if prev <= INVALID_INDEX or prev > count or prev == number or time_read < begin:
                    break
                number = prev
        return result

    @property
    def is_dirty(self) -> bool:
        return self._dirty

    def flush(self) -> None:
        """Force the mapping to disk. The header is already current in the mapping (put_key writes it)."""
        with self._life:
            if self._mm is not None:
                self._dirty = False  # cleared first: a put racing with the msync marks it dirty again
                sync_map(self._mm, self._address, 0, self.file_size)

    def close(self) -> None:
        """As IndexFile.shutdown: write the whole header (an unused file then says indexCount 1, as Java leaves
        it), flush and unmap."""
        with self._life:
            mm, self._mm = self._mm, None
            if mm is None:
                return
            write_index_header(mm, self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                               self.end_phy_offset, self.hash_slot_count, self.index_count)
            mm.flush()
            mm.close()

    def release(self) -> None:
        """Unmap without writing anything: the file belongs to another process, which deleted it."""
        with self._life:
            mm, self._mm = self._mm, None
            if mm is not None:
                mm.close()

    def destroy(self) -> None:
        self.release()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


@dataclass(slots=True)
class QueryOffsetResult:
    """IndexService.queryOffset's answer: the offsets found, newest first, and how far the index reaches."""

    phy_offsets: list[int] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


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
                 clock_ms: Callable[[], int] = _now_ms) -> None:
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
