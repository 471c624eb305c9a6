"""What each ``mqadmin`` command does and prints: tools/command/**/*SubCommand.java's ``execute``, on MQAdminExt.

Rule 1: the output formats live here, each written as its Java printf format (``%-32s`` is ``:<32``), so a row of
ours lines up with a row of Apache's tool. Java's ``String.valueOf`` shows through where Java prints a null
("null") or a boolean ("true"), and maps print as Java's HashMap does ("{0=127.0.0.1:10911}", in HashMap order).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, TextIO

from broker.client.message import MessageQueue
from broker.common.attributes import parse_attributes
from broker.common.errors import MQClientError, RmqError
from broker.common.fastjson import encode_json_pretty
from broker.common.hash_order import hash_map_order, table_size_for
from broker.common.message import java_hash
from broker.common.topic import PERM_READ, PERM_WRITE, TopicConfig, perm_to_string
from broker.common.validation import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, parse_group
from broker.remoting.admin_bodies import TopicStatsTable, mq_key
from broker.remoting.codes import ResponseCode
from broker.remoting.subscription import SubscriptionGroupConfig
from broker.tools.admin import MQAdminExt
from broker.tools.results import version_desc

log = logging.getLogger(__name__)

FLAG_UNIT, FLAG_UNIT_SUB = 0x1, 0x2  # TopicSysFlag


class UsageError(RmqError):
    """A command line the command cannot run; the message is commons-cli's (or says which option is wrong)."""


class ShowHelp(Exception):  # noqa: N818 - a signal, not an error
    """The options given select nothing to do (updateSubGroup without -b or -c): print the command's help."""


class CommandLine:
    """The parsed options of one command (commons-cli's CommandLine): ``has("t")``, ``value("t")`` (trimmed)."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    def has(self, key: str) -> bool:
        return self._values.get(key) not in (None, False)

    def value(self, key: str, default: str | None = None) -> str | None:
        raw = self._values.get(key)
        return raw.strip() if isinstance(raw, str) else default

    def required(self, key: str) -> str:
        raw = self.value(key)
        if raw is None:
            raise UsageError(f"Missing required option: {key}")
        return raw

    def int_value(self, key: str, default: int) -> int:
        raw = self.value(key)
        if raw is None:
            return default
        try:
            return int(raw)
        except ValueError:
            raise UsageError(f"option {key}: {raw!r} is not a number") from None

    def bool_value(self, key: str, default: bool) -> bool:
        """Boolean.parseBoolean: "true" in any case is true, anything else false."""
        raw = self.value(key)
        return default if raw is None else raw.lower() == "true"


# -- Java's text forms -------------------------------------------------------------------------------------------------


def js(value: object) -> str:
    """String.valueOf."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def java_map(mapping: Mapping[Any, Any], capacity: int = 16) -> str:
    """HashMap.toString, entries in HashMap order."""
    return "{" + ", ".join(f"{k}={js(mapping[k])}" for k in hash_map_order(list(mapping), capacity)) + "}"


def human_time2(ms: int) -> str:
    """UtilAll.timeMillisToHumanString2: local time with milliseconds after a comma."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f",{ms % 1000:03d}"


def format_date(ms: int) -> str:
    """UtilAll.formatDate(date, "yyyy-MM-dd HH:mm:ss")."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def front(text: str | None, size: int) -> str:
    """UtilAll.frontStringAtLeast: at most ``size`` characters."""
    return js(text)[:size]


def topic_config_text(config: TopicConfig) -> str:
    """TopicConfig.toString."""
    return (f"TopicConfig [topicName={config.topic_name}, readQueueNums={config.read_queue_nums}, "
            f"writeQueueNums={config.write_queue_nums}, perm={perm_to_string(config.perm)}, "
            f"topicFilterType={config.topic_filter_type}, topicSysFlag={config.topic_sys_flag}, "
            f"order={js(config.order)}, attributes={java_map(config.attributes)}]")


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


# -- topics ------------------------------------------------------------------------------------------------------------


