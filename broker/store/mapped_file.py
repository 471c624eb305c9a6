"""MappedFile and MappedFileQueue: fixed-size memory-mapped files named by their start offset.

A MappedFileQueue is one logical, append-only byte space (a CommitLog, or one ConsumeQueue) cut into files of
``file_size`` bytes. Positions here are logical offsets into that space unless a name says otherwise.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import os
import sys
from enum import Enum

from broker.common.errors import StoreError
from broker.store.layout import offset_file_name
from broker.store.service_thread import ServiceThread

log = logging.getLogger(__name__)

PAGE_SIZE = mmap.PAGESIZE
_ZERO_CHUNK = bytes(1 << 20)
_MS_SYNC = 4  # Linux <sys/mman.h>
_MADV_POPULATE_WRITE = 23  # Linux 5.14+: fault pages in writable without touching their bytes


def _libc_mm_calls() -> tuple[ctypes._CFuncPtr | None, ctypes._CFuncPtr | None]:
    """msync and madvise through ctypes, which releases the GIL for the call. ``mmap.flush`` holds the GIL for the
    whole disk write (CPython 3.11), stalling every other thread of the broker meanwhile. (None, None) off Linux."""
    if not sys.platform.startswith("linux"):
        return None, None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        msync, madvise = libc.msync, libc.madvise
    except (OSError, AttributeError):
        return None, None
    for fn in (msync, madvise):
        fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        fn.restype = ctypes.c_int
    return msync, madvise


_msync, _madvise = _libc_mm_calls()


def map_address(mm: mmap.mmap) -> int:
    """The address of a writable map, for msync/madvise through ctypes; 0 where those are not available. The
    ctypes view is dropped at once, so that the map has no export left that would stop its close()."""
    return ctypes.addressof(ctypes.c_char.from_buffer(mm)) if _msync is not None else 0


def sync_map(mm: mmap.mmap, address: int, start: int, length: int) -> None:
    """msync(MS_SYNC) of [start, start + length) of ``mm``, whose address is ``address`` (``map_address``): without
    the GIL through ctypes, else ``mmap.flush``, which holds it for the whole disk write."""
    if address and not mm.closed:
        if _msync(address + start, length, _MS_SYNC) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"msync: {os.strerror(err)}")
    else:
        mm.flush(start, length)


def populate_write(address: int, start: int, end: int) -> bool:
    """Fault the pages of [start, end) of the map at ``address`` in writable (MADV_POPULATE_WRITE), without the
    GIL. A first write to a page of a fresh sparse file costs a page fault, several microseconds on a VM, more
    than copying the page. False when the kernel cannot (before Linux 5.14) or the range is not mapped (any more)."""
    if not address or _madvise is None:
        return False
    if _madvise(address + start, end - start, _MADV_POPULATE_WRITE) != 0:
        log.debug("MADV_POPULATE_WRITE failed: %s", os.strerror(ctypes.get_errno()))
        return False
    return True


class MapMode(Enum):
    """How a MappedFile maps its file: the writer creates it; a process that follows another's writes
    (``MappedFileQueue.follow``) opens what exists, to flush it (OPEN) or only to read it (READ)."""

    CREATE = "create"
    OPEN = "open"
    READ = "read"


class MappedFile:
    """One file of a MappedFileQueue, mapped whole. ``wrote_position`` is how far it holds data;
    ``flushed_position`` how far that data has been forced to disk."""

    def __init__(self, path: str, file_size: int, mode: MapMode = MapMode.CREATE) -> None:
        self.path = path
        self.file_size = file_size
        self.file_from_offset = int(os.path.basename(path))
        flags = {MapMode.CREATE: os.O_RDWR | os.O_CREAT, MapMode.OPEN: os.O_RDWR, MapMode.READ: os.O_RDONLY}[mode]
        fd = os.open(path, flags, 0o644)
        try:
            if os.fstat(fd).st_size != file_size:
                if mode is not MapMode.CREATE:
                    raise StoreError(f"{path} is {os.fstat(fd).st_size} bytes, not {file_size}")
                os.ftruncate(fd, file_size)
            prot = mmap.PROT_READ if mode is MapMode.READ else mmap.PROT_READ | mmap.PROT_WRITE
            self._mm = mmap.mmap(fd, file_size, mmap.MAP_SHARED, prot)
        finally:
            os.close(fd)
        self._fd = -1  # opened by the first ``write``, closed by ``seal``: a store maps thousands of files
        self.buffer = memoryview(self._mm)
        # for msync/madvise without the GIL; a read-only map is never flushed nor prefaulted
        self._address = map_address(self._mm) if mode is not MapMode.READ else 0
        self.wrote_position = 0
        self.flushed_position = 0
        self.prefaulted_position = 0  # pages below it are mapped writable already (see ``prefault``)

    def __repr__(self) -> str:
        return f"MappedFile({self.path!r}, wrote={self.wrote_position}, flushed={self.flushed_position})"

    @property
    def free_space(self) -> int:
        return self.file_size - self.wrote_position

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    @property
    def end_offset(self) -> int:
        return self.file_from_offset + self.wrote_position

    def append(self, data) -> int:
        """Write ``data`` at the wrote position; returns the file-relative position it went to."""
        pos = self.wrote_position
        end = pos + len(data)
        self.buffer[pos:end] = data
        self.wrote_position = end
        return pos

    def write(self, data) -> int:
        """``append`` through the file instead of the map (pwrite): the same page cache, so readers of the map see
        the bytes, but no write fault per page and no wait on a page that a flush is still writing out. With a sync
        after each 38 KB put, about half the time of writing through the map."""
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY)
        pos = self.wrote_position
        done = os.pwrite(self._fd, data, pos)
        while done < len(data):  # a short write: only when the disk is full or a signal came, go on or fail
            done += os.pwrite(self._fd, memoryview(data)[done:], pos + done)
        self.wrote_position = pos + done
        return pos

    def seal(self) -> None:
        """No more ``write``s (the file is full): let go of the descriptor they use."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def write_at(self, pos: int, data) -> None:
        self.buffer[pos:pos + len(data)] = data

    def zero_tail(self, pos: int) -> None:
        """Zero stale bytes from ``pos`` on, so that recovery never mistakes old data for new records. Data is
        written contiguously, so the first chunk that is already all zero ends the work."""
        while pos < self.file_size:
            end = min(pos + len(_ZERO_CHUNK), self.file_size)
            chunk = self.buffer[pos:end]
            if chunk == _ZERO_CHUNK[: end - pos]:
                break
            chunk[:] = _ZERO_CHUNK[: end - pos]
            pos = end

    def flush(self) -> int:
        """Force the written, not yet flushed pages to disk; returns the new flushed position. Only that range is
        synced (not the whole file, as fdatasync would), so prefaulted pages ahead stay mapped writable."""
        wrote = self.wrote_position
        if wrote > self.flushed_position:
            start = self.flushed_position - self.flushed_position % PAGE_SIZE
            sync_map(self._mm, self._address, start, wrote - start)
            self.flushed_position = wrote
        return self.flushed_position

    def prefault(self, end: int) -> bool:
        """Map the pages up to ``end`` writable ahead of the writer (RocketMQ's warmMappedFile) without the GIL
        (``populate_write``), moving the page faults off the append path to another core. False when that cannot
        be done, so the caller stops trying."""
        end = min(end, self.file_size)
        start = max(self.prefaulted_position, self.wrote_position)
        start -= start % PAGE_SIZE
        if end <= start or self._mm.closed:
            return True
        if not populate_write(self._address, start, end):
            return self._mm.closed  # closed meanwhile (retention, shutdown): nothing left to do, not a failure
        self.prefaulted_position = end
        return True

    def last_modified(self) -> float:
        return os.path.getmtime(self.path)

    def close(self) -> None:
        self._address = 0
        self.seal()
        try:
            self.buffer.release()
            self._mm.close()
        except BufferError:
            # A reader still holds a view into the map; it is unmapped when the last view goes away.
            log.debug("%s still has readers; leaving the unmap to them", self.path)

    def destroy(self) -> None:
        self.close()
        os.unlink(self.path)


