"""StoreCheckpoint: the store times up to which CommitLog, ConsumeQueue and IndexFile are known to be on disk.

Crash recovery starts replaying the CommitLog from the first file whose first record is older than these times.
"""

from __future__ import annotations

import mmap
import os

from broker.store.layout import CHECKPOINT_FILE_SIZE, Checkpoint, decode_checkpoint, encode_checkpoint
from broker.store.mapped_file import map_address, sync_map

# Java's StoreCheckpoint.getMinTimestamp steps back this far to cover records stored in the same instant.
_SAFETY_MARGIN_MS = 3000


class StoreCheckpoint:
    def __init__(self, path: str) -> None:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        existed = os.path.exists(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < CHECKPOINT_FILE_SIZE:
                os.ftruncate(fd, CHECKPOINT_FILE_SIZE)
            self._mm = mmap.mmap(fd, CHECKPOINT_FILE_SIZE)
        finally:
            os.close(fd)
        self._address = map_address(self._mm)  # msync without the GIL (``sync_map``)
        self.value = decode_checkpoint(self._mm) if existed else Checkpoint()

    def update(self, **fields: int) -> None:
        self.value = self.value._replace(**fields)

    def flush(self) -> None:
        """Write the times and force them to disk: an msync that releases the GIL (``mmap.flush`` held it for the
        disk write, once a second, stalling the broker's requests meanwhile)."""
        self._mm[:CHECKPOINT_FILE_SIZE] = encode_checkpoint(self.value)
        sync_map(self._mm, self._address, 0, CHECKPOINT_FILE_SIZE)

    def close(self) -> None:
        self.flush()
        self._address = 0
        self._mm.close()

    def min_timestamp(self) -> int:
        """The store time before which CommitLog and ConsumeQueues are both on disk."""
        cp = self.value
        return max(min(cp.physic_msg_timestamp, cp.logics_msg_timestamp) - _SAFETY_MARGIN_MS, 0)

    def min_timestamp_index(self) -> int:
        return min(self.min_timestamp(), self.value.index_msg_timestamp)
