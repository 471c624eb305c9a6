"""The console on Apache RocketMQ's own NameServer and broker (the pool's, ``APACHE_VERSION``): the cluster and topic
pages render from what Apache's servers answer, through the same public protocol, and a topic made through the
console is there for the broker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from broker.console import ConsoleServer, start_console
from tests.console.conftest import SAMPLE_INTERVAL_S, api_ok
from tests.console.test_console_pages import Page
from tests.helpers import wait_until


@pytest.fixture(scope="module")
def apache(clusters: Any) -> Any:
    return clusters.shared("apache")


@pytest.fixture(scope="module")
def apache_console(apache: Any) -> Iterator[ConsoleServer]:
    with start_console(apache.namesrv_addr, port=0, sample_interval_s=SAMPLE_INTERVAL_S) as server:
        yield server


@pytest.mark.java
@pytest.mark.slow
def test_cluster_and_topic_pages_render_from_apache(apache: Any, apache_console: ConsoleServer, browser: Any) -> None:
    page = Page(browser, apache_console)
    page.console_errors()
    # A fresh Apache broker fails GET_BROKER_RUNTIME_INFO (NoSuchElementException) until its stats have a sample.
    wait_until("Apache's broker answers its runtime info",
               lambda: api_ok(apache_console, "GET", "/api/cluster")["brokers"][0]["reachable"], timeout=90)
    (broker,) = api_ok(apache_console, "GET", "/api/cluster")["brokers"]
    assert (broker["addr"], broker["role"], broker["reachable"]) == (apache.brokers[0].addr, "MASTER", True)
    topic = "ConsoleOnApache"
    made = api_ok(apache_console, "POST", "/api/topics", {"topic": topic, "cluster": broker["cluster"],
                                                           "readQueueNums": 3, "writeQueueNums": 3})
    assert made["brokers"] == [broker["addr"]]
    sent = api_ok(apache_console, "POST", f"/api/topics/{topic}/messages", {"body": "to Apache", "keys": "apache-1"})

    page.open("cluster")
    (row,) = page.rows("brokers")
    assert (row[1], row[3], row[4], row[5]) == (broker["brokerName"], "MASTER", broker["addr"], broker["version"])
    assert broker["version"].startswith("V5_")
    page.open(f"topic/{topic}")
    queues = page.rows("queues")
    assert len(queues) == 3 and sum(int(q[4]) for q in queues) == 1
    page.open(f"message/{topic}/{sent['offsetMsgId']}")
    assert page.browser.find_element(By.ID, "body").text == "to Apache"
    assert page.console_errors() == []
