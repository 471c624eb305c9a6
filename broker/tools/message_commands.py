"""The commands of ``mqadmin`` that send and consume (tools/command/message/SendMessageCommand, ConsumeMessageCommand
and CheckMsgSendRTCommand): sendMessage, consumeMessage, checkMsgSendRT. They produce with ``broker.client``'s
Producer (group: the current time in milliseconds, as Java's tool names it) and pull with MQAdminExt as
DefaultMQPullConsumer does (no subscription, no offset commit).

Rule 1: as in the other command modules, the output is written here as Java's printf formats, and a consumed message
is printed as Java's MessageExt.toString.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, TextIO

from broker.client.message import Message, MessageExt, MessageQueue, PullResult, PullStatus, SendResult
from broker.client.producer import Producer, ProducerConfig
from broker.common.errors import RmqError
from broker.common.hash_order import hash_map_order
from broker.common.message import PROPERTY_TRANSACTION_PREPARED, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from broker.common.validation import TOOLS_CONSUMER_GROUP
from broker.tools.admin import MQAdminExt
from broker.tools.cli import CommandLine, SubCommand, java_fixed, java_map, js, opt
from broker.tools.commands import mq_hash, parse_timestamp
from broker.tools.messages import MESSAGE_PROPERTIES_CAPACITY

RESULT_ROW = "{:<32}  {:<4}  {:<20}    {}\n"  # "%-32s  %-4s  %-20s    %s%n"
DEFAULT_MESSAGE_COUNT = 128  # ConsumeMessageCommand.messageCount
DEFAULT_RT_AMOUNT, DEFAULT_RT_SIZE = 100, 128  # CheckMsgSendRTCommand


def _producer(admin: MQAdminExt, *, trace: bool = False) -> Producer:
    """The tool's producer, signed with the admin's keys (Java's ``new DefaultMQProducer(rpcHook)``)."""
    return Producer(str(time.time_ns() // 1_000_000), admin.namesrv_addr,
                    config=ProducerConfig(enable_msg_trace=trace), credentials=admin.remoting.credentials)


async def send_one(admin: MQAdminExt, msg: Message, mq: MessageQueue | None = None, *,
                   trace: bool = False) -> SendResult:
    """sendMessage's send: ``msg`` to ``mq``, or to a queue the producer picks, by a producer of its own."""
    async with _producer(admin, trace=trace) as producer:
        return await producer.send(msg, mq)


# -- sendMessage -------------------------------------------------------------------------------------------------------


async def send_message(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    """One message, to the queue ``-b``/``-i`` names or to one the producer picks."""
    topic, body = line.required("t"), line.required("p")
    if line.has("i") and not line.has("b"):
        out.write("Broker name must be set if the queue is chosen!")
        return
    queue_id = line.int_value("i", -1)
    msg = Message(topic, body.encode("utf-8"), tags=line.value("c"), keys=line.value("k"))
    broker_name = line.value("b")
    mq = MessageQueue(topic, broker_name, queue_id) if broker_name is not None and queue_id > -1 else None
    result = await send_one(admin, msg, mq, trace=line.bool_value("m", False))
    out.write(RESULT_ROW.format("#Broker Name", "#QID", "#Send Result", "#MsgId"))
    out.write(RESULT_ROW.format(result.message_queue.broker_name, result.message_queue.queue_id,
                                result.send_status.value, js(result.msg_id)))


# -- checkMsgSendRT ----------------------------------------------------------------------------------------------------


class _RoundRobin:
    """The tool's selector: message ``i`` goes to queue ``i % n``; it remembers the last queue it chose."""

    def __init__(self) -> None:
        self.broker_name, self.queue_id = "", 0

    def select(self, mqs: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        mq = mqs[arg % len(mqs)]
        self.broker_name, self.queue_id = mq.broker_name, mq.queue_id
        return mq


async def check_msg_send_rt(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    """``-a`` sends of a ``-s``-byte message, one per queue in turn; each one's time, then the average of all but
    the first (which pays for the route lookup and the connection)."""
    topic, amount, size = line.required("t"), line.int_value("a", DEFAULT_RT_AMOUNT), line.int_value("s",
                                                                                                    DEFAULT_RT_SIZE)
    msg = Message(topic, b"a" * max(0, size))
    selector, elapsed = _RoundRobin(), 0
    async with _producer(admin) as producer:
        out.write(RESULT_ROW.format("#Broker Name", "#QID", "#Send Result", "#RT"))
        for i in range(amount):
            start = time.monotonic_ns()
            try:
                await producer.send(msg, selector=selector, arg=i)
                ok = True
            except RmqError:
                ok = False
            rt = (time.monotonic_ns() - start) // 1_000_000
            if i:
                elapsed += rt
            out.write(RESULT_ROW.format(selector.broker_name, selector.queue_id, js(ok), rt))
    out.write(f"Avg RT: {_average(elapsed, amount - 1)}\n")


def _average(total: int, count: int) -> str:
    """String.format("%.2f", (double) total / count), NaN and Infinity as Java prints them."""
    if count == 0:
        return "NaN" if total == 0 else "Infinity"
    return java_fixed(total / count)


# -- consumeMessage ----------------------------------------------------------------------------------------------------


def message_text(msg: MessageExt) -> str:
    """MessageExt.toString (hosts as InetSocketAddress prints them, the body as Arrays.toString of its bytes)."""
    props = msg.properties
    transaction_id = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) if (
        props.get(PROPERTY_TRANSACTION_PREPARED, "").lower() == "true") else None
    body = "[" + ", ".join(str(b - 256 if b > 127 else b) for b in msg.body) + "]"
    return (f"MessageExt [brokerName={js(msg.broker_name or None)}, queueId={msg.queue_id}, "
            f"storeSize={msg.store_size}, queueOffset={msg.queue_offset}, sysFlag={msg.sys_flag}, "
            f"bornTimestamp={msg.born_timestamp}, bornHost=/{msg.born_host}, storeTimestamp={msg.store_timestamp}, "
            f"storeHost=/{msg.store_host}, msgId={msg.offset_msg_id}, commitLogOffset={msg.commit_log_offset}, "
            f"bodyCRC={msg.body_crc}, reconsumeTimes={msg.reconsume_times}, "
            f"preparedTransactionOffset={msg.prepared_transaction_offset}, toString()=Message{{topic='{msg.topic}', "
            f"flag={msg.flag}, properties={java_map(props, MESSAGE_PROPERTIES_CAPACITY)}, body={body}, "
            f"transactionId='{js(transaction_id)}'}}]")


async def consume_message(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    """Print up to ``-c`` messages of the topic (every queue, or ``-b`` ``-i`` from ``-o``), optionally between two
    store times (``-s``, ``-e``); the checks and their words are Java's, printed without a newline as Java does."""
    group, topic = line.value("g") or TOOLS_CONSUMER_GROUP, line.required("t")
    count = line.int_value("c", DEFAULT_MESSAGE_COUNT)
    if count <= 0:
        out.write("Please input a positive messageNumber!")
        return
    if line.has("i") and not line.has("b"):
        out.write("Please set the brokerName before queueId!")
        return
    if line.has("o") and not line.has("i"):
        out.write("Please set queueId before offset!")
        return
    now = time.time_ns() // 1_000_000
    begin = parse_timestamp(line.required("s"), allow_now=False) if line.has("s") else 0
    if begin > now:
        out.write("Please set the beginTimestamp before now!")
        return
    end = parse_timestamp(line.required("e"), allow_now=False) if line.has("e") else 0
    if line.has("e") and end > now:
        out.write("Please set the endTimestamp before now!")
        return
    if line.has("e") and begin > end:
        out.write("Please make sure that the beginTimestamp is less than or equal to the endTimestamp")
        return
    if line.has("i"):
        mq = MessageQueue(topic, line.required("b"), line.int_value("i", 0))
        await _consume_queue(admin, out, group, mq, line.int_value("o", 0), count, begin, end)
    else:
        await _consume_topic(admin, out, group, topic, count, begin, end)


async def queue_offset_range(admin: MQAdminExt, mq: MessageQueue, begin: int, end: int) -> tuple[int, int]:
    """The offsets of ``mq`` that store times ``begin`` and ``end`` (epoch ms) fall on; 0 is the queue's first or
    last offset."""
    low = await admin.search_queue_offset(mq, begin) if begin > 0 else await admin.min_offset(mq)
    high = await admin.search_queue_offset(mq, end) if end > 0 else await admin.max_offset(mq)
    return low, high


async def _consume_topic(admin: MQAdminExt, out: TextIO, group: str, topic: str, count: int, begin: int,
                         end: int) -> None:
    """executeDefault: queue after queue in the order of Java's HashSet, until ``count`` is used up (Java's
    arithmetic, off-by-one included: a queue's range is inclusive of its max offset)."""
    left = count
    for mq in hash_map_order(await admin.subscribe_queues(topic), hash_of=mq_hash):
        if left == 0:
            return
        low, high = await queue_offset_range(admin, mq, begin, end)
        if high - low > left:
            out.write(f"The older {left} message of the {mq.queue_id} queue will be provided\n")
            high, left = low + left - 1, 0
        else:
            left = left - (high - low) - 1
        await _pull_range(admin, out, group, mq, low, high)


async def _consume_queue(admin: MQAdminExt, out: TextIO, group: str, mq: MessageQueue, offset: int, count: int,
                         begin: int, end: int) -> None:
    """executeByCondition: one queue from ``offset`` (or its first offset in the time range)."""
    low, high = await queue_offset_range(admin, mq, begin, end)
    if offset > high:
        out.write(f"{mq} no matched msg, offset={offset}\n")
        return
    low = max(low, offset)
    if high - low > count:
        out.write(f"The oldler {count} message will be provided\n")
        high = low + count - 1
    await _pull_range(admin, out, group, mq, low, high)


async def pull_range(admin: MQAdminExt, mq: MessageQueue, low: int, high: int, *,
                     group: str = TOOLS_CONSUMER_GROUP) -> AsyncIterator[tuple[PullResult, int]]:
    """pullMessageByQueue: each pull's result from ``low`` through ``high`` (inclusive), with the offset it leaves
    off at; it ends after the last, or after an answer that is neither FOUND nor NO_MATCHED_MSG."""
    offset = low
    while offset <= high:
        result = await admin.pull(mq, offset, high - offset + 1, group=group)
        offset = result.next_begin_offset
        yield result, offset
        if result.status not in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG):
            return


async def _pull_range(admin: MQAdminExt, out: TextIO, group: str, mq: MessageQueue, low: int, high: int) -> None:
    """Print each message pulled from ``low`` through ``high`` with its body."""
    async for result, offset in pull_range(admin, mq, low, high, group=group):
        if result.status is PullStatus.FOUND:
            out.write("Consume ok\n")
            for msg in result.messages:
                out.write(f"MSGID: {msg.msg_id} {message_text(msg)} BODY: "
                          f"{msg.body.decode('utf-8', errors='replace')}\n")
        elif result.status is PullStatus.NO_MATCHED_MSG:
            out.write(f"{mq} no matched msg. status={result.status.value}, offset={offset}\n")
        else:
            out.write(f"{mq} print msg finished. status={result.status.value}, offset={offset}\n")


SUB_COMMANDS: tuple[SubCommand, ...] = (
    SubCommand("sendMessage", "Send a message.", (
        opt("t", "topic", "Topic name", required=True),
        opt("p", "body", "UTF-8 string format of the message body", required=True),
        opt("k", "key", "Message keys"),
        opt("c", "tags", "Message tags"),
        opt("b", "broker", "Send message to target broker"),
        opt("i", "qid", "Send message to target queue"),
        opt("m", "msgTraceEnable", "Message Trace Enable, Default: false"),
    ), send_message),
    SubCommand("consumeMessage", "Consume message.", (
        opt("t", "topic", "Topic name", required=True),
        opt("b", "brokerName", "Broker name"),
        opt("i", "queueId", "Queue Id"),
        opt("o", "offset", "Queue offset"),
        opt("g", "consumerGroup", "Consumer group name"),
        # Java's long names end with a blank (so only -s and -e work there); its help shows it
        opt("s", "beginTimestamp ", "Begin timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"),
        opt("e", "endTimestamp ", "End timestamp[currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]"),
        opt("c", "MessageNumber", "Number of message to be consumed"),
    ), consume_message),
    SubCommand("checkMsgSendRT", "Check message send response time.", (
        opt("t", "topic", "topic name", required=True),
        opt("a", "amount", "message amount | default 100"),
        opt("s", "size", "message size | default 128 Byte"),
    ), check_msg_send_rt),
)
