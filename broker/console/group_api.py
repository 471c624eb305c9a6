"""The consumer-group pages' API: every group (consumerProgress without -g), one group's members, subscriptions and
per-queue lag (consumerConnection, consumerProgress -g), resetting its offsets by time (resetOffsetByTime), and its
dead letters with a resend.

A Spark query that commits its offsets to a group (the source's ``consumerGroup`` option) shows as a group like any
other: its driver announces itself to each broker once, as a pull consumer whose client id's instance name starts
with ``SPARK_SOURCE_INSTANCE_PREFIX``, then only commits offsets. A group is marked ``spark`` while such a client is
online, and stays marked while the console runs; after the broker drops the idle client (two minutes) a group the
console never saw online shows as what it is then: committed offsets, no members.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

from broker.client.route import MASTER_ID
from broker.common.errors import RmqError
from broker.common.mq_version import version_desc
from broker.common.validation import dlq_topic, retry_topic, validate_group
from broker.console.api import ApiError, ApiRequest, Console, Route
from broker.console.message_api import messages_between
from broker.console.views import is_spark_client, message_summary, queue_view, send_result_view
from broker.remoting.admin_bodies import ConsumeStats
from broker.tools.admin import MQAdminExt
from broker.tools.commands import GroupConsumeInfo, consumer_groups, group_consume_info, reset_offsets_by_time
from broker.tools.messages import resend_message

log = logging.getLogger(__name__)

PARALLEL_GROUPS = 8  # groups asked at once for the list: each is a route lookup and a request per broker
DLQ_PAGE = 200


def _remember_spark(console: Console, info: GroupConsumeInfo) -> bool:
    if info.connection and any(is_spark_client(c.client_id) for c in info.connection.connection_set):
        console.spark_groups.add(info.group)
    return info.group in console.spark_groups


def group_row(console: Console, info: GroupConsumeInfo) -> dict[str, Any]:
    return {"group": info.group, "members": info.count, "version": info.version, "consumeType": info.consume_type,
            "messageModel": info.message_model, "tps": info.tps, "lag": info.diff,
            "queues": len(info.stats.offset_table) if info.stats else 0,
            "state": "ONLINE" if info.count else ("OFFSETS_ONLY" if info.stats else "EMPTY"),
            "spark": _remember_spark(console, info)}


async def list_groups(console: Console, request: ApiRequest) -> dict[str, Any]:
    """Every group with a retry topic; ``q`` keeps those containing it (any case), ``spark=true`` Spark's only."""
    text, spark_only = request.text("q", "").lower(), request.bool("spark", False)
    limit = asyncio.Semaphore(PARALLEL_GROUPS)

    async def one(group: str) -> GroupConsumeInfo:
        async with limit:
            return await group_consume_info(console.admin, group)

    groups = sorted(g for g in await consumer_groups(console.admin) if text in g.lower())
    rows = [group_row(console, info) for info in await asyncio.gather(*(one(g) for g in groups))]
    return {"groups": [r for r in rows if r["spark"] or not spark_only]}


def _group_name(request: ApiRequest) -> str:
    return request.checked_name("group", validate_group)


async def _stats_of_every_master(admin: MQAdminExt, group: str) -> ConsumeStats | None:
    """The group's offsets from every master: for a group without a retry topic (one that never sent a heartbeat,
    such as a group created by updateSubGroup and committed to by offset only), whose brokers no route names."""
    stats = ConsumeStats()
    info = await admin.examine_broker_cluster_info()
    for broker in info.broker_addr_table.values():
        addr = broker.broker_addrs.get(MASTER_ID)
        if addr is not None:
            try:
                stats.offset_table.update((await admin.consume_stats_of_broker(addr, group)).offset_table)
            except RmqError as err:
                log.debug("consume stats of %s on %s: %s", group, addr, err)
    return stats if stats.offset_table else None


async def _has_route(admin: MQAdminExt, topic: str) -> bool:
    try:
        await admin.examine_topic_route_info(topic)
    except RmqError:
        return False
    return True


