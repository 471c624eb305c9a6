"""The transaction service's state in memory: the open half messages, how far the half and op queues are done, and
what is kept of recent half messages so that ending them needs no read of the store.

What is kept, by commit log offset: END_TRANSACTION comes right after its half message under a pipelining producer
(the sink), and reading the half record back and decoding it (with its CRC) was a fifth of the broker's time per
end. Two kinds are kept: the half record itself (a single prepared send: END_TRANSACTION rebuilds the committed
message from it), and for the items of a prepared batch the committed message ready to store
(END_TRANSACTION_BATCH stores it as it is). Both are bounded in bytes, the oldest going first; what is not kept is
read from the store as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeVar

from broker.common.record import MessageRecord
from broker.server.transaction import bridge
from broker.store.commit_log import StoreMessage
from broker.store.results import PutMessageResult

HALF_RECORDS_BYTES = 64 * 1024 * 1024  # what the kept records of single prepared sends may hold
RECORD_OVERHEAD = 2048  # Python's memory for one kept MessageRecord beyond its stored bytes (objects, properties)
# What the committed messages kept for prepared batches may hold: a Spark job's ends come after all its tasks, so
# this is what a job can send before its ends read half records back (about 300,000 rows of 128 B, 150,000 of 1 KB).
READY_COMMITS_BYTES = 256 * 1024 * 1024
COMMIT_OVERHEAD = 640  # Python's memory for one kept StoreMessage beyond its body and properties bytes (measured)

T = TypeVar("T")


@dataclass(slots=True, eq=False)
class HalfMessage:
    """An open transaction: where its newest half record is, and what the check needs to decide about it."""

    transaction_id: str
    producer_group: str | None
    queue_offset: int
    commit_log_offset: int
    born_timestamp: int
    store_timestamp: int
    check_times: int
    immunity: str | None  # CHECK_IMMUNITY_TIME_IN_SECONDS as the producer set it
    ended: bool = False
    busy: asyncio.Future[None] | None = None  # set while an end or a check writes for it

    @classmethod
    def from_record(cls, record: MessageRecord, queue_offset: int) -> HalfMessage:
        return cls(bridge.transaction_id(record), bridge.producer_group(record), queue_offset,
                   record.commit_log_offset, record.born_timestamp, record.store_timestamp, bridge.check_times(record),
                   bridge.immunity_property(record))


# A committed message kept ready: a StoreMessage, or its record encoded ahead (batch.HalfBatch), with its topic.
ReadyCommit = tuple[StoreMessage | bytearray, str]
Ready = tuple[HalfMessage, StoreMessage | bytearray]  # an open half message of a prepared batch and its committed one


class EndStatus(Enum):
    ENDED = "ENDED"  # committed or rolled back now, op record written
    ALREADY_ENDED = "ALREADY_ENDED"  # ended before (or discarded): nothing written
    PUT_FAILED = "PUT_FAILED"  # the store refused; still open


@dataclass(frozen=True, slots=True)
class EndOutcome:
    status: EndStatus
    put: PutMessageResult | None = None


ALREADY_ENDED = EndOutcome(EndStatus.ALREADY_ENDED)  # one for every end that finds its transaction ended


def outcome(result: PutMessageResult) -> EndOutcome:
    if not result.ok or result.append is None:
        return EndOutcome(EndStatus.PUT_FAILED, result)
    return EndOutcome(EndStatus.ENDED, result)


class QueueProgress:
    """The consume offset of one queue: the first offset not known to be done."""

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self._done: set[int] = set()

    def done(self, offset: int) -> bool:
        """Mark ``offset`` done; True when the consume offset moved."""
        if offset < self.offset:
            return False
        self._done.add(offset)
        start = self.offset
        while self.offset in self._done:
            self._done.remove(self.offset)
            self.offset += 1
        return self.offset != start

    def done_many(self, offsets: list[int]) -> bool:
        """``done`` for each of ``offsets``; True when the consume offset moved. The ends of a put are usually the
        run of offsets right at the consume offset: then that run is passed in one step."""
        start, pending = self.offset, self._done
        if not offsets:
            return False
        pending.update(offsets)
        if min(offsets) < start:  # below: nothing to do
            pending.difference_update([offset for offset in offsets if offset < start])
        if start not in pending:
            return False
        if max(pending) == start + len(pending) - 1:  # done from the consume offset on without a gap
            self.offset += len(pending)
            pending.clear()
            return True
        while self.offset in pending:
            pending.remove(self.offset)
            self.offset += 1
        return True


class KeptByOffset(Generic[T]):
    """Values by commit log offset, oldest first, at most ``max_bytes`` (each value's size plus ``overhead``)."""

    def __init__(self, max_bytes: int = HALF_RECORDS_BYTES, overhead: int = RECORD_OVERHEAD) -> None:
        self.max_bytes = max_bytes
        self.overhead = overhead
        self.bytes = 0
        self._values: dict[int, tuple[T, int]] = {}  # oldest first: (value, its accounted size)

    def __len__(self) -> int:
        return len(self._values)

    def get(self, commit_log_offset: int) -> T | None:
        kept = self._values.get(commit_log_offset)
        return None if kept is None else kept[0]

    def get_many(self, commit_log_offsets: Iterable[int]) -> list[T | None]:
        """``get`` for each of ``commit_log_offsets``."""
        return [None if kept is None else kept[0] for kept in map(self._values.get, commit_log_offsets)]

    def add(self, commit_log_offset: int, value: T, size: int) -> None:
        values = self._values
        self.discard(commit_log_offset)
        size += self.overhead
        values[commit_log_offset] = (value, size)
        self.bytes += size
        while self.bytes > self.max_bytes and values:
            self.discard(next(iter(values)))

    def add_many(self, offsets: list[int], values: list[T], sizes: list[int]) -> None:
        """``add`` for each (offset, value, size), the bound applied once at the end."""
        kept, overhead, total = self._values, self.overhead, self.bytes
        if kept.keys().isdisjoint(offsets):  # new records' offsets: nothing to replace, in one step
            if len(offsets) != len(values) or len(offsets) != len(sizes):
                raise ValueError(f"{len(offsets)} offsets, {len(values)} values and {len(sizes)} sizes")
            accounted = [size + overhead for size in sizes]
            kept.update(zip(offsets, zip(values, accounted, strict=True), strict=True))
            total += sum(accounted)
        else:
            for offset, value, size in zip(offsets, values, sizes, strict=True):
                previous = kept.pop(offset, None)
                if previous is not None:
                    total -= previous[1]
                kept[offset] = (value, size + overhead)
                total += size + overhead
        self.bytes = total
        while self.bytes > self.max_bytes and kept:
            self.discard(next(iter(kept)))

    def discard(self, commit_log_offset: int) -> None:
        kept = self._values.pop(commit_log_offset, None)
        if kept is not None:
            self.bytes -= kept[1]

    def discard_many(self, offsets: list[int]) -> None:
        """``discard`` for each of ``offsets``."""
        kept = self._values
        if not kept:
            return
        pop, freed = kept.pop, 0
        for offset in offsets:
            value = pop(offset, None)
            if value is not None:
                freed += value[1]
        self.bytes -= freed

    def clear(self) -> None:
        self._values.clear()
        self.bytes = 0
