"""Fixtures of the connector tests (source and sink): real NameServer + brokers as processes, helpers to make
topics and messages. The clusters are the suite's shared ones (tests/conftest.py ``clusters``): each test names its
own topics (``topic_name``: module and test) and groups.

Shared by the source and the sink tests; each part keeps its own fixtures in its own section below.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from pyspark.sql import Row

from broker.client import BlockingClient, Message
from broker.client.blocking import get_route
from broker.client.message import MessageQueue, SendResult
from broker.common.errors import MQClientError, RemotingError
from connector.options import SourceOptions
from connector.source import RmqStreamReader
from tests.helpers import mqadmin_ok, unique_topic, wait_until
from tests.integration.cluster import DEFAULT_CLUSTER, Cluster, ClusterPool

ROUTE_TIMEOUT_S = 15.0

# -- shared ------------------------------------------------------------------------------------------------------------


def routed_queues(namesrv_addr: str, topic: str) -> list[MessageQueue]:
    """The readable queues the NameServer routes for ``topic`` ([] while it has no route)."""
    from broker.client.route import subscribe_queues

    try:
        return subscribe_queues(topic, get_route(namesrv_addr, topic))
    except (MQClientError, RemotingError):
        return []


def create_topic(namesrv_addr: str, topic: str, queues: int, *, brokers: int = 1,
                 cluster: str = DEFAULT_CLUSTER) -> list[MessageQueue]:
    """``mqadmin updateTopic -c <cluster>`` with ``queues`` read/write queues on every broker; waits until the
    NameServer routes all of them (``brokers`` brokers x ``queues``). Also grows an existing topic."""
    # Our mqadmin sends standard admin requests, so this works on Apache's cluster too.
    mqadmin_ok("updateTopic", "-n", namesrv_addr, "-c", cluster, "-t", topic, "-r", str(queues), "-w", str(queues))
    wait_until(f"{topic} routed with {queues} queues on {brokers} broker(s)",
               lambda: len(routed_queues(namesrv_addr, topic)) == queues * brokers, ROUTE_TIMEOUT_S)
    return routed_queues(namesrv_addr, topic)


def produce(namesrv_addr: str, queues: Sequence[MessageQueue], per_queue: int, *, body: Callable[[MessageQueue, int],
            bytes] | None = None, tags: Callable[[MessageQueue, int], str | None] | None = None,
            properties: Callable[[MessageQueue, int], dict[str, str]] | None = None,
            batch: int = 64) -> dict[MessageQueue, list[SendResult]]:
    """``per_queue`` messages into each of ``queues`` (batched sends), bodies "<topic>/<broker>/<queue>/<i>" unless
    ``body`` says otherwise; keys "k<i>". Returns the send results by queue, in order, once every message is visible
    to consumers (dispatch builds the ConsumeQueue a moment after a send is acknowledged)."""
    results: dict[MessageQueue, list[SendResult]] = {}
    ends: dict[MessageQueue, int] = {}
    with BlockingClient(namesrv_addr) as client:
        for mq in queues:
            sent: list[SendResult] = []
            for first in range(0, per_queue, batch):
                msgs = []
                for i in range(first, min(first + batch, per_queue)):
                    data = body(mq, i) if body else f"{mq.topic}/{mq.broker_name}/{mq.queue_id}/{i}".encode()
                    msgs.append(Message(mq.topic, data, tags=tags(mq, i) if tags else None, keys=[f"k{i}"],
                                        properties=properties(mq, i) if properties else None))
                sent.append(client.send_batch(msgs, mq) if len(msgs) > 1 else client.send(msgs[0], mq))
                ends[mq] = sent[-1].queue_offset + len(msgs)
            results[mq] = sent
        deadline = time.monotonic() + 30
        for mq, end in ends.items():
            while client.get_max_offset(mq) < end:
                assert time.monotonic() < deadline, f"{mq} did not reach offset {end}"
                time.sleep(0.01)
    return results


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to the test in the session (its module's and its own name, cleaned): the clusters are
    shared between modules."""
    return unique_topic(request.node)


@pytest.fixture
def checkpoint(tmp_path: Path) -> str:
    return str(tmp_path / "checkpoint")


# -- source tests ------------------------------------------------------------------------------------------------------

BROKERS = ("broker-a", "broker-b")
COLUMNS = ["topic", "brokerName", "queueId", "queueOffset", "keys", "tags", "body"]


@pytest.fixture(scope="session")
def source_cluster(clusters: ClusterPool) -> Cluster:
    """A NameServer and two brokers (broker-a, broker-b), SQL92 filters on, shared by the source tests: every topic
    they make spans both brokers (``create_topic(..., brokers=2)``), so every read is from two brokers."""
    return clusters.shared(brokers=2, enablePropertyFilter=True)


def options(cluster: Cluster, topic: str, **extra: object) -> dict[str, str]:
    """The source's options reading ``topic`` from ``cluster`` (values as strings, as Spark passes them)."""
    return {"namesrvAddr": cluster.namesrv_addr, "topic": topic, **{k: str(v) for k, v in extra.items()}}


def stream_reader(cluster: Cluster, topic: str, **extra: object) -> RmqStreamReader:
    """The source's stream reader without Spark (its driver side, called as Spark would)."""
    return RmqStreamReader(SourceOptions.parse(options(cluster, topic, **extra), streaming=True))


