"""``mqadmin`` against our NameServer and broker as real processes (tests/integration/cluster.py).

Each command runs in-process through ``broker.tools.mqadmin.main`` (its stdout and stderr captured) and its output
is checked for the values the servers hold: the created topic in topicList, the route naming the broker, topic
offsets after sends, a consumer group's offsets after commits and after resetOffsetByTime, messages found by key,
by offsetMsgId, by UNIQ_KEY and by queue offset. Failures (unknown command, bad option, unreachable NameServer)
must be one line and exit code 1, never a traceback, also when run as ``python -m broker.tools``.

The operators' commands change the servers and are checked there: a broker's config live and in its file, a topic's
and a broker's write permission in the routes, KV and NameServer config, sends, pulls and the stats items.

The ``java`` test runs Apache's own ``mqadmin`` (rocketmq-tools, tests/apache's version) beside ours on the same
servers and compares what both print, line by line, after masking what changes between two runs (uptime, disk
usage, the age of the oldest message, rates, send times). Apache's commands are JVMs: independent ones run two at a
time, in steps ordered so that no step changes what another one reads.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from broker.client import BlockingClient, Message, protocol
from broker.client.blocking import BlockingRemotingClient
from broker.client.message import MessageQueue, SendResult
from broker.common.attributes import parse_attributes
from broker.common.fastjson import decode_json
from broker.remoting.client import RemotingClient
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from broker.tools import commands, messages
from broker.tools.admin import decode_message_id, route_topic
from broker.tools.mqadmin import SUB_COMMANDS, command_help, find_sub_command
from broker.tools.results import version_desc
from tests.helpers import MqadminRun, free_port, mqadmin, wait_until
from tests.helpers import mqadmin_ok as ok
from tests.integration.cluster import DEFAULT_CLUSTER, REPO, Cluster, start_cluster

if TYPE_CHECKING:
    from tests.javatools import JavaProgram

BROKER_NAME = "broker-a"
TOPIC = "MqadminTopic"
GROUP = "MqadminGroup"
ROUTE_TIMEOUT_S = 10.0
REQUIRED_COMMANDS = ("updateTopic", "deleteTopic", "topicList", "topicRoute", "topicStatus", "clusterList",
                     "brokerStatus", "consumerProgress", "consumerConnection", "queryMsgById", "queryMsgByKey",
                     "queryMsgByOffset", "updateSubGroup", "resetOffsetByTime", "getBrokerConfig",
                     "updateBrokerConfig", "updateTopicPerm", "wipeWritePerm", "addWritePerm", "statsAll",
                     "sendMessage", "consumeMessage", "checkMsgSendRT", "updateKvConfig", "deleteKvConfig",
                     "getNamesrvConfig", "updateNamesrvConfig")


def rows(text: str, first: str) -> list[list[str]]:
    """The whitespace-split lines of a table that start with ``first``."""
    return [line.split() for line in text.splitlines() if line.split()[:1] == [first]]


def await_route(namesrv: str, topic: str) -> None:
    wait_until(f"a route for {topic}", lambda: mqadmin("topicRoute", "-n", namesrv, "-t", topic).code == 0,
               ROUTE_TIMEOUT_S, interval=0.1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with start_cluster(tmp_path_factory.mktemp("mqadmin")) as started:
        yield started


@pytest.fixture(autouse=True)
def body_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """queryMsgById and friends save bodies where Java does (/tmp/rocketmq/msgbodys); tests keep them in tmp_path."""
    monkeypatch.setattr(messages, "MSG_BODY_DIR", str(tmp_path / "msgbodys"))
    return tmp_path / "msgbodys"


@pytest.fixture(scope="module")
def sent(cluster: Cluster) -> dict[int, list[SendResult]]:
    """TOPIC with 4 queues (created by updateTopic) and 1, 2, 3, 0 messages in queues 0-3, keyed k<q>-<i> and "all"."""
    ns = cluster.namesrv_addr
    out = ok("updateTopic", "-n", ns, "-c", DEFAULT_CLUSTER, "-t", TOPIC, "-r", "4", "-w", "4")
    assert f"create topic to {cluster.brokers[0].addr} success." in out
    await_route(ns, TOPIC)
    results: dict[int, list[SendResult]] = {0: [], 1: [], 2: [], 3: []}
    with BlockingClient(ns) as client:
        for queue_id, count in enumerate((1, 2, 3, 0)):
            for i in range(count):
                msg = Message(TOPIC, f"body {queue_id}-{i}".encode(), tags="TagA", keys=[f"k{queue_id}-{i}", "all"])
                results[queue_id].append(client.send(msg, MessageQueue(TOPIC, BROKER_NAME, queue_id)))
    return results


class OnlineConsumer:
    """A push consumer of GROUP as the broker sees one: a HEART_BEAT on a connection kept open by its own thread."""

    CLIENT_ID = "127.0.0.1@mqadmin-test"

    def __init__(self, broker_addr: str) -> None:
        self.broker_addr = broker_addr
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _run(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        data = protocol.ConsumerData(GROUP, "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET",
                                     [protocol.build_subscription_data(TOPIC, "TagA")])
        try:
            async with RemotingClient() as client:
                response = await client.invoke(self.broker_addr, protocol.heartbeat_request(self.CLIENT_ID, [], [data]))
                assert response.code == ResponseCode.SUCCESS, response.remark
                self._ready.set()
                await self._stop.wait()
        except BaseException as err:
            self._error = err
            self._ready.set()

    def __enter__(self) -> OnlineConsumer:
        self._thread.start()
        assert self._ready.wait(10), "the consumer did not come up"
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


def commit(broker_addr: str, offsets: dict[int, int]) -> None:
    with BlockingRemotingClient(broker_addr) as client:
        for queue_id, offset in offsets.items():
            mq = MessageQueue(TOPIC, BROKER_NAME, queue_id)
            assert client.invoke(protocol.update_consumer_offset_request(GROUP, mq, offset)).code == 0


def progress(ns: str) -> dict[int, tuple[int, int]]:
    """consumerProgress -g GROUP -t TOPIC: queue id -> (broker offset, consumer offset)."""
    table = rows(ok("consumerProgress", "-n", ns, "-g", GROUP, "-t", TOPIC), TOPIC)
    return {int(r[2]): (int(r[3]), int(r[4])) for r in table}


# -- the command line itself -------------------------------------------------------------------------------------------


def test_help_lists_the_commands() -> None:
    for args in ([], ["help"]):
        run = mqadmin(*args)
        assert run.code == 0 and run.out.startswith("The most commonly used mqadmin commands are:")
        listed = [line.split()[0] for line in run.out.splitlines()[1:] if line.startswith("   ")]
        assert set(REQUIRED_COMMANDS) <= set(listed)
    assert "See 'mqadmin help <command>' for more information on a specific command." in run.out
    assert {cmd.name for cmd in SUB_COMMANDS} >= set(REQUIRED_COMMANDS)


def test_command_help_is_commons_cli_layout() -> None:
    """What Apache's mqadmin prints for ``mqadmin help topicRoute`` (HelpFormatter, width 110)."""
    expected = (
        "usage: mqadmin topicRoute [-h] [-l] [-n <arg>] -t <arg>\n"
        " -h,--help                Print help\n"
        " -l,--list                Use list format to print data\n"
        " -n,--namesrvAddr <arg>   Name server address list, eg: '192.168.0.1:9876;192.168.0.2:9876'\n"
        " -t,--topic <arg>         topic name\n"
    )
    assert mqadmin("help", "topicRoute").out == expected
    assert mqadmin("topicRoute", "-h").out == expected
    usage = command_help(find_sub_command("updateTopic")).splitlines()[:2]  # type: ignore[arg-type]
    assert usage == ["usage: mqadmin updateTopic [-a <arg>] -b <arg> | -c <arg>  [-h] [-n <arg>] [-o <arg>] "
                     "[-p <arg>] [-r <arg>]", "       [-s <arg>] -t <arg> [-u <arg>] [-w <arg>]"]


