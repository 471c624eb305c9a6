"""One scripted NameServer session, run through our processors and through Apache's (NamesrvOracle.java).

The script (``SCENARIO``) registers brokers the ways brokers do (master, slave, another cluster with a zone and an
acting master, a single-topic increment too early, a compressed body, a pre-3.0.11 body, a wrong CRC), then asks
every question a client, broker or admin tool asks, changes topics, permissions and KV entries, and drops brokers
by UNREGISTER_BROKER and by a closed connection. Every answer is compared: code, remark, extFields and body bytes.

``run_ours`` plays the script against NamesrvController's processor table in-process (no sockets); the Java side
prints the same shape of JSON lines. The capture in ``namesrv_java_capture.json`` lets the comparison run without a
JDK; ``test_namesrv_java_oracle.py`` checks it against a live JVM.
"""

from __future__ import annotations

import asyncio
import base64
import json
import struct
import zlib
from pathlib import Path
from typing import Any

from broker.namesrv.config import NamesrvConfig
from broker.namesrv.server import NamesrvController
from broker.remoting.codes import RequestCode as RC
from broker.remoting.command import create_request
from broker.remoting.connection import not_supported_response
from tests.javatools import JavaProgram, build_program, rocketmq_artifact

CAPTURE = Path(__file__).with_name("namesrv_java_capture.json")
# Apache's NameServer 5.5.0 (5.5.1's namesrv is not on Maven Central) on remoting/common 5.5.1 (fastjson2 2.0.63),
# so the processors and route table are the released ones and the JSON is 5.5.1's.
ORACLE_ARTIFACTS = [
    rocketmq_artifact("rocketmq-namesrv", "5.5.0"),
    rocketmq_artifact("rocketmq-remoting"),
    rocketmq_artifact("rocketmq-common"),
]
NEW = 515  # MQVersion V5_5_1: standard-JSON routes
OLD = 300  # a 4.x client before V4_9_4: plain fastjson routes
ANCIENT = 30  # before V3_0_11: REGISTER_BROKER carries a bare TopicConfigSerializeWrapper
CONFIG = {"orderMessageEnable": "true"}
# Apache 5.5.0's ClientRequestProcessor has 5.5.0's FAQ URL compiled in; 5.5.1 (ours) points elsewhere.
JAVA_550_FAQ_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"
FAQ_URL = "https://rocketmq.apache.org/docs/faq/"

