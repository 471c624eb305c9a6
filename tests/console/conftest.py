"""Fixtures of the console's tests: one cluster of ours (the pool's, with the trace topic on), one console started
in-process on it, what the tests look for in it (``ConsoleData``: messages produced with keys, a Spark query's
committed group, a dead letter, a traced message), and one headless Chromium driven by Selenium, each made once per
test session (per xdist worker).

The browser is Debian's /usr/bin/chromium with its /usr/bin/chromedriver (``.ci/run`` installs them when missing),
started with a fresh profile and everything that would reach the network off.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from broker.client import protocol
from broker.client.blocking import BlockingClient
from broker.client.message import Message, MessageQueue, SendResult
from broker.common.validation import dlq_topic
from broker.console import ConsoleServer, start_console
from broker.tools.local_cluster import DEFAULT_CLUSTER, Cluster
from tests.helpers import mqadmin_ok, now_ms, run, wait_until

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1400,1000")
SAMPLE_INTERVAL_S = 0.5
ORDERS = 8


def api(console: ConsoleServer, method: str, path: str, body: Any = None, raw: bytes | None = None
        ) -> tuple[int, Any]:
    """One call of the console's API: (status, JSON answer)."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(console.url.rstrip("/") + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def api_ok(console: ConsoleServer, method: str, path: str, body: Any = None) -> Any:
    status, value = api(console, method, path, body)
    assert status == 200, (method, path, status, value)
    return value


@dataclass
class ConsoleData:
    """What the scenario put in the cluster, for the tests to find through the console."""

    namesrv_addr: str
    topic: str
    orders: list[SendResult]  # keys order-0..7, JSON bodies, tags "paid"
    binary: SendResult  # a body that is not UTF-8
    begin_ms: int
    end_ms: int
    spark_group: str  # committed half of each queue through the connector's own code
    dlq_group: str  # one dead letter: orders[0] sent back with delay level -1
    dead_letter_id: str
    traced: SendResult  # sent by a producer with message trace on
    spark_offsets: dict[int, int] = field(default_factory=dict)  # queue id -> the offset the query committed


@pytest.fixture(scope="session")
def cluster(clusters: Any) -> Cluster:
    return clusters.shared(traceTopicEnable=True)


@pytest.fixture(scope="session")
def console(cluster: Cluster) -> Iterator[ConsoleServer]:
    with start_console(cluster.namesrv_addr, port=0, sample_interval_s=SAMPLE_INTERVAL_S) as server:
        yield server


class RunningSparkQuery:
    """What a running streaming query with ``consumerGroup`` does: after each trigger the connector's OffsetOracle
    commits the group's offsets (and announces the group again every HEARTBEAT_INTERVAL_S). Here a trigger comes
    every ``TRIGGER_S`` and commits the same offsets, so the brokers keep the group online for as long as the test
    session runs, however long that is; ``close`` stops the query."""

    TRIGGER_S = 2.0

    def __init__(self, namesrv: str, topic: str, group: str, offsets: dict[MessageQueue, int]) -> None:
        from connector.offsets import OffsetOracle
        from connector.options import SourceOptions

        opts = SourceOptions.parse({"namesrvAddr": namesrv, "subscribe": topic, "consumerGroup": group},
                                   streaming=True)
        self.oracle = OffsetOracle(opts)
        self.oracle.commit_group_offsets(group, offsets)
        self._stopped = threading.Event()
        self._triggers = threading.Thread(target=self._run, args=(group, offsets), name="spark-query", daemon=True)
        self._triggers.start()

    def _run(self, group: str, offsets: dict[MessageQueue, int]) -> None:
        while not self._stopped.wait(self.TRIGGER_S):
            self.oracle.commit_group_offsets(group, offsets)

    def close(self) -> None:
        self._stopped.set()
        self._triggers.join()
        self.oracle.close()


async def _send_traced(namesrv: str, topic: str) -> SendResult:
    from broker.client.producer import Producer, ProducerConfig

    async with Producer("ConsoleTraced", namesrv, config=ProducerConfig(enable_msg_trace=True)) as producer:
        return await producer.send(Message(topic, b"traced", keys="traced-1"))


def make_scenario(ns: str, topic: str = "ConsoleOrders") -> tuple[ConsoleData, Any]:
    """Put the scenario in the cluster of ``ns``: the topic, its messages, the Spark query's commit, a dead letter,
    a traced message. Returns the data and the running Spark query (close it when done: the query stops)."""
    spark_group, dlq_group = f"{topic}SparkQuery", f"{topic}DeadGroup"
    mqadmin_ok("updateTopic", "-n", ns, "-c", DEFAULT_CLUSTER, "-t", topic, "-r", "4", "-w", "4")
    begin = now_ms()
    with BlockingClient(ns) as client:
        wait_until("the topic routed", lambda: client.get_route(topic, refresh=True), 10, ignoring=(Exception,))
        orders = [client.send(Message(topic, json.dumps({"order": i, "amount": 10 * i}).encode(), keys=f"order-{i}",
                                      tags="paid")) for i in range(ORDERS)]
        binary = client.send(Message(topic, bytes(range(256)), keys="binary-1"))
        end = now_ms()
        queues = sorted({r.message_queue for r in orders})
        committed = {mq: client.get_max_offset(mq) // 2 for mq in queues}
        query = RunningSparkQuery(ns, topic, spark_group, committed)
        first = orders[0].message_queue
        pulled = client.pull(first, orders[0].queue_offset, 1, group=dlq_group, decode=True).messages[0]
        answer = client.client(client.broker_addr(first)).invoke(
            protocol.consumer_send_msg_back_request(pulled, dlq_group, -1, 16), 5000)
        assert answer.code == 0, answer.remark
    traced = run(_send_traced(ns, topic))
    found = ConsoleData(ns, topic, orders, binary, begin, end, spark_group, dlq_group, "", traced,
                        {mq.queue_id: offset for mq, offset in committed.items()})
    wait_until("the dead letter routed", lambda: _dead_letter_id(ns, dlq_group, found), 30, interval=0.3,
               ignoring=(Exception,))
    wait_until("the keys indexed", lambda: mqadmin_ok("queryMsgByKey", "-n", ns, "-t", topic, "-k", "binary-1"), 10,
               ignoring=(AssertionError,))
    return found, query


@pytest.fixture(scope="session")
def data(cluster: Cluster) -> Iterator[ConsoleData]:
    found, query = make_scenario(cluster.namesrv_addr)
    try:
        yield found
    finally:
        query.close()


def _dead_letter_id(ns: str, group: str, found: ConsoleData) -> bool:
    with BlockingClient(ns) as client:
        (mq, *_) = client.fetch_message_queues(dlq_topic(group))
        messages = client.pull(mq, 0, 1, decode=True).messages
    if messages:
        found.dead_letter_id = messages[0].msg_id
    return bool(messages)


def start_browser(profile: Path) -> Any:
    """Headless Chromium with a fresh profile in ``profile``, its pages' console kept for the tests to read."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    return driver


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Headless Chromium; a missing browser fails the tests that need it (``.ci/run`` installs it)."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not Path(path).exists():
            pytest.fail(f"{path} is missing: apt-get install chromium chromium-driver", pytrace=False)
    driver = start_browser(tmp_path_factory.mktemp("chromium"))
    try:
        yield driver
    finally:
        driver.quit()
