"""The broker config and permission commands of ``mqadmin`` (tools/command/broker/GetBrokerConfigCommand,
UpdateBrokerConfigSubCommand and topic/UpdateTopicPermSubCommand, on MQAdminExt): getBrokerConfig,
updateBrokerConfig, updateTopicPerm.

Rule 1: as in the other command modules, the output is written here as Java's printf formats (``%-50s`` is ``:<50``),
so a line of ours lines up with a line of Apache's tool.
"""

from __future__ import annotations

import logging
from typing import TextIO

from broker.client.route import MASTER_ID
from broker.common.errors import RmqError
from broker.common.hash_order import hash_map_order
from broker.common.topic import TopicConfig
from broker.tools.admin import MQAdminExt
from broker.tools.admin_client import CLUSTER_NOT_FOUND
from broker.tools.cli import CommandLine, ShowHelp, SubCommand, UsageError, cluster_addrs, opt
from broker.tools.topic_commands import topic_config_text

log = logging.getLogger(__name__)

NO_MASTER = "NO_MASTER"  # CommandUtil.NO_MASTER_PLACEHOLDER


# -- getBrokerConfig ---------------------------------------------------------------------------------------------------


async def get_broker_config(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    """One broker's settings (``-b``), or every master's of a cluster and each of its slaves' (``-c``); neither
    prints nothing, as Java."""
    if line.has("b"):
        addr = line.required("b")
        await _print_config(admin, f"============{addr}============\n", addr, out)
    elif line.has("c"):
        for master, slaves in (await _masters_and_slaves(admin, line.required("c"), out)).items():
            await _print_config(admin, f"============Master: {master}============\n", master, out)
            for slave in slaves:
                await _print_config(admin, f"============My Master: {master}=====Slave: {slave}============\n",
                                    slave, out)


async def _print_config(admin: MQAdminExt, prefix: str, addr: str, out: TextIO) -> None:
    out.write(prefix)
    if addr == NO_MASTER:
        return
    for key, value in (await admin.get_broker_config(addr)).items():
        out.write(f"{key:<50}=  {value}\n")
    out.write("\n")


async def _masters_and_slaves(admin: MQAdminExt, cluster: str, out: TextIO) -> dict[str, list[str]]:
    """CommandUtil.fetchMasterAndSlaveDistinguish: master address (NO_MASTER for a group without one) -> its slaves,
    in the order of Java's HashMap; an unknown cluster prints Java's "[error]" line and has none."""
    info = await admin.examine_broker_cluster_info()
    names = info.cluster_addr_table.get(cluster)
    if names is None:
        out.write(f"[error] {CLUSTER_NOT_FOUND}")
        return {}
    groups: dict[str, list[str]] = {}
    for name in hash_map_order(list(names)):
        broker = info.broker_addr_table.get(name)
        if broker is None:
            continue
        master = broker.broker_addrs.get(MASTER_ID)
        if master is None:
            slaves = groups.setdefault(NO_MASTER, [])
        else:
            slaves = groups[master] = []  # HashMap.put: a new list for the master
        slaves += [broker.broker_addrs[i] for i in hash_map_order(list(broker.broker_addrs)) if i != MASTER_ID]
    return {master: groups[master] for master in hash_map_order(list(groups), 4)}


# -- updateBrokerConfig ------------------------------------------------------------------------------------------------


async def update_broker_config(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    """One broker (``-b``), or every master of a cluster (``-c``; with ``-a``, its slaves too). Over a cluster a
    broker's refusal is reported on stderr and the others are still updated, as Java does."""
    props = {line.required("k"): line.required("v")}
    if line.has("b"):
        addr = line.required("b")
        await admin.update_broker_config(addr, props)
        out.write(f"update broker config success, {addr}\n")
        return
    if not line.has("c"):
        raise ShowHelp
    failed = []
    for addr in await cluster_addrs(admin, line.required("c"), out, slaves=line.has("a")):
        try:
            await admin.update_broker_config(addr, props)
        except RmqError as err:
            failed.append(f"{addr}: {err}")
            continue
        out.write(f"update broker config success, {addr}\n")
    if failed:
        raise _Refused("; ".join(failed))


class _Refused(RmqError):
    """Some brokers of the cluster refused the update (the others applied it)."""


# -- updateTopicPerm ---------------------------------------------------------------------------------------------------


async def update_topic_perm(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    """Set the topic's permission on one master (``-b``) or every master of a cluster (``-c``), keeping its queue
    numbers and flags from the route (the first broker's)."""
    topic = line.required("t")
    route = await admin.examine_topic_route_info(topic)
    if not route.queue_datas:
        raise UsageError(f"the route of {topic} has no queues")
    first = route.queue_datas[0]
    perm = line.int_value("p", 0)
    config = TopicConfig(topic_name=topic, read_queue_nums=first.read_queue_nums,
                         write_queue_nums=first.write_queue_nums, perm=perm, topic_sys_flag=first.topic_sys_flag)
    if line.has("b"):
        addr = line.required("b")
        name = next((b.broker_name for b in route.broker_datas if b.broker_addrs.get(MASTER_ID) == addr), None)
        if name is None:
            out.write("updateTopicPerm error broker not exit or broker is not master!.\n")
            return
        old = next((q.perm for q in route.queue_datas if q.broker_name == name), 0)
        if old == perm:
            out.write("new perm equals to the old one!\n")
            return
        await admin.create_and_update_topic_config(addr, config)
        out.write(f"update topic perm from {old} to {perm} in {addr} success.\n")
        out.write(f"{topic_config_text(config)}.\n")
        return
    if not line.has("c"):
        raise ShowHelp
    for addr in await cluster_addrs(admin, line.required("c"), out):
        await admin.create_and_update_topic_config(addr, config)
        out.write(f"update topic perm from {first.perm} to {perm} in {addr} success.\n")


SUB_COMMANDS: tuple[SubCommand, ...] = (
    SubCommand("getBrokerConfig", "Get broker config by cluster or special broker.", (
        opt("b", "brokerAddr", "get which broker"),
        opt("c", "clusterName", "get which cluster"),
    ), get_broker_config),
    SubCommand("updateBrokerConfig", "Update broker's config.", (
        opt("b", "brokerAddr", "update which broker"),
        opt("c", "clusterName", "update which cluster"),
        opt("a", "updateAllBroker", "update all brokers include slave"),
        opt("k", "key", "config key", required=True),
        opt("v", "value", "config value", required=True),
    ), update_broker_config),
    SubCommand("updateTopicPerm", "Update topic perm.", (
        opt("b", "brokerAddr", "create topic to which broker"),
        opt("c", "clusterName", "create topic to which cluster"),
        opt("t", "topic", "topic name", required=True),
        opt("p", "perm", "set topic's permission(2|4|6), intro[2:W; 4:R; 6:RW]", required=True),
    ), update_topic_perm),
)
