"""The trace dispatcher and the trace hooks (client/trace: AsyncTraceDispatcher, SendMessageTraceHookImpl,
ConsumeMessageTraceHookImpl, EndTransactionTraceHookImpl).

A producer or consumer with ``enable_msg_trace`` owns one dispatcher. Its hooks turn a send, a consumed batch or an
ended transaction into a TraceContext and ``append`` it to a bounded queue without waiting: when the queue is full
the context is dropped with a log line, as Apache's is, so tracing never slows down or fails the user's call. A
task of the dispatcher takes up to ``batch_num`` contexts when that many are waiting, or every 5 seconds, encodes
them (``trace``) and sends them with an inner producer of its own, in the background: one trace message per
(first message's topic, trace topic), its KEYS the message ids and keys of every record, so the broker's IndexFile
finds a message's trace by its id. ``shutdown`` sends what is still queued before stopping.

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
from collections.abc import Sequence
from enum import Enum
from typing import TYPE_CHECKING, Any

from broker.client.message import Message, MessageExt, MessageQueue, SendResult, SendStatus
from broker.client.trace import (
    DEFAULT_REGION_ID,
    GROUP_NAME_PREFIX,
    TRACE_INSTANCE_NAME,
    ConsumeReturnType,
    MessageType,
    TraceBean,
    TraceContext,
    TraceTransferBean,
    TraceType,
    encode_trace_context,
    trace_message_keys,
)
from broker.common.errors import RmqError
from broker.common.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_MSG_REGION,
    PROPERTY_START_DELIVER_TIME,
    PROPERTY_TRACE_SWITCH,
    PROPERTY_TRANSACTION_PREPARED,
    TIMER_PROPERTIES,
)
from broker.common.validation import RMQ_SYS_TRACE_TOPIC

if TYPE_CHECKING:
    from broker.client.producer import Producer

log = logging.getLogger(__name__)

DEFAULT_BATCH_NUM = 10  # ClientConfig.traceMsgBatchNum
MAX_BATCH_NUM = 20  # AsyncTraceDispatcher: min(batchNum, 20)
QUEUE_CAPACITY = 2048  # traceContextQueue
MAX_MESSAGE_SIZE = 128_000  # the inner producer's maxMessageSize; a body is cut before it grows past this
FLUSH_INTERVAL_S = 5.0  # flushTraceInterval
SEND_TIMEOUT_MS = 5000  # the inner producer's sendMsgTimeout
MAX_SENDS_IN_FLIGHT = 4  # traceExecutor's maximum pool size
CONSUME_TIMEOUT_S = 15 * 60.0  # DefaultMQPushConsumer.consumeTimeout: a listener call this long is TIME_OUT

_GROUP_COUNTER = itertools.count(1)  # AsyncTraceDispatcher.COUNTER: one number per dispatcher in the process


class TraceDispatcherType(Enum):
    PRODUCE = "PRODUCE"
    CONSUME = "CONSUME"


def trace_topic_name(trace_topic: str | None) -> str:
    """The topic trace messages go to: the one given, or RMQ_SYS_TRACE_TOPIC when it is blank."""
    return trace_topic.strip() if trace_topic and trace_topic.strip() else RMQ_SYS_TRACE_TOPIC


class _RoundRobin:
    """The dispatcher's selector: the trace topic's queues in turn (its route lists only brokers that host it)."""

    def __init__(self) -> None:
        self._index = itertools.count()

    def select(self, mqs: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        return mqs[next(self._index) % len(mqs)]


class AsyncTraceDispatcher:
    """Batches trace contexts and sends them with an inner producer; see the module docstring."""

    def __init__(self, group: str, kind: TraceDispatcherType, trace_topic: str | None, namesrv_addr: str, *,
                 batch_num: int = DEFAULT_BATCH_NUM, queue_capacity: int = QUEUE_CAPACITY) -> None:
        self.trace_topic = trace_topic_name(trace_topic)
        self.batch_num = max(1, min(batch_num, MAX_BATCH_NUM))
        self.namesrv_addr = namesrv_addr
        self.producer_group = f"{GROUP_NAME_PREFIX}-{group}-{kind.value}-{next(_GROUP_COUNTER)}"
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

        client_config = ClientConfig(namesrv_addr=self.namesrv_addr,
                                     instance_name=f"{TRACE_INSTANCE_NAME}_{self.namesrv_addr}")
        self._producer = Producer(self.producer_group, config=ProducerConfig(
            send_msg_timeout=SEND_TIMEOUT_MS, max_message_size=MAX_MESSAGE_SIZE), client_config=client_config)
        await self._producer.start()
        self._worker = asyncio.get_running_loop().create_task(self._run(), name=f"trace-{self.producer_group}")

    def append(self, ctx: TraceContext) -> bool:
        """Queue ``ctx`` without waiting; a full queue drops it (and says so), as Apache's dispatcher does."""
        try:
            self._queue.put_nowait(ctx)
        except asyncio.QueueFull:
            self.discard_count += 1
            log.info("buffer full%s ,context is %s", self.discard_count, ctx)
            return False
        if self._queue.qsize() >= self.batch_num:
            self._wakeup.set()
        return True

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
            while self._queue.qsize() >= self.batch_num or (due and not self._queue.empty()):
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
        """AsyncDataSendTask.sendTraceData: encode, group by the first message's topic, one body per group."""
        groups: dict[str, list[TraceTransferBean]] = {}
        for ctx in contexts:
            if ctx.region_id is None or not ctx.beans:
                continue
            groups.setdefault(ctx.beans[0].topic or "", []).append(encode_trace_context(ctx))
        async with self._slots:
            for beans in groups.values():
                await self._flush_data(beans)

    async def _flush_data(self, beans: list[TraceTransferBean]) -> None:
        batch: list[TraceTransferBean] = []
        size = 0
        for bean in beans:
            batch.append(bean)
            size += len(bean.data)
            if size >= MAX_MESSAGE_SIZE:
                await self._send_by_mq(batch)
                batch, size = [], 0
        if batch:
            await self._send_by_mq(batch)

    async def _send_by_mq(self, beans: list[TraceTransferBean]) -> None:
        data = "".join(b.data for b in beans)
        msg = Message(self.trace_topic, data.encode("utf-8"), keys=trace_message_keys(beans))
        assert self._producer is not None
        try:
            await self._producer.send(msg, selector=self._selector)
        except (RmqError, OSError) as err:
            log.error("send trace data failed, the traceData is %s: %s", data, err)

    # -- the hooks -------------------------------------------------------------------------------------------------

    def send_before(self, group: str, msg: Message, store_host: str, body_length: int) -> TraceContext | None:
        """SendMessageTraceHookImpl.sendMessageBefore: a Pub context, or None for the trace topic's own sends."""
        if msg.topic.startswith(self.trace_topic):
            return None
        bean = TraceBean(topic=msg.topic, tags=msg.tags, keys=msg.keys, store_host=store_host,
                         body_length=body_length, msg_type=message_type_of(msg))
        return TraceContext(TraceType.Pub, group_name=group, beans=[bean])

    def send_after(self, ctx: TraceContext | None, result: SendResult | None) -> None:
        """sendMessageAfter: a send that got an answer, from a broker that has trace on."""
        if ctx is None or result is None or not result.trace_on:
            return
        ctx.cost_time = (_now_ms() - ctx.time_stamp) // len(ctx.beans)
        ctx.success = result.send_status is SendStatus.SEND_OK
        ctx.region_id = result.region_id
        bean = ctx.beans[0]
        bean.msg_id, bean.offset_msg_id = result.msg_id, result.offset_msg_id
        self.append(ctx)

    def consume_before(self, group: str, msgs: Sequence[MessageExt]) -> TraceContext | None:
        """ConsumeMessageTraceHookImpl.consumeMessageBefore: SubBefore of the messages stored with trace on."""
        ctx = TraceContext(TraceType.SubBefore, group_name=group)
        for msg in msgs:
            if msg.properties.get(PROPERTY_TRACE_SWITCH) == "false":
                continue
            ctx.region_id = msg.properties.get(PROPERTY_MSG_REGION)
            ctx.beans.append(TraceBean(topic=msg.topic, msg_id=msg.msg_id, tags=msg.tags, keys=msg.keys,
                                       body_length=msg.store_size, retry_times=msg.reconsume_times))
        if not ctx.beans:
            return None
        ctx.time_stamp = _now_ms()
        self.append(ctx)
        return ctx

    def consume_after(self, before: TraceContext | None, batch_size: int, success: bool,
                      return_type: ConsumeReturnType | None) -> None:
        """consumeMessageAfter: SubAfter with the same requestId; cost per message; the listener's return type."""
        if before is None or batch_size == 0:
            return
        after = TraceContext(TraceType.SubAfter, region_id=before.region_id, group_name=before.group_name,
                             request_id=before.request_id, success=success, beans=before.beans,
                             cost_time=(_now_ms() - before.time_stamp) // batch_size,
                             context_code=int(return_type) if return_type is not None else 0)
        self.append(after)

    def end_transaction(self, group: str, msg: Message, msg_id: str | None, store_host: str, state: str,
                        transaction_id: str | None, *, from_check: bool) -> None:
        """EndTransactionTraceHookImpl.endTransaction: one EndTransaction record per ended transaction."""
        if msg.topic.startswith(self.trace_topic):
            return
        bean = TraceBean(topic=msg.topic, msg_id=msg_id, tags=msg.tags, keys=msg.keys, store_host=store_host,
                         msg_type=MessageType.Trans_msg_Commit, transaction_id=transaction_id,
                         transaction_state=state, from_transaction_check=from_check)
        region = msg.properties.get(PROPERTY_MSG_REGION) or DEFAULT_REGION_ID
        self.append(TraceContext(TraceType.EndTransaction, region_id=region, group_name=group, beans=[bean]))


