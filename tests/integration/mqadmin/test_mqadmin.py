"""``mqadmin`` against our NameServer and broker as real processes (tests/integration/cluster.py).

Each command runs in-process through ``broker.tools.mqadmin.main`` (its stdout and stderr captured) and its output
is checked for the values the servers hold: the created topic in topicList, the route naming the broker, topic
offsets after sends, a consumer group's offsets after commits and after resetOffsetByTime, messages found by key,
by offsetMsgId, by UNIQ_KEY and by queue offset. Failures (unknown command, bad option, unreachable NameServer)
must be one line and exit code 1, never a traceback, also when run as ``python -m broker.tools``.

The operators' commands change the servers and are checked there: a broker's config live and in its file, a topic's
and a broker's write permission in the routes, KV and NameServer config, sends, pulls and the stats items.

Apache's own ``mqadmin`` beside ours on the same scenario: test_mqadmin_apache.py.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.client import protocol
from broker.client.blocking import BlockingRemotingClient
from broker.client.message import MessageQueue, SendResult
from broker.common.attributes import parse_attributes
from broker.common.fastjson import decode_json
from broker.common.mq_version import version_desc
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from broker.tools import commands
from broker.tools.admin import decode_message_id, route_topic
from broker.tools.mqadmin import SUB_COMMANDS, command_help, find_sub_command
from tests.helpers import free_port, mqadmin, wait_until
from tests.helpers import mqadmin_ok as ok
from tests.integration.cluster import DEFAULT_CLUSTER, REPO, Cluster
from tests.integration.mqadmin.scenario import (
    BROKER_NAME,
    GROUP,
    REQUIRED_COMMANDS,
    ROUTE_TIMEOUT_S,
    TOPIC,
    OnlineConsumer,
    await_route,
    commit,
    perms,
    progress,
    rows,
)

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
