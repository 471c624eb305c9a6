"""The trace hooks (client/trace/hook: SendMessageTraceHookImpl, ConsumeMessageTraceHookImpl,
EndTransactionTraceHookImpl): what a send, a consumed batch or an ended transaction puts in a TraceContext.

Rule 1: the one place that decides which events are traced and with which fields, and what becomes of a context
the queue has no room for. ``TraceHooks`` is the base of both dispatchers (``trace_dispatcher.AsyncTraceDispatcher``,
``blocking_trace.BlockingTraceDispatcher``), which give it ``trace_topic``, ``batch_num``, their bounded queue and
wake-up event, and the queue's put in ``append``; a full queue's drop and a full batch's wake-up (``_dropped``,
``_queued``) are written here once for both. As Apache's client traces: a send that got an answer from a broker
with trace on (one Pub), SubBefore and SubAfter around each consumed batch (messages stored with TRACE_ON=false left
out), and EndTransaction for every ended transaction; nothing about the trace topic's own messages.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from broker.client.message import Message, MessageExt, SendResult, SendStatus
from broker.client.trace import DEFAULT_REGION_ID, ConsumeReturnType, MessageType, TraceBean, TraceContext, TraceType
from broker.common.clock import now_ms
from broker.common.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_MSG_REGION,
    PROPERTY_START_DELIVER_TIME,
    PROPERTY_TRACE_SWITCH,
    PROPERTY_TRANSACTION_PREPARED,
    TIMER_PROPERTIES,
)

if TYPE_CHECKING:  # the two dispatchers' queue and event types; neither is needed at run time here
    import asyncio
    import queue
    import threading

log = logging.getLogger(__name__)

CONSUME_TIMEOUT_S = 15 * 60.0  # DefaultMQPushConsumer.consumeTimeout: a listener call this long is TIME_OUT


class TraceHooks:
    """The hooks and the queue's outcomes, for a dispatcher that has the attributes below and ``append``."""

    trace_topic: str
    batch_num: int
    discard_count: int
    _queue: queue.Queue[TraceContext] | asyncio.Queue[TraceContext]
    _wakeup: threading.Event | asyncio.Event

    def append(self, ctx: TraceContext) -> bool:
        """Put ``ctx`` on the queue; ``_queued()`` when it went in, ``_dropped(ctx)`` when the queue was full."""
        raise NotImplementedError

    def _dropped(self, ctx: TraceContext) -> bool:
        """A full queue drops the context, counted and logged with Apache's line (AsyncTraceDispatcher.append), so
        tracing never slows down or fails the user's call."""
        self.discard_count += 1
        log.info("buffer full%s ,context is %s", self.discard_count, ctx)
        return False

    def _queued(self) -> bool:
        """A context went in: a full batch wakes the worker before its flush interval."""
        if self._queue.qsize() >= self.batch_num:
            self._wakeup.set()
        return True

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
        self.sent(ctx, result.msg_id, result.offset_msg_id, result.region_id,
                  success=result.send_status is SendStatus.SEND_OK)

    def sent(self, ctx: TraceContext, msg_id: str | None, offset_msg_id: str | None, region_id: str | None, *,
             success: bool) -> None:
        """The end of sendMessageAfter, for callers that read the answer themselves (the Spark sink's pipelined
        sends): cost per message since ``ctx.time_stamp``, the ids and region of the answer."""
        ctx.cost_time = (now_ms() - ctx.time_stamp) // len(ctx.beans)
        ctx.success = success
        ctx.region_id = region_id
        bean = ctx.beans[0]
        bean.msg_id, bean.offset_msg_id = msg_id, offset_msg_id
        self.append(ctx)

    def consume_before(self, group: str, msgs: Sequence[MessageExt]) -> TraceContext | None:
        """ConsumeMessageTraceHookImpl.consumeMessageBefore: SubBefore of the messages stored with trace on."""
        beans, region = [], None
        for msg in msgs:
            if msg.properties.get(PROPERTY_TRACE_SWITCH) == "false":
                continue
            region = msg.properties.get(PROPERTY_MSG_REGION)
            beans.append(TraceBean(topic=msg.topic, msg_id=msg.msg_id, tags=msg.tags, keys=msg.keys,
                                   body_length=msg.store_size, retry_times=msg.reconsume_times))
        return self.consume_beans_before(group, beans, region)

    def consume_beans_before(self, group: str, beans: list[TraceBean], region_id: str | None) -> TraceContext | None:
        """consumeMessageBefore of messages already made beans (those stored with trace on; ``region_id`` the last
        one's MSG_REGION): for callers that hold messages as columns (the Spark source)."""
        if not beans:
            return None
        ctx = TraceContext(TraceType.SubBefore, time_stamp=now_ms(), region_id=region_id, group_name=group,
                           beans=beans)
        self.append(ctx)
        return ctx

    def consume_after(self, before: TraceContext | None, batch_size: int, success: bool,
                      return_type: ConsumeReturnType | None) -> None:
        """consumeMessageAfter: SubAfter with the same requestId; cost per message; the listener's return type."""
        if before is None or batch_size == 0:
            return
        after = TraceContext(TraceType.SubAfter, region_id=before.region_id, group_name=before.group_name,
                             request_id=before.request_id, success=success, beans=before.beans,
                             cost_time=(now_ms() - before.time_stamp) // batch_size,
                             context_code=int(return_type) if return_type is not None else 0)
        self.append(after)

    def end_transaction(self, group: str, msg: Message, msg_id: str | None, store_host: str, state: str,
                        transaction_id: str | None, *, from_check: bool) -> None:
        """EndTransactionTraceHookImpl.endTransaction: one EndTransaction record per ended transaction; the region
        is the message's MSG_REGION, else DefaultRegion."""
        if msg.topic.startswith(self.trace_topic):
            return
        bean = TraceBean(topic=msg.topic, msg_id=msg_id, tags=msg.tags, keys=msg.keys, store_host=store_host,
                         msg_type=MessageType.Trans_msg_Commit, transaction_id=transaction_id,
                         transaction_state=state, from_transaction_check=from_check)
        region = msg.properties.get(PROPERTY_MSG_REGION) or DEFAULT_REGION_ID
        self.append(TraceContext(TraceType.EndTransaction, region_id=region, group_name=group, beans=[bean]))


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
