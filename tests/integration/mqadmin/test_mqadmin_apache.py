"""Apache's own ``mqadmin`` (rocketmq-tools, tests/apache's version) beside ours on the same servers (the scenario of
mqadmin/scenario.py), comparing what both print, line by line, after masking what changes between two runs (uptime,
disk usage, the age of the oldest message, rates, send times). Apache's commands are JVMs: independent ones run two
at a time, in steps ordered so that no step changes what another one reads.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pytest

from broker.client.message import SendResult
from tests.helpers import MqadminRun, mqadmin, wait_until
from tests.helpers import mqadmin_ok as ok
from tests.integration.cluster import DEFAULT_CLUSTER, Cluster
from tests.integration.mqadmin.scenario import BROKER_NAME, GROUP, ROUTE_TIMEOUT_S, TOPIC, perms

if TYPE_CHECKING:
    from tests.javatools import JavaProgram

# What differs between two runs a second apart: uptime, disk usage, the age of the oldest message, tmp paths, rates,
# send times, message ids.
VOLATILE = [
    (re.compile(r"(runtime\s*: ).*"), r"\1*"),
    (re.compile(r"((?:putTps|getTransferredTps)\s*: ).*"), r"\1*"),  # 10 s windows: empty in a young broker
    (re.compile(r"(remainHowManyDataToFlush\s*: ).*"), r"\1*"),  # the flush runs every 500 ms
    (re.compile(r"(DiskRatio\S*\s*: ).*"), r"\1*"),
    (re.compile(r"(commitLogDirCapacity\s*: ).*"), r"\1*"),
    (re.compile(r"(Message Body Path:\s+).*"), r"\1*"),
    (re.compile(r"\d+\.\d\d(\s+)\d\.\d{4}(\s+true)"), r"*\1*\2"),  # clusterList #Hour and #SPACE
    (re.compile(r"\b\d+\.\d\d(?=\()"), "*"),  # clusterList #InTPS / #OutTPS: rates over the last seconds
    (re.compile(r"(SEND_OK\s+)[0-9A-F]{32,}"), r"\1*"),  # sendMessage: each run sends a new message
    (re.compile(r"(?m)^(\S+\s+\d+\s+(?:true|false)\s+)\d+$"), r"\1*"),  # checkMsgSendRT: each send's time
    (re.compile(r"Avg RT: \S+"), "Avg RT: *"),
]
# statsAll: the rates and 24-hour sums of rolling windows, sampled every 10 s between the two runs.
STATS_ROW = re.compile(r"(?m)^(MqadminTopic\s.*?)(\s+[\d.]+\s+[\d.]*\s+\d+\s+(?:\d+|NO_CONSUMER))$")


def masked(text: str) -> str:
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    text = STATS_ROW.sub(lambda m: m[1] + re.sub(r"[\d.]+", "*", m[2]), text)
    return text.rstrip("\n")


JAVA_WORKERS = 2  # Apache's mqadmin is a JVM per command (1.5-3 s of start-up): independent ones run side by side


@pytest.fixture(scope="module")
def apache_mqadmin(tmp_path_factory: pytest.TempPathFactory) -> JavaProgram:
    from tests.apache import apache_mqadmin

    return apache_mqadmin(tmp_path_factory.mktemp("apache-mqadmin"))


def java_text(tool: JavaProgram, args: list[str]) -> str:
    """What Apache's mqadmin printed. A run whose request timed out on the client side (Java's 3 s, which a loaded
    2-core machine can exceed while JVMs start) runs once more: that is the machine, not an answer to compare."""
    for _ in range(2):
        done = tool.run(*args, check=False, timeout=120)
        text = done.stdout.decode() + done.stderr.decode()
        if "RemotingTimeoutException" not in text:
            break
    return text


def assert_same(args: list[str], java: str, ours: MqadminRun) -> None:
    expected = masked(java)
    assert masked(ours.err + ours.out) == expected or masked(ours.out + ours.err) == expected, \
        f"mqadmin {' '.join(args)}:\n--- Apache\n{java}\n--- ours\n{ours.err}{ours.out}"


def run_side_by_side(tool: JavaProgram, phase: list[list[str]]) -> None:
    """Apache's and our mqadmin for each command of ``phase`` (independent of each other): Apache's JVMs run
    concurrently while ours run in this thread, then each pair is compared."""
    with ThreadPoolExecutor(JAVA_WORKERS) as pool:
        javas = [pool.submit(java_text, tool, args) for args in phase]
        ours = [mqadmin(*args) for args in phase]
        for args, java, our in zip(phase, javas, ours, strict=True):
            assert_same(args, java.result(), our)


@pytest.mark.java
@pytest.mark.slow
def test_apache_mqadmin_prints_the_same(cluster: Cluster, sent: dict[int, list[SendResult]],
                                        apache_mqadmin: JavaProgram) -> None:
    ns, broker, one = cluster.namesrv_addr, cluster.brokers[0].addr, sent[2][1]
    reading = [
        ["clusterList"], ["topicRoute", "-t", TOPIC], ["topicRoute", "-t", TOPIC, "-l"], ["topicStatus", "-t", TOPIC],
        ["topicClusterList", "-t", TOPIC], ["brokerStatus", "-b", broker], ["queryMsgByKey", "-t", TOPIC, "-k", "all"],
        ["queryMsgById", "-t", TOPIC, "-i", one.offset_msg_id], ["queryMsgById", "-t", TOPIC, "-i", one.msg_id],
        ["queryMsgByUniqueKey", "-t", TOPIC, "-i", one.msg_id], ["topicList"], ["topicList", "-c"],
        ["consumerProgress"], ["consumerProgress", "-g", GROUP, "-t", TOPIC], ["updateTopic", "-t", "X"],
        ["getBrokerConfig", "-b", broker], ["getBrokerConfig", "-c", DEFAULT_CLUSTER], ["getNamesrvConfig"],
        ["statsAll", "-t", TOPIC],
    ]
    helps = [["help", name] for name in ("updateTopic", "resetOffsetByTime", "updateBrokerConfig", "updateTopicPerm",
                                         "sendMessage", "consumeMessage", "statsAll", "checkMsgSendRT")]
    ok("updateSubGroup", "-n", ns, "-b", broker, "-g", GROUP)  # a reset needs the group to exist
    run_side_by_side(apache_mqadmin, [[*run, "-n", ns] for run in reading] + helps)
    changing = [  # in order: each step's commands are independent of each other
        # after the reads, as pulls count in brokerStatus' gets
        [["consumeMessage", "-t", TOPIC], ["queryMsgByOffset", "-t", TOPIC, "-b", BROKER_NAME, "-i", "2", "-o", "1"],
         ["consumeMessage", "-t", TOPIC, "-b", BROKER_NAME, "-i", "2", "-o", "1"],
         ["consumeMessage", "-t", TOPIC, "-c", "2"]],
        [["resetOffsetByTime", "-g", GROUP, "-t", TOPIC, "-s", "0"]],  # it moves the group's offsets: the tracks change
        [["updateBrokerConfig", "-b", broker, "-k", "fileReservedTime", "-v", "72"],
         ["updateKvConfig", "-s", "MqadminNs", "-k", "k", "-v", "v"],
         ["updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "false"],
         ["sendMessage", "-t", TOPIC, "-p", "again", "-b", BROKER_NAME, "-i", "3"],
         ["checkMsgSendRT", "-t", TOPIC, "-a", "2", "-s", "8"]],
        [["deleteKvConfig", "-s", "MqadminNs", "-k", "k"], ["wipeWritePerm", "-b", BROKER_NAME]],
        [["addWritePerm", "-b", BROKER_NAME]],
    ]
    for step in changing:
        run_side_by_side(apache_mqadmin, [[*run, "-n", ns] for run in step])
    assert perms(ns, TOPIC) == [6]
    # updateTopicPerm prints the perm it replaced: each tool takes the topic from 6 to 4 and back in turn
    to_read_only, to_read_write = ["updateTopicPerm", "-b", broker, "-t", TOPIC, "-p", "4", "-n", ns], \
        ["updateTopicPerm", "-c", DEFAULT_CLUSTER, "-t", TOPIC, "-p", "6", "-n", ns]
    java_read_only = java_text(apache_mqadmin, to_read_only)
    wait_until("perm 4 in the route", lambda: perms(ns, TOPIC) == [4], ROUTE_TIMEOUT_S, interval=0.1)
    ours_read_write = mqadmin(*to_read_write)
    wait_until("perm 6 in the route", lambda: perms(ns, TOPIC) == [6], ROUTE_TIMEOUT_S, interval=0.1)
    assert_same(to_read_only, java_read_only, mqadmin(*to_read_only))
    wait_until("perm 4 in the route", lambda: perms(ns, TOPIC) == [4], ROUTE_TIMEOUT_S, interval=0.1)
    assert_same(to_read_write, java_text(apache_mqadmin, to_read_write), ours_read_write)
    wait_until("perm 6 in the route", lambda: perms(ns, TOPIC) == [6], ROUTE_TIMEOUT_S, interval=0.1)
