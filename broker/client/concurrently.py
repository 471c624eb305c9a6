"""Concurrent push consumption (MessageListenerConcurrently): Java's ConsumeMessageConcurrentlyService.

Each pull that found messages is handed over in batches of ``consume_message_batch_max_size``, each batch a task;
up to ``consume_thread_max`` listener calls run at once. A listener may be a coroutine function or a plain function
(run in a worker thread). What it returns settles the batch: CONSUME_SUCCESS acknowledges up to
``context.ack_index``; RECONSUME_LATER (or an exception, or no status) sends the rest back to the broker
(CONSUMER_SEND_MSG_BACK, into the group's retry topic); if that fails they are re-sent as ordinary messages to the
retry topic, and if that fails too, consumed again locally after 5 s. The queue's committed offset then moves to its
lowest unacknowledged message. The orderly twin is ``orderly.py``; the consumer that pulls is ``push_consumer.py``.

Examples:
    >>> async def listener(msgs, context):
    ...     for msg in msgs:
    ...         print(msg.msg_id, msg.body)
    ...     return ConsumeConcurrentlyStatus.CONSUME_SUCCESS
    >>> consumer.register_message_listener(listener)  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from broker.client.message import Message, MessageExt, MessageQueue
from broker.client.offsets import MessageModel, ProcessQueue
from broker.client.trace import ConsumeReturnType
from broker.client.trace_hooks import consume_return_type
from broker.common.message import (
    PROPERTY_CONSUME_START_TIMESTAMP,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
)
from broker.common.validation import retry_topic

if TYPE_CHECKING:
    from broker.client.push_consumer import PushConsumer

log = logging.getLogger(__name__)

RECONSUME_LOCALLY_DELAY_S = 5.0  # submitConsumeRequestLater


class ConsumeConcurrentlyStatus(Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


@dataclass(slots=True)
class ConsumeConcurrentlyContext:
    """What a listener may set: the delay level of a retry (0: the broker's choice, 3 + reconsume times) and, on
    success, the index of the last message it really consumed (the rest are retried)."""

    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0
    ack_index: int = 2**31 - 1


MessageListener = Callable[[list[MessageExt], ConsumeConcurrentlyContext],
                           ConsumeConcurrentlyStatus | Awaitable[ConsumeConcurrentlyStatus]]


class ConcurrentlyConsumeService:
    """ConsumeMessageConcurrentlyService for one PushConsumer: the consumer calls ``submit`` after each pull that
    found messages, and ``stop`` at shutdown."""

    def __init__(self, consumer: PushConsumer) -> None:
        self.consumer = consumer
        self._consuming: set[asyncio.Task[None]] = set()  # consume tasks, the delayed ones included
        self._delayed: set[asyncio.Task[None]] = set()  # consume tasks still waiting to re-deliver locally
        self._slots = asyncio.Semaphore(consumer.config.consume_thread_max)

    def submit(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, delay_s: float = 0.0) -> None:
        size = max(1, self.consumer.config.consume_message_batch_max_size)
        for i in range(0, len(msgs), size):
            task = asyncio.get_running_loop().create_task(self._consume(msgs[i:i + size], pq, mq, delay_s))
            self._consuming.add(task)
            task.add_done_callback(self._consuming.discard)

    async def stop(self) -> None:
        """Drop the local re-deliveries still waiting, and wait for the listener calls in flight."""
        delayed = list(self._delayed)
        for task in delayed:
            task.cancel()
        await asyncio.gather(*delayed, return_exceptions=True)
        await asyncio.gather(*self._consuming, return_exceptions=True)

    async def _consume(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue, delay_s: float) -> None:
        """ConsumeRequest.run: call the listener, then settle the result."""
        if delay_s:  # a local re-delivery: shutdown() need not wait for it
            task = asyncio.current_task()
            assert task is not None
            self._delayed.add(task)
            try:
                await asyncio.sleep(delay_s)
            finally:
                self._delayed.discard(task)
        async with self._slots:
            if pq.dropped:
                return
            self.consumer.reset_retry_topic(msgs)
            now = str(int(time.time() * 1000))
            for msg in msgs:
                msg.properties[PROPERTY_CONSUME_START_TIMESTAMP] = now
            context = ConsumeConcurrentlyContext(mq)
            trace = self.consumer.trace_dispatcher
            before = trace.consume_before(self.consumer.group, msgs) if trace is not None else None
            status, return_type = await self._call_listener(msgs, context)
            if trace is not None:
                trace.consume_after(before, len(msgs), status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS,
                                    return_type)
            pq.last_consume_timestamp = int(time.time() * 1000)
            if not pq.dropped:
                await self._process_consume_result(status, context, msgs, pq, mq)

    async def _call_listener(self, msgs: list[MessageExt], context: ConsumeConcurrentlyContext
                             ) -> tuple[ConsumeConcurrentlyStatus, ConsumeReturnType]:
        """The listener's status (RECONSUME_LATER when it raised or returned none) and how it ended, for traces."""
        listener = self.consumer.listener
        assert listener is not None
        begin = time.monotonic()
        try:
            if inspect.iscoroutinefunction(listener):
                status = await listener(msgs, context)
            else:
                status = await asyncio.to_thread(listener, msgs, context)
                if inspect.isawaitable(status):
                    status = await status
        except Exception:
            log.exception("consumeMessage exception, group %s, messages %s", self.consumer.group,
                          [m.msg_id for m in msgs])
            return ConsumeConcurrentlyStatus.RECONSUME_LATER, ConsumeReturnType.EXCEPTION
        if not isinstance(status, ConsumeConcurrentlyStatus):
            log.warning("consumeMessage returned %r, not a status; group %s reconsumes later", status,
                        self.consumer.group)
            return ConsumeConcurrentlyStatus.RECONSUME_LATER, ConsumeReturnType.RETURNNULL
        return status, consume_return_type(status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS, begin)

    async def _process_consume_result(self, status: ConsumeConcurrentlyStatus, context: ConsumeConcurrentlyContext,
                                      msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        """ConsumeMessageConcurrentlyService.processConsumeResult."""
        ack_index = min(context.ack_index, len(msgs) - 1)
        if status is ConsumeConcurrentlyStatus.RECONSUME_LATER:
            ack_index = -1
        failed = msgs[ack_index + 1:]
        if self.consumer.config.message_model is MessageModel.BROADCASTING:
            for msg in failed:
                log.warning("BROADCASTING, the message %s consume failed, drop it", msg.msg_id)
        else:
            back_failed = [m for m in failed if pq.contains(m) and not await self._send_message_back(m, context)]
            for msg in back_failed:
                msg.reconsume_times += 1
            if back_failed:
                failed_ids = {id(m) for m in back_failed}
                msgs = [m for m in msgs if id(m) not in failed_ids]
                self.submit(back_failed, pq, mq, RECONSUME_LOCALLY_DELAY_S)
        offset = pq.remove_messages(msgs)
        if offset >= 0 and not pq.dropped:
            self.consumer.offset_store.update_offset(mq, offset, increase_only=True)

    async def _send_message_back(self, msg: MessageExt, context: ConsumeConcurrentlyContext) -> bool:
        """CONSUMER_SEND_MSG_BACK; failing that, the message as a new one to the group's retry topic."""
        try:
            consumer = self.consumer
            await consumer.instance.consumer_send_msg_back(msg, consumer.group, context.delay_level_when_next_consume,
                                                           consumer.max_reconsume_times)
            return True
        except Exception as err:
            log.warning("send message %s back to its broker failed (%s); sending it to the retry topic", msg.msg_id,
                        err)
        try:
            await self._send_back_as_normal_message(msg)
            return True
        except Exception as err:
            log.warning("send message %s to the retry topic failed (%s); consuming it again locally", msg.msg_id, err)
            return False

    async def _send_back_as_normal_message(self, msg: MessageExt) -> None:
        """sendMessageBackAsNormalMessage."""
        producer = self.consumer.send_back_producer()
        properties = dict(msg.properties)
        properties.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, msg.msg_id)
        properties[PROPERTY_RETRY_TOPIC] = msg.topic
        properties[PROPERTY_RECONSUME_TIME] = str(msg.reconsume_times + 1)
        properties[PROPERTY_MAX_RECONSUME_TIMES] = str(self.consumer.max_reconsume_times)
        properties.pop(PROPERTY_TRANSACTION_PREPARED, None)
        new = Message(retry_topic(self.consumer.group), msg.body, flag=msg.flag, properties=properties)
        new.delay_time_level = 3 + msg.reconsume_times
        await producer.send(new)
