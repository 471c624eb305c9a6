"""The consumer-group and offset commands of ``mqadmin`` (tools/command/consumer, connection and offset
*SubCommand.java's ``execute``, on MQAdminExt): updateSubGroup, deleteSubGroup, consumerConnection,
producerConnection, consumerProgress, resetOffsetByTime.

Rule 1: the output formats live in the command modules (this one, ``topic_commands`` and ``messages``), each written as
its Java printf format (``%-32s`` is ``:<32``), so a row of ours lines up with a row of Apache's tool.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TextIO

from broker.client.message import MessageQueue
from broker.common.attributes import parse_attributes
from broker.common.errors import MQClientError, RmqError
from broker.common.hash_order import table_size_for
from broker.common.message import java_hash
from broker.common.mq_version import version_desc
from broker.common.validation import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, parse_group
from broker.remoting.admin_bodies import ConsumerConnection, ConsumeStats, mq_key
from broker.remoting.codes import ResponseCode
from broker.remoting.subscription import SubscriptionGroupConfig
from broker.tools.admin import MQAdminExt
from broker.tools.cli import CommandLine, ShowHelp, UsageError, format_date, front, java_map, js
from broker.tools.results import RollbackStats

log = logging.getLogger(__name__)


def _to_string_helper(name: str, fields: Iterable[tuple[str, object]]) -> str:
    """Guava's MoreObjects.toStringHelper: ``Name{a=1, b=null}``, arrays as ``[1, 2]``."""
    def text(value: object) -> str:
        return "[" + ", ".join(map(js, value)) + "]" if isinstance(value, list) else js(value)

    return name + "{" + ", ".join(f"{k}={text(v)}" for k, v in fields) + "}"


def _retry_policy_text(policy: Mapping[str, Any]) -> str:
    exponential, customized = policy.get("exponentialRetryPolicy"), policy.get("customizedRetryPolicy")
    return _to_string_helper("GroupRetryPolicy", [
        ("type", policy.get("type", "CUSTOMIZED")),
        ("exponentialRetryPolicy", None if exponential is None else _to_string_helper(
            "ExponentialRetryPolicy", [(k, exponential.get(k)) for k in ("initial", "max", "multiplier")])),
        ("customizedRetryPolicy", None if customized is None else _to_string_helper(
            "CustomizedRetryPolicy", [("next", customized.get("next"))])),
    ])


def sub_group_text(config: SubscriptionGroupConfig) -> str:
    """SubscriptionGroupConfig.toString."""
    return _to_string_helper("SubscriptionGroupConfig", [
        ("groupName", config.group_name), ("consumeEnable", config.consume_enable),
        ("consumeFromMinEnable", config.consume_from_min_enable),
        ("consumeBroadcastEnable", config.consume_broadcast_enable),
        ("consumeMessageOrderly", config.consume_message_orderly), ("retryQueueNums", config.retry_queue_nums),
        ("retryMaxTimes", config.retry_max_times), ("groupRetryPolicy", _retry_policy_text(config.group_retry_policy)),
        ("brokerId", config.broker_id), ("whichBrokerWhenConsumeSlowly", config.which_broker_when_consume_slowly),
        ("notifyConsumerIdsChangedEnable", config.notify_consumer_ids_changed_enable),
        ("groupSysFlag", config.group_sys_flag), ("consumeTimeoutMinute", config.consume_timeout_minute),
        ("subscriptionDataSet", config.subscription_data_set), ("attributes", java_map(config.attributes)),
    ])


# -- groups and offsets ------------------------------------------------------------------------------------------------


