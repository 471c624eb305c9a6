"""Message trace records (client/trace: TraceContext, TraceBean, TraceDataEncoder, TraceView) as Apache writes them.

Rule 1: the one place that knows the trace record format: the trace types, the message types' ordinals, the two
separators and the field order of each record. The dispatcher that batches and sends them is ``trace_dispatcher``.

A trace message's body is records concatenated; each record is its fields joined by U+0001 and ended by U+0002.
Values print as Java's ``StringBuilder.append`` does (a missing tag or key is ``null``, booleans ``true``/``false``,
the message type its ordinal)::

    Pub            type ts region group topic msgId tags keys storeHost bodyLength costTime msgType offsetMsgId success
    SubBefore      type ts region group requestId msgId retryTimes keys               (one record per message)
    SubAfter       type requestId msgId costTime success keys contextCode ts group    (one record per message)
    EndTransaction type ts region group topic msgId tags keys storeHost msgType transactionId state fromCheck
    Recall         type ts region group topic msgId success

The message carrying them has KEYS = every record's msgId and business keys, in Java HashSet order, so the broker's
IndexFile finds a message's trace by its id (``mqadmin queryMsgTraceById``).

Examples:
    >>> ctx = TraceContext(TraceType.Pub, time_stamp=1, region_id="R", group_name="G", beans=[
    ...     TraceBean(topic="T", msg_id="ID", tags=None, keys=None, store_host="h:1")])
    >>> encode_trace_context(ctx).data.replace(CONTENT_SPLITOR, "|")
    'Pub|1|R|G|T|ID|null|null|h:1|0|0|0||true\\x02'
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum, IntEnum

from broker.common.errors import RmqError
from broker.common.hash_order import hash_map_order
from broker.common.message import KEY_SEPARATOR, create_uniq_id

CONTENT_SPLITOR = "\x01"  # TraceConstants.CONTENT_SPLITOR, (char) 1: between the fields of a record
FIELD_SPLITOR = "\x02"  # TraceConstants.FIELD_SPLITOR, (char) 2: after each record
DEFAULT_REGION_ID = "DefaultRegion"  # MixAll.DEFAULT_TRACE_REGION_ID
TRACE_TOPIC_PREFIX = "rmq_sys_TRACE_DATA_"  # TraceConstants.TRACE_TOPIC_PREFIX: the cloud channel's trace topics
GROUP_NAME_PREFIX = "_INNER_TRACE_PRODUCER"  # TraceConstants.GROUP_NAME_PREFIX
TRACE_INSTANCE_NAME = "PID_CLIENT_INNER_TRACE_PRODUCER"  # TraceConstants.TRACE_INSTANCE_NAME


class TraceError(RmqError):
    """A trace record that cannot be read: names the record."""


class TraceType(Enum):
    """trace/TraceType; the value is the name written as a record's first field."""

    Pub = "Pub"
    SubBefore = "SubBefore"
    SubAfter = "SubAfter"
    EndTransaction = "EndTransaction"
    Recall = "Recall"


class MessageType(IntEnum):
    """common/message/MessageType; records carry the ordinal."""

    Normal_Msg = 0
    Trans_Msg_Half = 1
    Trans_msg_Commit = 2
    Delay_Msg = 3
    Order_Msg = 4


class ConsumeReturnType(IntEnum):
    """consumer/listener/ConsumeReturnType; SubAfter's contextCode is the ordinal."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


@dataclass(slots=True)
class TraceBean:
    """trace/TraceBean: one message in a trace context. ``None`` prints as ``null``, as in Java."""

    topic: str | None = ""
    msg_id: str | None = ""
    offset_msg_id: str | None = ""
    tags: str | None = ""
    keys: str | None = ""
    store_host: str | None = ""
    client_host: str | None = ""
    body_length: int = 0
    retry_times: int = 0
    msg_type: MessageType = MessageType.Normal_Msg
    transaction_id: str | None = None
    transaction_state: str | None = None  # LocalTransactionState's name
    from_transaction_check: bool = False


@dataclass(slots=True)
class TraceContext:
    """trace/TraceContext: one trace event (a send, a consumed batch, an ended transaction) and its messages.

    ``cloud`` stands for AccessChannel.CLOUD: its SubAfter records leave out the time stamp and group."""

    trace_type: TraceType
    time_stamp: int = field(default_factory=lambda: time.time_ns() // 1_000_000)
    region_id: str | None = ""
    group_name: str | None = ""
    cost_time: int = 0
    success: bool = True
    request_id: str = field(default_factory=create_uniq_id)
    context_code: int = 0
    beans: list[TraceBean] = field(default_factory=list)
    cloud: bool = False


@dataclass(frozen=True, slots=True)
class TraceTransferBean:
    """trace/TraceTransferBean: a context's records and the keys its trace message is indexed by."""

    data: str
    keys: tuple[str, ...]


