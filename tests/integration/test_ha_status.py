"""``mqadmin haStatus`` and ``clusterList`` on a master and its slave, our brokers as real processes: the master lists
its slave (what it acknowledged, from where it is sent, in sync), the slave names its master's HA address and when
it last read and reported, ``-c`` asks the cluster's masters, ``-i`` prints again every interval, and clusterList
shows the pair as Java does (the slave not activated, no client puts on it). The master's Prometheus metrics show
its slave's replication lag. One pair serves the whole module.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from prometheus_client.parser import text_string_to_metric_families

from broker.client import BlockingClient, Message, SendStatus
from broker.tools.admin_client import CLUSTER_NOT_FOUND
from tests.helpers import free_port, mqadmin, mqadmin_ok, wait_until
from tests.integration.cluster import DEFAULT_CLUSTER, REPO, ServerProcess, start_broker, start_namesrv
from tests.integration.replication import ha_address, max_offset, wait_caught_up

TOPIC = "HaStatusTopic"
PAIR_CONF: dict[str, object] = {"haSendHeartbeatInterval": 1000}
TIME = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}"


@dataclass(frozen=True, slots=True)
class Pair:
    namesrv: ServerProcess
    master: ServerProcess
    slave: ServerProcess
    master_metrics_port: int


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    home = tmp_path_factory.mktemp("ha-status")
    metrics = {"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1",
               "metricsPromExporterPort": free_port()}
    with start_namesrv(home / "namesrv") as namesrv, start_broker(home / "master", namesrv.addr, **PAIR_CONF,
                                                                  **metrics) as master:
        with BlockingClient(namesrv.addr) as client:
            sent = [client.send(Message(TOPIC, f"before the slave {i}".encode())) for i in range(20)]
        assert {r.send_status for r in sent} == {SendStatus.SEND_OK}
        slave_conf = PAIR_CONF | {"brokerId": 1, "brokerRole": "SLAVE", "haMasterAddress": ha_address(master)}
        with start_broker(home / "slave", namesrv.addr, **slave_conf) as slave:
            wait_caught_up(slave, master)
            yield Pair(namesrv, master, slave, int(metrics["metricsPromExporterPort"]))


def ha_status(pair: Pair, *args: str) -> str:
    return mqadmin_ok("haStatus", "-n", pair.namesrv.addr, *args)


def master_lines(pair: Pair) -> list[str]:
    end = max_offset(pair.master)
    return ["", f"#MasterAddr\t{pair.master.addr}", f"#MasterCommitLogMaxOffset\t{end}", "#SlaveNum\t1",
            "#InSyncSlaveNum\t1", f"{'#SlaveAddr':<32}  {'#SlaveAckOffset':<16} {'#Diff':>16} "
            f"{'#TransferSpeed(KB/s)':>16} {'#Status':>16} {'#TransferFromWhere':>16}"]


def test_the_master_lists_its_slave(pair: Pair) -> None:
    out = ha_status(pair, "-b", pair.master.addr)
    lines = out.split("\n")
    assert lines[:6] == master_lines(pair) and lines[7:] == [""], out
    end = max_offset(pair.master)
    row = re.fullmatch(r"(127\.0\.0\.1:\d+) +(\d+) +(\d+) +(\d+\.\d\d) +OK +(\d+)", lines[6])
    assert row is not None, lines[6]
    assert (int(row[2]), int(row[3]), int(row[5])) == (end, 0, end)  # acknowledged all, sent up to the end
    assert lines[6][34:34 + len(row[2])] == row[2] and len(lines[6]) == 34 + 16 + 4 * 17  # Java's column widths


def test_the_masters_metrics_show_its_slaves_replication_lag(pair: Pair) -> None:
    row = ha_status(pair, "-b", pair.master.addr).split("\n")[6].split()
    page = urllib.request.urlopen(f"http://127.0.0.1:{pair.master_metrics_port}/metrics", timeout=10).read().decode()
    lags = [(s.labels, s.value) for family in text_string_to_metric_families(page) for s in family.samples
            if s.name == "rocketmq_replication_lag_bytes"]
    assert [(labels["slave_address"], labels["node_id"], value) for labels, value in lags] == [
        (row[0], "broker-a", 0.0)]  # haStatus's slave, caught up


def test_the_slave_names_its_masters_ha_address(pair: Pair) -> None:
    started = time.time()
    out = ha_status(pair, "-b", pair.slave.addr)
    match = re.fullmatch(rf"\n#MasterAddr\t(\S+)\n#CommitLogMaxOffset\t(\d+)\n#TransferSpeed\(KB/s\)\t(\d+\.\d\d)\n"
                         rf"#LastReadTime\t({TIME})\n#LastWriteTime\t({TIME})\n#MasterFlushOffset\t0\n", out)
    assert match is not None, out
    assert match[1] == ha_address(pair.master) and int(match[2]) == max_offset(pair.master)
    for stamp in (match[4], match[5]):  # the master heartbeats and the slave reports every second here
        seconds = time.mktime(time.strptime(stamp[:19], "%Y-%m-%d %H:%M:%S"))
        assert started - 5 < seconds <= time.time(), stamp


def test_a_cluster_is_asked_through_its_masters(pair: Pair) -> None:
    out = ha_status(pair, "-c", DEFAULT_CLUSTER)
    assert out.split("\n")[:6] == master_lines(pair)
    assert pair.slave.addr not in out
    unknown = mqadmin("haStatus", "-n", pair.namesrv.addr, "-c", "NoSuchCluster")
    assert (unknown.code, unknown.out) == (0, f"[error] {CLUSTER_NOT_FOUND}")


def test_without_a_broker_or_cluster_it_shows_its_help(pair: Pair) -> None:
    assert ha_status(pair).startswith("usage: mqadmin haStatus [-b <arg>] [-c <arg>] [-h] [-i <arg>] [-n <arg>]\n")


def test_interval_prints_again_until_stopped(pair: Pair) -> None:
    """``-i 1``: a status a second, as Java's loop, until the process is stopped (timed from the first status, so a
    slow interpreter start on a loaded machine does not count)."""
    proc = subprocess.Popen([sys.executable, "-m", "broker.tools", "haStatus", "-n", pair.namesrv.addr, "-b",
                             pair.slave.addr, "-i", "1"], cwd=REPO, stdout=subprocess.PIPE, text=True)
    seen: list[float] = []
    watchdog = threading.Timer(60, proc.kill)  # a tool that never prints ends the read instead of hanging the test
    watchdog.start()
    try:
        assert proc.stdout is not None
        for row in proc.stdout:  # the loop flushes after each status, so rows arrive as printed
            if row.startswith("#MasterAddr\t"):
                seen.append(time.monotonic())
                if len(seen) == 3:
                    break
    finally:
        watchdog.cancel()
        proc.kill()
        proc.communicate(timeout=10)
    assert len(seen) == 3, "the tool stopped printing"
    gaps = [seen[1] - seen[0], seen[2] - seen[1]]
    assert all(0.8 <= gap <= 5 for gap in gaps), gaps


def test_cluster_list_shows_the_slave_not_activated_and_without_client_puts(pair: Pair) -> None:
    wait_until("the slave is in the cluster info",
               lambda: pair.slave.addr in mqadmin_ok("clusterList", "-n", pair.namesrv.addr))
    out = mqadmin_ok("clusterList", "-n", pair.namesrv.addr)
    rows = [line.split() for line in out.splitlines()[1:]]
    assert [(row[1], row[2], row[3], row[-1]) for row in rows] == [
        ("broker-a", "0", pair.master.addr, "true"), ("broker-a", "1", pair.slave.addr, "false")], out
    more = mqadmin_ok("clusterList", "-n", pair.namesrv.addr, "-m")
    assert [line.split()[4] for line in more.splitlines()[1:]] == ["20", "0"], more  # #InTotalToday
    status = mqadmin_ok("brokerStatus", "-n", pair.namesrv.addr, "-b", pair.slave.addr)
    # the slave's store counts the replicated puts as Java's reput does, its client puts are none
    assert re.search(r"^putMessageTimesTotal +: 20$", status, re.M) and re.search(r"^msgPutTotalTodayNow +: 0$",
                                                                                   status, re.M), status
