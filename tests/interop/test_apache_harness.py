"""The Apache harness itself: Apache's NameServer and broker as child processes, driven by the official Java client.

One end-to-end pass proves every piece other interop tests lean on: topic creation, sync, batch and (one-shot,
ROCKETMQ-serialized, non-V2) sends, a full read back with the lite pull consumer, index queries by key, by client
msgId and by offsetMsgId, the route, the queue offsets, and a clean SIGTERM that leaves a consistent store behind.
Timings of each stage go to stdout (``pytest -s``) and to the junit properties.
"""

from __future__ import annotations

import base64
import json
from collections import defaultdict
from pathlib import Path

import pytest

from tests.apache import (  # noqa: F401 (fixtures)
    ApacheClient,
    ApacheProcess,
    DriverError,
    DriverSession,
    apache_broker,
    apache_client_driver,
    apache_namesrv,
    driver_body,
)

pytestmark = [pytest.mark.java, pytest.mark.slow]

TOPIC = "HarnessTopic"
AUTO_TOPIC = "HarnessAutoTopic"
QUEUES = 4
COUNT = 20
BODY_SIZE = 100


def _by_index(records: list[dict]) -> dict[int, dict]:
    return {r["index"]: r for r in records}


def _check_sent(sent: list[dict]) -> None:
    assert [r["index"] for r in sent] == list(range(COUNT))
    assert {r["sendStatus"] for r in sent} == {"SEND_OK"}
    assert len({r["msgId"] for r in sent}) == COUNT
    assert len({r["offsetMsgId"] for r in sent}) == COUNT


def _check_consumed(consumed: list[dict], sent: dict[str, dict], expected: dict[str, tuple[str, str, int]]) -> None:
    """Every sent message back exactly once, field for field, and per-queue offsets 0..n-1 without a hole."""
    assert sorted(m["msgId"] for m in consumed) == sorted(sent)
    per_queue: dict[int, list[int]] = defaultdict(list)
    for m in consumed:
        tag, prefix, index = expected[m["msgId"]]
        produced = sent[m["msgId"]]
        assert m["topic"] == TOPIC
        assert m["tags"] == tag
        assert m["keys"] == f"{prefix}{index}"
        assert base64.b64decode(m["body"]) == driver_body(index, BODY_SIZE)
        assert (m["queueId"], m["queueOffset"]) == (produced["queueId"], produced["queueOffset"])
        assert m["offsetMsgId"] == produced["offsetMsgId"]
        assert m["properties"]["UNIQ_KEY"] == m["msgId"]
        assert m["reconsumeTimes"] == 0
        assert m["storeTimestamp"] >= m["bornTimestamp"] - 1000
        per_queue[m["queueId"]].append(m["queueOffset"])
    for queue_id, offsets in per_queue.items():
        assert sorted(offsets) == list(range(len(offsets))), f"queue {queue_id} has holes: {sorted(offsets)}"


def _report(stages: list[tuple[str, float]], request: pytest.FixtureRequest) -> None:
    lines = [f"  {name:<40} {seconds:6.2f} s" for name, seconds in stages]
    print("\nApache harness timings:\n" + "\n".join(lines))
    request.node.user_properties.append(("timings", json.dumps(stages)))


def _one_shot(client: ApacheClient, addr: str, stages: list[tuple[str, float]]) -> None:
    """One JVM per command: the error path, then a send with the other wire options into an auto-created topic."""
    with pytest.raises(DriverError, match="--topic is required"):
        client.run("route", namesrv=addr)
    stages.append(("one-shot: error exit", client.timings[-1][1]))
    other = ApacheClient(client.log_dir, serialize="ROCKETMQ", smart_msg=False)
    auto = other.run("produce", namesrv=addr, topic=AUTO_TOPIC, count=3, size=BODY_SIZE, tag="Auto")
    assert [r["sendStatus"] for r in auto.records] == ["SEND_OK"] * 3
    stages.append(("one-shot: produce 3 (ROCKETMQ, no V2)", other.timings[-1][1]))


def _produce(s: DriverSession, addr: str) -> tuple[list[dict], list[dict]]:
    common = {"namesrv": addr, "topic": TOPIC, "count": COUNT, "size": BODY_SIZE}
    sync = s.call("produce", tag="TagSync", keys_prefix="sync-", **common).records
    batch = s.call("produce", tag="TagBatch", keys_prefix="batch-", mode="batch", batch=8, **common).records
    _check_sent(sync)
    _check_sent(batch)
    for first in range(0, COUNT, 8):  # a batch lands in one queue, at consecutive offsets
        group = [_by_index(batch)[i] for i in range(first, min(COUNT, first + 8))]
        assert len({r["queueId"] for r in group}) == 1
        base = group[0]["queueOffset"]
        assert [r["queueOffset"] for r in group] == list(range(base, base + len(group)))
    return sync, batch