SYSTEM_TOPICS = [
    *("TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "OFFSET_MOVED_EVENT", "SELF_TEST_TOPIC"),
    *("RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"),
    *("rmq_sys_REVIVE_LOG_DefaultCluster", "DefaultCluster", "DefaultCluster_REPLY_TOPIC", "rmq_sys_wheel_timer"),
]


def topic_config(name: str, queues: int = 4, perm: int = 6, sys_flag: int = 0, order: bool = False) -> dict[str, Any]:
    return {
        "attributes": {}, "order": order, "perm": perm, "readQueueNums": queues, "topicFilterType": "SINGLE_TAG",
        "topicName": name, "topicSysFlag": sys_flag, "writeQueueNums": queues,
    }


def version(counter: int, state: int = 0) -> dict[str, int]:
    return {"counter": counter, "stateVersion": state, "timestamp": 1_700_000_000_000 + counter}


def version_body(counter: int) -> bytes:
    return json.dumps(version(counter)).encode()


def register_body(topics: list[dict[str, Any]], data_version: dict[str, int], filter_servers=()) -> bytes:
    """RegisterBrokerBody JSON as a 5.x broker sends it (TopicConfigAndMappingSerializeWrapper inside)."""
    wrapper = {
        "dataVersion": data_version,
        "mappingDataVersion": version(0),
        "topicConfigTable": {t["topicName"]: t for t in topics},
        "topicQueueMappingDetailMap": {},
        "topicQueueMappingInfoMap": {},
    }
    return json.dumps({"filterServerList": list(filter_servers), "topicConfigSerializeWrapper": wrapper}).encode()


def compressed_register_body(topics: list[dict[str, Any]], data_version: dict[str, int]) -> bytes:
    """RegisterBrokerBody.encode(true), built by hand from its layout (independent of our decoder)."""

    def part(data: bytes) -> bytes:
        return struct.pack(">i", len(data)) + data

    raw = part(json.dumps(data_version).encode()) + struct.pack(">i", len(topics))
    for t in topics:
        text = f"{t['topicName']} {t['readQueueNums']} {t['writeQueueNums']} {t['perm']} {t['topicFilterType']} {{}}"
        raw += part(text.encode())
    raw += part(b"[]") + struct.pack(">i", 0)
    return zlib.compress(raw, 9)


def crc(body: bytes) -> str:
    return str(zlib.crc32(body) & 0x7FFFFFFF)


def request(conn: int, code: int, ext: dict[str, Any] | None = None, body: bytes = b"", ver: int = NEW) -> dict:
    return {
        "conn": conn,
        "code": int(code),
        "version": ver,
        "extFields": {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in (ext or {}).items()},
        "body": base64.b64encode(body).decode(),
    }


def register(conn, cluster, name, addr, broker_id, topics, data_version, ver=NEW, filter_servers=(), **extra) -> dict:
    """REGISTER_BROKER as a broker sends it; ``extra`` adds header fields (``body`` replaces the body)."""
    body = extra.pop("body", None) or register_body(topics, data_version, filter_servers)
    ext = {"brokerName": name, "brokerAddr": addr, "clusterName": cluster, "haServerAddr": addr.replace(":1", ":2"),
           "brokerId": broker_id, "bodyCrc32": crc(body), **extra}
    if ver >= 413:
        ext.setdefault("enableActingMaster", False)
        ext.setdefault("compressed", False)
    return request(conn, RC.REGISTER_BROKER, ext, body, ver)


def identity(cluster, name, addr, broker_id) -> dict[str, Any]:
    return {"clusterName": cluster, "brokerName": name, "brokerAddr": addr, "brokerId": broker_id}


def _scenario() -> list[dict]:
    a_topics = [topic_config(t) for t in SYSTEM_TOPICS] + [
        topic_config("TopicTest"), topic_config("Shared", 8), topic_config("主题", 2),
        topic_config("UnitTopic", sys_flag=1), topic_config("UnitSubTopic", sys_flag=2),
        topic_config("UnitBoth", sys_flag=3), topic_config("OrderTopic", order=True),
    ]
    b_topics = [topic_config("TBW102"), topic_config("Shared", 2, perm=4), topic_config("OnlyB")]
    c_topics = [topic_config("OtherTopic"), topic_config("Shared", 1)]
    a, a1, b = "127.0.0.1:10911", "127.0.0.1:10921", "127.0.0.1:10931"
    c1, c2 = "127.0.0.1:10941", "127.0.0.1:10951"
    steps: list[dict] = [
        register(1, "DefaultCluster", "broker-a", a, 0, a_topics, version(1)),
        register(2, "DefaultCluster", "broker-a", a1, 1, a_topics, version(1)),  # a slave: gets its master
        register(3, "DefaultCluster", "broker-b", b, 0, b_topics, version(5), filter_servers=["127.0.0.1:9999"]),
        # A zone, an acting master and a short heartbeat timeout; the slave registers before any master.
        register(4, "OtherCluster", "broker-é", c1, 1, c_topics, version(2), enableActingMaster=True,
                 heartbeatTimeoutMillis=30000, __ZONE_NAME="zone-1"),
        register(5, "OtherCluster", "broker-é", c2, 2, c_topics, version(2), enableActingMaster=True),
        # A single-topic increment before the broker's first full registration is refused, with side effects.
        register(6, "DefaultCluster", "broker-d", "127.0.0.1:10961", 0, [topic_config("Lonely")], version(1)),
        # Hash collisions in the brokerAddrs HashMap: ids 17 and 1 share a bin of 16.
        register(7, "DefaultCluster", "broker-f", "127.0.0.1:10971", 17, b_topics, version(1)),
        register(8, "DefaultCluster", "broker-f", "127.0.0.1:10981", 1, b_topics, version(1)),
        register(9, "DefaultCluster", "broker-f", "127.0.0.1:10991", 0, b_topics, version(1)),
        # Compressed, pre-3.0.11, wrong CRC.
        register(10, "DefaultCluster", "broker-z", "127.0.0.1:11011", 0, [], version(3), compressed=True,
                 body=compressed_register_body([topic_config("Zipped", 3), topic_config("Shared", 5)], version(3))),
        register(11, "DefaultCluster", "broker-old", "127.0.0.1:11021", 0, [], {}, ver=ANCIENT,
                 body=json.dumps({"dataVersion": version(1), "topicConfigTable": {
                     "Ancient": topic_config("Ancient"), "TBW102": topic_config("TBW102")}}).encode()),
        register(12, "DefaultCluster", "broker-x", "127.0.0.1:11031", 0, b_topics, version(1)),
    ]
    steps[-1]["extFields"]["bodyCrc32"] = "12345"  # crc32 not match
    for ver, ext in [(NEW, {}), (OLD, {}), (OLD, {"acceptStandardJsonOnly": True})]:
        steps.append(request(20, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "Shared", **ext}, ver=ver))
    steps += [
        request(20, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "OtherTopic"}, ver=OLD),
        request(20, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "OtherTopic"}),
        request(20, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "主题"}, ver=OLD),
        request(20, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "NoSuchTopic"}),
        request(20, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "Lonely"}),
        request(20, RC.GET_BROKER_CLUSTER_INFO),
        request(20, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
        request(20, RC.GET_TOPICS_BY_CLUSTER, {"cluster": "DefaultCluster"}),
        request(20, RC.GET_TOPICS_BY_CLUSTER, {"cluster": "NoCluster"}),
        request(20, RC.GET_SYSTEM_TOPIC_LIST_FROM_NS),
        request(20, RC.GET_UNIT_TOPIC_LIST),
        request(20, RC.GET_HAS_UNIT_SUB_TOPIC_LIST),
        request(20, RC.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST),
        request(20, RC.GET_BROKER_MEMBER_GROUP, {"clusterName": "DefaultCluster", "brokerName": "broker-f"}),
        request(20, RC.GET_BROKER_MEMBER_GROUP, {"clusterName": "DefaultCluster", "brokerName": "nobody"}),
        # KV config: order topics reach routes and broker registrations.
        request(20, RC.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "OrderTopic", "value": "broker-a:4"}),
        request(20, RC.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "Shared", "value": "broker-a:8"}),
        request(20, RC.PUT_KV_CONFIG, {"namespace": "other", "key": "k", "value": "v"}),
        request(20, RC.GET_KV_CONFIG, {"namespace": "other", "key": "k"}),
        request(20, RC.GET_KV_CONFIG, {"namespace": "other", "key": "missing"}),
        request(20, RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "ORDER_TOPIC_CONFIG"}),
        request(20, RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "nothing"}),
        request(20, RC.DELETE_KV_CONFIG, {"namespace": "other", "key": "k"}),
        request(20, RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "other"}),
        request(20, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "OrderTopic"}),
        # Same DataVersion: liveness only, answered with the order-topic KVTable; QUERY_DATA_VERSION both ways.
        register(1, "DefaultCluster", "broker-a", a, 0, a_topics, version(1)),
        request(1, RC.QUERY_DATA_VERSION, identity("DefaultCluster", "broker-a", a, 0), version_body(1)),
        request(1, RC.QUERY_DATA_VERSION, identity("DefaultCluster", "broker-a", a, 0), version_body(2)),
        request(1, RC.QUERY_DATA_VERSION, identity("DefaultCluster", "broker-q", "1.2.3.4:5", 0), version_body(2)),
        request(1, RC.BROKER_HEARTBEAT, identity("DefaultCluster", "broker-a", a, 0)),
        # A new DataVersion changes queues; an unchanged one with a changed topic does not.
        register(3, "DefaultCluster", "broker-b", b, 0, [*b_topics[:1], topic_config("Shared", 6, perm=6)], version(5)),
        request(20, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "Shared"}),
        register(3, "DefaultCluster", "broker-b", b, 0, [*b_topics[:1], topic_config("Shared", 6, perm=6)], version(6)),
        request(20, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "Shared"}),
        request(20, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "OnlyB"}),
        # Permissions.
        request(20, RC.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-b"}),
        request(20, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "Shared"}),
        request(20, RC.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-b"}),
        request(20, RC.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "nobody"}),
        # Topic registration and deletion.
        request(20, RC.REGISTER_TOPIC_IN_NAMESRV, {"topic": "Registered"}, json.dumps({"queueDatas": [
            {"brokerName": "broker-a", "perm": 6, "readQueueNums": 2, "topicSysFlag": 0, "writeQueueNums": 2},
            {"brokerName": "broker-b", "perm": 6, "readQueueNums": 1, "topicSysFlag": 0, "writeQueueNums": 1},
        ]}).encode()),
        request(20, RC.REGISTER_TOPIC_IN_NAMESRV, {"topic": "Rejected"}, json.dumps({"queueDatas": [
            {"brokerName": "broker-a", "perm": 6, "readQueueNums": 2, "topicSysFlag": 0, "writeQueueNums": 2},
            {"brokerName": "ghost", "perm": 6, "readQueueNums": 1, "topicSysFlag": 0, "writeQueueNums": 1},
        ]}).encode()),
        request(20, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "Registered"}),
        request(20, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "Rejected"}),
        request(20, RC.DELETE_TOPIC_IN_NAMESRV, {"topic": "Shared", "clusterName": "OtherCluster"}),
        request(20, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "Shared"}),
        request(20, RC.DELETE_TOPIC_IN_NAMESRV, {"topic": "OtherTopic"}),
        request(20, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "OtherTopic"}),
        # Brokers leave: a slave unregisters, a master's connection closes, a whole group unregisters.
        request(2, RC.UNREGISTER_BROKER, identity("DefaultCluster", "broker-a", a1, 1)),
        {"close": 3},
        request(20, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "Shared"}),
        request(20, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "OnlyB"}),
        request(20, RC.UNREGISTER_BROKER, identity("DefaultCluster", "broker-f", "127.0.0.1:10971", 17)),
        request(20, RC.UNREGISTER_BROKER, identity("DefaultCluster", "broker-f", "127.0.0.1:10981", 1)),
        request(20, RC.UNREGISTER_BROKER, identity("DefaultCluster", "broker-f", "127.0.0.1:10991", 0)),
        {"close": 4},
        request(20, RC.GET_BROKER_CLUSTER_INFO),
        request(20, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
        request(20, RC.GET_TOPICS_BY_CLUSTER, {"cluster": "OtherCluster"}),
        request(20, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}, ver=OLD),
        request(20, 99999),  # not a NameServer code
        # Slaves only (no master): sorted maps compare Long keys as numbers, 2 before 10.
        register(13, "DefaultCluster", "broker-g", "127.0.0.1:11041", 10, b_topics, version(1)),
        register(14, "DefaultCluster", "broker-g", "127.0.0.1:11051", 2, b_topics, version(1)),
        request(20, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "OnlyB"}),
        request(20, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "OnlyB"}, ver=OLD),
    ]
    return steps