def expected_rows(results: dict[MessageQueue, list], per_queue: int) -> set[tuple[str, int, int, bytes]]:
    """(brokerName, queueId, queueOffset, body) of ``per_queue`` messages ``produce`` sent to each queue."""
    return {(mq.broker_name, mq.queue_id, i, f"{mq.topic}/{mq.broker_name}/{mq.queue_id}/{i}".encode())
            for mq in results for i in range(per_queue)}


def as_set(rows: list[Row]) -> set[tuple[str, int, int, bytes]]:
    return {(r.brokerName, r.queueId, r.queueOffset, bytes(r.body)) for r in rows}


# -- sink tests --------------------------------------------------------------------------------------------------------

# Short transaction timings (the same keys on Apache's broker): checks start 1 s after a half is born (or after its
# CHECK_IMMUNITY_TIME_IN_SECONDS), every 300 ms; up to 50 checks before the broker discards a half.
SINK_BROKER_CONF = {"transactionTimeOut": 1000, "transactionCheckInterval": 300, "transactionCheckMax": 50,
                    "transactionOpBatchInterval": 100}
SINK_IMMUNITY_S = 30  # checkImmunitySeconds of the sink tests: the driver commits halves younger than 15 s itself
SINK_CHECK_IMMUNITY_S = 4  # ... of the tests that want the check to finish (commit or roll back) soon


@pytest.fixture(scope="session")
def sink_cluster(clusters: ClusterPool) -> Cluster:
    """One NameServer and one broker with short transaction check timings, shared by the sink tests. Our broker
    takes transactional batches by default (rmqTransactionBatchEnable): the sink sends its halves in prepared
    batches and ends them with END_TRANSACTION_BATCH."""
    return clusters.shared(**SINK_BROKER_CONF)


@pytest.fixture(params=["per-row", "batched"])
def sink_cluster_both(request: pytest.FixtureRequest, clusters: ClusterPool) -> Cluster:
    """The sink's cluster both ways: as ``sink_cluster`` (batched), and one whose broker has
    rmqTransactionBatchEnable=false (one half message and END_TRANSACTION per row, as against Apache's broker).
    For the core scenarios only: each use runs the test twice."""
    if request.param == "batched":
        return clusters.shared(**SINK_BROKER_CONF)
    return clusters.shared(**SINK_BROKER_CONF, rmqTransactionBatchEnable=False)


@pytest.fixture(scope="session")
def apache(clusters: ClusterPool) -> str:
    """The NameServer address of Apache's NameServer and broker (broker-a), shared by the source's and the sink's
    Apache tests: SQL92 filters on (the source's filters) and the sink's short transaction timings. Each names its
    own topics."""
    return clusters.shared("apache", enablePropertyFilter=True, **SINK_BROKER_CONF).namesrv_addr


def takes_transaction_batches(cluster: Cluster) -> bool:
    """What a sink task learns when it asks the cluster's broker (GET_BROKER_CONFIG)."""
    from broker.client.blocking import BlockingRemotingClient
    from broker.client.transaction_protocol import supports_transaction_batch

    (broker,) = cluster.brokers
    with BlockingRemotingClient(broker.addr) as client:
        return supports_transaction_batch(client)


def wait_dispatched(namesrv_addr: str, topic: str) -> None:
    """Wait until every master routing ``topic`` has dispatched all it stored: a send is answered before its
    ConsumeQueue unit is written (on Apache's broker too), and a pull stops at the first queue offset not yet there."""
    from broker.client.route import MASTER_ID
    from tests.integration.replication import runtime

    try:
        route = get_route(namesrv_addr, topic)
    except (MQClientError, RemotingError):
        return
    for broker in route.broker_datas:
        addr = dict(broker.broker_addrs).get(MASTER_ID)
        if addr is not None:
            wait_until(f"{addr} dispatched everything", lambda a=addr: runtime(a)["dispatchBehindBytes"] == "0")


def read_topic(namesrv_addr: str, topic: str) -> list:
    """Every visible message of ``topic`` (all queues, from the minimum offset), decoded, in queue order."""
    from broker.client.message import PullStatus

    wait_dispatched(namesrv_addr, topic)
    out = []
    with BlockingClient(namesrv_addr) as client:
        for mq in routed_queues(namesrv_addr, topic):
            offset = client.get_min_offset(mq)
            while True:
                result = client.pull(mq, offset, 32, decode=True)
                if result.status is not PullStatus.FOUND:
                    break
                out.extend(result.messages)
                offset = result.next_begin_offset
    return out


def resolver_pids(resolver_dir: Path, sink_id: str) -> list[int]:
    """The pid of every resolver that served ``sink_id`` from ``resolver_dir`` (each says so in its log)."""
    log = resolver_dir / f"{sink_id}.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    return [int(part.split(",")[0]) for part in text.split("resolver ready (pid ")[1:]]


def resolver_gone(resolver_dir: Path, sink_id: str) -> bool:
    """No resolver of ``sink_id`` runs (none of those its log names is alive: a zombie counts as gone, the
    container's init may reap late) and none left its pid or lock file."""
    if any((resolver_dir / f"{sink_id}{suffix}").exists() for suffix in (".pid", ".lock")):
        return False
    for pid in resolver_pids(resolver_dir, sink_id):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if stat.rsplit(")", 1)[1].split()[0] != "Z" and b"connector.resolver" in cmdline:
            return False
    return True