def _read_back(s: DriverSession, addr: str, sync: list[dict], batch: list[dict]) -> None:
    sent = {r["msgId"]: r for r in sync + batch}
    expected = {r["msgId"]: ("TagSync", "sync-", r["index"]) for r in sync}
    expected |= {r["msgId"]: ("TagBatch", "batch-", r["index"]) for r in batch}
    pulled = s.call("consume-pull", namesrv=addr, topic=TOPIC, group="harness_pull")
    assert pulled.summary is not None and not pulled.summary["timedOut"]
    _check_consumed(pulled.records, sent, expected)

    auto = s.call("consume-pull", namesrv=addr, topic=AUTO_TOPIC, group="harness_pull", body_format="utf8")
    assert sorted(m["body"] for m in auto.records) == sorted(driver_body(i, BODY_SIZE).decode() for i in range(3))


def _queries(s: DriverSession, addr: str, sync: list[dict], batch: list[dict]) -> None:
    by_key = s.call("query-key", namesrv=addr, topic=TOPIC, key="sync-7").records
    assert [(m["msgId"], m["keys"]) for m in by_key] == [(_by_index(sync)[7]["msgId"], "sync-7")]
    assert s.call("query-key", namesrv=addr, topic=TOPIC, key="no-such-key").summary == {
        "summary": "query-key",
        "count": 0,
    }
    target = _by_index(batch)[13]
    by_id = s.call("query-id", namesrv=addr, topic=TOPIC, id=target["msgId"]).records
    assert [(m["keys"], m["queueOffset"]) for m in by_id] == [("batch-13", target["queueOffset"])]
    by_offset_id = s.call("query-id", namesrv=addr, topic=TOPIC, offset_id=target["offsetMsgId"]).records
    assert [m["msgId"] for m in by_offset_id] == [target["msgId"]]
    assert base64.b64decode(by_offset_id[0]["body"]) == driver_body(13, BODY_SIZE)


def _route_and_offsets(s: DriverSession, addr: str, broker: ApacheProcess) -> None:
    (route,) = s.call("route", namesrv=addr, topic=TOPIC).records
    queue_datas = [(q["brokerName"], q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in route["queueDatas"]]
    assert queue_datas == [("broker-a", QUEUES, QUEUES, 6)]
    (broker_data,) = route["brokerDatas"]
    assert (broker_data["cluster"], broker_data["brokerAddrs"]) == ("DefaultCluster", {"0": broker.addr})

    offsets = s.call("offsets", namesrv=addr, topic=TOPIC).records
    assert [(o["queueId"], o["minOffset"]) for o in offsets] == [(q, 0) for q in range(QUEUES)]
    assert sum(o["maxOffset"] for o in offsets) == 2 * COUNT


def _check_store(store: Path) -> None:
    """What a clean SIGTERM leaves: data, derived queues and index, metadata, a checkpoint and no abort file."""
    assert (store / "commitlog" / f"{0:020d}").is_file()
    assert sorted(p.name for p in (store / "consumequeue" / TOPIC).iterdir()) == [str(q) for q in range(QUEUES)]
    assert any((store / "index").iterdir())
    topics = json.loads((store / "config" / "topics.json").read_text())
    assert TOPIC in topics["topicConfigTable"] and AUTO_TOPIC in topics["topicConfigTable"]
    assert (store / "checkpoint").is_file()
    assert not (store / "abort").exists(), "a clean stop deletes the abort file"


def test_apache_round_trip(
    apache_namesrv: ApacheProcess,  # noqa: F811 (the fixture imported above)
    apache_broker: ApacheProcess,  # noqa: F811
    apache_client_driver: ApacheClient,  # noqa: F811
    request: pytest.FixtureRequest,
) -> None:
    namesrv, broker, client = apache_namesrv, apache_broker, apache_client_driver
    stages = [
        ("namesrv: first output (JVM start)", namesrv.first_output_s),
        ("namesrv: boot until ready", namesrv.boot_s),
        ("broker: first output (JVM start)", broker.first_output_s),
        ("broker: boot until ready (registered)", broker.boot_s),
    ]
    _one_shot(client, namesrv.addr, stages)

    before = len(client.timings)
    with client.session() as s:  # the session JVM's start-up is paid by its first call
        created = s.call("create-topic", namesrv=namesrv.addr, topic=TOPIC, queues=QUEUES).records
        assert created == [{"topic": TOPIC, "queues": QUEUES, "brokers": {"broker-a": broker.addr}}]
        sync, batch = _produce(s, namesrv.addr)
        _read_back(s, namesrv.addr, sync, batch)
        _queries(s, namesrv.addr, sync, batch)
        _route_and_offsets(s, namesrv.addr, broker)
    stages += [(f"session: {name}", seconds) for name, seconds in client.timings[before:]]

    assert broker.stop() == 143, broker.console()[-2000:]  # the JVM's exit code after SIGTERM
    stages.append(("broker: SIGTERM until exit", broker.stop_s or 0.0))
    assert broker.store_dir is not None
    _check_store(broker.store_dir)
    _report(stages, request)
