"""The topic pages' API: the topic list with filters, one topic's route, queues (min and max offsets, last update)
and consumer groups, create or update (updateTopic), delete (deleteTopic, only with the topic's name given again as
``confirm``), and a test message (sendMessage)."""

from __future__ import annotations

from typing import Any

from broker.client.message import Message, MessageQueue
from broker.common.errors import MQClientError
from broker.common.topic import PERM_READ, PERM_WRITE, TopicConfig, is_valid_perm, perm_to_string
from broker.common.validation import reply_topic, validate_topic
from broker.console.api import ApiError, ApiRequest, Console, Route
from broker.console.views import send_result_view, topic_type
from broker.remoting.admin_bodies import TopicStatsTable
from broker.tools.admin import MQAdminExt
from broker.tools.message_commands import send_one
from broker.tools.topic_commands import create_or_update_topic

TOPIC_TYPES = ("NORMAL", "RETRY", "DLQ", "SYSTEM")
MAX_QUEUE_NUMS = 1024


async def cluster_named_topics(admin: MQAdminExt) -> set[str]:
    """The topics a broker creates after its cluster's and its own name (and the cluster's reply topic): system
    topics, as the reserved ones."""
    info = await admin.examine_broker_cluster_info()
    clusters = set(info.cluster_addr_table)
    return clusters | {reply_topic(c) for c in clusters} | set(info.broker_addr_table)


async def list_topics(console: Console, request: ApiRequest) -> dict[str, Any]:
    """Every topic of the NameServer, sorted; ``q`` keeps those containing it (any case), ``type`` those of one
    type (NORMAL, RETRY, DLQ, SYSTEM)."""
    wanted, text = request.text("type", None), request.text("q", "").lower()
    if wanted is not None and wanted not in TOPIC_TYPES:
        raise ApiError(400, f"type must be one of {', '.join(TOPIC_TYPES)}, not {wanted!r}")
    named = await cluster_named_topics(console.admin)
    rows = [{"topic": t, "type": topic_type(t, named)} for t in sorted(await console.admin.fetch_all_topic_list())]
    return {"topics": [r for r in rows if text in r["topic"].lower() and wanted in (None, r["type"])]}


def _topic_name(request: ApiRequest) -> str:
    return request.checked_name("topic", validate_topic)


async def _topic_stats(admin: MQAdminExt, topic: str) -> TopicStatsTable:
    """topicStatus's table; empty for a topic whose brokers hold no queue of it yet."""
    try:
        return await admin.examine_topic_stats(topic)
    except MQClientError as err:
        if err.code != -1:
            raise
        return TopicStatsTable()


async def get_topic(console: Console, request: ApiRequest) -> dict[str, Any]:
    """topicRoute, topicStatus and the groups consuming it (QUERY_TOPIC_CONSUME_BY_WHO)."""
    topic, admin = _topic_name(request), console.admin
    route = await admin.examine_topic_route_info(topic)
    stats = await _topic_stats(admin, topic)
    queues = {q.broker_name: q for q in route.queue_datas}
    brokers = []
    for broker in sorted(route.broker_datas, key=lambda b: b.broker_name):
        queue = queues.get(broker.broker_name)
        brokers.append({
            "brokerName": broker.broker_name, "cluster": broker.cluster,
            "addrs": {str(i): a for i, a in sorted(broker.broker_addrs.items())},
            "readQueueNums": queue.read_queue_nums if queue else 0,
            "writeQueueNums": queue.write_queue_nums if queue else 0,
            "perm": queue.perm if queue else 0, "permText": perm_to_string(queue.perm) if queue else "",
            "topicSysFlag": queue.topic_sys_flag if queue else 0,
        })
    rows = []
    for mq in sorted(stats.offset_table):
        offset = stats.offset_table[mq]
        rows.append({"brokerName": mq.broker_name, "queueId": mq.queue_id, "minOffset": offset.min_offset,
                     "maxOffset": offset.max_offset, "messages": offset.max_offset - offset.min_offset,
                     "lastUpdateTimestamp": offset.last_update_timestamp})
    return {"topic": topic, "type": topic_type(topic, await cluster_named_topics(admin)),
            "order": bool(route.order_topic_conf), "orderTopicConf": route.order_topic_conf,
            "brokers": brokers, "queues": rows, "consumerGroups": sorted(await admin.query_topic_consume_by_who(topic))}


