"""The cluster page's API: every broker with its role, address, version, disk, TPS in and out and replication state
(clusterList's rows and each broker's GET_BROKER_HA_STATUS), one broker's runtime table (brokerStatus), and the
charts' samples."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from broker.client.route import MASTER_ID
from broker.common.errors import RmqError
from broker.console.api import ApiError, ApiRequest, Console, Route
from broker.remoting.ha_bodies import HARuntimeInfo
from broker.tools.topic_commands import BrokerRuntime, cluster_brokers

log = logging.getLogger(__name__)


def replication_view(info: HARuntimeInfo | None) -> dict[str, Any] | None:
    """A master's slaves (acknowledged offset, bytes behind, in sync), or a slave's master and how far it has read."""
    if info is None:
        return None
    if info.master:
        return {"master": True, "commitLogMaxOffset": info.master_commit_log_max_offset,
                "inSyncSlaves": info.in_sync_slave_nums,
                "slaves": [{"addr": c.addr, "ackOffset": c.slave_ack_offset, "behindBytes": c.diff,
                            "inSync": c.in_sync, "bytesPerSecond": c.transferred_byte_in_second}
                           for c in info.ha_connection_info]}
    client = info.ha_client_runtime_info
    return {"master": False, "masterAddr": client.master_addr, "maxOffset": client.max_offset,
            "masterFlushOffset": client.master_flush_offset, "lastReadTimestamp": client.last_read_timestamp,
            "bytesPerSecond": client.transferred_byte_in_second}


def broker_view(broker: BrokerRuntime, ha: HARuntimeInfo | None, now_ms: int) -> dict[str, Any]:
    table = broker.table
    in_yesterday, out_yesterday, in_today, out_today = broker.day_totals()
    return {
        "cluster": broker.cluster, "brokerName": broker.broker_name, "brokerId": broker.broker_id,
        "addr": broker.addr, "role": "MASTER" if broker.broker_id == MASTER_ID else "SLAVE",
        "reachable": bool(table), "version": table.get("brokerVersionDesc"), "active": broker.active,
        "inTps": broker.in_tps, "outTps": broker.out_tps, "inToday": in_today, "outToday": out_today,
        "inYesterday": in_yesterday, "outYesterday": out_yesterday,
        "diskRatio": broker.disk_ratio, "diskCapacity": table.get("commitLogDirCapacity"),
        "hoursKept": round(broker.hours_kept(now_ms), 2) if table else None,
        "replication": replication_view(ha),
    }


async def _ha_status(console: Console, addr: str) -> HARuntimeInfo | None:
    try:
        return await console.admin.get_broker_ha_status(addr)
    except (RmqError, OSError) as err:
        log.debug("HA status of %s: %s", addr, err)
        return None


async def get_cluster(console: Console, request: ApiRequest) -> dict[str, Any]:
    brokers = await cluster_brokers(console.admin, request.text("cluster", None))
    ha = await asyncio.gather(*(_ha_status(console, b.addr) for b in brokers))
    now = time.time_ns() // 1_000_000
    return {"namesrvAddr": console.admin.namesrv_addr, "clusters": sorted({b.cluster for b in brokers}),
            "brokers": [broker_view(b, h, now) for b, h in zip(brokers, ha, strict=True)]}


async def get_broker(console: Console, request: ApiRequest) -> dict[str, Any]:
    """brokerStatus: the broker's whole runtime table, keys sorted."""
    addr = request.text("addr")
    info = await console.admin.examine_broker_cluster_info()
    known = {a for broker in info.broker_addr_table.values() for a in broker.broker_addrs.values()}
    if addr not in known:
        raise ApiError(404, f"no broker at {addr} in the NameServer's cluster info")
    table = await console.admin.fetch_broker_runtime_stats(addr)
    return {"addr": addr, "runtime": dict(sorted(table.items()))}


async def get_metrics(console: Console, request: ApiRequest) -> dict[str, Any]:
    return console.sampler.snapshot()


async def get_health(console: Console, request: ApiRequest) -> dict[str, Any]:
    """The console answers (whether the cluster does is for the other calls to say)."""
    return {"status": "UP", "namesrvAddr": console.admin.namesrv_addr, "samples": console.sampler.samples}


ROUTES = (
    Route("GET", "/api/health", get_health),
    Route("GET", "/api/cluster", get_cluster),
    Route("GET", "/api/brokers/{addr}", get_broker),
    Route("GET", "/api/metrics", get_metrics),
)
