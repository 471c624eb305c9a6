"""IndexFile: one file of the message-key index, byte for byte RocketMQ's ``store/index`` format.

The byte layout (40-byte header, hash slots, 20-byte entries) is defined in ``broker.store.layout``; this module only
decides what goes where. Each key ``topic#key`` hashes to a slot that holds the number of the newest entry with that
slot; every entry points to the previous one of its slot, so a lookup walks a chain from newest to oldest. The files
of a store, and which one takes new keys, are ``broker.store.index_service``'s.

Threads: one writer (the dispatcher) puts keys; any number of readers call ``select_phy_offsets`` at the same time;
a flush thread may call ``flush``. ``close``, ``release`` and ``destroy`` are the IndexService's to call.
"""

from __future__ import annotations

import mmap
import os
import threading

from broker.common.errors import StoreError
from broker.common.message import java_hash
from broker.store.layout import (
    decode_index_entry,
    decode_index_header,
    index_entry_pos,
    index_file_size,
    read_index_slot,
    write_index_entries,
    write_index_entry,
    write_index_header,
    write_index_slot,
)
from broker.store.mapped_file import map_address, populate_write, sync_map

INVALID_INDEX = 0  # entry 0 is never used, so 0 in a slot or a prevIndex means "none"
_INT_MAX = 0x7FFFFFFF


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
