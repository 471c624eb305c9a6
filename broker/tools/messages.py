"""The message commands of ``mqadmin``: queryMsgById, queryMsgByKey, queryMsgByUniqueKey, queryMsgByOffset,
queryMsgTraceById (tools/command/message/*.java): what they ask for and how they print a message, as Java's printf
formats do.
"""

from __future__ import annotations

import logging
import os
import time
from typing import TextIO

from broker.client.message import Message, MessageExt, MessageQueue, PullStatus, SendResult
from broker.client.trace import TraceType, TraceView, trace_views
from broker.common.errors import MQClientError, RmqError
from broker.common.hash_order import hash_map_order
from broker.common.message import parse_host
from broker.common.validation import RMQ_SYS_TRACE_TOPIC
from broker.tools.admin import INDEX_KEY_TYPE, INDEX_TAG_TYPE, INDEX_UNIQUE_TYPE, JAVA_LONG_MAX, MQAdminExt
from broker.tools.cli import CommandLine, format_date, human_time2, java_map, js

log = logging.getLogger(__name__)

MSG_BODY_DIR = "/tmp/rocketmq/msgbodys"  # QueryMsgByIdSubCommand.createBodyFile
HOUR_MS = 3600 * 1000
UNIQUE_KEY_WINDOW_MS = 36 * HOUR_MS  # queryMsgByUniqueKey without -s/-e: 36 hours either side of now
MESSAGE_PROPERTIES_CAPACITY = 128  # MessageDecoder.string2messageProperties: new HashMap<>(128)


def _body_file(msg: MessageExt, index: int = 0) -> str:
    os.makedirs(MSG_BODY_DIR, exist_ok=True)
    path = f"{MSG_BODY_DIR}/{msg.msg_id}" + (f"_{index}" if index > 0 else "")
    with open(path, "wb") as f:
        f.write(msg.body)
    return path


def _message_lines(msg: MessageExt, body_path: str) -> list[tuple[str, object]]:
    return [
        ("Topic:", msg.topic), ("Tags:", f"[{js(msg.tags)}]"), ("Keys:", f"[{js(msg.keys)}]"),
        ("Queue ID:", msg.queue_id), ("Queue Offset:", msg.queue_offset), ("CommitLog Offset:", msg.commit_log_offset),
        ("Reconsume Times:", msg.reconsume_times), ("Born Timestamp:", human_time2(msg.born_timestamp)),
        ("Store Timestamp:", human_time2(msg.store_timestamp)), ("Born Host:", msg.born_host),
        ("Store Host:", msg.store_host), ("System Flag:", msg.sys_flag),
        ("Properties:", java_map(msg.properties, MESSAGE_PROPERTIES_CAPACITY)), ("Message Body Path:", body_path),
    ]


async def _print_tracks(admin: MQAdminExt, msg: MessageExt, out: TextIO) -> None:
    try:
        tracks = await admin.message_track_detail(msg)
    except (RmqError, OSError) as err:
        log.warning("message track of %s: %s", msg.msg_id, err)
        return
    if not tracks:
        print("\n\nWARN: No Consumer", file=out)
        return
    print("\n", file=out)
    for track in tracks:
        print(track, file=out)


async def print_msg(admin: MQAdminExt, msg: MessageExt | None, out: TextIO, charset: str | None = None) -> None:
    """QueryMsgByIdSubCommand.printMsg: the message's fields, its body saved to a file, then who consumed it."""
    if msg is None:
        print("\nMessage not found!", file=out)
        return
    lines = [("OffsetID:", msg.offset_msg_id), *_message_lines(msg, _body_file(msg))]
    if charset is not None:
        lines.append(("Message Body:", msg.body.decode(charset, errors="replace")))
    for label, value in lines:
        print(f"{label:<20} {value}", file=out)
    await _print_tracks(admin, msg, out)


