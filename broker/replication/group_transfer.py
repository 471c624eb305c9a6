"""GroupTransferService: SYNC_MASTER puts waiting until their bytes are on enough slaves (RocketMQ's
GroupTransferService), on the broker's event loop rather than a thread of their own.

Each waiting put is a future keyed by the CommitLog offset its records end at. Slaves' reports arrive on the HA
reader threads; each report that moves the replicated offset forward releases, in one pass on the loop, every put
at or below it: many puts share one report, as Java's requests share one wake-up. A put whose slaves do not catch
up within slaveTimeout is told so (FLUSH_SLAVE_TIMEOUT); its message stays stored on the master.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import threading


class GroupTransferService:
    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters: list[tuple[int, int, asyncio.Future[bool]]] = []  # a heap by offset
        self._seq = itertools.count()
        self._replicated = 0  # on the loop: puts ending at or below it are released
        self._reported = 0  # on the reader threads: the newest offset handed to the loop
        self._lock = threading.Lock()

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    async def wait(self, next_offset: int, timeout_s: float) -> bool:
        """True once the bytes below ``next_offset`` are replicated, False after ``timeout_s``."""
        if self._replicated >= next_offset:
            return True
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        heapq.heappush(self._waiters, (next_offset, next(self._seq), future))
        expiry = loop.call_later(timeout_s, _expire, future)
        try:
            return await future
        finally:
            expiry.cancel()
            if len(self._waiters) > 1024 and future.done():
                self._drop_done()

    def replicated(self, offset: int) -> None:
        """Enough slaves hold everything below ``offset`` (any thread)."""
        with self._lock:
            if offset <= self._reported:
                return
            self._reported = offset
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._release, offset)

    def _release(self, offset: int) -> None:
        self._replicated = max(self._replicated, offset)
        waiters = self._waiters
        while waiters and waiters[0][0] <= self._replicated:
            future = heapq.heappop(waiters)[2]
            if not future.done():
                future.set_result(True)

    def _drop_done(self) -> None:
        """Forget timed-out puts (they stay in the heap until a report passes them otherwise)."""
        self._waiters = [w for w in self._waiters if not w[2].done()]
        heapq.heapify(self._waiters)

    def release_all(self) -> None:
        """Shutdown: every waiting put is told its slaves did not confirm."""
        for _, _, future in self._waiters:
            if not future.done():
                future.set_result(False)
        self._waiters.clear()


def _expire(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(False)