SCENARIO: list[dict] = _scenario()


class FakeConnection:
    """What the processors see of a connection: an identity and an address for the logs."""

    def __init__(self, conn_id: int) -> None:
        self.remote_address = f"127.0.0.1:{40000 + conn_id}"

    def __repr__(self) -> str:
        return f"<FakeConnection {self.remote_address}>"


def describe(code: int, remark: str | None, ext: dict[str, str], body: bytes) -> dict[str, Any]:
    out: dict[str, Any] = {"code": code, "extFields": dict(ext), "body": body.decode("utf-8")}  # all text
    if remark is not None:
        out["remark"] = remark.replace(JAVA_550_FAQ_URL, FAQ_URL)
    return out


def run_ours(steps: list[dict], kv_config_path: str, config: dict[str, str] = CONFIG) -> list[dict[str, Any]]:
    """Play ``steps`` against our processors, one answer (or {"closed": n}) per step."""
    controller = NamesrvController(NamesrvConfig(kv_config_path=kv_config_path).updated(config))
    controller.kv_config_manager.load()
    processors = controller.processor.processors()
    conns: dict[int, FakeConnection] = {}

    async def play() -> list[dict[str, Any]]:
        out = []
        for step in steps:
            if "close" in step:
                conn = conns.get(step["close"])
                controller.route_info_manager.on_channel_destroy(conn)
                out.append({"closed": step["close"]})
                continue
            conn = conns.setdefault(step["conn"], FakeConnection(step["conn"]))
            body = base64.b64decode(step["body"])
            cmd = create_request(step["code"], step["extFields"], body, version=step["version"])
            processor = processors.get(cmd.code)
            response = await processor(conn, cmd) if processor else not_supported_response(cmd)
            out.append(describe(response.code, response.remark, dict(response.ext_fields), response.body))
        return out

    return asyncio.run(play())


