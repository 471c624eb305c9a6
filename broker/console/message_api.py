"""The message pages' API: lookups by key (queryMsgByKey), by id (queryMsgById: an offsetMsgId or a UNIQ_KEY), by
queue and offset (queryMsgByOffset) and by store-time range (consumeMessage's queue ranges, pulled as the tools'
consumer, without committing anything); one message with its body, properties and who consumed it; its trace
(queryMsgTraceById)."""

from __future__ import annotations

from typing import Any

from broker.client.message import MessageExt, MessageQueue, PullStatus
from broker.common.errors import MQClientError
from broker.common.validation import RMQ_SYS_TRACE_TOPIC
from broker.console.api import ApiError, ApiRequest, Console, Route
from broker.console.views import message_detail, message_summary, track_view
from broker.remoting.codes import ResponseCode
from broker.tools.admin import JAVA_LONG_MAX, MQAdminExt
from broker.tools.message_commands import pull_range, queue_offset_range
from broker.tools.messages import message_trace

DEFAULT_LIMIT, MAX_LIMIT = 100, 2000
KEY_QUERY_MAX = 64  # queryMsgByKey's default maxNum


async def messages_between(admin: MQAdminExt, topic: str, begin_ms: int, end_ms: int, limit: int) -> list[MessageExt]:
    """Up to ``limit`` messages of ``topic`` stored between ``begin_ms`` and ``end_ms`` (0: the queue's first or
    last), queue by queue from each one's first offset in the range, then sorted by store time."""
    found: list[MessageExt] = []
    for mq in sorted(await admin.subscribe_queues(topic)):
        low, high = await queue_offset_range(admin, mq, begin_ms, end_ms)
        async for result, _ in pull_range(admin, mq, low, min(high, low + limit - len(found) - 1)):
            found += [m for m in result.messages
                      if m.store_timestamp >= begin_ms and (not end_ms or m.store_timestamp <= end_ms)]
        if len(found) >= limit:
            break
    return sorted(found[:limit], key=lambda m: (m.store_timestamp, m.queue_id, m.queue_offset))


async def broker_names(admin: MQAdminExt) -> dict[str, str]:
    """Broker address -> broker name, from the NameServer's cluster info."""
    info = await admin.examine_broker_cluster_info()
    return {addr: name for name, broker in info.broker_addr_table.items() for addr in broker.broker_addrs.values()}


async def _found(admin: MQAdminExt, messages: list[MessageExt]) -> dict[str, Any]:
    names = await broker_names(admin) if any(not m.broker_name for m in messages) else {}
    return {"messages": [message_summary(m, names) for m in messages]}


async def by_key(console: Console, request: ApiRequest) -> dict[str, Any]:
    topic, key = request.text("topic"), request.text("key")
    begin, end = request.time_ms("begin", 0), request.time_ms("end", JAVA_LONG_MAX)
    max_num = request.int("max", KEY_QUERY_MAX, minimum=1, maximum=MAX_LIMIT)
    try:
        result = await console.admin.query_message(topic, key, max_num, begin, end)
    except MQClientError as err:
        if err.code != ResponseCode.NO_MESSAGE:
            raise
        return await _found(console.admin, [])
    return await _found(console.admin, sorted(result.messages, key=lambda m: m.store_timestamp))


async def by_id(console: Console, request: ApiRequest) -> dict[str, Any]:
    topic, msg_id = request.text("topic"), request.text("msgId")
    await console.admin.examine_topic_route_info(topic)  # an unknown topic is a 404 rather than "not found"
    msg = await console.admin.query_message_by_id(topic, msg_id)
    return await _found(console.admin, [msg] if msg is not None else [])


async def by_offset(console: Console, request: ApiRequest) -> dict[str, Any]:
    mq = MessageQueue(request.text("topic"), request.text("brokerName"), request.int("queueId", minimum=0))
    result = await console.admin.pull_one(mq, request.int("offset", minimum=0))
    return await _found(console.admin, result.messages[:1] if result.status is PullStatus.FOUND else [])


async def by_time(console: Console, request: ApiRequest) -> dict[str, Any]:
    topic, begin, end = request.text("topic"), request.time_ms("begin"), request.time_ms("end")
    if end < begin:
        raise ApiError(400, "end is before begin")
    limit = request.int("limit", DEFAULT_LIMIT, minimum=1, maximum=MAX_LIMIT)
    return await _found(console.admin, await messages_between(console.admin, topic, begin, end, limit))


async def get_message(console: Console, request: ApiRequest) -> dict[str, Any]:
    """One message by id, with its body and properties, and for each group consuming its topic whether it did."""
    topic, msg_id = request.text("topic"), request.text("msgId")
    await console.admin.examine_topic_route_info(topic)
    msg = await console.admin.query_message_by_id(topic, msg_id)
    if msg is None:
        raise ApiError(404, f"no message {msg_id} in topic {topic}")
    tracks = await console.admin.message_track_detail(msg)
    return {**message_detail(msg, await broker_names(console.admin)), "tracks": [track_view(t) for t in tracks]}


async def get_trace(console: Console, request: ApiRequest) -> dict[str, Any]:
    """The message's trace records (Pub, SubBefore, SubAfter, EndTransaction); none when it was not traced."""
    msg_id, trace_topic = request.text("msgId"), request.text("traceTopic", RMQ_SYS_TRACE_TOPIC)
    try:
        views = await message_trace(console.admin, msg_id, trace_topic)
    except MQClientError as err:
        if err.code not in (ResponseCode.NO_MESSAGE, ResponseCode.TOPIC_NOT_EXIST):
            raise
        views = []
    return {"msgId": msg_id, "traceTopic": trace_topic,
            "records": [{"type": v.trace_type.value, "group": v.group_name, "clientHost": v.client_host,
                         "timestamp": v.time_stamp, "costTime": v.cost_time, "status": v.status}
                        for v in sorted(views, key=lambda v: v.time_stamp)]}


ROUTES = (
    Route("GET", "/api/messages/by-key", by_key),
    Route("GET", "/api/messages/by-id", by_id),
    Route("GET", "/api/messages/by-offset", by_offset),
    Route("GET", "/api/messages/by-time", by_time),
    Route("GET", "/api/topics/{topic}/messages/{msgId}", get_message),
    Route("GET", "/api/traces/{msgId}", get_trace),
)
