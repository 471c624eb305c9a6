"""Dispatch: follow the CommitLog behind its write position and build the derived data (RocketMQ's reput).

ConsumeQueue units and IndexFile entries are derived from CommitLog records only, so they can be dropped and rebuilt
by dispatching again from any earlier offset: the ConsumeQueue ignores units it already has, the IndexFile skips
records below its end.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from broker.message import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    split_keys,
    tags_code,
    transaction_type,
)
from broker.store.commit_log import CommitLog
from broker.store.consume_queue import ConsumeQueueStore
from broker.store.index_file import IndexService
from broker.store.layout import MessageRecord, decode_record, is_blank, record_size

log = logging.getLogger(__name__)


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
    properties: dict[str, str]


def default_tags_code(record: MessageRecord) -> int:
    return tags_code(record.properties.get(PROPERTY_TAGS))


def dispatch_request(record: MessageRecord, tags_code_of: Callable[[MessageRecord], int]) -> DispatchRequest:
    props = record.properties
    return DispatchRequest(
        topic=record.topic,
        queue_id=record.queue_id,
        commit_log_offset=record.commit_log_offset,
        msg_size=record.store_size,
        tags_code=tags_code_of(record),
        store_timestamp=record.store_timestamp,
        consume_queue_offset=record.queue_offset,
        keys=split_keys(props.get(PROPERTY_KEYS)),
        uniq_key=props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
        sys_flag=record.sys_flag,
        properties=props,
    )


class CommitLogDispatcher(Protocol):
    def dispatch(self, request: DispatchRequest) -> None: ...


class BuildConsumeQueue:
    def __init__(self, consume_queues: ConsumeQueueStore) -> None:
        self.consume_queues = consume_queues

    def dispatch(self, request: DispatchRequest) -> None:
        if transaction_type(request.sys_flag) in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE):
            return
        cq = self.consume_queues.find_or_create(request.topic, request.queue_id)
        cq.put(request.consume_queue_offset, request.commit_log_offset, request.msg_size, request.tags_code)


class BuildIndex:
    def __init__(self, index_service: IndexService) -> None:
        self.index_service = index_service

    def dispatch(self, request: DispatchRequest) -> None:
        self.index_service.build_index(request.topic, request.keys, request.uniq_key, request.commit_log_offset,
                                       request.store_timestamp, sys_flag=request.sys_flag)


ArrivalListener = Callable[[DispatchRequest], None]


class ReputMessageService:
    """Dispatches every CommitLog record from ``reput_from_offset`` on, in a thread of its own once started."""

    def __init__(self, commit_log: CommitLog, dispatchers: list[CommitLogDispatcher],
                 tags_code_of: Callable[[MessageRecord], int] = default_tags_code) -> None:
        self.commit_log = commit_log
        self.dispatchers = dispatchers
        self.tags_code_of = tags_code_of
        self.arrival_listeners: list[ArrivalListener] = []
        self.reput_from_offset = 0
        self.last_store_timestamp = 0
        self._wake = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

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
            mf = self.commit_log.queue.find(self.reput_from_offset)
            if mf is None:
                break
            pos = self.reput_from_offset - mf.file_from_offset
            limit = min(mf.wrote_position, end - mf.file_from_offset)
            buf = mf.buffer
            while pos < limit:
                if is_blank(buf, pos):
                    pos = mf.file_size
                    break
                size = record_size(buf, pos)
                request = dispatch_request(decode_record(buf[pos:pos + size], body=False), self.tags_code_of)
                for dispatcher in self.dispatchers:
                    dispatcher.dispatch(request)
                for listener in self.arrival_listeners:
                    listener(request)
                self.last_store_timestamp = request.store_timestamp
                pos += size
                count += 1
            self.reput_from_offset = mf.file_from_offset + pos
        return count

    def wakeup(self) -> None:
        self._wake.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ReputMessageService", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        self.do_reput()

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._wake.wait(0.01)
            self._wake.clear()
            try:
                self.do_reput()
            except Exception:  # a dispatch bug must not silently stop all future dispatching
                log.exception("dispatch failed at offset %d", self.reput_from_offset)
                self._stopped.wait(1)