async def update_topic(console: Console, request: ApiRequest) -> dict[str, Any]:
    """updateTopic: the topic created, or its queues and permission changed, on every master of ``cluster`` or on
    the broker at ``brokerAddr``."""
    topic = _topic_name(request)
    perm = request.int("perm", PERM_READ | PERM_WRITE)
    if not is_valid_perm(perm):
        raise ApiError(400, f"perm must be 2 (W), 4 (R) or 6 (RW), not {perm}")
    config = TopicConfig(topic_name=topic, read_queue_nums=request.int("readQueueNums", 4, minimum=1,
                                                                       maximum=MAX_QUEUE_NUMS),
                         write_queue_nums=request.int("writeQueueNums", 4, minimum=1, maximum=MAX_QUEUE_NUMS),
                         perm=perm, order=request.bool("order", False))
    broker_addr, cluster = request.text("brokerAddr", None), request.text("cluster", None)
    if (broker_addr is None) == (cluster is None):
        raise ApiError(400, "give either cluster or brokerAddr")
    if cluster is not None and cluster not in (await console.admin.examine_broker_cluster_info()).cluster_addr_table:
        raise ApiError(404, f"no cluster {cluster!r} on the NameServer")
    addrs, order_conf = await create_or_update_topic(console.admin, config, broker_addr=broker_addr, cluster=cluster)
    return {"topic": topic, "brokers": addrs, "orderConf": order_conf, "readQueueNums": config.read_queue_nums,
            "writeQueueNums": config.write_queue_nums, "perm": perm, "order": config.order}


async def delete_topic(console: Console, request: ApiRequest) -> dict[str, Any]:
    """deleteTopic from every broker of its clusters (or of ``cluster``) and from the NameServers. ``confirm`` must
    repeat the topic's name: the page asks for it before it sends the request."""
    topic, admin = _topic_name(request), console.admin
    if request.text("confirm", None) != topic:
        raise ApiError(400, f"deleting a topic needs confirm={topic!r} (its name typed again)")
    cluster = request.text("cluster", None)
    clusters = [cluster] if cluster else await admin.topic_cluster_list(topic)
    if not clusters:
        raise ApiError(404, f"topic {topic!r} is on no cluster")
    for name in clusters:
        await admin.delete_topic(topic, name)
    return {"topic": topic, "deleted": True, "clusters": clusters}


async def send_message(console: Console, request: ApiRequest) -> dict[str, Any]:
    """sendMessage: a UTF-8 body with optional keys and tags, to ``brokerName``/``queueId`` when both are given."""
    topic = _topic_name(request)
    body = request.body.get("body")
    if not isinstance(body, str):
        raise ApiError(400, "body is required, as a string")
    msg = Message(topic, body.encode("utf-8"), tags=request.text("tags", None), keys=request.text("keys", None))
    broker_name, queue_id = request.text("brokerName", None), request.int("queueId", None, minimum=0)
    if (broker_name is None) != (queue_id is None):
        raise ApiError(400, "brokerName and queueId go together")
    await console.admin.examine_topic_route_info(topic)  # an unknown topic is a 404, not an auto-created one
    mq = MessageQueue(topic, broker_name, queue_id) if broker_name is not None else None
    return send_result_view(await send_one(console.admin, msg, mq))


ROUTES = (
    Route("GET", "/api/topics", list_topics),
    Route("POST", "/api/topics", update_topic),
    Route("GET", "/api/topics/{topic}", get_topic),
    Route("DELETE", "/api/topics/{topic}", delete_topic),
    Route("POST", "/api/topics/{topic}/messages", send_message),
)