DELETE_FILES_BATCH_MAX = 10  # files one retention round deletes at most (Apache's and DLedger's)


class MappedFileQueue:
    """The files of one log in offset order, as RocketMQ's MappedFileQueue."""

    def __init__(self, directory: str, file_size: int, mode: MapMode = MapMode.CREATE) -> None:
        self.directory = directory
        self.file_size = file_size
        self.mode = mode  # READ: the files are only read here (``follow``); the writer is another process
        self.files: list[MappedFile] = []

    def load(self) -> None:
        """Map every file in the directory. Each loaded file counts as full until recovery sets the positions."""
        if not os.path.isdir(self.directory):
            return
        names = sorted(n for n in os.listdir(self.directory) if n.isdigit() and len(n) == 20)
        for name in names:
            path = os.path.join(self.directory, name)
            if os.path.getsize(path) == 0 and name == names[-1]:
                # A crash between creating the newest file and sizing it; Java's doLoad deletes it too.
                log.warning("%s is empty; deleting it", path)
                os.remove(path)
                continue
            if os.path.getsize(path) != self.file_size:
                log.warning("%s is %d bytes, not %d; ignoring it and what follows", path,
                            os.path.getsize(path), self.file_size)
                break
            mf = MappedFile(path, self.file_size)
            mf.wrote_position = mf.flushed_position = self.file_size
            self.files.append(mf)

    def close(self) -> None:
        for mf in self.files:
            mf.close()
        self.files.clear()

    # -- offsets --------------------------------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        """End of the written data (RocketMQ's getMaxOffset/getMaxWrotePosition)."""
        return self.files[-1].end_offset if self.files else 0

    @property
    def flushed_offset(self) -> int:
        for mf in reversed(self.files):
            if mf.flushed_position:
                return mf.file_from_offset + mf.flushed_position
        return self.min_offset

    def find(self, offset: int) -> MappedFile | None:
        """The file holding logical ``offset``, or None when it is outside the files."""
        if not self.files:
            return None
        index = (offset - self.files[0].file_from_offset) // self.file_size
        if 0 <= index < len(self.files):
            mf = self.files[index]
            if mf.file_from_offset <= offset < mf.file_from_offset + self.file_size:
                return mf
        return None

    def last_file_for_write(self, start_offset: int = 0) -> MappedFile:
        """The last file if it has room, else a new one after it (the first one starts at ``start_offset``)."""
        if self.files and not self.files[-1].is_full:
            return self.files[-1]
        if self.files:
            offset = self.files[-1].file_from_offset + self.file_size
        else:
            offset = start_offset - start_offset % self.file_size
        os.makedirs(self.directory, exist_ok=True)
        mf = MappedFile(os.path.join(self.directory, offset_file_name(offset)), self.file_size)
        if not self.files and start_offset > offset:
            # A queue that starts mid-file (e.g. a ConsumeQueue rebuilt after old data was deleted).
            mf.wrote_position = mf.flushed_position = start_offset - offset
        self.files.append(mf)
        return mf

    def follow(self, start: int, end: int) -> None:
        """Take the writer's view, for a queue written by another process: files wholly below ``start`` are gone
        (deleted, or no longer needed), data ends at ``end``. Files are mapped as the data reaches them; a file
        missing meanwhile (deleted by the writer since it reported ``end``) ends the view until the next report.
        The list is replaced, not changed in place, so readers in other threads see one or the other."""
        size = self.file_size
        files = self.files
        if files and files[0].file_from_offset + size > start and 0 <= end - files[-1].file_from_offset <= size:
            # Nothing deleted, nothing to map: the writer only wrote on in its last file (a dispatch report's
            # usual news, a thousand times a second under a trickle of puts).
            files[-1].wrote_position = end - files[-1].file_from_offset
            return
        # Files past the one holding ``end`` are not (yet) the writer's: a writer that died may have left one.
        files = [mf for mf in self.files if mf.file_from_offset + size > start and mf.file_from_offset <= end]
        for mf in self.files:
            if not (mf.file_from_offset + size > start and mf.file_from_offset <= end):
                mf.close()
        offset = files[-1].file_from_offset + size if files else start - start % size
        mode = MapMode.READ if self.mode is MapMode.READ else MapMode.OPEN  # never create what the writer deleted
        while offset < end:
            try:
                files.append(MappedFile(os.path.join(self.directory, offset_file_name(offset)), size, mode))
            except FileNotFoundError:
                later = None if files else self._first_file_after(offset, end)
                if later is None:
                    break
                offset = later  # the writer's log starts later (a slave that began at its master's last file)
                continue
            offset += size
        for mf in files:
            mf.wrote_position = min(max(end - mf.file_from_offset, 0), size)
        self.files = files

    def _first_file_after(self, offset: int, end: int) -> int | None:
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return None
        later = [int(n) for n in names if n.isdigit() and offset < int(n) < end]
        return min(later, default=None)

    def flush(self) -> int:
        """Flush every file with unflushed data; returns the flushed offset."""
        for mf in self.files:
            if mf.wrote_position > mf.flushed_position:
                mf.flush()
        return self.flushed_offset

    def unflushed_bytes(self) -> int:
        return self.max_offset - self.flushed_offset

    def truncate(self, offset: int) -> None:
        """Cut the log at ``offset``: later files are deleted, the file holding it is rewound, its tail zeroed."""
        keep: list[MappedFile] = []
        for mf in self.files:
            if mf.file_from_offset + self.file_size <= offset:
                keep.append(mf)
            elif mf.file_from_offset <= offset:
                pos = offset - mf.file_from_offset
                mf.zero_tail(pos)
                mf.wrote_position = pos
                mf.flushed_position = min(mf.flushed_position, pos)
                keep.append(mf)
            else:
                mf.destroy()
        self.files = keep

    def delete_first(self) -> MappedFile:
        mf = self.files.pop(0)
        mf.destroy()
        return mf

    def delete_all(self) -> None:
        while self.files:
            self.delete_first()

    def delete_expired(self, reserved_ms: float, now: float, *, clean_at_once: bool, end: int,
                       keep_last: bool = True, batch_max: int = DELETE_FILES_BATCH_MAX) -> list[MappedFile]:
        """Retention's deletion (MappedFileQueue/MmapFileList.deleteExpiredFileByTime): the leading files not
        modified for ``reserved_ms`` (any when ``clean_at_once``), up to ``batch_max`` a call and never a file
        reaching past ``end`` (what its readers have not taken in yet). The first young file stops the walk, so no
        file in the middle goes; the last file stays unless not ``keep_last`` (a log no longer written)."""
        deleted: list[MappedFile] = []
        for mf in (self.files[:-1] if keep_last else self.files)[:batch_max]:  # a copy: deleting shortens files
            if not clean_at_once and (now - mf.last_modified()) * 1000 < reserved_ms:
                break
            if mf.file_from_offset + self.file_size > end:
                break
            deleted.append(self.delete_first())
            log.info("retention deleted %s", mf.path)
        return deleted


