"""The topic, broker and cluster commands of ``mqadmin`` (tools/command/topic, broker and cluster
*SubCommand.java's ``execute``, on MQAdminExt): updateTopic, deleteTopic, topicList, topicRoute, topicStatus,
topicClusterList, brokerStatus, deleteExpiredCommitLog, clusterList.

Rule 1: the output formats live in the command modules (this one, ``commands`` and ``messages``), each written as
its Java printf format (``%-32s`` is ``:<32``), so a row of ours lines up with a row of Apache's tool.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, TextIO

from broker.common.attributes import parse_attributes
from broker.common.errors import RmqError
from broker.common.fastjson import encode_json_pretty
from broker.common.hash_order import hash_map_order
from broker.common.topic import PERM_READ, PERM_WRITE, TopicConfig, perm_to_string
from broker.common.validation import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from broker.remoting.admin_bodies import TopicStatsTable
from broker.remoting.route import TopicRouteData
from broker.tools.admin import MQAdminExt
from broker.tools.cli import CommandLine, front, human_time2, java_map, js

log = logging.getLogger(__name__)

FLAG_UNIT, FLAG_UNIT_SUB = 0x1, 0x2  # TopicSysFlag


def topic_config_text(config: TopicConfig) -> str:
    """TopicConfig.toString."""
    return (f"TopicConfig [topicName={config.topic_name}, readQueueNums={config.read_queue_nums}, "
            f"writeQueueNums={config.write_queue_nums}, perm={perm_to_string(config.perm)}, "
            f"topicFilterType={config.topic_filter_type}, topicSysFlag={config.topic_sys_flag}, "
            f"order={js(config.order)}, attributes={java_map(config.attributes)}]")


# -- topics ------------------------------------------------------------------------------------------------------------


async def update_topic(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    """UpdateTopicSubCommand: create or update the topic on one broker (-b) or every master of a cluster (-c)."""
    order = line.bool_value("o", False)
    sys_flag = (FLAG_UNIT if line.bool_value("u", False) else 0) | (FLAG_UNIT_SUB if line.bool_value("s", False)
                                                                      else 0)
    config = TopicConfig(topic_name=line.required("t"), read_queue_nums=line.int_value("r", 8),
                         write_queue_nums=line.int_value("w", 8), perm=line.int_value("p", PERM_READ | PERM_WRITE),
                         topic_sys_flag=sys_flag, order=order, attributes=parse_attributes(line.value("a")))
    broker_addr = line.value("b")
    addrs, order_conf = await create_or_update_topic(admin, config, broker_addr=broker_addr,
                                                     cluster=None if broker_addr else line.required("c"))
    if broker_addr is not None:
        if order_conf is not None:
            print(f"set broker orderConf. isOrder={js(order)}, orderConf=[{order_conf}]", file=out)
        print(f"create topic to {broker_addr} success.", file=out)
    else:
        for addr in addrs:
            print(f"create topic to {addr} success.", file=out)
        if order_conf is not None:
            print(f"set cluster orderConf. isOrder={js(order)}, orderConf=[{order_conf}]", file=out)
    print(topic_config_text(config), file=out)


async def create_or_update_topic(admin: MQAdminExt, config: TopicConfig, *, broker_addr: str | None = None,
                                 cluster: str | None = None) -> tuple[list[str], str | None]:
    """updateTopic's changes: ``config`` to one broker, else to every master of ``cluster``, and an ordered
    topic's orderConf ("brokerName:writeQueueNums", merged into the NameServers' for one broker, replacing it for a
    cluster). Returns the brokers' addresses and the orderConf written (None for a topic that is not ordered)."""
    if broker_addr is not None:
        addrs = [broker_addr]
        await admin.create_and_update_topic_config(broker_addr, config)
    elif cluster is not None:
        addrs = await admin.master_addrs_by_cluster(cluster)
        for addr in addrs:
            await admin.create_and_update_topic_config(addr, config)
    else:
        raise ValueError("a topic is created on a broker or on a cluster: give one")
    if not config.order:
        return addrs, None
    if broker_addr is not None:
        order_conf = f"{await admin.broker_name_by_addr(broker_addr)}:{config.write_queue_nums}"
    else:
        names = await admin.broker_names_by_cluster(cluster or "")
        order_conf = ";".join(f"{name}:{config.write_queue_nums}" for name in names)
    await admin.create_or_update_order_conf(config.topic_name, order_conf, broker_addr is None)
    return addrs, order_conf


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


def _route_json(route: TopicRouteData) -> dict[str, Any]:
    """TopicRouteData as the tool's fastjson writes the bean it parsed: properties in alphabetical order, Long map
    keys bare, broker addresses in the order of a HashMap filled by parsing, no static-topic mappings."""
    return {"brokerDatas": [b.to_json() for b in route.broker_datas],
            "filterServerTable": dict(route.filter_server_table), "orderTopicConf": route.order_topic_conf,
            "queueDatas": [q.to_json() for q in route.queue_datas]}


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
        brokers = await cluster_brokers(admin, line.value("c"))
        if line.has("m"):
            _print_more_stats(brokers, out)
        else:
            _print_base_info(brokers, out)
        if interval_s is None:
            return
        out.flush()
        await asyncio.sleep(interval_s)


def _first_double(text: str | None) -> float:
    return float(text.split(" ")[0]) if text and text.strip() else 0.0


