"""The Apache harness itself: Apache's NameServer and broker as child processes, driven by the official Java client.

One end-to-end pass proves every piece other interop tests lean on: topic creation, sync, batch and (one-shot,
ROCKETMQ-serialized, non-V2) sends, a full read back with the lite pull consumer, index queries by key, by client
msgId and by offsetMsgId, the route, the queue offsets, and a clean SIGTERM that leaves a consistent store behind.
Timings of each stage go to stdout (``pytest -s``) and to the junit properties.
"""

from __future__ import annotations

import base64
import json
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.apache import (
    ApacheClient,
    ApacheProcess,
    DriverError,
    apache_client,
    driver_body,
    start_apache_broker,
    start_apache_namesrv,
)
from tests.javatools import JavaToolError

pytestmark = [pytest.mark.java, pytest.mark.slow]

TOPIC = "HarnessTopic"
AUTO_TOPIC = "HarnessAutoTopic"
QUEUES = 4
COUNT = 20
BODY_SIZE = 100


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> ApacheClient:
    try:
        return apache_client(tmp_path_factory.mktemp("apache-client"))
    except JavaToolError as err:
        reason = str(err)
    pytest.fail(f"cannot build the Apache client driver: {reason}", pytrace=False)


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[ApacheProcess]:
    with start_apache_namesrv(tmp_path) as proc:
        yield proc


def _by_index(records: list[dict]) -> dict[int, dict]:
    return {r["index"]: r for r in records}


def _check_sent(sent: list[dict]) -> None:
    assert [r["index"] for r in sent] == list(range(COUNT))
    assert {r["sendStatus"] for r in sent} == {"SEND_OK"}
    assert len({r["msgId"] for r in sent}) == COUNT
    assert len({r["offsetMsgId"] for r in sent}) == COUNT


def _check_consumed(consumed: list[dict], sent: dict[str, dict], expected_keys: dict[str, tuple[str, str, int]]):
    """Every sent message back exactly once, field for field, and per-queue offsets 0..n-1 without a hole."""
    assert sorted(m["msgId"] for m in consumed) == sorted(sent)
    per_queue: dict[int, list[int]] = defaultdict(list)
    for m in consumed:
        tag, prefix, index = expected_keys[m["msgId"]]
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
    request.node.user_properties.append(("timings", json.dumps(dict(stages))))