class PrefaultService(ServiceThread):
    """Keeps the pages just ahead of a MappedFileQueue's write position prefaulted (``MappedFile.prefault``), in a
    thread of its own. The writer calls ``poke`` after each append: a comparison, and a wake-up only when less than
    half the window is left. Chunks are large because after each one the thread waits for the GIL again, up to the
    5 ms switch interval while the writer and dispatch are busy."""

    name = "PrefaultService"
    interval = 1.0  # a look at the write position even when nobody poked
    error_pause = 1.0

    def __init__(self, queue: MappedFileQueue, window: int = 32 << 20, chunk: int = 8 << 20) -> None:
        super().__init__()
        self.queue = queue
        self.window = window
        self.chunk = chunk
        self._low = window // 2
        self.supported = _madvise is not None

    def poke(self, mf: MappedFile) -> None:
        # Not once the file is prefaulted to its end: a small file (tests, benches) would wake the thread on every put.
        if mf.wrote_position + self._low > mf.prefaulted_position < mf.file_size and self.supported:
            self.wakeup()

    def start(self) -> None:
        if self.supported:
            super().start()

    def run_once(self) -> None:
        """Prefault the last file up to ``window`` bytes past its write position, a chunk at a time."""
        files = self.queue.files
        if not files:
            return
        mf = files[-1]
        while not self.is_stopped():
            target = min(mf.wrote_position + self.window, mf.file_size)
            if mf.prefaulted_position >= target:
                return
            if not mf.prefault(min(max(mf.prefaulted_position, mf.wrote_position) + self.chunk, target)):
                self.supported = False
                return