def test_names_match_ignoring_case_as_java() -> None:
    assert find_sub_command("TOPICROUTE") is find_sub_command("topicRoute")
    assert find_sub_command("topicroute").name == "topicRoute"  # type: ignore[union-attr]


@pytest.mark.parametrize(("args", "message"), [
    (["noSuchCommand"], "The sub command noSuchCommand not exist."),
    (["help", "noSuchCommand"], "The sub command noSuchCommand not exist."),
    (["topicRoute"], "Missing required option: t"),
    (["consumerConnection", "-b", "x"], "Missing required option: g"),
    (["resetOffsetByTime", "-g", "g"], "Missing required options: t, s"),
    (["topicRoute", "-t", "T", "-x", "1"], "Unrecognized option: -x"),
    (["topicRoute", "-t"], "Missing argument for option: t"),
    (["updateTopic", "-t", "T"], "Missing required option: [-b create topic to which broker, "
                                 "-c create topic to which cluster]"),
    (["updateTopic", "-t", "T", "-b", "a:1", "-c", "C"],
     "The option 'c' was specified but an option from this group has already been selected: 'b'"),
])
def test_bad_command_lines_exit_1_with_one_line(args: list[str], message: str) -> None:
    run = mqadmin(*args)
    assert run.code == 1
    assert run.err.splitlines() == [message]
    assert "Traceback" not in run.err + run.out


