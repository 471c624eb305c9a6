"""The console's JSON API without a browser, on our cluster: what each page asks for (cluster, topics, groups,
lookups, a message, its trace, the charts' samples) answers with what the scenario put there, the changes (create,
send, reset, resend, delete) change the cluster, and every bad input gets a JSON error with its status. ``mqconsole``
itself runs as a process once."""

from __future__ import annotations

import base64
import json
import signal
import socket
from pathlib import Path

import pytest

from broker.client import protocol
from broker.client.blocking import BlockingClient
from broker.common.message import PROPERTY_RETRY_TOPIC
from broker.common.validation import retry_topic
from broker.console import ConsoleServer, start_console_process, startup
from broker.tools.local_cluster import DEFAULT_CLUSTER, Cluster
from tests.console.conftest import ORDERS, ConsoleData, api, api_ok
from tests.helpers import mqadmin, mqadmin_ok, wait_until


def test_the_cluster_answers_with_the_broker_and_its_figures(console: ConsoleServer, cluster: Cluster) -> None:
    answer = api_ok(console, "GET", "/api/cluster")
    (broker,) = [b for b in answer["brokers"] if b["addr"] == cluster.brokers[0].addr]
    assert (broker["cluster"], broker["role"], broker["reachable"], broker["active"]) == (DEFAULT_CLUSTER, "MASTER",
                                                                                          True, True)
    assert broker["version"].startswith("V5_") and 0 < broker["diskRatio"] < 1
    assert broker["replication"] == {"master": True, "commitLogMaxOffset": broker["replication"]["commitLogMaxOffset"],
                                     "inSyncSlaves": 0, "slaves": []}
    runtime = api_ok(console, "GET", f"/api/brokers/{cluster.brokers[0].addr}")["runtime"]
    assert runtime["brokerVersionDesc"] == broker["version"] and "putTps" in runtime


def test_topics_filter_and_detail(console: ConsoleServer, data: ConsoleData) -> None:
    listed = api_ok(console, "GET", "/api/topics?q=consoleorders&type=NORMAL")["topics"]
    assert listed == [{"topic": data.topic, "type": "NORMAL"}]
    types = {t["topic"]: t["type"] for t in api_ok(console, "GET", "/api/topics")["topics"]}
    assert (types["TBW102"], types[DEFAULT_CLUSTER], types[f"%DLQ%{data.dlq_group}"]) == ("SYSTEM", "SYSTEM", "DLQ")
    assert all(t["type"] == "DLQ" for t in api_ok(console, "GET", "/api/topics?type=DLQ")["topics"])
    detail = api_ok(console, "GET", f"/api/topics/{data.topic}")
    assert [(b["readQueueNums"], b["writeQueueNums"], b["permText"]) for b in detail["brokers"]] == [(4, 4, "RW-")]
    assert sum(q["maxOffset"] for q in detail["queues"]) >= ORDERS + 2
    assert data.spark_group in detail["consumerGroups"]


def test_lookups_find_the_produced_messages(console: ConsoleServer, data: ConsoleData) -> None:
    order = data.orders[3]
    by_key = api_ok(console, "GET", f"/api/messages/by-key?topic={data.topic}&key=order-3")["messages"]
    assert [(m["msgId"], m["keys"], m["brokerName"]) for m in by_key] == [(order.msg_id, "order-3",
                                                                          order.message_queue.broker_name)]
    for msg_id in (order.msg_id, order.offset_msg_id):  # a UNIQ_KEY, and the broker's offsetMsgId
        found = api_ok(console, "GET", f"/api/messages/by-id?topic={data.topic}&msgId={msg_id}")["messages"]
        assert [m["msgId"] for m in found] == [order.msg_id], msg_id
    mq = order.message_queue
    found = api_ok(console, "GET", f"/api/messages/by-offset?topic={data.topic}&brokerName={mq.broker_name}"
                                   f"&queueId={mq.queue_id}&offset={order.queue_offset}")["messages"]
    assert [m["msgId"] for m in found] == [order.msg_id]
    in_range = api_ok(console, "GET", f"/api/messages/by-time?topic={data.topic}&begin={data.begin_ms}"
                                      f"&end={data.end_ms}")["messages"]
    assert {m["msgId"] for m in in_range} == {r.msg_id for r in [*data.orders, data.binary]}
    assert [m["storeTimestamp"] for m in in_range] == sorted(m["storeTimestamp"] for m in in_range)
    assert api_ok(console, "GET", f"/api/messages/by-key?topic={data.topic}&key=no-such-key") == {"messages": []}


