"""The blocking trace dispatcher: AsyncTraceDispatcher for callers without an event loop (the Spark connector's
tasks and driver, ``enableMsgTrace``).

The same hooks (``trace_hooks``) and batching rules (``trace_batch``) as the asyncio dispatcher; the worker is a
daemon thread, and the inner producer a ``BlockingClient`` of its own (its own connections, the producer group
``_INNER_TRACE_PRODUCER-<group>-<kind>-<n>``), signing with the host's credentials as Java's dispatcher shares its
host's RPC hook. ``append`` never waits (unless ``wait_for_room``): a full queue drops the context with Apache's
log line. ``shutdown``
sends what is queued and returns when it is sent (a Spark task or commit ends only after its records left).

Examples:
    >>> dispatcher = BlockingTraceDispatcher("RMQ_SINK_s1", TraceDispatcherType.PRODUCE, None,  # doctest: +SKIP
    ...                                      "127.0.0.1:9876").start()
    >>> dispatcher.end_transaction("RMQ_SINK_s1", msg, uniq, "127.0.0.1:10911", "COMMIT_MESSAGE", uniq,
    ...                            from_check=False)  # doctest: +SKIP
    >>> dispatcher.shutdown()  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import queue
import threading
import time

from broker.client.blocking import BlockingClient
from broker.client.trace import TraceContext
from broker.client.trace_batch import (
    DEFAULT_BATCH_NUM,
    FLUSH_INTERVAL_S,
    QUEUE_CAPACITY,
    SEND_TIMEOUT_MS,
    TraceDispatcherType,
    batch_size,
    flush_due,
    inner_producer_group,
    trace_messages,
    trace_topic_name,
)
from broker.client.trace_hooks import TraceHooks
from broker.common.errors import RmqError
from broker.remoting.signing import SessionCredentials

log = logging.getLogger(__name__)


class BlockingTraceDispatcher(TraceHooks):
    """Batches trace contexts on a daemon thread and sends them with a BlockingClient; see the module docstring."""

    def __init__(self, group: str, kind: TraceDispatcherType, trace_topic: str | None, namesrv_addr: str, *,
                 credentials: SessionCredentials | None = None, batch_num: int = DEFAULT_BATCH_NUM,
                 queue_capacity: int = QUEUE_CAPACITY, wait_for_room: bool = False) -> None:
        self.trace_topic = trace_topic_name(trace_topic)
        self.batch_num = batch_size(batch_num)
        self.producer_group = inner_producer_group(group, kind)
        self.discard_count = 0
        self.wait_for_room = wait_for_room
        self.client = BlockingClient(namesrv_addr, timeout_ms=SEND_TIMEOUT_MS, producer_group=self.producer_group,
                                     credentials=credentials)
        self._queue: queue.Queue[TraceContext] = queue.Queue(queue_capacity)
        self._wakeup = threading.Event()
        self._stopping = threading.Event()
        self._worker: threading.Thread | None = None

    def start(self) -> BlockingTraceDispatcher:
        self._worker = threading.Thread(target=self._run, name=f"trace-{self.producer_group}", daemon=True)
        self._worker.start()
        return self

    def append(self, ctx: TraceContext) -> bool:
        """Queue ``ctx``. A full queue drops it (and says so), as Apache's dispatcher does; with ``wait_for_room``
        the caller waits for the worker to make room instead (callers that record faster than one sender sends:
        the Spark connector's pipelined tasks)."""
        try:
            if self.wait_for_room and self._worker is not None:  # at most a trace send's timeout
                self._queue.put(ctx, timeout=SEND_TIMEOUT_MS / 1000)
            else:
                self._queue.put_nowait(ctx)
        except queue.Full:
            return self._dropped(ctx)
        return self._queued()

    def shutdown(self) -> None:
        """Stop the thread, send what is still queued (here, in the caller's thread), close the connections."""
        if self._worker is not None:
            self._stopping.set()
            self._wakeup.set()
            self._worker.join()
            self._worker = None
        while not self._queue.empty():
            self._flush_one_batch()
        self.client.close()

    def _run(self) -> None:
        last_flush = time.monotonic()
        while not self._stopping.is_set():
            self._wakeup.wait(max(0.0, FLUSH_INTERVAL_S - (time.monotonic() - last_flush)))
            self._wakeup.clear()
            due = time.monotonic() - last_flush >= FLUSH_INTERVAL_S
            while not self._stopping.is_set() and flush_due(self._queue.qsize(), self.batch_num,
                                                            interval_passed=due):
                self._flush_one_batch()
                last_flush, due = time.monotonic(), False
            if due:
                last_flush = time.monotonic()

    def _flush_one_batch(self) -> None:
        contexts = []
        for _ in range(self.batch_num):
            try:
                contexts.append(self._queue.get_nowait())
            except queue.Empty:
                break
        for msg in trace_messages(contexts, self.trace_topic):
            try:
                self.client.send(msg)  # the trace topic's queues, in turn, with the producer's retries
            except (RmqError, OSError) as err:
                log.error("send trace data failed, the traceData is %s: %s", msg.body.decode("utf-8"), err)
