"""Ends gathered into puts: the committed messages and op records of the ends that arrive in one loop iteration are
stored by one put, as Java's TransactionalOpBatchService merges op records (one store write for many ends instead of
two each).

A put holds at most END_BATCH_MAX ends; its committed messages come first, in the order the ends were added, then
its op records (Java's op batch sizes, ``bridge.op_messages``), so a crash keeps an end's message and its op record
together or neither. Every end of a put shares that put's future. What ending means for the transaction state (the
open transactions, the consume offsets) is the service's: it is told once per put, through ``on_stored``.

Examples:
    >>> puts = EndPuts(controller.put_messages, store_host, on_stored)  # doctest: +SKIP
    >>> stored = puts.add(entry, [entry.queue_offset], committed)  # stored at the end of this loop iteration
    >>> futures = puts.add_many(entries, [e.queue_offset for e in entries], commits)  # one future per end
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from broker.server.transaction import bridge
from broker.server.transaction.state import HalfMessage
from broker.store.commit_log import EncodedRecord, StoreMessage
from broker.store.results import PutMessageResult

END_BATCH_MAX = 256  # ends stored in one put at most

Committed = StoreMessage | EncodedRecord  # a committed message, or its record encoded ahead
# The service's bookkeeping once a put is stored: the ended entries, the half offsets its op records name, and
# per op record (its op queue offset) the half offsets it names.
OnStored = Callable[[list[HalfMessage], list[int], dict[int, list[int]]], None]


@dataclass(slots=True)
class GatheredPut:
    """The put being gathered: its ends, the half offsets their op records will name, their committed messages."""

    stored: asyncio.Future[PutMessageResult]
    entries: list[HalfMessage] = field(default_factory=list)
    half_offsets: list[int] = field(default_factory=list)
    msgs: list[Committed] = field(default_factory=list)


class EndPuts:
    """The puts of ends: gathered during a loop iteration, stored at its end (or when full)."""

    def __init__(self, put_messages: Callable[[list[Committed]], Awaitable[PutMessageResult]], store_host: bytes,
                 on_stored: OnStored) -> None:
        self._put_messages = put_messages
        self._store_host = store_host
        self._on_stored = on_stored
        self._gathered: GatheredPut | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def add(self, entry: HalfMessage, half_offsets: list[int],
            msg: Committed | None) -> asyncio.Future[PutMessageResult]:
        """Add one end (``msg`` None rolling back); the future is its put's."""
        put = self._gathering()
        put.entries.append(entry)
        put.half_offsets += half_offsets
        if msg is not None:
            put.msgs.append(msg)
        if len(put.entries) >= END_BATCH_MAX:
            self.flush()
        return put.stored

    def add_many(self, entries: list[HalfMessage], half_offsets: list[int],
                 msgs: Sequence[Committed] | None) -> list[asyncio.Future[PutMessageResult]]:
        """Add ends that each name one half offset (``half_offsets[i]`` of ``entries[i]``), in order, with their
        committed messages (None rolling back): sliced into the puts, a slice at a time. One future per end."""
        futures: list[asyncio.Future[PutMessageResult]] = []
        start = 0
        while start < len(entries):
            put = self._gathering()
            end = start + END_BATCH_MAX - len(put.entries)
            put.entries += entries[start:end]
            put.half_offsets += half_offsets[start:end]
            if msgs is not None:
                put.msgs += msgs[start:end]
            futures += [put.stored] * (min(end, len(entries)) - start)
            if len(put.entries) >= END_BATCH_MAX:
                self.flush()
            start = end
        return futures

    def _gathering(self) -> GatheredPut:
        """The put being gathered, a new one (stored at the end of this loop iteration) when there is none."""
        put = self._gathered
        if put is None:
            loop = asyncio.get_running_loop()
            put = self._gathered = GatheredPut(loop.create_future())
            loop.call_soon(self.flush)
        return put

    def flush(self) -> None:
        """Store the put gathered so far: its committed messages, then its op records."""
        put, self._gathered = self._gathered, None
        if put is None:
            return
        ops = bridge.op_messages(put.half_offsets, self._store_host, time.time_ns() // 1_000_000)
        put.msgs += [op for op, _ in ops]
        task = asyncio.get_running_loop().create_task(self._store(put, [named for _, named in ops]))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _store(self, put: GatheredPut, op_groups: list[list[int]]) -> None:
        """Put ``put``'s records and settle its ends through its future (the service's bookkeeping first)."""
        try:
            result = await self._put_messages(put.msgs)
        except asyncio.CancelledError:
            put.stored.cancel()
            raise
        except Exception as err:  # each end raises it (its request is answered SYSTEM_ERROR)
            put.stored.set_exception(err)
            return
        if result.ok and result.append is not None:
            op_offsets = result.append.queue_offsets[-len(op_groups):]
            self._on_stored(put.entries, put.half_offsets, dict(zip(op_offsets, op_groups, strict=True)))
        put.stored.set_result(result)