def test_a_message_has_its_body_properties_consumers_and_trace(console: ConsoleServer, data: ConsoleData) -> None:
    order = data.orders[1]
    m = api_ok(console, "GET", f"/api/topics/{data.topic}/messages/{order.msg_id}")
    assert json.loads(m["bodyText"]) == {"order": 1, "amount": 10}
    assert (m["properties"]["KEYS"], m["properties"]["TAGS"], m["queueOffset"]) == ("order-1", "paid",
                                                                                   order.queue_offset)
    assert {t["consumerGroup"] for t in m["tracks"]} >= {data.spark_group}
    binary = api_ok(console, "GET", f"/api/topics/{data.topic}/messages/{data.binary.msg_id}")
    assert (binary["bodyText"], base64.b64decode(binary["body"])) == (None, bytes(range(256)))

    def pub_traced() -> bool:
        records = api_ok(console, "GET", f"/api/traces/{data.traced.msg_id}")["records"]
        return [(r["type"], r["group"], r["status"]) for r in records][:1] == [("Pub", "ConsoleTraced", "success")]

    wait_until("the Pub trace record", pub_traced, 20, interval=0.5)
    assert api_ok(console, "GET", f"/api/traces/{data.orders[0].msg_id}")["records"] == []


def test_the_spark_query_group_shows_its_lag(console: ConsoleServer, data: ConsoleData) -> None:
    """The connector's own commit: the group is online with the driver's client, marked as Spark's, and its lag is
    what it did not commit."""
    (row,) = [g for g in api_ok(console, "GET", "/api/groups?spark=true")["groups"] if g["group"] == data.spark_group]
    detail = api_ok(console, "GET", f"/api/groups/{data.spark_group}")
    assert (row["spark"], row["state"], row["consumeType"], detail["topics"]) == (True, "ONLINE", "PULL", [data.topic])
    assert [c["spark"] for c in detail["clients"]] == [True]
    assert {q["queueId"]: q["consumerOffset"] for q in detail["queues"]} == data.spark_offsets
    assert all(q["lag"] == q["brokerOffset"] - q["consumerOffset"] for q in detail["queues"])
    assert row["lag"] == sum(q["lag"] for q in detail["queues"]) > 0


def test_reset_offsets_by_time_moves_the_group(console: ConsoleServer, data: ConsoleData) -> None:
    group = "ConsoleResetGroup"
    mqadmin_ok("updateSubGroup", "-n", data.namesrv_addr, "-c", DEFAULT_CLUSTER, "-g", group)
    with BlockingClient(data.namesrv_addr) as client:  # an offline group with offsets at each queue's end
        for mq in client.fetch_message_queues(data.topic):
            commit = protocol.update_consumer_offset_request(group, mq, client.get_max_offset(mq))
            assert client.client(client.broker_addr(mq)).invoke(commit, 5000).code == 0
    done = api_ok(console, "POST", f"/api/groups/{group}/reset", {"topic": data.topic, "timestamp": data.begin_ms})
    assert done["queues"] and all(q["offset"] == 0 for q in done["queues"]), done
    assert done["mode"] in ("broker", "tool")


def test_a_dead_letter_is_listed_and_resent_to_its_group(console: ConsoleServer, data: ConsoleData) -> None:
    dead = api_ok(console, "GET", f"/api/groups/{data.dlq_group}/dlq")["messages"]
    assert [m["msgId"] for m in dead] == [data.dead_letter_id]
    sent = api_ok(console, "POST", f"/api/groups/{data.dlq_group}/dlq/resend", {"msgId": data.dead_letter_id})
    assert (sent["sendStatus"], sent["topic"]) == ("SEND_OK", retry_topic(data.dlq_group))
    again = api_ok(console, "GET", f"/api/topics/{retry_topic(data.dlq_group)}/messages/{sent['offsetMsgId']}")
    assert (again["bodyText"], again["properties"][PROPERTY_RETRY_TOPIC]) == (json.dumps({"order": 0, "amount": 0}),
                                                                              data.topic)


def test_create_send_and_delete_a_topic(console: ConsoleServer, data: ConsoleData) -> None:
    topic = "ConsoleApiMade"
    made = api_ok(console, "POST", "/api/topics", {"topic": topic, "cluster": DEFAULT_CLUSTER, "readQueueNums": 2,
                                                   "writeQueueNums": 2})
    assert (made["readQueueNums"], len(made["brokers"])) == (2, 1)
    sent = api_ok(console, "POST", f"/api/topics/{topic}/messages", {"body": "hi", "keys": "k1", "tags": "t"})
    assert sent["sendStatus"] == "SEND_OK" and sent["queueId"] in (0, 1)
    assert api(console, "DELETE", f"/api/topics/{topic}")[0] == 400  # no confirmation
    assert api(console, "DELETE", f"/api/topics/{topic}?confirm=other")[0] == 400
    assert api_ok(console, "DELETE", f"/api/topics/{topic}?confirm={topic}")["clusters"] == [DEFAULT_CLUSTER]
    assert api(console, "GET", f"/api/topics/{topic}")[0] == 404
    assert mqadmin("topicRoute", "-n", data.namesrv_addr, "-t", topic).code == 1