async def update_topic(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    """UpdateTopicSubCommand: create or update the topic on one broker (-b) or every master of a cluster (-c)."""
    order = line.bool_value("o", False)
    sys_flag = (FLAG_UNIT if line.bool_value("u", False) else 0) | (FLAG_UNIT_SUB if line.bool_value("s", False)
                                                                      else 0)
    config = TopicConfig(topic_name=line.required("t"), read_queue_nums=line.int_value("r", 8),
                         write_queue_nums=line.int_value("w", 8), perm=line.int_value("p", PERM_READ | PERM_WRITE),
                         topic_sys_flag=sys_flag, order=order, attributes=parse_attributes(line.value("a")))
    if line.has("b"):
        addr = line.required("b")
        await admin.create_and_update_topic_config(addr, config)
        if order:
            order_conf = f"{await admin.broker_name_by_addr(addr)}:{config.write_queue_nums}"
            await admin.create_or_update_order_conf(config.topic_name, order_conf, False)
            print(f"set broker orderConf. isOrder={js(order)}, orderConf=[{order_conf}]", file=out)
        print(f"create topic to {addr} success.", file=out)
        print(topic_config_text(config), file=out)
        return
    cluster = line.required("c")
    for addr in await admin.master_addrs_by_cluster(cluster):
        await admin.create_and_update_topic_config(addr, config)
        print(f"create topic to {addr} success.", file=out)
    if order:
        names = await admin.broker_names_by_cluster(cluster)
        order_conf = ";".join(f"{name}:{config.write_queue_nums}" for name in names)
        await admin.create_or_update_order_conf(config.topic_name, order_conf, True)
        print(f"set cluster orderConf. isOrder={js(order)}, orderConf=[{order_conf}]", file=out)
    print(topic_config_text(config), file=out)


async def delete_topic(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    topic, cluster = line.required("t"), line.required("c")
    await admin.delete_topic_in_broker(await admin.master_addrs_by_cluster(cluster), topic)
    print(f"delete topic [{topic}] from cluster [{cluster}] success.", file=out)
    await admin.delete_topic_in_name_server(dict.fromkeys(admin.namesrv_list()), topic, cluster)
    print(f"delete topic [{topic}] from NameServer success.", file=out)


async def topic_list(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    topics = await admin.fetch_all_topic_list()
    if not line.has("c"):
        for topic in topics:
            print(topic, file=out)
        return
    info = await admin.examine_broker_cluster_info()
    print(f"{'#Cluster Name':<20}  {'#Topic':<48}  {'#Consumer Group':<48}", file=out)
    for topic in topics:
        if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
            continue
        cluster, groups = "", []
        try:
            route = await admin.examine_topic_route_info(topic)
            name = route.broker_datas[0].broker_name
            cluster = next((c for c, names in info.cluster_addr_table.items() if name in names), None)
            groups = await admin.query_topic_consume_by_who(topic)
        except (RmqError, IndexError) as err:
            log.debug("topic %s: %s", topic, err)
        for group in groups or [""]:
            print(f"{front(cluster, 20):<20}  {front(topic, 64):<64}  {front(group, 64):<64}", file=out)


def _route_json(route: Any) -> dict[str, Any]:
    """TopicRouteData as fastjson writes its bean: properties in alphabetical order, Long map keys bare."""
    brokers = [{"brokerAddrs": {k: b.broker_addrs[k] for k in hash_map_order(list(b.broker_addrs))},
                "brokerName": b.broker_name, "cluster": b.cluster, "enableActingMaster": b.enable_acting_master,
                "zoneName": b.zone_name} for b in route.broker_datas]
    queues = [{"brokerName": q.broker_name, "perm": q.perm, "readQueueNums": q.read_queue_nums,
               "topicSysFlag": q.topic_sys_flag, "writeQueueNums": q.write_queue_nums} for q in route.queue_datas]
    return {"brokerDatas": brokers, "filterServerTable": dict(route.filter_server_table),
            "orderTopicConf": route.order_topic_conf, "queueDatas": queues}


ROUTE_FORMAT = "{:<45} {:<32} {:<50} {:<10} {:<11} {:<5}"


async def topic_route(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    route = await admin.examine_topic_route_info(line.required("t"))
    if not line.has("l"):
        print(encode_json_pretty(_route_json(route)), file=out)
        return
    queues = {q.broker_name: q for q in route.queue_datas}
    print(ROUTE_FORMAT.format("#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm"),
          file=out)
    total_read = total_write = 0
    for broker in sorted(route.broker_datas, key=lambda b: b.broker_name):
        queue = queues.get(broker.broker_name)
        read, write, perm = (queue.read_queue_nums, queue.write_queue_nums, queue.perm) if queue else (0, 0, 0)
        total_read, total_write = total_read + read, total_write + write
        print(ROUTE_FORMAT.format(js(broker.cluster), broker.broker_name, java_map(broker.broker_addrs), read, write,
                                  perm), file=out)
    print("-" * 158, file=out)
    print(ROUTE_FORMAT.format("Total:", len(queues), "", total_read, total_write, ""), file=out)


async def topic_status(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    topic = line.required("t")
    if line.has("c"):
        stats = TopicStatsTable()
        for broker in (await admin.examine_topic_route_info(line.required("c"))).broker_datas:
            addr = broker.select_broker_addr()
            if addr is not None:
                stats.offset_table.update((await admin.examine_topic_stats(topic, addr)).offset_table)
    else:
        stats = await admin.examine_topic_stats(topic)
    print(f"{'#Broker Name':<32}  {'#QID':<4}  {'#Min Offset':<20}  {'#Max Offset':<20}    #Last Updated", file=out)
    for mq in sorted(stats.offset_table):
        offset = stats.offset_table[mq]
        last = human_time2(offset.last_update_timestamp) if offset.last_update_timestamp > 0 else ""
        print(f"{front(mq.broker_name, 32):<32}  {mq.queue_id:<4d}  {offset.min_offset:<20d}  "
              f"{offset.max_offset:<20d}    {last}", file=out)
    print(file=out)
    print(f"Topic Put TPS: {0.0!r}", file=out)  # Java's merged table never carries the brokers' TPS


async def topic_cluster_list(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    for cluster in await admin.topic_cluster_list(line.required("t")):
        print(cluster, file=out)


# -- brokers and clusters ----------------------------------------------------------------------------------------------


async def broker_status(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    if line.has("b"):
        table = await admin.fetch_broker_runtime_stats(line.required("b"))
        for key in sorted(table):
            print(f"{key:<32}: {table[key]}", file=out)
        return
    for addr in await admin.master_and_slave_addrs_by_cluster(line.required("c")):
        try:
            table = await admin.fetch_broker_runtime_stats(addr)
        except (RmqError, OSError) as err:
            log.warning("broker %s: %s", addr, err)
            continue
        for key in sorted(table):
            print(f"{addr:<24} {key:<32}: {table[key]}", file=out)


async def delete_expired_commit_log(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    """"success" or "false", without a newline, as Java's printf leaves it."""
    if line.has("b"):
        result = await admin.delete_expired_commit_log_by_addr(line.required("b"))
    else:
        result = await admin.delete_expired_commit_log(line.value("c"))
    out.write("success" if result else "false")


async def cluster_list(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    interval_s = line.int_value("i", 0) if line.has("i") else None
    while True:
        info = await admin.examine_broker_cluster_info()
        cluster = line.value("c")
        clusters = [cluster] if cluster else list(hash_map_order(list(info.cluster_addr_table)))
        if line.has("m"):
            await _cluster_more_stats(admin, info, clusters, out)
        else:
            await _cluster_base_info(admin, info, clusters, out)
        if interval_s is None:
            return
        out.flush()
        await asyncio.sleep(interval_s)


def _cluster_brokers(info: Any, clusters: list[str]) -> Iterable[tuple[str, str, int, str]]:
    """(cluster, broker name, broker id, address), broker names sorted, ids in HashMap order."""
    for cluster in clusters:
        for name in sorted(info.cluster_addr_table.get(cluster) or ()):
            broker = info.broker_addr_table.get(name)
            if broker is not None:
                for broker_id in hash_map_order(list(broker.broker_addrs)):
                    yield cluster, name, broker_id, broker.broker_addrs[broker_id]


async def _runtime(admin: MQAdminExt, addr: str) -> dict[str, str] | None:
    try:
        return await admin.fetch_broker_runtime_stats(addr)
    except (RmqError, OSError) as err:
        log.warning("runtime stats of broker %s: %s", addr, err)
        return None


async def _cluster_more_stats(admin: MQAdminExt, info: Any, clusters: list[str], out: TextIO) -> None:
    print(f"{'#Cluster Name':<16}  {'#Broker Name':<32} {'#InTotalYest':>14} {'#OutTotalYest':>14} "
          f"{'#InTotalToday':>14} {'#OutTotalToday':>14}", file=out)
    for cluster, name, _, addr in _cluster_brokers(info, clusters):
        totals = [0, 0, 0, 0]
        table = await _runtime(admin, addr)
        try:
            if table is not None:
                put = [int(table[f"msgPutTotal{k}"]) for k in ("YesterdayMorning", "TodayMorning", "TodayNow")]
                get = [int(table[f"msgGetTotal{k}"]) for k in ("YesterdayMorning", "TodayMorning", "TodayNow")]
                totals = [put[1] - put[0], get[1] - get[0], put[2] - put[1], get[2] - get[1]]
        except (KeyError, ValueError):
            pass
        print(f"{cluster:<16}  {name:<32} {totals[0]:>14d} {totals[1]:>14d} {totals[2]:>14d} {totals[3]:>14d}",
              file=out)


def _first_double(text: str | None) -> float:
    return float(text.split(" ")[0]) if text and text.strip() else 0.0


async def _cluster_base_info(admin: MQAdminExt, info: Any, clusters: list[str], out: TextIO) -> None:
    row = "{:<22}  {:<22}  {:<4}  {:<22} {:<16}  {:>16}  {:>30}  {:<22}  {:>11}  {:<12}  {:<8}  {:>10}"
    header = row.replace("{:>11}", "{:<11}").replace("{:>10}", "{:<10}")
    print(header.format("#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)",
                        "#OutTPS(LOAD)", "#Timer(Progress)", "#PCWait(ms)", "#Hour", "#SPACE", "#ACTIVATED"), file=out)
    for cluster, name, broker_id, addr in _cluster_brokers(info, clusters):
        t: dict[str, str | None] = dict(await _runtime(admin, addr) or {})
        got = bool(t)
        timer = [0, 0, 0, 0.0, 0.0]
        try:
            timer = [int(t["timerReadBehind"] or 0), int(t["timerOffsetBehind"] or 0),
                     int(t["timerCongestNum"] or 0), float(t["timerEnqueueTps"] or 0), float(t["timerDequeueTps"] or 0)]
        except (KeyError, ValueError):
            pass
        earliest, ratio = t.get("earliestMessageTimeStamp"), t.get("commitLogDiskRatio")
        hour = (time.time_ns() // 1_000_000 - int(earliest)) / 3_600_000 if earliest else 0.0
        in_tps = (f"{_first_double(t.get('putTps')):9.2f}({js(t.get('sendThreadPoolQueueSize'))},"
                  f"{js(t.get('sendThreadPoolQueueHeadWaitTimeMills'))}ms)")
        out_tps = (f"{_first_double(t.get('getTransferredTps')):9.2f}({js(t.get('pullThreadPoolQueueSize'))},"
                   f"{js(t.get('pullThreadPoolQueueHeadWaitTimeMills'))}ms|{t.get('ackThreadPoolQueueSize', 'N')},"
                   f"{t.get('ackThreadPoolQueueHeadWaitTimeMills', 'N')}ms)")
        timer_text = f"{timer[0]}-{timer[1]}({timer[2] / 10000:.1f}w, {timer[3]:.1f}, {timer[4]:.1f})"
        print(row.format(cluster, name, broker_id, addr, js(t.get("brokerVersionDesc", "") if got else ""), in_tps,
                         out_tps, timer_text, js(t.get("pageCacheLockTimeMills", "") if got else ""),
                         f"{hour:2.2f}", f"{float(ratio) if ratio else 0.0:.4f}",
                         js((t.get("brokerActive") or "").lower() == "true")), file=out)


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
        diff, inflight = w.broker_offset - w.consumer_offset, w.pull_offset - w.consumer_offset
        diff_total, inflight_total = diff_total + diff, inflight_total + inflight
        last = format_date(w.last_timestamp) if w.last_timestamp else "N/A"
        ip = f"{owners.get(mq, 'N/A'):<20} " if show_ip else ""
        print(f"{front(mq.topic, 64):<64}  {front(mq.broker_name, 32):<32}  {mq.queue_id:<4d}  {w.broker_offset:<20d}  "
              f"{w.consumer_offset:<20d}  {ip}{diff:<20d} {inflight:<20d} {last}", file=out)
    print(file=out)
    print(f"Consume TPS: {stats.consume_tps:.2f}", file=out)
    print(f"Consume Diff Total: {diff_total}", file=out)
    print(f"Consume Inflight Total: {inflight_total}", file=out)


async def _all_groups_progress(admin: MQAdminExt, out: TextIO) -> None:
    """Every group with a retry topic: clients, version, type, model, TPS and total lag (GroupConsumeInfo)."""
    print(f"{'#Group':<64}  {'#Count':<6}  {'#Version':<24} {'#Type':<5}  {'#Model':<14}  {'#TPS':<7}  #Diff Total",
          file=out)
    for topic in await admin.fetch_all_topic_list():
        if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            continue
        group = parse_group(topic)
        tps = diff = count = 0
        version, consume_type, model = "OFFLINE", "", ""
        try:
            stats = await admin.examine_consume_stats(group)
            tps, diff = int(stats.consume_tps), stats.compute_total_diff()
        except RmqError as err:
            log.debug("consume stats of %s: %s", group, err)
        try:
            cc = await admin.examine_consumer_connection_info(group)
        except RmqError as err:
            log.debug("connections of %s: %s", group, err)
        else:
            count = len(cc.connection_set)
            if count:
                version = version_desc(cc.compute_min_version())
                consume_type = "PULL" if cc.consume_type == "CONSUME_ACTIVELY" else "PUSH"
                model = js(cc.message_model) if cc.consume_type == "CONSUME_PASSIVELY" else ""
        print(f"{front(group, 64):<64}  {count:<6d}  {version:<24} {consume_type:<5}  {model:<14}  {tps:<7d}  {diff}",
              file=out)


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


def parse_timestamp(text: str) -> int:
    """"now", epoch milliseconds, or local "yyyy-MM-dd#HH:mm:ss:SSS" (ResetOffsetByTimeCommand)."""
    if text == "now":
        return time.time_ns() // 1_000_000
    try:
        return int(text)
    except ValueError:
        pass
    try:
        parsed = datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f")
    except ValueError:
        raise UsageError(f"timestamp {text!r} is not now, milliseconds or yyyy-MM-dd#HH:mm:ss:SSS") from None
    return int(time.mktime(parsed.timetuple())) * 1000 + parsed.microsecond // 1000


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
    try:
        table = await admin.reset_offset_by_timestamp(topic, group, timestamp, force, cluster=line.value("c"))
    except MQClientError as err:
        if err.code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
        await _reset_offset_old(admin, group, topic, timestamp, force, stamp, line.value("c"), out)
        return
    print(f"start reset consumer offset by specified, group[{group}], topic[{topic}], force[{js(force)}], "
          f"timestamp(string)[{stamp}], timestamp(long)[{timestamp}]", file=out)
    print(f"{'#brokerName':<40}  {'#queueId':<40}  {'#offset':<40}", file=out)
    for mq in put_all_order(table):
        print(f"{front(mq.broker_name, 32):<40}  {mq.queue_id:<40d}  {table[mq]:<40d}", file=out)


async def _reset_offset_old(admin: MQAdminExt, group: str, topic: str, timestamp: int, force: bool, stamp: str,
                            cluster: str | None, out: TextIO) -> None:
    """ResetOffsetByTimeOldCommand: the group is offline, so the tool commits the offsets itself."""
    stats = await admin.reset_offset_by_timestamp_old(group, topic, timestamp, force, cluster=cluster)
    print(f"reset consumer offset by specified consumerGroup[{group}], topic[{topic}], force[{js(force)}], "
          f"timestamp(string)[{stamp}], timestamp(long)[{timestamp}]", file=out)
    print(f"{'#brokerName':<20}  {'#queueId':<20}  {'#brokerOffset':<20}  {'#consumerOffset':<20}  "
          f"{'#timestampOffset':<20}  {'#resetOffset':<20}", file=out)
    for s in stats:
        print(f"{front(s.broker_name, 32):<20}  {s.queue_id:<20d}  {s.broker_offset:<20d}  {s.consumer_offset:<20d}  "
              f"{s.timestamp_offset:<20d}  {s.rollback_offset:<20d}", file=out)