def test_unreachable_or_missing_namesrv(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    run = mqadmin("topicList")
    assert run.code == 1 and run.err.startswith("topicList command failed: CODE: 10004") and "NAMESRV_ADDR" in run.err
    dead = f"127.0.0.1:{free_port()}"
    run = mqadmin("topicList", "-n", dead)
    assert run.code == 1 and run.err.startswith(f"topicList command failed: cannot connect to {dead}: ")
    assert len(run.err.splitlines()) == 1 and run.out == ""
    monkeypatch.setenv("NAMESRV_ADDR", dead)
    run = mqadmin("clusterList")
    assert run.code == 1 and f"cannot connect to {dead}" in run.err and len(run.err.splitlines()) == 1


def test_as_a_process_exit_codes(cluster: Cluster) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "broker.tools", "topicList", "-n", cluster.namesrv_addr],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0 and "TBW102" in done.stdout.split()
    done = subprocess.run([sys.executable, "-m", "broker.tools", "topicList", "-n", f"127.0.0.1:{free_port()}"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 1 and "cannot connect" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run([sys.executable, "-m", "broker.tools", "nope"], capture_output=True, text=True, env=env,
                          timeout=60)
    assert (done.returncode, done.stderr) == (1, "The sub command nope not exist.\n")


def test_helpers() -> None:
    assert [version_desc(v) for v in (0, 28, 401, 413, 515, 10**6)] == [
        "V3_0_0_SNAPSHOT", "V3_0_7_SNAPSHOT", "V4_9_4", "V5_0_0", "V5_5_1", "V5_9_9"]
    assert decode_message_id("7F00000100002A9F00000000000004C9") == ("127.0.0.1:10911", 1225)
    with pytest.raises(ValueError):
        decode_message_id("C00002026AE2CDAADC5980A562820002")  # a UNIQ_KEY: its "port" is out of range
    assert parse_attributes("+a=b,+c=d,-e") == {"+a": "b", "+c": "d", "-e": ""}
    with pytest.raises(ValueError, match="add/alter attribute format is wrong: a"):
        parse_attributes("a=b")
    assert commands.parse_timestamp("1700000000123") == 1700000000123
    local = time.mktime((2024, 3, 5, 6, 7, 8, 0, 0, -1))
    assert commands.parse_timestamp("2024-03-05#06:07:08:009") == int(local) * 1000 + 9
    assert commands.java_map({0: "127.0.0.1:10911"}) == "{0=127.0.0.1:10911}"
    assert commands.parse_group("%RETRY%g1") == "g1" and commands.parse_group("%RETRY%g1+t1") == "g1"
    assert [route_topic(t, c) for t, c in (("T", "C"), ("%LMQ%q", "Parent"), ("%LMQ%q", None))] == ["T", "Parent",
                                                                                                      "%LMQ%q"]
    mqs = [MessageQueue("TopicA", BROKER_NAME, i) for i in range(4)]
    assert [mq.queue_id for mq in commands.put_all_order(mqs)] == [3, 1, 2, 0]  # what Apache's tool printed


# -- topics ------------------------------------------------------------------------------------------------------------


def test_update_topic_then_list_route_and_cluster(cluster: Cluster, sent: dict[int, list[SendResult]]) -> None:
    ns, broker = cluster.namesrv_addr, cluster.brokers[0].addr
    out = ok("updateTopic", "-n", ns, "-b", broker, "-t", "MqadminOther", "-r", "2", "-w", "3", "-p", "4")
    assert out.splitlines() == [
        f"create topic to {broker} success.",
        "TopicConfig [topicName=MqadminOther, readQueueNums=2, writeQueueNums=3, perm=R--, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false, attributes={}]",
    ]
    await_route(ns, "MqadminOther")
    assert {TOPIC, "MqadminOther", "TBW102"} <= set(ok("topicList", "-n", ns).split())
    route = decode_json(ok("topicRoute", "-n", ns, "-t", TOPIC))
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": broker}
    assert route["brokerDatas"][0]["cluster"] == DEFAULT_CLUSTER
    assert route["queueDatas"] == [{"brokerName": BROKER_NAME, "perm": 6, "readQueueNums": 4, "topicSysFlag": 0,
                                    "writeQueueNums": 4}]
    listed = ok("topicRoute", "-n", ns, "-t", "MqadminOther", "-l").splitlines()
    assert listed[1].split() == [DEFAULT_CLUSTER, BROKER_NAME, f"{{0={broker}}}", "2", "3", "4"]
    assert listed[2] == "-" * 158 and listed[3].split() == ["Total:", "1", "2", "3"]
    assert ok("topicClusterList", "-n", ns, "-t", TOPIC).split() == [DEFAULT_CLUSTER]
    clustered = rows(ok("topicList", "-n", ns, "-c"), DEFAULT_CLUSTER)
    assert [DEFAULT_CLUSTER, TOPIC] in [r[:2] for r in clustered]


def test_topic_status_after_sends(cluster: Cluster, sent: dict[int, list[SendResult]]) -> None:
    out = ok("topicStatus", "-n", cluster.namesrv_addr, "-t", TOPIC)
    assert out.splitlines()[0].split() == ["#Broker", "Name", "#QID", "#Min", "Offset", "#Max", "Offset", "#Last",
                                           "Updated"]
    table = {int(r[1]): r for r in rows(out, BROKER_NAME)}
    assert {q: (int(r[2]), int(r[3])) for q, r in table.items()} == {0: (0, 1), 1: (0, 2), 2: (0, 3), 3: (0, 0)}
    assert len(table[2]) == 6 and len(table[3]) == 4  # an empty queue has no last-updated time
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}", " ".join(table[2][4:]))
    assert out.endswith("\nTopic Put TPS: 0.0\n")
    by_cluster = ok("topicStatus", "-n", cluster.namesrv_addr, "-t", TOPIC, "-c", DEFAULT_CLUSTER)
    assert rows(by_cluster, BROKER_NAME) == rows(out, BROKER_NAME)


def test_delete_topic(cluster: Cluster) -> None:
    ns = cluster.namesrv_addr
    ok("updateTopic", "-n", ns, "-c", DEFAULT_CLUSTER, "-t", "MqadminDoomed")
    await_route(ns, "MqadminDoomed")
    out = ok("deleteTopic", "-n", ns, "-c", DEFAULT_CLUSTER, "-t", "MqadminDoomed")
    assert out.splitlines() == [f"delete topic [MqadminDoomed] from cluster [{DEFAULT_CLUSTER}] success.",
                                "delete topic [MqadminDoomed] from NameServer success."]
    run = mqadmin("topicRoute", "-n", ns, "-t", "MqadminDoomed")
    assert run.code == 1 and "CODE: 17" in run.err and "MqadminDoomed" in run.err
    assert "MqadminDoomed" not in ok("topicList", "-n", ns).split()
    run = mqadmin("deleteTopic", "-n", ns, "-c", "NoSuchCluster", "-t", "MqadminDoomed")
    assert run.code == 1 and "NoSuchCluster" in run.err


# -- brokers -----------------------------------------------------------------------------------------------------------


def test_cluster_list_and_broker_status(cluster: Cluster, sent: dict[int, list[SendResult]]) -> None:
    ns, broker = cluster.namesrv_addr, cluster.brokers[0].addr
    out = ok("clusterList", "-n", ns)
    assert out.splitlines()[0].split()[:4] == ["#Cluster", "Name", "#Broker", "Name"]
    row = rows(out, DEFAULT_CLUSTER)[0]
    assert row[:5] == [DEFAULT_CLUSTER, BROKER_NAME, "0", broker, "V5_5_1"] and row[-1] == "true"
    more = rows(ok("clusterList", "-n", ns, "-m"), DEFAULT_CLUSTER)
    assert more[0][:2] == [DEFAULT_CLUSTER, BROKER_NAME] and all(n.lstrip("-").isdigit() for n in more[0][2:])
    status = ok("brokerStatus", "-n", ns, "-b", broker)
    table = dict(line.split(": ", 1) for line in status.splitlines())
    assert table["brokerVersionDesc".ljust(32)] == "V5_5_1"
    assert list(table) == sorted(table)
    by_cluster = ok("brokerStatus", "-n", ns, "-c", DEFAULT_CLUSTER)
    assert all(line.startswith(broker.ljust(24) + " ") for line in by_cluster.splitlines())
    assert len(by_cluster.splitlines()) == len(status.splitlines())


# -- messages ----------------------------------------------------------------------------------------------------------


def test_query_msg_by_key(cluster: Cluster, sent: dict[int, list[SendResult]]) -> None:
    ns = cluster.namesrv_addr
    out = ok("queryMsgByKey", "-n", ns, "-t", TOPIC, "-k", "all")
    assert out.splitlines()[0].split() == ["#Message", "ID", "#QID", "#Offset", "#IndexKey"]
    found = {(r[0], int(r[1]), int(r[2])) for r in (line.split() for line in out.splitlines()[1:])}
    assert found == {(s.msg_id, q, s.queue_offset) for q, results in sent.items() for s in results}
    one = sent[2][1]
    line = ok("queryMsgByKey", "-n", ns, "-t", TOPIC, "-k", "k2-1").splitlines()[1].split()
    assert line[:3] == [one.msg_id, "2", "1"]
    assert re.fullmatch(rf"\d+@{TOPIC}@K@k2-1@{one.msg_id}@\d+", line[3])
    run = mqadmin("queryMsgByKey", "-n", ns, "-t", TOPIC, "-k", "no-such-key")
    assert run.code == 1 and "CODE: 208" in run.err and "no message" in run.err


def message_fields(out: str) -> dict[str, str]:
    return {line[:20].strip(): line[21:] for line in out.splitlines() if len(line) > 21 and line[20] == " "
            and line[:20].strip().endswith(":")}


def test_query_msg_by_id_offset_msg_id_and_uniq_key(cluster: Cluster, sent: dict[int, list[SendResult]],
                                                    body_dir: Path) -> None:
    ns, one = cluster.namesrv_addr, sent[1][0]
    out = ok("queryMsgById", "-n", ns, "-t", TOPIC, "-i", one.offset_msg_id, "-f", "UTF-8")
    fields = message_fields(out)
    assert fields["OffsetID:"] == one.offset_msg_id
    assert (fields["Topic:"], fields["Tags:"], fields["Keys:"]) == (TOPIC, "[TagA]", "[k1-0 all]")
    assert (fields["Queue ID:"], fields["Queue Offset:"]) == ("1", "0")
    assert fields["CommitLog Offset:"] == str(decode_message_id(one.offset_msg_id)[1])
    assert fields["Store Host:"] == cluster.brokers[0].addr and fields["Message Body:"] == "body 1-0"
    assert f"UNIQ_KEY={one.msg_id}" in fields["Properties:"] and fields["Properties:"].startswith("{")
    assert Path(fields["Message Body Path:"]).read_bytes() == b"body 1-0"
    assert Path(fields["Message Body Path:"]).parent == body_dir
    # a client id (UNIQ_KEY) decodes to no broker: Java's fallback is a query by UNIQ_KEY
    by_uniq = message_fields(ok("queryMsgById", "-n", ns, "-t", TOPIC, "-i", one.msg_id))
    assert by_uniq["OffsetID:"] == one.offset_msg_id and by_uniq["Keys:"] == "[k1-0 all]"
    both = ok("queryMsgById", "-n", ns, "-t", TOPIC, "-i", f"{sent[0][0].offset_msg_id},{sent[2][2].msg_id}")
    assert [line.split()[1] for line in both.splitlines() if line.startswith("OffsetID:")] == [
        sent[0][0].offset_msg_id, sent[2][2].offset_msg_id]
    unique = message_fields(ok("queryMsgByUniqueKey", "-n", ns, "-t", TOPIC, "-i", one.msg_id))
    assert unique["Keys:"] == "[k1-0 all]" and "OffsetID:" not in unique


def test_query_msg_by_offset(cluster: Cluster, sent: dict[int, list[SendResult]]) -> None:
    ns, third = cluster.namesrv_addr, sent[2][2]
    fields = message_fields(ok("queryMsgByOffset", "-n", ns, "-t", TOPIC, "-b", BROKER_NAME, "-i", "2", "-o", "2",
                               "-f", "UTF-8"))
    assert (fields["OffsetID:"], fields["Message Body:"], fields["Queue Offset:"]) == (third.offset_msg_id,
                                                                                      "body 2-2", "2")
    assert "MIN_OFFSET=0" in fields["Properties:"] and "MAX_OFFSET=3" in fields["Properties:"]
    past_end = ok("queryMsgByOffset", "-n", ns, "-t", TOPIC, "-b", BROKER_NAME, "-i", "2", "-o", "3")
    assert past_end == ""  # Java prints nothing when the pull finds no message


# -- groups, consumers and offsets -------------------------------------------------------------------------------------


def test_consumer_connection_progress_and_reset(cluster: Cluster, sent: dict[int, list[SendResult]]) -> None:
    ns, broker = cluster.namesrv_addr, cluster.brokers[0].addr
    with OnlineConsumer(broker):
        await_route(ns, f"%RETRY%{GROUP}")  # the broker creates the retry topic on the first heartbeat
        commit(broker, {0: 1, 1: 1, 2: 0})
        out = ok("consumerConnection", "-n", ns, "-g", GROUP)
        lines = out.splitlines()
        assert lines[1].split() == [OnlineConsumer.CLIENT_ID, lines[1].split()[1], "PYTHON", "V5_5_1"]
        assert [TOPIC, "TagA"] in [line.split() for line in lines]
        assert lines[-3:] == ["ConsumeType: CONSUME_PASSIVELY", "MessageModel: CLUSTERING",
                              "ConsumeFromWhere: CONSUME_FROM_LAST_OFFSET"]
        assert ok("consumerConnection", "-n", ns, "-g", GROUP, "-b", broker) == out

        assert progress(ns) == {0: (1, 1), 1: (2, 1), 2: (3, 0), 3: (0, 0)}
        whole = ok("consumerProgress", "-n", ns, "-g", GROUP)
        assert whole.endswith("Consume TPS: 0.00\nConsume Diff Total: 4\nConsume Inflight Total: 0\n")
        groups = {r[0]: r for r in (line.split() for line in ok("consumerProgress", "-n", ns).splitlines()[1:])}
        assert groups[GROUP][1:5] == ["1", "V5_5_1", "PUSH", "CLUSTERING"] and groups[GROUP][-1] == "4"

        track = ok("queryMsgById", "-n", ns, "-t", TOPIC, "-i", sent[0][0].offset_msg_id)
        assert f"MessageTrack [consumerGroup={GROUP}, trackType=CONSUMED, exceptionDesc=null]" in track
        track = ok("queryMsgById", "-n", ns, "-t", TOPIC, "-i", sent[2][0].offset_msg_id)
        assert f"MessageTrack [consumerGroup={GROUP}, trackType=NOT_CONSUME_YET, exceptionDesc=null]" in track

        out = ok("resetOffsetByTime", "-n", ns, "-g", GROUP, "-t", TOPIC, "-s", "0")
        assert out.startswith(f"start reset consumer offset by specified, group[{GROUP}], topic[{TOPIC}], "
                              "force[true], timestamp(string)[0], timestamp(long)[0]\n")
        assert {int(r[1]): int(r[2]) for r in rows(out, BROKER_NAME)} == {0: 0, 1: 0, 2: 0, 3: 0}
        assert progress(ns) == {0: (1, 0), 1: (2, 0), 2: (3, 0), 3: (0, 0)}

        out = ok("resetOffsetByTime", "-n", ns, "-g", GROUP, "-t", TOPIC, "-s", "now")
        assert {int(r[1]): int(r[2]) for r in rows(out, BROKER_NAME)} == {0: 1, 1: 2, 2: 3, 3: 0}
        assert progress(ns) == {0: (1, 1), 1: (2, 2), 2: (3, 3), 3: (0, 0)}

        out = ok("resetOffsetByTime", "-n", ns, "-g", GROUP, "-t", TOPIC, "-s", "2020-01-01#00:00:00:000",
                 "-b", broker, "-q", "2", "-o", "1")
        assert out.splitlines()[-1] == "reset consumer offset to 1"
        assert progress(ns)[2] == (3, 1)


def test_update_and_delete_sub_group(cluster: Cluster) -> None:
    ns, broker = cluster.namesrv_addr, cluster.brokers[0].addr
    out = ok("updateSubGroup", "-n", ns, "-b", broker, "-g", "MqadminSubGroup", "-r", "5", "-q", "2", "-s", "false")
    assert out.splitlines() == [
        f"create subscription group to {broker} success.",
        "SubscriptionGroupConfig{groupName=MqadminSubGroup, consumeEnable=false, consumeFromMinEnable=false, "
        "consumeBroadcastEnable=false, consumeMessageOrderly=false, retryQueueNums=2, retryMaxTimes=5, "
        "groupRetryPolicy=GroupRetryPolicy{type=CUSTOMIZED, exponentialRetryPolicy=null, customizedRetryPolicy=null}, "
        "brokerId=0, whichBrokerWhenConsumeSlowly=1, notifyConsumerIdsChangedEnable=true, groupSysFlag=0, "
        "consumeTimeoutMinute=15, subscriptionDataSet=null, attributes={}}",
    ]
    groups = all_groups(broker)
    assert groups["MqadminSubGroup"]["retryMaxTimes"] == 5 and groups["MqadminSubGroup"]["consumeEnable"] is False
    out = ok("updateSubGroup", "-n", ns, "-c", DEFAULT_CLUSTER, "-g", "MqadminSubGroup", "-r", "7", "-p",
             '{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":5000,"max":7200000,"multiplier":2}}')
    assert "groupRetryPolicy=GroupRetryPolicy{type=EXPONENTIAL, exponentialRetryPolicy=ExponentialRetryPolicy{" \
           "initial=5000, max=7200000, multiplier=2}, customizedRetryPolicy=null}" in out
    assert all_groups(broker)["MqadminSubGroup"]["retryMaxTimes"] == 7
    help_only = mqadmin("updateSubGroup", "-n", ns, "-g", "MqadminSubGroup")  # neither -b nor -c: Java prints help
    assert help_only.code == 0 and help_only.out.startswith("usage: mqadmin updateSubGroup")
    out = ok("deleteSubGroup", "-n", ns, "-b", broker, "-g", "MqadminSubGroup")
    assert out == f"delete subscription group [MqadminSubGroup] from broker [{broker}] success.\n"
    assert "MqadminSubGroup" not in all_groups(broker)


def all_groups(broker_addr: str) -> dict[str, dict[str, object]]:
    with BlockingRemotingClient(broker_addr) as client:
        response = client.invoke(create_request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
    assert response.code == ResponseCode.SUCCESS
    return decode_json(response.body.decode())["subscriptionGroupTable"]


# -- operators' commands: broker and NameServer config, permissions, send and consume, stats -------------------------


def perms(ns: str, topic: str) -> list[int]:
    """The perm of each broker's queues of ``topic`` in the NameServer's route."""
    return [q["perm"] for q in decode_json(ok("topicRoute", "-n", ns, "-t", topic))["queueDatas"]]


def test_broker_config_get_and_update(cluster: Cluster, sent: dict[int, list[SendResult]]) -> None:
    ns, broker = cluster.namesrv_addr, cluster.brokers[0]
    listed = ok("getBrokerConfig", "-n", ns, "-b", broker.addr).splitlines()
    assert listed[0] == f"============{broker.addr}============" and listed[-1] == ""
    assert f"{'fileReservedTime':<50}=  72" in listed and f"{'brokerName':<50}=  {BROKER_NAME}" in listed
    out = ok("updateBrokerConfig", "-n", ns, "-b", broker.addr, "-k", "fileReservedTime", "-v", "48")
    assert out == f"update broker config success, {broker.addr}\n"
    by_cluster = ok("getBrokerConfig", "-n", ns, "-c", DEFAULT_CLUSTER).splitlines()
    assert by_cluster[0] == f"============Master: {broker.addr}============"
    assert f"{'fileReservedTime':<50}=  48" in by_cluster
    assert "fileReservedTime=48" in (broker.home / "broker.conf").read_text().splitlines()  # what a restart reads
    run = mqadmin("updateBrokerConfig", "-n", ns, "-b", broker.addr, "-k", "listenPort", "-v", "1")
    assert run.code == 1 and "CODE: 16" in run.err and "Can not update config at runtime: listenPort" in run.err
    run = mqadmin("updateBrokerConfig", "-n", ns, "-b", broker.addr, "-k", "brokerConfigPath", "-v", "/etc/x")
    assert run.code == 1 and "Can not update config in black list." in run.err
    # brokerPermission: the broker registers again at once, so its topics are read-only in the route and producers
    # find no queue to send to (the broker itself refuses only ordered topics' sends, as Java's)
    try:
        out = ok("updateBrokerConfig", "-n", ns, "-c", DEFAULT_CLUSTER, "-k", "brokerPermission", "-v", "4")
        assert out == f"update broker config success, {broker.addr}\n"
        wait_until("the route of a read-only broker", lambda: perms(ns, TOPIC) == [4], ROUTE_TIMEOUT_S, interval=0.1)
        run = mqadmin("sendMessage", "-n", ns, "-t", TOPIC, "-p", "refused")
        assert run.code == 1 and "No route info" in run.err, run.err
    finally:
        ok("updateBrokerConfig", "-n", ns, "-b", broker.addr, "-k", "brokerPermission", "-v", "6")
        ok("updateBrokerConfig", "-n", ns, "-b", broker.addr, "-k", "fileReservedTime", "-v", "72")
    wait_until("the route of a writable broker", lambda: perms(ns, TOPIC) == [6], ROUTE_TIMEOUT_S, interval=0.1)


def test_topic_perm_and_broker_write_perm(cluster: Cluster, sent: dict[int, list[SendResult]]) -> None:
    ns, broker = cluster.namesrv_addr, cluster.brokers[0].addr
    ok("updateTopic", "-n", ns, "-c", DEFAULT_CLUSTER, "-t", "MqadminPerm", "-r", "2", "-w", "2")
    await_route(ns, "MqadminPerm")
    assert ok("updateTopicPerm", "-n", ns, "-b", broker, "-t", "MqadminPerm", "-p", "4").splitlines() == [
        f"update topic perm from 6 to 4 in {broker} success.",
        "TopicConfig [topicName=MqadminPerm, readQueueNums=2, writeQueueNums=2, perm=R--, "
        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false, attributes={}].",
    ]
    wait_until("perm 4 in the route", lambda: perms(ns, "MqadminPerm") == [4], ROUTE_TIMEOUT_S, interval=0.1)
    assert ok("updateTopicPerm", "-n", ns, "-b", broker, "-t", "MqadminPerm", "-p", "4") == \
        "new perm equals to the old one!\n"
    assert ok("updateTopicPerm", "-n", ns, "-b", "127.0.0.1:1", "-t", "MqadminPerm", "-p", "6") == \
        "updateTopicPerm error broker not exit or broker is not master!.\n"
    assert ok("updateTopicPerm", "-n", ns, "-c", DEFAULT_CLUSTER, "-t", "MqadminPerm", "-p", "6") == \
        f"update topic perm from 4 to 6 in {broker} success.\n"
    wait_until("perm 6 in the route", lambda: perms(ns, "MqadminPerm") == [6], ROUTE_TIMEOUT_S, interval=0.1)
    # the NameServer's routes only: every topic of the broker loses write permission, then gets it back
    topics = len([t for t in ok("topicList", "-n", ns).split() if BROKER_NAME in
                  [b["brokerName"] for b in decode_json(ok("topicRoute", "-n", ns, "-t", t))["brokerDatas"]]])
    wiped = ok("wipeWritePerm", "-n", ns, "-b", BROKER_NAME)
    assert wiped == f"wipe write perm of broker[{BROKER_NAME}] in name server[{ns}] OK, {topics}\n"
    assert perms(ns, TOPIC) == [4] and perms(ns, "MqadminPerm") == [4]
    added = ok("addWritePerm", "-n", ns, "-b", BROKER_NAME)
    assert added == f"add write perm of broker[{BROKER_NAME}] in name server[{ns}] OK, {topics}\n"
    assert perms(ns, TOPIC) == [6] and perms(ns, "MqadminPerm") == [6]
    dead = f"127.0.0.1:{free_port()}"
    run = mqadmin("wipeWritePerm", "-n", f"{ns};{dead}", "-b", BROKER_NAME)
    assert run.out.splitlines()[1] == f"wipe write perm of broker[{BROKER_NAME}] in name server[{dead}] Failed"
    assert run.code == 1 and dead in run.err
    ok("addWritePerm", "-n", ns, "-b", BROKER_NAME)


def test_kv_and_namesrv_config(cluster: Cluster) -> None:
    ns = cluster.namesrv_addr
    assert ok("updateKvConfig", "-n", ns, "-s", "MqadminNs", "-k", "k1", "-v", "v1") == \
        "create or update kv config to namespace success.\n"
    assert asyncio.run(kv_value(ns, "MqadminNs", "k1")) == "v1"
    assert ok("deleteKvConfig", "-n", ns, "-s", "MqadminNs", "-k", "k1") == \
        "delete kv config from namespace success.\n"
    assert asyncio.run(kv_value(ns, "MqadminNs", "k1")) is None
    config = ok("getNamesrvConfig", "-n", ns).splitlines()
    assert config[0] == f"============{ns}============"
    assert f"{'orderMessageEnable':<50}=  false" in config
    try:
        assert ok("updateNamesrvConfig", "-n", ns, "-k", "orderMessageEnable", "-v", "true") == \
            f"update name server config success![{ns}]\norderMessageEnable : true\n"
        assert f"{'orderMessageEnable':<50}=  true" in ok("getNamesrvConfig", "-n", ns).splitlines()
    finally:
        ok("updateNamesrvConfig", "-n", ns, "-k", "orderMessageEnable", "-v", "false")
    run = mqadmin("updateNamesrvConfig", "-n", ns, "-k", "kvConfigPath", "-v", "/etc/x")
    assert run.code == 1 and "Can not update config in black list." in run.err


async def kv_value(ns: str, namespace: str, key: str) -> str | None:
    from broker.common.errors import MQClientError
    from broker.tools import MQAdminExt

    async with MQAdminExt(ns) as admin:
        try:
            return await admin.get_kv_config(namespace, key)
        except MQClientError:
            return None


def test_send_and_consume_message(cluster: Cluster) -> None:
    ns = cluster.namesrv_addr
    ok("updateTopic", "-n", ns, "-c", DEFAULT_CLUSTER, "-t", "MqadminSend", "-r", "2", "-w", "2")
    await_route(ns, "MqadminSend")
    out = ok("sendMessage", "-n", ns, "-t", "MqadminSend", "-p", "héllo", "-k", "key1", "-c", "TagS",
             "-b", BROKER_NAME, "-i", "1").splitlines()
    assert out[0] == f"{'#Broker Name':<32}  {'#QID':<4}  {'#Send Result':<20}    #MsgId"
    assert out[1].split()[:3] == [BROKER_NAME, "1", "SEND_OK"]
    msg_id = out[1].split()[3]
    assert ok("sendMessage", "-n", ns, "-t", "MqadminSend", "-p", "second").splitlines()[1].split()[2] == "SEND_OK"
    consumed = ok("consumeMessage", "-n", ns, "-t", "MqadminSend", "-b", BROKER_NAME, "-i", "1").splitlines()
    assert consumed[0] == "Consume ok"
    assert consumed[1].startswith(f"MSGID: {msg_id} MessageExt [brokerName={BROKER_NAME}, queueId=1, ")
    assert "properties={" in consumed[1] and "KEYS=key1" in consumed[1] and "TAGS=TagS" in consumed[1]
    assert "body=[104, -61, -87, 108, 108, 111], transactionId='null'}] BODY: héllo" in consumed[1]
    assert consumed[-1].startswith(f"MessageQueue [topic=MqadminSend, brokerName={BROKER_NAME}, queueId=1] "
                                   "print msg finished. status=NO_NEW_MSG, offset=")
    everything = ok("consumeMessage", "-n", ns, "-t", "MqadminSend")
    assert everything.count("MSGID: ") == 2 and "BODY: second" in everything
    limited = ok("consumeMessage", "-n", ns, "-t", TOPIC, "-c", "1")
    assert limited.count("MSGID: ") == 1 and "The older -1 message of the " in limited  # Java's arithmetic
    assert ok("consumeMessage", "-n", ns, "-t", "MqadminSend", "-i", "1") == "Please set the brokerName before queueId!"
    assert ok("sendMessage", "-n", ns, "-t", "MqadminSend", "-p", "x", "-i", "1") == \
        "Broker name must be set if the queue is chosen!"
    rt = ok("checkMsgSendRT", "-n", ns, "-t", "MqadminSend", "-a", "3", "-s", "16").splitlines()
    assert rt[0] == f"{'#Broker Name':<32}  {'#QID':<4}  {'#Send Result':<20}    #RT"
    assert [r.split()[:3] for r in rt[1:4]] == [[BROKER_NAME, "0", "true"], [BROKER_NAME, "1", "true"],
                                                [BROKER_NAME, "0", "true"]]
    assert re.fullmatch(r"Avg RT: \d+\.\d\d", rt[4])


def stats_row(ns: str, topic: str) -> list[str]:
    rows = [line.split() for line in ok("statsAll", "-n", ns, "-t", topic).splitlines()[1:]]
    return rows[0] if rows else []


def test_stats_all(cluster: Cluster) -> None:
    """A topic's puts and a group's gets, as the broker's stats items count them (sampled every 10 s)."""
    ns, broker = cluster.namesrv_addr, cluster.brokers[0].addr
    header = ok("statsAll", "-n", ns, "-t", "none").splitlines()
    assert header == [f"{'#Topic':<64}  {'#Consumer Group':<64} {'#Accumulation':>12} {'#InTPS':>11} "
                      f"{'#OutTPS':>11} {'#InMsg24Hour':>14} {'#OutMsg24Hour':>14}"]
    topic, group = "MqadminStats", "MqadminStatsGroup"
    ok("updateTopic", "-n", ns, "-c", DEFAULT_CLUSTER, "-t", topic, "-r", "1", "-w", "1")
    await_route(ns, topic)
    assert stats_row(ns, topic) == [topic, "0", "0.00", "0", "NO_CONSUMER"]
    for body in ("a", "b", "c"):
        ok("sendMessage", "-n", ns, "-t", topic, "-p", body)
    ok("updateSubGroup", "-n", ns, "-b", broker, "-g", group)
    with BlockingRemotingClient(broker) as client:  # the group consumes the topic: it has an offset there
        mq = MessageQueue(topic, BROKER_NAME, 0)
        assert client.invoke(protocol.update_consumer_offset_request(group, mq, 1)).code == 0
    assert ok("consumeMessage", "-n", ns, "-t", topic, "-g", group).count("Consume ok") == 1
    wait_until("statsAll counting the puts and gets", lambda: stats_row(ns, topic)[-2:] == ["3", "3"], 15.0,
               interval=0.5)
    row = stats_row(ns, topic)
    assert row[:3] == [topic, group, "2"] and float(row[3]) > 0 and float(row[4]) > 0
    active = {line.split()[0] for line in ok("statsAll", "-n", ns, "-a").splitlines()[1:]}
    assert topic in active and "TBW102" not in active and "MqadminPerm" not in active  # no puts, no gets


# -- Apache's mqadmin beside ours --------------------------------------------------------------------------------------

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
    from tests.apache import DRIVER_JVM_ARGS, apache_artifact
    from tests.javatools import JavaProgram, resolve_classpath

    home = tmp_path_factory.mktemp("apache-mqadmin")
    return JavaProgram(resolve_classpath([apache_artifact("rocketmq-tools")]),
                       "org.apache.rocketmq.tools.command.MQAdminStartup",
                       (*DRIVER_JVM_ARGS, f"-Duser.home={home}", f"-Drocketmq.home.dir={home}"))


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