async def start_trace_dispatcher(group: str, kind: TraceDispatcherType, trace_topic: str | None,
                                 namesrv_addr: str) -> AsyncTraceDispatcher | None:
    """What a producer or consumer with ``enable_msg_trace`` starts with (DefaultMQProducer.start, and the
    consumers' start): its dispatcher, the inner producer running; None, with Apache's log line, when that fails,
    for tracing must not stop the client itself."""
    dispatcher = AsyncTraceDispatcher(group, kind, trace_topic, namesrv_addr)
    try:
        await dispatcher.start()
    except (RmqError, OSError) as err:
        log.error("system mqtrace hook init failed ,maybe can't send msg trace data: %s", err)
        await dispatcher.shutdown()
        return None
    return dispatcher


def message_type_of(msg: Message) -> MessageType:
    """What sendKernelImpl tells the hook: a delay level or timer property makes a Delay_Msg, TRAN_MSG a half
    message; anything else, ordered sends included, is Normal_Msg."""
    props = msg.properties
    if any(p in props for p in (PROPERTY_START_DELIVER_TIME, PROPERTY_DELAY_TIME_LEVEL, *TIMER_PROPERTIES)):
        return MessageType.Delay_Msg
    if props.get(PROPERTY_TRANSACTION_PREPARED) == "true":
        return MessageType.Trans_Msg_Half
    return MessageType.Normal_Msg


def consume_return_type(succeeded: bool, begin: float) -> ConsumeReturnType:
    """How a listener call that returned a status ended (ConsumeReturnType): TIME_OUT past the consume timeout
    (``begin`` from time.monotonic), else SUCCESS or FAILED. Raising is EXCEPTION, returning nothing RETURNNULL."""
    if time.monotonic() - begin >= CONSUME_TIMEOUT_S:
        return ConsumeReturnType.TIME_OUT
    return ConsumeReturnType.SUCCESS if succeeded else ConsumeReturnType.FAILED


def _now_ms() -> int:
    return time.time_ns() // 1_000_000