async def query_msg_by_id(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    topic, cluster = line.required("t"), line.value("c")
    msg_ids = [m.strip() for m in line.required("i").split(",") if m.strip()]
    if line.has("g") and line.has("d"):
        raise MQClientError(-1, "pushing a message to a consumer client (-g with -d) is not supported by rmq")
    if line.has("s"):
        if line.bool_value("s", False):
            for msg_id in msg_ids:
                await _resend(admin, topic, msg_id, cluster, line.value("u"), out)
        return
    for msg_id in msg_ids:
        await print_msg(admin, await admin.query_message_by_id(topic, msg_id, cluster), out, line.value("f"))


async def resend_message(admin: MQAdminExt, msg: MessageExt, topic: str | None = None) -> SendResult:
    """``msg`` sent again, body, flag and properties as they are, as the ReSendMsgById producer does; to ``topic``
    when given (a dead letter back to its group's retry topic), else to its own."""
    from broker.client.producer import Producer  # only a resend sends: the tool needs no producer otherwise

    async with Producer("ReSendMsgById", admin.namesrv_addr, credentials=admin.remoting.credentials) as producer:
        return await producer.send(Message(topic or msg.topic, msg.body, flag=msg.flag,
                                           properties=dict(msg.properties)))


async def _resend(admin: MQAdminExt, topic: str, msg_id: str, cluster: str | None, unit: str | None,
                  out: TextIO) -> None:
    """queryMsgById -s true: send the message again, properties and all."""
    msg = await admin.query_message_by_id(topic, msg_id, cluster)
    if msg is None:
        print(f"no message. msgId={msg_id}", file=out)
        return
    print(f"prepare resend msg. originalMsgId={msg_id}", file=out)
    result = await resend_message(admin, msg)
    print(f"SendResult [sendStatus={result.send_status.value}, msgId={js(result.msg_id)}, "
          f"offsetMsgId={result.offset_msg_id}, messageQueue={result.message_queue}, "
          f"queueOffset={result.queue_offset}, recallHandle=null]", file=out)


async def query_msg_by_key(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    """QueryMsgByKeySubCommand (5.5): by KEYS (-p K, the default) or by tags (-p T); each row ends with its IndexKey,
    the ``-l`` of a next page."""
    topic, key = line.required("t"), line.required("k")
    key_type = line.value("p", INDEX_KEY_TYPE)
    if key_type not in (INDEX_KEY_TYPE, INDEX_TAG_TYPE):
        print("index type error, just support K for keys or T for tags", file=out)
        return
    result = await admin.query_message(topic, key, line.int_value("m", 64), line.int_value("b", 0),
                                       line.int_value("e", JAVA_LONG_MAX), cluster=line.value("c"),
                                       index_type=key_type, last_key=line.value("l"))
    print(f"{'#Message ID':<50} {'#QID':>4} {'#Offset':>40} {'#IndexKey':<200}", file=out)
    for msg in result.messages:
        index_key = f"{hour_of(msg.store_timestamp)}@{topic}@{key_type}@{key}@{msg.msg_id}@{msg.commit_log_offset}"
        print(f"{msg.msg_id:<50} {msg.queue_id:>4d} {msg.queue_offset:>40d} {index_key:<200}", file=out)


def hour_of(ms: int) -> int:
    """MixAll.dealTimeToHourStamps: the start of the hour (epoch milliseconds)."""
    return ms if ms <= 0 else ms // HOUR_MS * HOUR_MS


async def query_msg_by_unique_key(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    """QueryMsgByUniqueKeySubCommand (5.5): within -s..-e (milliseconds), by default 36 hours either side of now."""
    if line.has("g") and line.has("d"):
        raise MQClientError(-1, "pushing a message to a consumer client (-g with -d) is not supported by rmq")
    now = time.time_ns() // 1_000_000
    begin, end = now - UNIQUE_KEY_WINDOW_MS, now + UNIQUE_KEY_WINDOW_MS
    if line.value("s") and line.value("e"):
        begin, end = line.int_value("s", 0), line.int_value("e", 0)
    result = await admin.query_message(line.required("t"), line.required("i"), 32, begin, end,
                                       cluster=line.value("c"), index_type=INDEX_UNIQUE_TYPE)
    messages = sorted(result.messages, key=lambda m: m.store_timestamp)
    for index, msg in enumerate(messages if line.has("a") else messages[:1]):
        for label, value in _message_lines(msg, _body_file(msg, index)):
            print(f"{label:<20} {value}", file=out)
        await _print_tracks(admin, msg, out)


async def query_msg_by_offset(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    mq = MessageQueue(line.required("t"), line.required("b"), line.int_value("i", 0))
    result = await admin.pull_one(mq, line.int_value("o", 0), line.value("r"))
    if result.status is PullStatus.FOUND and result.messages:
        await print_msg(admin, result.messages[0], out, line.value("f"))


TRACE_ROW = "{:<10} {:<20} {:<20} {:<20} {:<10} {:<10}\n"  # "%-10s %-20s %-20s %-20s %-10s %-10s%n"


async def message_trace(admin: MQAdminExt, msg_id: str, trace_topic: str = RMQ_SYS_TRACE_TOPIC, max_num: int = 64,
                        begin_ms: int = 0, end_ms: int = JAVA_LONG_MAX) -> list[TraceView]:
    """The trace records about ``msg_id``: a key query for it on the trace topic, each trace message decoded; the
    client host is the trace message's born host (getBornHostString). MQClientError(NO_MESSAGE) when there is none."""
    result = await admin.query_message(trace_topic, msg_id, max_num, begin_ms, end_ms)
    return [view for msg in result.messages for view in trace_views(msg_id, msg.body, parse_host(msg.born_host)[0])]


async def query_msg_trace_by_id(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    """QueryMsgTraceByIdSubCommand: each Pub, then each consumer group's SubAfter records (groups in Java HashMap
    order); times are local."""
    msg_id = line.required("i").strip()
    trace_topic = (line.value("t") or RMQ_SYS_TRACE_TOPIC).strip()
    views = await message_trace(admin, msg_id, trace_topic, line.int_value("c", 64), line.int_value("b", 0),
                                line.int_value("e", JAVA_LONG_MAX))
    consumers: dict[str, list[TraceView]] = {}
    for view in views:
        if view.trace_type is TraceType.Pub:
            out.write(TRACE_ROW.format("#Type", "#ProducerGroup", "#ClientHost", "#SendTime", "#CostTimes",
                                       "#Status"))
            out.write(_trace_row("Pub", view))
            out.write("\n")
        elif view.trace_type is TraceType.SubAfter:
            consumers.setdefault(view.group_name, []).append(view)
    for group in hash_map_order(consumers):
        out.write(TRACE_ROW.format("#Type", "#ConsumerGroup", "#ClientHost", "#ConsumerTime", "#CostTimes",
                                   "#Status"))
        for view in consumers[group]:
            out.write(_trace_row("Sub", view))
        out.write("\n")


def _trace_row(kind: str, view: TraceView) -> str:
    return TRACE_ROW.format(kind, view.group_name, view.client_host, format_date(view.time_stamp),
                            f"{view.cost_time}ms", view.status)