def test_apache_round_trip(
    tmp_path: Path, namesrv: ApacheProcess, client: ApacheClient, request: pytest.FixtureRequest
) -> None:
    stages: list[tuple[str, float]] = [
        ("namesrv: first output (JVM start)", namesrv.first_output_s),
        ("namesrv: boot until ready", namesrv.boot_s),
    ]
    store = tmp_path / "store"
    with start_apache_broker(tmp_path, namesrv, store) as broker:
        stages += [
            ("broker: first output (JVM start)", broker.first_output_s),
            ("broker: boot until ready", broker.boot_s),
        ]
        addr = namesrv.addr

        # One JVM per command: the error path, then a send with the other wire options into an auto-created topic.
        with pytest.raises(DriverError, match="--topic is required"):
            client.run("route", namesrv=addr)
        other = ApacheClient(client.log_dir, serialize="ROCKETMQ", smart_msg=False)
        auto = other.run("produce", namesrv=addr, topic=AUTO_TOPIC, count=3, size=BODY_SIZE, tag="Auto")
        assert [r["sendStatus"] for r in auto.records] == ["SEND_OK"] * 3
        stages += [("one-shot: error exit", client.timings[-1][1]), ("one-shot: produce 3", other.timings[-1][1])]

        start = time.monotonic()
        with client.session() as s:
            stages.append(("session: JVM spawn", time.monotonic() - start))
            created = s.call("create-topic", namesrv=addr, topic=TOPIC, queues=QUEUES).records
            assert created == [{"topic": TOPIC, "queues": QUEUES, "brokers": {"broker-a": broker.addr}}]

            sync = s.call(
                "produce", namesrv=addr, topic=TOPIC, count=COUNT, size=BODY_SIZE, tag="TagSync", keys_prefix="sync-"
            ).records
            batch = s.call(
                "produce",
                namesrv=addr,
                topic=TOPIC,
                count=COUNT,
                size=BODY_SIZE,
                tag="TagBatch",
                keys_prefix="batch-",
                mode="batch",
                batch=8,
            ).records
            _check_sent(sync)
            _check_sent(batch)
            sent = {r["msgId"]: r for r in sync + batch}
            expected = {r["msgId"]: ("TagSync", "sync-", r["index"]) for r in sync}
            expected |= {r["msgId"]: ("TagBatch", "batch-", r["index"]) for r in batch}
            # A batch lands in one queue at consecutive offsets.
            for first in range(0, COUNT, 8):
                group = [_by_index(batch)[i] for i in range(first, min(COUNT, first + 8))]
                assert len({r["queueId"] for r in group}) == 1
                assert [r["queueOffset"] for r in group] == list(
                    range(group[0]["queueOffset"], group[0]["queueOffset"] + len(group))
                )

            pulled = s.call("consume-pull", namesrv=addr, topic=TOPIC, group="harness_pull")
            assert pulled.summary is not None and not pulled.summary["timedOut"]
            _check_consumed(pulled.records, sent, expected)

            auto_back = s.call("consume-pull", namesrv=addr, topic=AUTO_TOPIC, group="harness_pull", body_format="utf8")
            assert sorted(m["body"] for m in auto_back.records) == sorted(
                driver_body(i, BODY_SIZE).decode() for i in range(3)
            )

            by_key = s.call("query-key", namesrv=addr, topic=TOPIC, key="sync-7").records
            assert [(m["msgId"], m["keys"]) for m in by_key] == [(_by_index(sync)[7]["msgId"], "sync-7")]
            target = _by_index(batch)[13]
            by_id = s.call("query-id", namesrv=addr, topic=TOPIC, id=target["msgId"]).records
            assert [(m["keys"], m["queueOffset"]) for m in by_id] == [("batch-13", target["queueOffset"])]
            by_offset_id = s.call("query-id", namesrv=addr, topic=TOPIC, offset_id=target["offsetMsgId"]).records
            assert [m["msgId"] for m in by_offset_id] == [target["msgId"]]
            assert base64.b64decode(by_offset_id[0]["body"]) == driver_body(13, BODY_SIZE)

            (route,) = s.call("route", namesrv=addr, topic=TOPIC).records
            assert [
                (q["brokerName"], q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in route["queueDatas"]
            ] == [("broker-a", QUEUES, QUEUES, 6)]
            (broker_data,) = route["brokerDatas"]
            assert broker_data["cluster"] == "DefaultCluster"
            assert broker_data["brokerAddrs"] == {"0": broker.addr}

            offsets = s.call("offsets", namesrv=addr, topic=TOPIC).records
            assert [o["queueId"] for o in offsets] == list(range(QUEUES))
            assert all(o["minOffset"] == 0 for o in offsets)
            assert sum(o["maxOffset"] for o in offsets) == 2 * COUNT
        stages += [(f"session: {name}", seconds) for name, seconds in client.timings[1:]]

        rc = broker.stop()
        stages.append(("broker: SIGTERM until exit", broker.stop_s or 0.0))
        assert rc in (0, 143), broker.console()[-2000:]

    assert (store / "commitlog" / f"{0:020d}").is_file()
    assert sorted(p.name for p in (store / "consumequeue" / TOPIC).iterdir()) == [str(q) for q in range(QUEUES)]
    assert any((store / "index").iterdir())
    topics = json.loads((store / "config" / "topics.json").read_text())
    assert TOPIC in topics["topicConfigTable"] and AUTO_TOPIC in topics["topicConfigTable"]
    assert (store / "checkpoint").is_file()
    assert not (store / "abort").exists(), "a clean stop deletes the abort file"
    _report(stages, request)
