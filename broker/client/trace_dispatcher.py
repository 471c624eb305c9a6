"""The asyncio trace dispatcher (client/trace/AsyncTraceDispatcher) of the Producer and the consumers.

A producer or consumer with ``enable_msg_trace`` owns one dispatcher. Its hooks (``trace_hooks``) turn a send, a
consumed batch or an ended transaction into a TraceContext and ``append`` it to a bounded queue without waiting:
when the queue is full the context is dropped with a log line, as Apache's is, so tracing never slows down or fails
the user's call. A task of the dispatcher takes batches off the queue by ``trace_batch``'s rules, and sends their
trace messages with an inner producer of its own, in the background. ``shutdown`` sends what is still queued before
stopping. The blocking twin, for Spark's executors, is ``blocking_trace``.

What is traced, as Apache's client traces it: a send that got an answer (sync, async, a batch: one Pub whose msgId
is the batch's comma-joined ids; a oneway send has no answer and no trace), SubBefore and SubAfter around each
consumed batch (messages stored with TRACE_ON=false are left out), and EndTransaction for every ended transaction.
A broker that answers TRACE_ON=false turns the Pub records off.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import TYPE_CHECKING, Any

from broker.client.message import Message, MessageQueue
from broker.client.trace import TraceContext
from broker.client.trace_batch import (
    DEFAULT_BATCH_NUM,
    FLUSH_INTERVAL_S,
    MAX_MESSAGE_SIZE,
    MAX_SENDS_IN_FLIGHT,
    QUEUE_CAPACITY,
    SEND_TIMEOUT_MS,
    TraceDispatcherType,
    batch_size,
    flush_due,
    inner_instance_name,
    inner_producer_group,
    trace_messages,
    trace_topic_name,
)
from broker.client.trace_hooks import TraceHooks
from broker.common.errors import RmqError

if TYPE_CHECKING:
    from broker.client.producer import Producer
    from broker.remoting.signing import SessionCredentials

log = logging.getLogger(__name__)


class _RoundRobin:
    """The dispatcher's selector: the trace topic's queues in turn (its route lists only brokers that host it)."""

    def __init__(self) -> None:
        self._index = itertools.count()

    def select(self, mqs: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        return mqs[next(self._index) % len(mqs)]


class AsyncTraceDispatcher(TraceHooks):
    """Batches trace contexts and sends them with an inner producer; see the module docstring."""

    def __init__(self, group: str, kind: TraceDispatcherType, trace_topic: str | None, namesrv_addr: str, *,
                 batch_num: int = DEFAULT_BATCH_NUM, queue_capacity: int = QUEUE_CAPACITY,
                 credentials: SessionCredentials | None = None) -> None:
        self.trace_topic = trace_topic_name(trace_topic)
        self.credentials = credentials  # the traced client's keys: its inner producer signs with them, as Apache's
        self.batch_num = batch_size(batch_num)
        self.namesrv_addr = namesrv_addr
        self.producer_group = inner_producer_group(group, kind)
        self.discard_count = 0
        self._queue: asyncio.Queue[TraceContext] = asyncio.Queue(queue_capacity)
        self._wakeup = asyncio.Event()
        self._sends: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(MAX_SENDS_IN_FLIGHT)
        self._selector = _RoundRobin()
        self._producer: Producer | None = None
        self._worker: asyncio.Task[None] | None = None

    async def start(self) -> None:
        from broker.client.instance import ClientConfig  # late: the producer module imports this one
        from broker.client.producer import Producer, ProducerConfig

        client_config = ClientConfig(namesrv_addr=self.namesrv_addr, instance_name=inner_instance_name(
            self.namesrv_addr))
        self._producer = Producer(self.producer_group, config=ProducerConfig(
            send_msg_timeout=SEND_TIMEOUT_MS, max_message_size=MAX_MESSAGE_SIZE), client_config=client_config,
            credentials=self.credentials)
        await self._producer.start()
        self._worker = asyncio.get_running_loop().create_task(self._run(), name=f"trace-{self.producer_group}")

    def append(self, ctx: TraceContext) -> bool:
        """Queue ``ctx`` without waiting; a full queue drops it (and says so), as Apache's dispatcher does."""
        try:
            self._queue.put_nowait(ctx)
        except asyncio.QueueFull:
            return self._dropped(ctx)
        return self._queued()

    async def shutdown(self) -> None:
        """Send what is queued, wait for the sends in flight, stop the inner producer."""
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
            self._worker = None
        while not self._queue.empty():
            self._flush_one_batch()
        await asyncio.gather(*self._sends, return_exceptions=True)
        if self._producer is not None:
            await self._producer.shutdown()
            self._producer = None

    async def _run(self) -> None:
        last_flush = time.monotonic()
        while True:
            timeout = max(0.0, FLUSH_INTERVAL_S - (time.monotonic() - last_flush))
            try:
                await asyncio.wait_for(self._wakeup.wait(), timeout)
            except TimeoutError:
                pass
            self._wakeup.clear()
            due = time.monotonic() - last_flush >= FLUSH_INTERVAL_S
            while flush_due(self._queue.qsize(), self.batch_num, interval_passed=due):
                self._flush_one_batch()
                last_flush, due = time.monotonic(), False
            if due:
                last_flush = time.monotonic()

    def _flush_one_batch(self) -> None:
        contexts = [self._queue.get_nowait() for _ in range(min(self.batch_num, self._queue.qsize()))]
        task = asyncio.get_running_loop().create_task(self._send_trace_data(contexts))
        self._sends.add(task)
        task.add_done_callback(self._sends.discard)

    async def _send_trace_data(self, contexts: list[TraceContext]) -> None:
        async with self._slots:
            for msg in trace_messages(contexts, self.trace_topic):
                await self._send_by_mq(msg)

    async def _send_by_mq(self, msg: Message) -> None:
        assert self._producer is not None
        try:
            await self._producer.send(msg, selector=self._selector)
        except (RmqError, OSError) as err:
            log.error("send trace data failed, the traceData is %s: %s", msg.body.decode("utf-8"), err)


async def start_trace_dispatcher(group: str, kind: TraceDispatcherType, trace_topic: str | None,
                                 namesrv_addr: str, credentials: SessionCredentials | None = None,
                                 ) -> AsyncTraceDispatcher | None:
    """What a producer or consumer with ``enable_msg_trace`` starts with (DefaultMQProducer.start, and the
    consumers' start): its dispatcher, the inner producer running; None, with Apache's log line, when that fails,
    for tracing must not stop the client itself."""
    dispatcher = AsyncTraceDispatcher(group, kind, trace_topic, namesrv_addr, credentials=credentials)
    try:
        await dispatcher.start()
    except (RmqError, OSError) as err:
        log.error("system mqtrace hook init failed ,maybe can't send msg trace data: %s", err)
        await dispatcher.shutdown()
        return None
    return dispatcher