@dataclass(frozen=True, slots=True)
class BrokerRuntime:
    """One broker of clusterList: where it is, and its runtime table (GET_BROKER_RUNTIME_INFO; empty when the
    broker did not answer). The figures are read from the table as the tool reads them."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    table: dict[str, str]

    @property
    def in_tps(self) -> float:
        """Messages put per second (the first, shortest window of ``putTps``)."""
        return _first_double(self.table.get("putTps"))

    @property
    def out_tps(self) -> float:
        """Messages delivered to consumers per second (``getTransferredTps``)."""
        return _first_double(self.table.get("getTransferredTps"))

    @property
    def disk_ratio(self) -> float:
        """The used fraction of the CommitLog's disk."""
        ratio = self.table.get("commitLogDiskRatio")
        return float(ratio) if ratio else 0.0

    @property
    def active(self) -> bool:
        return (self.table.get("brokerActive") or "").lower() == "true"

    def hours_kept(self, now_ms: int) -> float:
        """How many hours of messages the store holds (since ``earliestMessageTimeStamp``)."""
        earliest = self.table.get("earliestMessageTimeStamp")
        return (now_ms - int(earliest)) / 3_600_000 if earliest else 0.0

    def day_totals(self) -> tuple[int, int, int, int]:
        """Messages in and out yesterday, then today so far (0s when the table lacks the counters)."""
        try:
            put = [int(self.table[f"msgPutTotal{k}"]) for k in ("YesterdayMorning", "TodayMorning", "TodayNow")]
            get = [int(self.table[f"msgGetTotal{k}"]) for k in ("YesterdayMorning", "TodayMorning", "TodayNow")]
        except (KeyError, ValueError):
            return 0, 0, 0, 0
        return put[1] - put[0], get[1] - get[0], put[2] - put[1], get[2] - get[1]


async def cluster_brokers(admin: MQAdminExt, cluster: str | None = None) -> list[BrokerRuntime]:
    """Every broker of ``cluster`` (of every cluster when None, in Java's HashMap order), broker names sorted,
    with its runtime table; a broker that does not answer is logged and listed with an empty table."""
    info = await admin.examine_broker_cluster_info()
    clusters = [cluster] if cluster else list(hash_map_order(list(info.cluster_addr_table)))
    where = list(_cluster_brokers(info, clusters))
    tables = await asyncio.gather(*(_runtime(admin, addr) for *_, addr in where))
    return [BrokerRuntime(c, name, broker_id, addr, table or {})
            for (c, name, broker_id, addr), table in zip(where, tables, strict=True)]


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


def _print_more_stats(brokers: list[BrokerRuntime], out: TextIO) -> None:
    print(f"{'#Cluster Name':<16}  {'#Broker Name':<32} {'#InTotalYest':>14} {'#OutTotalYest':>14} "
          f"{'#InTotalToday':>14} {'#OutTotalToday':>14}", file=out)
    for b in brokers:
        totals = b.day_totals()
        print(f"{b.cluster:<16}  {b.broker_name:<32} {totals[0]:>14d} {totals[1]:>14d} {totals[2]:>14d} "
              f"{totals[3]:>14d}", file=out)


def _print_base_info(brokers: list[BrokerRuntime], out: TextIO) -> None:
    row = "{:<22}  {:<22}  {:<4}  {:<22} {:<16}  {:>16}  {:>30}  {:<22}  {:>11}  {:<12}  {:<8}  {:>10}"
    header = row.replace("{:>11}", "{:<11}").replace("{:>10}", "{:<10}")
    print(header.format("#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)",
                        "#OutTPS(LOAD)", "#Timer(Progress)", "#PCWait(ms)", "#Hour", "#SPACE", "#ACTIVATED"), file=out)
    for b in brokers:
        t: dict[str, str | None] = dict(b.table)
        got = bool(t)
        timer = [0, 0, 0, 0.0, 0.0]
        try:
            timer = [int(t["timerReadBehind"] or 0), int(t["timerOffsetBehind"] or 0),
                     int(t["timerCongestNum"] or 0), float(t["timerEnqueueTps"] or 0), float(t["timerDequeueTps"] or 0)]
        except (KeyError, ValueError):
            pass
        in_tps = (f"{b.in_tps:9.2f}({js(t.get('sendThreadPoolQueueSize'))},"
                  f"{js(t.get('sendThreadPoolQueueHeadWaitTimeMills'))}ms)")
        out_tps = (f"{b.out_tps:9.2f}({js(t.get('pullThreadPoolQueueSize'))},"
                   f"{js(t.get('pullThreadPoolQueueHeadWaitTimeMills'))}ms|{t.get('ackThreadPoolQueueSize', 'N')},"
                   f"{t.get('ackThreadPoolQueueHeadWaitTimeMills', 'N')}ms)")
        timer_text = f"{timer[0]}-{timer[1]}({timer[2] / 10000:.1f}w, {timer[3]:.1f}, {timer[4]:.1f})"
        print(row.format(b.cluster, b.broker_name, b.broker_id, b.addr,
                         js(t.get("brokerVersionDesc", "") if got else ""), in_tps, out_tps, timer_text,
                         js(t.get("pageCacheLockTimeMills", "") if got else ""),
                         f"{b.hours_kept(time.time_ns() // 1_000_000):2.2f}", f"{b.disk_ratio:.4f}", js(b.active)),
              file=out)
