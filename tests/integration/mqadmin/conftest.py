"""Fixtures of the mqadmin tests: each module gets its own NameServer and broker (``cluster``), with MqadminTopic
holding 1, 2, 3, 0 messages in its queues (``sent``); message bodies the tools save go to the test's tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.client import BlockingClient, Message
from broker.client.message import MessageQueue, SendResult
from broker.tools import messages
from tests.helpers import mqadmin_ok as ok
from tests.integration.cluster import DEFAULT_CLUSTER, Cluster, start_cluster
from tests.integration.mqadmin.scenario import BROKER_NAME, TOPIC, await_route


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
