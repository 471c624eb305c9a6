"""MmapFileList: DLedger's data or index files, one logical byte space cut into fixed-size mapped files.

The files are the store's own ``MappedFileQueue`` (named by their first offset, 20 digits); what DLedger adds is how
an append rolls: an entry never spans two files, and a data file that cannot take the next entry plus
``MIN_BLANK_LEN`` bytes is closed with a pad (``layout.encode_blank``). Index files take 32-byte units and a size
that is a multiple of 32, so they roll without a pad.
"""

from __future__ import annotations

import os

from broker.common.errors import StoreError
from broker.dledger.layout import MIN_BLANK_LEN, encode_blank
from broker.store.mapped_file import MappedFile, MappedFileQueue


class MmapFileList:
    def __init__(self, directory: str, file_size: int) -> None:
        self.queue = MappedFileQueue(directory, file_size)
        self.file_size = file_size

    @property
    def files(self) -> list[MappedFile]:
        return self.queue.files

    @property
    def min_offset(self) -> int:
        return self.queue.min_offset

    @property
    def max_wrote_position(self) -> int:
        return self.queue.max_offset

    def load(self) -> None:
        """Map every file; each counts as full until recovery cuts the list at its end. A file of another size is
        refused, as DLedger refuses it (a changed file size setting, or a torn copy)."""
        directory = self.queue.directory
        if os.path.isdir(directory):
            for name in sorted(os.listdir(directory)):
                path = os.path.join(directory, name)
                if name.isdigit() and len(name) == 20 and os.path.getsize(path) != self.file_size:
                    raise StoreError(f"{path} is {os.path.getsize(path)} bytes, not {self.file_size}: the file size "
                                     "setting differs from the one the files were written with")
        self.queue.load()
        self.check_self()

    def check_self(self) -> None:
        """Consecutive files, each ``file_size`` after the one before (MmapFileList.checkSelf)."""
        files = self.queue.files
        for before, after in zip(files, files[1:], strict=False):
            if after.file_from_offset - before.file_from_offset != self.file_size:
                raise StoreError(f"{after.path} does not follow {before.path}: a file is missing")

    def start_at(self, offset: int) -> None:
        """Create the first file at ``offset`` (a multiple of the file size): where DLedger's data begins after a
        plain CommitLog (dividedCommitlogOffset)."""
        if self.queue.files:
            raise StoreError(f"{self.queue.directory} has files already")
        if offset % self.file_size:
            raise StoreError(f"a first file at {offset} is not at a multiple of the file size {self.file_size}")
        self.queue.last_file_for_write(offset)

    def pre_append(self, length: int, use_blank: bool = True) -> int:
        """Where ``length`` bytes would go: the last file if they fit (with ``MIN_BLANK_LEN`` to spare when
        ``use_blank``), else a new file, the last one closed with a pad first."""
        if length > self.file_size - (MIN_BLANK_LEN if use_blank else 0):
            raise StoreError(f"{length} bytes do not fit in a file of {self.file_size}")
        mf = self.queue.last_file_for_write(self.queue.max_offset)
        blank = MIN_BLANK_LEN if use_blank else 0
        if length + blank > mf.free_space:
            if not use_blank:
                raise StoreError(f"{length} bytes do not fit in the {mf.free_space} left in {mf.path}")
            remaining = mf.free_space
            mf.write_at(mf.wrote_position, encode_blank(remaining).ljust(remaining, b"\0"))
            mf.wrote_position = self.file_size
            mf = self.queue.last_file_for_write()
        return mf.file_from_offset + mf.wrote_position

    def append(self, data, use_blank: bool = True) -> int:
        """Append ``data`` whole into one file; returns its offset."""
        offset = self.pre_append(len(data), use_blank)
        self.queue.files[-1].append(data)
        return offset

    def view(self, offset: int, size: int) -> memoryview | None:
        """``size`` bytes at ``offset``, within one file; None when no file holds them."""
        mf = self.queue.find(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos + size > mf.wrote_position:
            return None
        return mf.buffer[pos:pos + size]

    def truncate(self, offset: int) -> None:
        """Cut the list at ``offset``: later files deleted, the file holding it rewound. Unlike DLedger we also zero
        the cut-off tail, so that stale entries can never look like data to a later recovery."""
        self.queue.truncate(offset)

    def flush(self) -> int:
        return self.queue.flush()

    def close(self) -> None:
        self.queue.close()