def test_charts_have_samples(console: ConsoleServer, data: ConsoleData) -> None:
    wait_until("samples of the groups", lambda: any(g["group"] == data.spark_group and len(g["points"]) >= 2
                                                    for g in api_ok(console, "GET", "/api/metrics")["groups"]), 10)
    metrics = api_ok(console, "GET", "/api/metrics")
    (broker,) = metrics["brokers"]
    assert len(broker["points"]) >= 2 and all(len(p) == 4 for p in broker["points"])
    assert metrics["intervalS"] == 0.5 and metrics["samples"] >= 2


def test_every_bad_input_gets_a_json_error(console: ConsoleServer, data: ConsoleData) -> None:
    cases = [
        ("GET", "/api/nothing", None, 404, "no such API"),
        ("GET", "/api/topics/NoSuchTopic", None, 404, "No topic route"),
        ("GET", "/api/topics/bad%20name", None, 400, "illegal characters"),
        ("GET", f"/api/messages/by-offset?topic={data.topic}&brokerName=broker-a&queueId=0&offset=x", None, 400,
         "offset must be an integer"),
        ("GET", f"/api/messages/by-offset?topic={data.topic}&brokerName=broker-a&queueId=-1&offset=0", None, 400,
         "queueId must be"),
        ("GET", f"/api/messages/by-time?topic={data.topic}&begin=yesterday&end=now", None, 400, "begin must be"),
        ("GET", f"/api/messages/by-key?topic={data.topic}", None, 400, "key is required"),
        ("GET", "/api/messages/by-key?topic=NoSuchTopic&key=k", None, 404, "No topic route"),
        ("POST", "/api/topics", b"{not json", 400, "not JSON"),
        ("POST", "/api/topics", b"[1, 2]", 400, "must be a JSON object"),
        ("POST", "/api/topics", json.dumps({"topic": "X1", "cluster": "NoSuchCluster"}).encode(), 404, "no cluster"),
        ("POST", "/api/topics", json.dumps({"topic": "X1", "cluster": DEFAULT_CLUSTER, "perm": 9}).encode(), 400,
         "perm must be"),
        ("POST", f"/api/topics/{data.topic}/messages", json.dumps({"body": 5}).encode(), 400, "body is required"),
        ("POST", "/api/topics/NoSuchTopic/messages", json.dumps({"body": "x"}).encode(), 404, "No topic route"),
        ("GET", "/api/groups/NoSuchGroup", None, 404, "no committed offsets"),
        ("POST", f"/api/groups/{data.dlq_group}/dlq/resend", json.dumps({"msgId": "00"}).encode(), 404, "no message"),
        ("DELETE", "/api/cluster", None, 405, "not allowed"),
    ]
    for method, path, body, status, words in cases:
        got, answer = api(console, method, path, raw=body)
        assert (got, words in answer.get("error", "")) == (status, True), (method, path, got, answer)
    host, port = console.url.split("/")[2].split(":")
    for raw, status in ((b"GARBAGE\r\n\r\n", b"400"), (b"GET /../../etc/passwd HTTP/1.0\r\n\r\n", b"404"),
                        (b"HEAD /api/cluster HTTP/1.0\r\n\r\n", b"501")):
        with socket.create_connection((host, int(port))) as sock:
            sock.sendall(raw)
            answer = sock.makefile("rb").read()
        assert answer.split(b" ")[1] == status and b"Traceback" not in answer, (raw, answer)


def test_mqconsole_runs_as_a_process(tmp_path: Path, cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    """Started as the demo starts it; SIGTERM ends it with status 0. A taken port is one line on stderr and status 1,
    bad options status 2 (those two in-process)."""
    with start_console_process(tmp_path / "console", cluster.namesrv_addr, sample_interval_s=1) as proc:
        assert proc.console().startswith(f"mqconsole on http://{proc.addr}/")
        with socket.create_connection(("127.0.0.1", proc.port)) as sock:
            sock.sendall(b"GET /index.html HTTP/1.0\r\n\r\n")
            assert b'<script type="module" src="/app.js">' in sock.makefile("rb").read()
        capsys.readouterr()
        assert startup.main(["-n", cluster.namesrv_addr, "--port", str(proc.port)]) == 1
        err = capsys.readouterr().err
        assert (err.count("\n"), "Address already in use" in err) == (1, True), err
        proc.popen.send_signal(signal.SIGTERM)
        assert proc.popen.wait(15) == 0
    for bad in (["--port", "x"], ["-n", cluster.namesrv_addr, "--accessKey", "ak"]):
        with pytest.raises(SystemExit) as exited:
            startup.main(bad)
        assert exited.value.code == 2, bad