async def update_sub_group(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    """UpdateSubGroupSubCommand: Java's defaults, except that a new group neither broadcasts nor starts at min."""
    values: dict[str, Any] = {"consume_broadcast_enable": False, "consume_from_min_enable": False}
    for key, name in (("s", "consume_enable"), ("m", "consume_from_min_enable"), ("d", "consume_broadcast_enable"),
                      ("o", "consume_message_orderly"), ("a", "notify_consumer_ids_changed_enable")):
        if line.has(key):
            values[name] = line.bool_value(key, False)
    for key, name in (("q", "retry_queue_nums"), ("r", "retry_max_times"), ("i", "broker_id"),
                      ("w", "which_broker_when_consume_slowly")):
        if line.has(key):
            values[name] = line.int_value(key, 0)
    if line.has("p"):
        values["group_retry_policy"] = json.loads(line.required("p"))
    if line.has("attributes"):
        values["attributes"] = parse_attributes(line.value("attributes"))
    config = dataclasses.replace(SubscriptionGroupConfig(line.required("g")), **values)
    if line.has("b"):
        addr = line.required("b")
        await admin.create_and_update_subscription_group_config(addr, config)
        print(f"create subscription group to {addr} success.", file=out)
    elif line.has("c"):
        for addr in await admin.master_addrs_by_cluster(line.required("c")):
            await admin.create_and_update_subscription_group_config(addr, config)
            print(f"create subscription group to {addr} success.", file=out)
    else:
        raise ShowHelp
    print(sub_group_text(config), file=out)


async def delete_sub_group(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    group, clean = line.required("g"), line.bool_value("r", False)
    if line.has("b"):
        addr = line.required("b")
        await admin.delete_subscription_group(addr, group, clean)
        print(f"delete subscription group [{group}] from broker [{addr}] success.", file=out)
        return
    if not line.has("c"):
        raise ShowHelp
    cluster = line.required("c")
    for addr in await admin.master_addrs_by_cluster(cluster):
        await admin.delete_subscription_group(addr, group, clean)
        print(f"delete subscription group [{group}] from broker [{addr}] in cluster [{cluster}] success.", file=out)
    for topic in (RETRY_GROUP_TOPIC_PREFIX + group, DLQ_GROUP_TOPIC_PREFIX + group):
        try:
            await admin.delete_topic(topic, cluster)
        except RmqError as err:
            log.warning("delete topic %s: %s", topic, err)


async def consumer_connection(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    cc = await admin.examine_consumer_connection_info(line.required("g"), line.value("b"))
    print(f"{'#ClientId':<36} {'#ClientAddr':<22} {'#Language':<10} #Version", file=out)
    for conn in cc.connection_set:
        print(f"{conn.client_id:<36} {conn.client_addr:<22} {conn.language:<10} {version_desc(conn.version)}",
              file=out)
    print("\nBelow is subscription:", file=out)
    print(f"{'#Topic':<20} #SubExpression", file=out)
    for sub in cc.subscription_table.values():
        print(f"{sub.topic:<20} {sub.sub_string}", file=out)
    print(file=out)
    print(f"ConsumeType: {js(cc.consume_type)}", file=out)
    print(f"MessageModel: {js(cc.message_model)}", file=out)
    print(f"ConsumeFromWhere: {js(cc.consume_from_where)}", file=out)


async def producer_connection(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    connections = await admin.examine_producer_connection_info(line.required("g"), line.required("t"))
    for i, conn in enumerate(connections, 1):
        print(f"{i:04d}  {conn.client_id:<32} {conn.client_addr:<22} {conn.language:<8} {version_desc(conn.version)}",
              file=out)


async def _allocation(admin: MQAdminExt, group: str) -> dict[MessageQueue, str]:
    """Which client IP holds each queue (consumerProgress -s true), from each client's running info."""
    result: dict[MessageQueue, str] = {}
    try:
        for conn in (await admin.examine_consumer_connection_info(group)).connection_set:
            info = await admin.get_consumer_running_info(group, conn.client_id)
            for key in info.get("mqTable") or {}:
                result[mq_key(key)] = conn.client_id.split("@")[0]
    except (RmqError, ValueError) as err:
        log.debug("queue allocation of group %s: %s", group, err)
    return result


async def consumer_progress(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    if not line.has("g"):
        await _all_groups_progress(admin, out)
        return
    group, topic = line.required("g"), line.value("t")
    stats = await admin.examine_consume_stats(group, topic, line.value("c") if topic else None)
    show_ip = (line.value("s") or "").lower() == "true"
    owners = await _allocation(admin, group) if show_ip else {}
    ip_head = f"{'#Client IP':<20} " if show_ip else ""
    print(f"{'#Topic':<64}  {'#Broker Name':<32}  {'#QID':<4}  {'#Broker Offset':<20}  {'#Consumer Offset':<20}  "
          f"{ip_head}{'#Diff':<20} {'#Inflight':<20}#LastTime", file=out)
    diff_total = inflight_total = 0
    for mq in sorted(stats.offset_table):
        w = stats.offset_table[mq]
        diff_total, inflight_total = diff_total + w.diff, inflight_total + w.inflight
        last = format_date(w.last_timestamp) if w.last_timestamp else "N/A"
        ip = f"{owners.get(mq, 'N/A'):<20} " if show_ip else ""
        print(f"{front(mq.topic, 64):<64}  {front(mq.broker_name, 32):<32}  {mq.queue_id:<4d}  {w.broker_offset:<20d}  "
              f"{w.consumer_offset:<20d}  {ip}{w.diff:<20d} {w.inflight:<20d} {last}", file=out)
    print(file=out)
    print(f"Consume TPS: {stats.consume_tps:.2f}", file=out)
    print(f"Consume Diff Total: {diff_total}", file=out)
    print(f"Consume Inflight Total: {inflight_total}", file=out)


@dataclass(frozen=True, slots=True)
class GroupConsumeInfo:
    """One row of consumerProgress without -g (Java's GroupConsumeInfo): the group's clients as a broker sees them
    (None when none is online) and its offsets (None when the broker has none to show)."""

    group: str
    connection: ConsumerConnection | None
    stats: ConsumeStats | None

    @property
    def count(self) -> int:
        return len(self.connection.connection_set) if self.connection else 0

    @property
    def version(self) -> str:
        return version_desc(self.connection.compute_min_version()) if self.count else "OFFLINE"

    @property
    def consume_type(self) -> str:
        """PULL or PUSH, blank when offline."""
        if not self.count:
            return ""
        return "PULL" if self.connection.consume_type == "CONSUME_ACTIVELY" else "PUSH"

    @property
    def message_model(self) -> str:
        """CLUSTERING or BROADCASTING of a push group; blank for a pull group (the tool shows none)."""
        passive = self.count and self.connection.consume_type == "CONSUME_PASSIVELY"
        return js(self.connection.message_model) if passive else ""

    @property
    def tps(self) -> int:
        return int(self.stats.consume_tps) if self.stats else 0

    @property
    def diff(self) -> int:
        return self.stats.compute_total_diff() if self.stats else 0


async def consumer_groups(admin: MQAdminExt) -> list[str]:
    """The groups consumerProgress lists: one per retry topic on the NameServer, in its order."""
    return [parse_group(topic) for topic in await admin.fetch_all_topic_list()
            if topic.startswith(RETRY_GROUP_TOPIC_PREFIX)]


async def group_consume_info(admin: MQAdminExt, group: str) -> GroupConsumeInfo:
    """The group's offsets and clients; what cannot be read (offline, no offsets yet) is left out, as the tool does."""
    stats = connection = None
    try:
        stats = await admin.examine_consume_stats(group)
    except RmqError as err:
        log.debug("consume stats of %s: %s", group, err)
    try:
        connection = await admin.examine_consumer_connection_info(group)
    except RmqError as err:
        log.debug("connections of %s: %s", group, err)
    return GroupConsumeInfo(group, connection, stats)


async def _all_groups_progress(admin: MQAdminExt, out: TextIO) -> None:
    """Every group with a retry topic: clients, version, type, model, TPS and total lag (GroupConsumeInfo)."""
    print(f"{'#Group':<64}  {'#Count':<6}  {'#Version':<24} {'#Type':<5}  {'#Model':<14}  {'#TPS':<7}  #Diff Total",
          file=out)
    for group in await consumer_groups(admin):
        info = await group_consume_info(admin, group)
        print(f"{front(group, 64):<64}  {info.count:<6d}  {info.version:<24} {info.consume_type:<5}  "
              f"{info.message_model:<14}  {info.tps:<7d}  {info.diff}", file=out)


def mq_hash(mq: MessageQueue) -> int:
    """MessageQueue.hashCode (brokerName, queueId, topic), as an unsigned 32-bit value."""
    h = 1
    for part in (java_hash(mq.broker_name), mq.queue_id, java_hash(mq.topic)):
        h = (31 * h + part) & 0xFFFFFFFF
    return h


def put_all_order(queues: Iterable[MessageQueue]) -> list[MessageQueue]:
    """The iteration order of ``new HashMap<>()`` after ``putAll`` of a map holding ``queues``: putAll sizes the
    table for them (tableSizeFor(n / 0.75 + 1)), and entries go bin by bin (hash ^ hash >>> 16)."""
    keys = list(queues)
    capacity = table_size_for(int(len(keys) / 0.75 + 1)) if keys else 16
    ranked = sorted(range(len(keys)), key=lambda i: ((mq_hash(keys[i]) ^ (mq_hash(keys[i]) >> 16)) & (capacity - 1),
                                                      i))
    return [keys[i] for i in ranked]


def parse_timestamp(text: str, *, allow_now: bool = True) -> int:
    """"now" (unless ``allow_now`` is off: ConsumeMessageCommand has no such word), epoch milliseconds, or local
    "yyyy-MM-dd#HH:mm:ss:SSS" (ResetOffsetByTimeCommand, ConsumeMessageCommand.timestampFormat)."""
    if allow_now and text == "now":
        return time.time_ns() // 1_000_000
    try:
        return int(text)
    except ValueError:
        pass
    try:
        parsed = datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f")
    except ValueError:
        forms = "now, milliseconds" if allow_now else "milliseconds"
        raise UsageError(f"timestamp {text!r} is not {forms} or yyyy-MM-dd#HH:mm:ss:SSS") from None
    return int(time.mktime(parsed.timetuple())) * 1000 + parsed.microsecond // 1000


@dataclass(frozen=True, slots=True)
class OffsetReset:
    """What resetOffsetByTime did: the brokers' new offsets (``offsets``: the brokers worked them out, committed them
    or had the group's online clients apply them), or, for a group no broker could reset, the tool's own commits
    queue by queue (``rollbacks``: ResetOffsetByTimeOldCommand)."""

    offsets: dict[MessageQueue, int] | None = None
    rollbacks: list[RollbackStats] | None = None


async def reset_offsets_by_time(admin: MQAdminExt, group: str, topic: str, timestamp: int, force: bool,
                                cluster: str | None = None) -> OffsetReset:
    """The group's offsets of ``topic`` moved to the first message stored at ``timestamp`` (epoch ms)."""
    try:
        return OffsetReset(offsets=await admin.reset_offset_by_timestamp(topic, group, timestamp, force,
                                                                         cluster=cluster))
    except MQClientError as err:
        if err.code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
    return OffsetReset(rollbacks=await admin.reset_offset_by_timestamp_old(group, topic, timestamp, force,
                                                                           cluster=cluster))


async def reset_offset_by_time(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    group, topic, stamp = line.required("g"), line.required("t"), line.required("s")
    timestamp, force = parse_timestamp(stamp), line.bool_value("f", True)
    broker_addr, queue_id = line.value("b"), line.int_value("q", -1)
    if broker_addr is not None and queue_id >= 0:
        print(f"start reset consumer offset by specified, group[{group}], topic[{topic}], queueId[{queue_id}], "
              f"broker[{broker_addr}], timestamp(string)[{stamp}], timestamp(long)[{timestamp}]", file=out)
        offset = (line.int_value("o", 0) if line.has("o")
                  else await admin.search_offset(broker_addr, MessageQueue(topic, "", queue_id), timestamp))
        print(f"reset consumer offset to {offset}", file=out)
        if offset > 0:
            await admin.reset_offset_by_queue_id(broker_addr, group, topic, queue_id, offset)
        return
    reset = await reset_offsets_by_time(admin, group, topic, timestamp, force, line.value("c"))
    if reset.rollbacks is not None:
        _print_rollbacks(reset.rollbacks, group, topic, timestamp, force, stamp, out)
        return
    table = reset.offsets or {}
    print(f"start reset consumer offset by specified, group[{group}], topic[{topic}], force[{js(force)}], "
          f"timestamp(string)[{stamp}], timestamp(long)[{timestamp}]", file=out)
    print(f"{'#brokerName':<40}  {'#queueId':<40}  {'#offset':<40}", file=out)
    for mq in put_all_order(table):
        print(f"{front(mq.broker_name, 32):<40}  {mq.queue_id:<40d}  {table[mq]:<40d}", file=out)


def _print_rollbacks(stats: list[RollbackStats], group: str, topic: str, timestamp: int, force: bool, stamp: str,
                     out: TextIO) -> None:
    """ResetOffsetByTimeOldCommand's table: the group was offline, so the tool committed the offsets itself."""
    print(f"reset consumer offset by specified consumerGroup[{group}], topic[{topic}], force[{js(force)}], "
          f"timestamp(string)[{stamp}], timestamp(long)[{timestamp}]", file=out)
    print(f"{'#brokerName':<20}  {'#queueId':<20}  {'#brokerOffset':<20}  {'#consumerOffset':<20}  "
          f"{'#timestampOffset':<20}  {'#resetOffset':<20}", file=out)
    for s in stats:
        print(f"{front(s.broker_name, 32):<20}  {s.queue_id:<20d}  {s.broker_offset:<20d}  {s.consumer_offset:<20d}  "
              f"{s.timestamp_offset:<20d}  {s.rollback_offset:<20d}", file=out)