def normalize_java(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for line in lines:
        if "closed" in line:
            out.append(line)
        else:
            out.append(describe(line["code"], line.get("remark"), line.get("extFields") or {},
                                base64.b64decode(line.get("body") or "")))
    return out


def load_capture() -> list[dict[str, Any]]:
    return json.loads(CAPTURE.read_text(encoding="utf-8"))["answers"]


def build_oracle() -> JavaProgram:
    return build_program("namesrv", "NamesrvOracle", ORACLE_ARTIFACTS)


def run_java(oracle: JavaProgram, steps: list[dict], work_dir: Path, config: dict[str, str] = CONFIG) -> list[dict]:
    """Play ``steps`` against Apache's processors (one JVM run), normalized like ``run_ours``'s answers."""
    script = work_dir / "namesrv-script.json"
    script.write_text(json.dumps({"config": config, "steps": steps}), encoding="utf-8")
    done = oracle.run("run", script, work_dir / "java-kvConfig.json")
    return normalize_java([json.loads(line) for line in done.stdout.decode().splitlines() if line.startswith("{")])


def write_capture() -> None:
    """Regenerate namesrv_java_capture.json: ``python -m tests.unit.namesrv.namesrv_scenario``."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        answers = run_java(build_oracle(), SCENARIO, Path(tmp))
    provenance = (
        "Answers of Apache RocketMQ's NameServer processors (rocketmq-namesrv 5.5.0 on rocketmq-remoting/common "
        "5.5.1, fastjson2 2.0.63) to namesrv_scenario.SCENARIO, via tests/java/namesrv/NamesrvOracle.java; "
        "regenerate with: python -m tests.unit.namesrv.namesrv_scenario"
    )
    text = json.dumps({"provenance": provenance, "answers": answers}, ensure_ascii=False, indent=1)
    CAPTURE.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    write_capture()
