"""Dispatch: follow the CommitLog behind its write position and build the derived data (RocketMQ's reput).

ConsumeQueue units and IndexFile entries are derived from CommitLog records only, so they can be dropped and rebuilt
by dispatching again from any earlier offset: the ConsumeQueue ignores units it already has, the IndexFile skips
records below its end.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from broker.common.errors import CorruptRecord
from broker.common.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_MASK,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    decode_properties,
    split_keys,
    tags_code,
)
from broker.common.record import MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2, dispatch_fields
from broker.store.consume_queue import ConsumeQueueStore
from broker.store.index_service import IndexService
from broker.store.mapped_file import MappedFileQueue
from broker.store.service_thread import ServiceThread

log = logging.getLogger(__name__)

# Records per dispatch step: ConsumeQueue units and index headers are written once per step, listeners hear of the
# step's records after their units are readable, and the thread lets others have the GIL between steps.
DISPATCH_BATCH = 256
POLL_INTERVAL_S = 0.01  # the dispatch thread looks for records this often when no put wakes it


@dataclass(slots=True)
class DispatchRequest:
    topic: str
    queue_id: int
    commit_log_offset: int
    msg_size: int
    tags_code: int
    store_timestamp: int
    consume_queue_offset: int
    keys: list[str]
    uniq_key: str | None
    sys_flag: int
    properties: dict[str, str]  # those named in DISPATCH_PROPERTIES only


# The properties dispatch reads of a record: the index's keys, and what the tagsCode comes from (the tag, or for a
# scheduled record its delay level: CommitLog.checkMessageAndReturnSize reads the same). A record holds more (a
# transactional one about a dozen); the scan makes no str of the others.
DISPATCH_PROPERTIES = (PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, PROPERTY_DELAY_TIME_LEVEL)


class TaggedRecord(Protocol):
    """What a tagsCode hook may read of a record: a DispatchRequest, or a decoded MessageRecord (of its properties,
    those named in DISPATCH_PROPERTIES)."""

    topic: str
    properties: dict[str, str]
    store_timestamp: int


def default_tags_code(record: TaggedRecord) -> int:
    return tags_code(record.properties.get(PROPERTY_TAGS))


# A record's tagsCode from its TAGS, or (a scheduled record) its DELAY: CommitLog.checkMessageAndReturnSize's rule,
# so dispatch asks only about records holding one of them; the others' tagsCode is 0.
TagsCodeHook = Callable[[TaggedRecord], int]


_OUTSIDE_CONSUME_QUEUES = frozenset({TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE})


def enters_consume_queue(sys_flag: int) -> bool:
    """Half and rolled-back transaction records never enter a ConsumeQueue."""
    return sys_flag & TRANSACTION_MASK not in _OUTSIDE_CONSUME_QUEUES


# (TOTALSIZE, QUEUEID, QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, STORETIMESTAMP, topic, properties) of a record, of its
# properties those a scan was asked for
ScannedRecord = tuple[int, int, int, int, int, int, str, dict[str, str]]


_SIZE_AND_MAGIC = struct.Struct(">ii")
_MESSAGE_MAGICS = (MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2)


def _scan_records_py(buf, pos: int, limit: int, max_records: int,
                     names: tuple[str, ...]) -> tuple[list[ScannedRecord], int, bool]:
    """What dispatch reads of the records from ``buf[pos:]`` up to ``limit``, at most ``max_records`` of them (of
    their properties, those in ``names``); where the scan stopped; and whether it stopped at a BLANK filler. A
    record that runs past ``limit`` (a slave has its first bytes only: the master sends the CommitLog in slices)
    ends the scan before it. ValueError(pos, reason) when the bytes at ``pos`` are not a record.
    ``_speedups.scan_records`` does the same in C."""
    records: list[ScannedRecord] = []
    while pos < limit and len(records) < max_records:
        if len(buf) - pos >= _SIZE_AND_MAGIC.size:
            if limit - pos < _SIZE_AND_MAGIC.size:  # a record's first bytes, the rest still to come (a slave)
                break
            size, magic = _SIZE_AND_MAGIC.unpack_from(buf, pos)
            if magic in _MESSAGE_MAGICS and len(buf) - pos >= size > limit - pos:
                break  # replicated up to here: the record ends in bytes the master has not sent yet
        try:
            fields = dispatch_fields(buf, pos)
        except CorruptRecord as err:
            raise ValueError(pos, err.reason) from None
        except UnicodeDecodeError:
            raise ValueError(pos, "TOPIC or PROPERTIES are not UTF-8") from None
        if fields is None:
            return records, pos, True
        size, queue_id, queue_offset, phys, sys_flag, store_ts, topic, props_text = fields
        if size > len(buf) - pos:
            raise ValueError(pos, "TOTALSIZE runs past the data")
        props = decode_properties(props_text)
        records.append((size, queue_id, queue_offset, phys, sys_flag, store_ts, topic,
                        {name: props[name] for name in names if name in props}))
        pos += size
    return records, pos, False


try:
    from broker._speedups import scan_records
except ImportError:  # built without a C compiler
    scan_records = _scan_records_py


def dispatch_requests(records: list[ScannedRecord], tags_code_of: TagsCodeHook) -> list[DispatchRequest]:
    """The dispatch requests of scanned records (``scan_records``), their tagsCodes from ``tags_code_of``."""
    requests: list[DispatchRequest] = []
    for size, queue_id, queue_offset, phys, sys_flag, store_ts, topic, props in records:
        keys = props.get(PROPERTY_KEYS)
        request = DispatchRequest(topic, queue_id, phys, size, 0, store_ts, queue_offset,
                                  split_keys(keys) if keys else [],
                                  props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), sys_flag, props)
        if PROPERTY_TAGS in props or PROPERTY_DELAY_TIME_LEVEL in props:  # else 0, whatever the hook
            request.tags_code = tags_code_of(request)
        requests.append(request)
    return requests


QueueKey = tuple[str, int]  # (topic, queueId)
# What a dispatch step added, per queue: the queue's new max offset and the tagsCodes of the new units, in order.
Arrivals = dict[QueueKey, tuple[int, list[int]]]


def arrivals_of(requests: list[DispatchRequest]) -> Arrivals:
    codes: dict[QueueKey, list[int]] = {}
    ends: dict[QueueKey, int] = {}
    for r in requests:
        if r.sys_flag & TRANSACTION_MASK not in _OUTSIDE_CONSUME_QUEUES:  # enters_consume_queue, inlined
            key = (r.topic, r.queue_id)
            queue_codes = codes.get(key)
            if queue_codes is None:
                codes[key] = [r.tags_code]
            else:
                queue_codes.append(r.tags_code)
            ends[key] = r.consume_queue_offset + 1
    return {key: (ends[key], queue_codes) for key, queue_codes in codes.items()}


class CommitLogDispatcher(Protocol):
    """Builds one kind of derived data from the CommitLog, and drops what of it is no longer wanted."""

    def dispatch(self, requests: list[DispatchRequest]) -> None:
        """Build derived data for ``requests``: consecutive CommitLog records, in order."""

    def delete_expired(self, min_commit_log_offset: int) -> None:
        """Drop what points only below ``min_commit_log_offset`` (retention deleted those CommitLog files)."""

    def delete_topics(self, topics: set[str]) -> None:
        """Drop what belongs to ``topics`` alone."""


class BuildConsumeQueue:
    def __init__(self, consume_queues: ConsumeQueueStore) -> None:
        self.consume_queues = consume_queues

    def delete_expired(self, min_commit_log_offset: int) -> None:
        self.consume_queues.delete_expired(min_commit_log_offset)

    def delete_topics(self, topics: set[str]) -> None:
        for topic in topics:
            self.consume_queues.delete_topic(topic)

    def dispatch(self, requests: list[DispatchRequest]) -> None:
        units: dict[tuple[str, int], list[tuple[int, int, int, int]]] = {}
        for r in requests:
            if r.sys_flag & TRANSACTION_MASK in _OUTSIDE_CONSUME_QUEUES:  # not enters_consume_queue, inlined
                continue
            unit = (r.consume_queue_offset, r.commit_log_offset, r.msg_size, r.tags_code)
            queue_units = units.get((r.topic, r.queue_id))
            if queue_units is None:
                units[r.topic, r.queue_id] = [unit]
            else:
                queue_units.append(unit)
        for (topic, queue_id), queue_units in units.items():
            self.consume_queues.find_or_create(topic, queue_id).put_units(queue_units)


class BuildIndex:
    def __init__(self, index_service: IndexService) -> None:
        self.index_service = index_service

    def dispatch(self, requests: list[DispatchRequest]) -> None:
        self.index_service.build_index_batch(requests)

    def delete_expired(self, min_commit_log_offset: int) -> None:
        self.index_service.delete_expired(min_commit_log_offset)

    def delete_topics(self, topics: set[str]) -> None:
        """Index entries of other topics share the files; queries check the topic, so they stay until expired."""


# Hears of every dispatch step once its units are readable (long polling); runs on the dispatching thread.
ArrivalListener = Callable[[Arrivals], None]


class DispatchService(Protocol):
    """Dispatch once the store is open, as the store's other parts see it: ReputMessageService in a thread, or
    ``dispatch_process.DispatchProcess`` for a child process."""

    arrival_listeners: list[ArrivalListener]
    reput_from_offset: int  # everything below it is in the ConsumeQueues and the index
    last_store_timestamp: int  # of the last record dispatched

    @property
    def behind(self) -> int: ...

    def wakeup(self) -> None:
        """Records were appended."""

    def start(self) -> None: ...

    def shutdown(self) -> None:
        """Dispatch everything written (``behind`` is then 0, unless that failed), then stop."""

    def delete_expired(self, min_commit_log_offset: int) -> None: ...

    def delete_topics(self, topics: set[str]) -> None: ...


class ReputMessageService(ServiceThread):
    """Dispatches every CommitLog record from ``reput_from_offset`` on: in a thread of its own once started
    (dispatchMode=THREAD), or run by the dispatch process (``dispatch_process``, dispatchMode=PROCESS). Either way
    the broker process runs it at start, to rebuild what recovery found missing.

    ``commit_log`` is the CommitLog's MappedFileQueue: dispatch reads only the bytes below its max offset."""

    name = "ReputMessageService"

    def __init__(self, commit_log: MappedFileQueue, dispatchers: list[CommitLogDispatcher],
                 tags_code_of: TagsCodeHook = default_tags_code) -> None:
        super().__init__()
        self.commit_log = commit_log
        self.dispatchers = dispatchers
        self.tags_code_of = tags_code_of
        self.arrival_listeners: list[ArrivalListener] = []
        self.reput_from_offset = 0
        self.last_store_timestamp = 0

    @property
    def behind(self) -> int:
        """Bytes written to the CommitLog and not dispatched yet."""
        return self.commit_log.max_offset - self.reput_from_offset

    def do_reput(self) -> int:
        """Dispatch everything written so far; returns the number of records dispatched."""
        count = 0
        if self.reput_from_offset < self.commit_log.min_offset:
            log.warning("reput offset %d is below the CommitLog minimum %d; skipping ahead",
                        self.reput_from_offset, self.commit_log.min_offset)
            self.reput_from_offset = self.commit_log.min_offset
        end = self.commit_log.max_offset
        while self.reput_from_offset < end:
            before = self.reput_from_offset
            dispatched = self.dispatch_batch(end)
            if dispatched is None or self.reput_from_offset == before:  # no file, or a record not whole yet
                break
            count += dispatched
        return count

    def dispatch_batch(self, end: int) -> int | None:
        """Dispatch up to DISPATCH_BATCH records from ``reput_from_offset``, not past ``end`` nor the end of its
        file; the number dispatched, None when there is no file at ``reput_from_offset``."""
        mf = self.commit_log.find(self.reput_from_offset)
        if mf is None:
            return None
        pos = self.reput_from_offset - mf.file_from_offset
        limit = min(mf.wrote_position, end - mf.file_from_offset)
        try:
            records, pos, blank = scan_records(mf.buffer, pos, limit, DISPATCH_BATCH, DISPATCH_PROPERTIES)
        except ValueError as err:
            at, reason = err.args
            raise CorruptRecord(mf.file_from_offset + at, reason) from None
        if blank:  # the rest of the file is filler
            pos = mf.file_size
        return self.hand_over(dispatch_requests(records, self.tags_code_of), mf.file_from_offset + pos)

    def hand_over(self, requests: list[DispatchRequest], next_offset: int) -> int:
        """Give ``requests`` to the dispatchers, move on to ``next_offset``, then tell the arrival listeners;
        returns how many requests there were."""
        if requests:
            for dispatcher in self.dispatchers:
                dispatcher.dispatch(requests)
            self.last_store_timestamp = requests[-1].store_timestamp
        self.reput_from_offset = next_offset
        if self.arrival_listeners:
            arrivals = arrivals_of(requests)
            for listener in self.arrival_listeners:  # after the units are readable
                listener(arrivals)
        return len(requests)

    def delete_expired(self, min_commit_log_offset: int) -> None:
        for dispatcher in self.dispatchers:
            dispatcher.delete_expired(min_commit_log_offset)

    def delete_topics(self, topics: set[str]) -> None:
        for dispatcher in self.dispatchers:
            dispatcher.delete_topics(topics)

    def shutdown(self) -> None:
        """Stop the thread, then dispatch what is still behind (``behind`` is then 0)."""
        super().shutdown()
        self.do_reput()

    def run(self) -> None:
        while not self.is_stopped():
            self.wait_for_running(POLL_INTERVAL_S)
            try:
                self.do_reput()
            except Exception:  # a dispatch bug must not silently stop all future dispatching
                log.exception("dispatch failed at offset %d", self.reput_from_offset)
                self.pause(1)
