"""The stats command of ``mqadmin`` (tools/command/stats/StatsAllSubCommand, on MQAdminExt): statsAll, each topic's
put rate and messages of the last 24 hours and, per consumer group, its backlog, get rate and messages, from the
masters' stats items (VIEW_BROKER_STATS_DATA: TOPIC_PUT_NUMS of the topic, GROUP_GET_NUMS of "topic@group").

Rule 1: as in the other command modules, the output is written here as Java's printf formats (``%11.2f`` is Java's
half-up ``java_fixed`` right-aligned in 11).
"""

from __future__ import annotations

import logging
from typing import TextIO

from broker.client.route import MASTER_ID
from broker.common.errors import RmqError
from broker.common.hash_order import hash_map_order
from broker.common.validation import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX
from broker.remoting.admin_bodies import BrokerStatsData
from broker.tools.admin import MQAdminExt
from broker.tools.cli import CommandLine, SubCommand, front, java_fixed, opt

log = logging.getLogger(__name__)

TOPIC_PUT_NUMS, GROUP_GET_NUMS = "TOPIC_PUT_NUMS", "GROUP_GET_NUMS"  # BrokerStatsManager.Stats


def compute_24_hour_sum(data: BrokerStatsData) -> int:
    """StatsAllSubCommand.compute24HourSum: the day's sum, else the hour's, else the minute's."""
    for item in (data.stats_day, data.stats_hour, data.stats_minute):
        if item.sum != 0:
            return item.sum
    return 0


async def _rate_and_sum(admin: MQAdminExt, masters: list[str], stats_name: str, stats_key: str) -> tuple[float, int]:
    """The minute's TPS and the 24-hour sum over the masters; a master without the item adds nothing (Java ignores
    the error)."""
    tps, total = 0.0, 0
    for addr in masters:
        try:
            data = await admin.view_broker_stats_data(addr, stats_name, stats_key)
        except (RmqError, OSError) as err:
            log.debug("%s %s on %s: %s", stats_name, stats_key, addr, err)
            continue
        tps += data.stats_minute.tps
        total += compute_24_hour_sum(data)
    return tps, total


def _row(topic: str, group: str, accumulation: int, in_tps: str, out_tps: str, in_msgs: int, out_msgs: str) -> str:
    return (f"{front(topic, 64):<64}  {front(group, 64):<64} {accumulation:>12d} {in_tps:>11} {out_tps:>11} "
            f"{in_msgs:>14d} {out_msgs:>14}\n")


async def print_topic_detail(admin: MQAdminExt, topic: str, active_only: bool, out: TextIO) -> None:
    """printTopicDetail: one line per consumer group of the topic, or one NO_CONSUMER line."""
    route = await admin.examine_topic_route_info(topic)
    groups = hash_map_order(await admin.query_topic_consume_by_who(topic))  # GroupList: a HashSet
    masters = [a for a in (b.broker_addrs.get(MASTER_ID) for b in route.broker_datas) if a is not None]
    in_tps, in_msgs = await _rate_and_sum(admin, masters, TOPIC_PUT_NUMS, topic)
    if not groups:
        if not active_only or in_msgs > 0:
            out.write(_row(topic, "", 0, java_fixed(in_tps), "", in_msgs, "NO_CONSUMER"))
        return
    for group in groups:
        out_tps, out_msgs = await _rate_and_sum(admin, masters, GROUP_GET_NUMS, f"{topic}@{group}")
        accumulation = 0
        try:
            accumulation = max(0, (await admin.examine_consume_stats(group, topic)).compute_total_diff())
        except (RmqError, OSError) as err:
            log.debug("consume stats of %s on %s: %s", group, topic, err)
        if not active_only or in_msgs > 0 or out_msgs > 0:
            out.write(_row(topic, group, accumulation, java_fixed(in_tps), java_fixed(out_tps), in_msgs,
                           str(out_msgs)))


async def stats_all(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    """Every topic of the NameServer but retry and DLQ topics (``-t``: that one only; ``-a``: only topics that took
    or gave messages in the last 24 hours). A topic that cannot be read is skipped, as Java does."""
    topics = await admin.fetch_all_topic_list()
    out.write(f"{'#Topic':<64}  {'#Consumer Group':<64} {'#Accumulation':>12} {'#InTPS':>11} {'#OutTPS':>11} "
              f"{'#InMsg24Hour':>14} {'#OutMsg24Hour':>14}\n")
    active_only, selected = line.has("a"), line.value("t")
    for topic in topics:
        if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)) or (selected and topic != selected):
            continue
        try:
            await print_topic_detail(admin, topic, active_only, out)
        except (RmqError, OSError) as err:
            log.debug("statsAll: topic %s: %s", topic, err)


SUB_COMMANDS: tuple[SubCommand, ...] = (
    SubCommand("statsAll", "Topic and Consumer tps stats.", (
        opt("a", "activeTopic", "print active topic only", arg=False),
        opt("t", "topic", "print select topic only"),
    ), stats_all),
)