async def get_group(console: Console, request: ApiRequest) -> dict[str, Any]:
    group = _group_name(request)
    info = await group_consume_info(console.admin, group)
    if info.stats is None:
        info = dataclasses.replace(info, stats=await _stats_of_every_master(console.admin, group))
    has_dlq = await _has_route(console.admin, dlq_topic(group))
    if info.connection is None and info.stats is None and not has_dlq:
        raise ApiError(404, f"consumer group {group!r} has no committed offsets, no online client and no dead letter")
    connection, stats = info.connection, info.stats
    queues = []
    for mq in sorted(stats.offset_table) if stats else ():
        w = stats.offset_table[mq]
        queues.append({**queue_view(mq), "brokerOffset": w.broker_offset, "consumerOffset": w.consumer_offset,
                       "lag": w.diff, "inflight": w.inflight, "lastTimestamp": w.last_timestamp})
    subscriptions = sorted(connection.subscription_table.values(), key=lambda s: s.topic) if connection else []
    topics = sorted({q["topic"] for q in queues} | {s.topic for s in subscriptions})
    return {
        **group_row(console, info),
        "clients": [{"clientId": c.client_id, "clientAddr": c.client_addr, "language": c.language,
                     "version": version_desc(c.version), "spark": is_spark_client(c.client_id)}
                    for c in (connection.connection_set if connection else ())],
        "subscriptions": [{"topic": s.topic, "expression": s.sub_string} for s in subscriptions],
        "consumeFromWhere": connection.consume_from_where if connection else None,
        "queues": queues, "topics": [t for t in topics if t != retry_topic(group)],
        "dlqTopic": dlq_topic(group) if has_dlq else None,
    }


async def reset_offsets(console: Console, request: ApiRequest) -> dict[str, Any]:
    """resetOffsetByTime: the group's offsets of ``topic`` moved to ``timestamp``; the brokers do it when they
    can (``mode`` broker), else the console commits each queue's offset itself, as the tool does (``mode`` tool)."""
    group, topic = _group_name(request), request.text("topic")
    timestamp, force = request.time_ms("timestamp"), request.bool("force", True)
    reset = await reset_offsets_by_time(console.admin, group, topic, timestamp, force)
    if reset.rollbacks is not None:
        rows = [{"brokerName": s.broker_name, "queueId": s.queue_id, "offset": s.rollback_offset,
                 "previousOffset": s.consumer_offset} for s in reset.rollbacks]
        return {"group": group, "topic": topic, "timestamp": timestamp, "mode": "tool", "queues": rows}
    table = reset.offsets or {}
    rows = [{"brokerName": mq.broker_name, "queueId": mq.queue_id, "offset": table[mq]} for mq in sorted(table)]
    return {"group": group, "topic": topic, "timestamp": timestamp, "mode": "broker", "queues": rows}


async def list_dead_letters(console: Console, request: ApiRequest) -> dict[str, Any]:
    """The group's dead letters (its %DLQ% topic), oldest first, at most ``limit``."""
    group = _group_name(request)
    limit = request.int("limit", DLQ_PAGE, minimum=1, maximum=2000)
    messages = await messages_between(console.admin, dlq_topic(group), 0, 0, limit)
    return {"group": group, "topic": dlq_topic(group), "messages": [message_summary(m) for m in messages]}


async def resend_dead_letter(console: Console, request: ApiRequest) -> dict[str, Any]:
    """A dead letter sent again to the group's retry topic, properties and all: only that group consumes it again,
    under its original topic (the RETRY_TOPIC property the broker set when it gave up on it)."""
    group, msg_id = _group_name(request), request.text("msgId")
    msg = await console.admin.query_message_by_id(dlq_topic(group), msg_id)
    if msg is None:
        raise ApiError(404, f"no message {msg_id} in {dlq_topic(group)}")
    result = await resend_message(console.admin, msg, retry_topic(group))
    return {"resentFrom": msg_id, **send_result_view(result)}


ROUTES = (
    Route("GET", "/api/groups", list_groups),
    Route("GET", "/api/groups/{group}", get_group),
    Route("POST", "/api/groups/{group}/reset", reset_offsets),
    Route("GET", "/api/groups/{group}/dlq", list_dead_letters),
    Route("POST", "/api/groups/{group}/dlq/resend", resend_dead_letter),
)
