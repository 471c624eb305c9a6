"""How trace contexts become trace messages (AsyncTraceDispatcher's rules), for both dispatchers: the asyncio one
(``trace_dispatcher``) and the blocking one (``blocking_trace``, Spark's executors and driver).

Rule 1: the one place for the batching rules. A dispatcher queues contexts (at most QUEUE_CAPACITY; a full queue
drops the new one) and flushes up to ``batch_num`` of them when that many wait, or every FLUSH_INTERVAL_S, or when
it shuts down (``flush_due``). A flush (``trace_messages``) leaves out contexts without a region or messages,
groups the rest by their first message's topic, and cuts each group's records into bodies of about
MAX_MESSAGE_SIZE characters; each body is one message to the trace topic, its KEYS the records' ids and keys. The
inner producer is named as Apache names it (``inner_producer_group``). No asyncio here: the blocking side imports
this module.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from enum import Enum

from broker.client.message import Message
from broker.client.trace import (
    GROUP_NAME_PREFIX,
    TRACE_INSTANCE_NAME,
    TraceContext,
    TraceTransferBean,
    encode_trace_context,
    trace_message_keys,
)
from broker.common.validation import RMQ_SYS_TRACE_TOPIC

DEFAULT_BATCH_NUM = 10  # ClientConfig.traceMsgBatchNum
MAX_BATCH_NUM = 20  # AsyncTraceDispatcher: min(batchNum, 20)
QUEUE_CAPACITY = 2048  # traceContextQueue
MAX_MESSAGE_SIZE = 128_000  # the inner producer's maxMessageSize; a body is cut before it grows past this
FLUSH_INTERVAL_S = 5.0  # flushTraceInterval
SEND_TIMEOUT_MS = 5000  # the inner producer's sendMsgTimeout
MAX_SENDS_IN_FLIGHT = 4  # traceExecutor's maximum pool size

_GROUP_COUNTER = itertools.count(1)  # AsyncTraceDispatcher.COUNTER: one number per dispatcher in the process


class TraceDispatcherType(Enum):
    PRODUCE = "PRODUCE"
    CONSUME = "CONSUME"


def trace_topic_name(trace_topic: str | None) -> str:
    """The topic trace messages go to: the one given, or RMQ_SYS_TRACE_TOPIC when it is blank."""
    return trace_topic.strip() if trace_topic and trace_topic.strip() else RMQ_SYS_TRACE_TOPIC


def batch_size(batch_num: int) -> int:
    """Contexts per flush: ``traceMsgBatchNum``, capped at MAX_BATCH_NUM."""
    return max(1, min(batch_num, MAX_BATCH_NUM))


def inner_producer_group(group: str, kind: TraceDispatcherType) -> str:
    """``_INNER_TRACE_PRODUCER-<host group>-<PRODUCE|CONSUME>-<n>``, n counting the dispatchers of this process."""
    return f"{GROUP_NAME_PREFIX}-{group}-{kind.value}-{next(_GROUP_COUNTER)}"


def inner_instance_name(namesrv_addr: str) -> str:
    return f"{TRACE_INSTANCE_NAME}_{namesrv_addr}"


def flush_due(queued: int, batch_num: int, *, interval_passed: bool) -> bool:
    """Whether a dispatcher takes a batch off its queue now: a full batch waits, or the interval passed with
    anything queued."""
    return queued >= batch_num or (interval_passed and queued > 0)


def trace_messages(contexts: Sequence[TraceContext], trace_topic: str) -> Iterator[Message]:
    """AsyncDataSendTask.sendTraceData: the trace messages of one flush, one group of contexts (by their first
    message's topic) after another, a group's records cut into bodies of about MAX_MESSAGE_SIZE characters."""
    groups: dict[str, list[TraceTransferBean]] = {}
    for ctx in contexts:
        if ctx.region_id is None or not ctx.beans:
            continue
        groups.setdefault(ctx.beans[0].topic or "", []).append(encode_trace_context(ctx))
    for beans in groups.values():
        batch: list[TraceTransferBean] = []
        size = 0
        for bean in beans:
            batch.append(bean)
            size += len(bean.data)
            if size >= MAX_MESSAGE_SIZE:
                yield _trace_message(batch, trace_topic)
                batch, size = [], 0
        if batch:
            yield _trace_message(batch, trace_topic)


def _trace_message(beans: list[TraceTransferBean], trace_topic: str) -> Message:
    data = "".join(b.data for b in beans)
    return Message(trace_topic, data.encode("utf-8"), keys=trace_message_keys(beans))