def _text(value: object) -> str:
    """String.valueOf / StringBuilder.append."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, IntEnum):
        return str(int(value))
    return str(value)


def _fields(*fields: object) -> str:
    return CONTENT_SPLITOR.join(_text(f) for f in fields)


def _record(*fields: object) -> str:
    return _fields(*fields) + FIELD_SPLITOR


def _records(ctx: TraceContext) -> str:
    """TraceDataEncoder.encoderFromContextBean's text."""
    t, first = ctx.trace_type, ctx.beans[0]
    if t is TraceType.Pub:
        return _record(t.value, ctx.time_stamp, ctx.region_id, ctx.group_name, first.topic, first.msg_id, first.tags,
                       first.keys, first.store_host, first.body_length, ctx.cost_time, first.msg_type,
                       first.offset_msg_id, ctx.success)
    if t is TraceType.SubBefore:
        return "".join(_record(t.value, ctx.time_stamp, ctx.region_id, ctx.group_name, ctx.request_id, b.msg_id,
                               b.retry_times, b.keys) for b in ctx.beans)
    if t is TraceType.SubAfter:
        # the separator after contextCode stays when the cloud channel leaves the last two fields out
        tail = "" if ctx.cloud else _fields(ctx.time_stamp, ctx.group_name)
        return "".join(_fields(t.value, ctx.request_id, b.msg_id, ctx.cost_time, ctx.success, b.keys,
                               ctx.context_code) + CONTENT_SPLITOR + tail + FIELD_SPLITOR for b in ctx.beans)
    if t is TraceType.EndTransaction:
        return _record(t.value, ctx.time_stamp, ctx.region_id, ctx.group_name, first.topic, first.msg_id, first.tags,
                       first.keys, first.store_host, first.msg_type, first.transaction_id, first.transaction_state,
                       first.from_transaction_check)
    return _record(t.value, ctx.time_stamp, ctx.region_id, ctx.group_name, first.topic, first.msg_id, ctx.success)


def encode_trace_context(ctx: TraceContext) -> TraceTransferBean:
    """The records of ``ctx`` and its keys: every bean's msgId and business keys (split on spaces)."""
    keys: list[str] = []
    for bean in ctx.beans:
        keys.append(_text(bean.msg_id))
        if bean.keys:
            keys.extend(bean.keys.split(KEY_SEPARATOR))
    return TraceTransferBean(_records(ctx), tuple(keys))


def trace_message_keys(beans: Iterable[TraceTransferBean]) -> str:
    """The KEYS of a trace message: the union of the beans' keys as a Java HashSet iterates it, joined by spaces
    (AsyncTraceDispatcher.flushData, Message.setKeys(Collection))."""
    union = dict.fromkeys(k for bean in beans for k in bean.keys)
    return KEY_SEPARATOR.join(hash_map_order(union))


# -- decoding (TraceDataEncoder.decoderFromTraceDataString) ------------------------------------------------------------


def _java_split(text: str, sep: str) -> list[str]:
    """String.split: trailing empty strings are dropped."""
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts or [""]


def _bool(text: str) -> bool:
    return text.lower() == "true"  # Boolean.parseBoolean


def decode_trace_data(text: str) -> list[TraceContext]:
    """The contexts of a trace message's body, one per record; records of unknown types are skipped, as in Java.
    TraceError names the record when a number or message type does not parse."""
    contexts = []
    for record in _java_split(text, FIELD_SPLITOR) if text else []:
        line = _java_split(record, CONTENT_SPLITOR)
        try:
            ctx = _decode_line(line)
        except (ValueError, IndexError) as err:
            raise TraceError(f"trace record {record!r} cannot be decoded: {err}") from err
        if ctx is not None:
            contexts.append(ctx)
    return contexts


def _decode_line(line: list[str]) -> TraceContext | None:
    kind = line[0]
    if kind == TraceType.Pub.value:
        bean = TraceBean(topic=line[4], msg_id=line[5], tags=line[6], keys=line[7], store_host=line[8],
                         body_length=int(line[9]), msg_type=MessageType(int(line[11])))
        ctx = TraceContext(TraceType.Pub, int(line[1]), line[2], line[3], cost_time=int(line[10]), beans=[bean])
        if len(line) == 13:
            ctx.success = _bool(line[12])
        elif len(line) >= 14:
            bean.offset_msg_id, ctx.success = line[12], _bool(line[13])
            if len(line) >= 15:
                bean.client_host = line[14]
        return ctx
    if kind == TraceType.SubBefore.value:
        bean = TraceBean(msg_id=line[5], retry_times=int(line[6]), keys=line[7])
        return TraceContext(TraceType.SubBefore, int(line[1]), line[2], line[3], request_id=line[4], beans=[bean])
    if kind == TraceType.SubAfter.value:
        ctx = TraceContext(TraceType.SubAfter, request_id=line[1], cost_time=int(line[3]), success=_bool(line[4]),
                           beans=[TraceBean(msg_id=line[2], keys=line[5])])
        if len(line) >= 7:
            ctx.context_code = int(line[6])
        if len(line) >= 9:
            ctx.time_stamp, ctx.group_name = int(line[7]), line[8]
        return ctx
    if kind == TraceType.EndTransaction.value:
        bean = TraceBean(topic=line[4], msg_id=line[5], tags=line[6], keys=line[7], store_host=line[8],
                         msg_type=MessageType(int(line[9])), transaction_id=line[10], transaction_state=line[11],
                         from_transaction_check=_bool(line[12]))
        return TraceContext(TraceType.EndTransaction, int(line[1]), line[2], line[3], beans=[bean])
    if kind == TraceType.Recall.value:
        bean = TraceBean(topic=line[4], msg_id=line[5])
        return TraceContext(TraceType.Recall, int(line[1]), line[2], line[3], success=_bool(line[6]), beans=[bean])
    return None


# -- what queryMsgTraceById shows (trace/TraceView) --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TraceView:
    """trace/TraceView: one record of one message, with the host that sent the trace message."""

    trace_type: TraceType
    group_name: str
    client_host: str
    time_stamp: int
    cost_time: int
    status: str  # "success" or "failed"


def trace_views(msg_id: str, body: bytes, client_host: str) -> list[TraceView]:
    """TraceView.decodeFromTraceTransData: the records of one trace message about ``msg_id``."""
    views = []
    for ctx in decode_trace_data(body.decode("utf-8", errors="replace")):
        if ctx.beans[0].msg_id != msg_id:
            continue
        views.append(TraceView(ctx.trace_type, _text(ctx.group_name), client_host, ctx.time_stamp, ctx.cost_time,
                               "success" if ctx.success else "failed"))
    return views
