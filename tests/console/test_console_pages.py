"""The console's pages in a real browser (headless Chromium through Selenium) on our cluster: each page renders what
the cluster holds, the lookups find the messages the scenario produced, a topic created in the page exists for
``mqadmin`` (run as a process) and is deleted after its name is typed, offsets are reset and a dead letter resent
from the page, and the charts draw points. No page may log an error in the browser's console."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select, WebDriverWait

from broker.client import protocol
from broker.client.blocking import BlockingClient
from broker.common.validation import dlq_topic, retry_topic
from broker.console import ConsoleServer
from broker.tools.local_cluster import DEFAULT_CLUSTER, REPO
from tests.console.conftest import ConsoleData, api_ok
from tests.helpers import mqadmin, mqadmin_ok

WAIT_S = 20
_loads = itertools.count()


class Page:
    """The browser on one console page: ``open`` loads the page afresh and waits until it rendered its data."""

    def __init__(self, browser: Any, console: ConsoleServer) -> None:
        self.browser, self.console = browser, console

    def open(self, path: str) -> WebElement:
        self.browser.get(f"{self.console.url}?load={next(_loads)}#/{path}")
        return self.ready(path.split("/")[0].split("?")[0])

    def ready(self, name: str) -> WebElement:
        """<main> once the router marked page ``name`` rendered; fails with the page's error if it shows one."""
        WebDriverWait(self.browser, WAIT_S).until(
            lambda d: d.find_element(By.ID, "main").get_attribute("data-ready") == name)
        main = self.browser.find_element(By.ID, "main")
        errors = [e.text for e in main.find_elements(By.CSS_SELECTOR, ".error")]
        assert not errors, errors
        return main

    def wait_for(self, css: str, what: str = "") -> WebElement:
        WebDriverWait(self.browser, WAIT_S).until(lambda d: d.find_elements(By.CSS_SELECTOR, css), what or css)
        return self.browser.find_element(By.CSS_SELECTOR, css)

    def rows(self, table_id: str) -> list[list[str]]:
        return [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
                for tr in self.browser.find_elements(By.CSS_SELECTOR, f"#{table_id} tbody tr")]

    def fill(self, form: WebElement, **values: str) -> None:
        """Set fields by name (through the DOM: date-time inputs take a value whatever the browser's locale)."""
        for name, value in values.items():
            field = form.find_element(By.NAME, name)
            self.browser.execute_script("arguments[0].value = arguments[1]", field, value)

    def local_input(self, ms: int) -> str:
        """``ms`` as the browser's datetime-local text (its own time zone)."""
        return self.browser.execute_script(
            "const d = new Date(arguments[0]); return new Date(d - d.getTimezoneOffset() * 60000)"
            ".toISOString().slice(0, 23)", ms)

    def console_errors(self) -> list[str]:
        return [e["message"] for e in self.browser.get_log("browser") if e["level"] == "SEVERE"]


@pytest.fixture
def page(browser: Any, console: ConsoleServer) -> Any:
    view = Page(browser, console)
    view.console_errors()  # what an earlier test left
    yield view
    assert view.console_errors() == []


def test_each_page_renders(page: Page, data: ConsoleData, cluster: Any) -> None:
    page.open("cluster")
    assert [r[4] for r in page.rows("brokers")] == [b.addr for b in cluster.brokers]
    page.browser.find_element(By.CSS_SELECTOR, "#brokers tbody a").click()
    page.wait_for("#runtime")
    assert any(r[0] == "brokerVersionDesc" for r in page.rows("runtime"))

    page.open("topics")
    page.browser.find_element(By.ID, "topic-filter").send_keys("ConsoleOrd")
    assert {tuple(r) for r in page.rows("topics")} >= {(data.topic, "NORMAL"), (dlq_topic(data.dlq_group), "DLQ"),
                                                       (retry_topic(data.spark_group), "RETRY")}
    assert all("ConsoleOrd" in r[0] for r in page.rows("topics"))
    Select(page.browser.find_element(By.ID, "topic-type")).select_by_value("NORMAL")
    assert page.rows("topics") == [[data.topic, "NORMAL"]]

    page.open(f"topic/{data.topic}")
    assert len(page.rows("queues")) == 4 and page.rows("route")[0][:2] == [DEFAULT_CLUSTER, "broker-a"]
    assert data.spark_group in page.browser.find_element(By.ID, "consumer-groups").text

    page.open("groups")
    (spark,) = [r for r in page.rows("groups") if r[0].startswith(data.spark_group)]
    assert "Spark query" in spark[0] and spark[1] == "online"
    page.browser.find_element(By.ID, "spark-only").click()
    assert all("Spark query" in r[0] for r in page.rows("groups"))

    page.open(f"group/{data.spark_group}")
    progress = page.rows("progress")
    assert len(progress) == 4 and all(int(r[5]) == int(r[3]) - int(r[4]) for r in progress)
    assert "Spark query" in page.rows("clients")[0][0]

    order = data.orders[2]
    page.open(f"message/{data.topic}/{order.msg_id}")
    body = page.browser.find_element(By.ID, "body")
    assert (body.get_attribute("data-view"), json.loads(body.text)) == ("json", {"order": 2, "amount": 20})
    assert body.text.startswith("{\n  ")  # pretty-printed
    page.browser.find_element(By.CSS_SELECTOR, "button[data-view=hex]").click()
    assert body.text.startswith("00000000  7b 22 6f 72 64 65 72 22")
    assert ["KEYS", "order-2"] in page.rows("properties")
    page.wait_for("#trace")


def test_lookups_find_the_produced_messages(page: Page, data: ConsoleData) -> None:
    order = data.orders[5]
    mq = order.message_queue
    lookups = {
        "key": {"key": "order-5"},
        "id": {"msgId": order.offset_msg_id},
        "offset": {"brokerName": mq.broker_name, "queueId": str(mq.queue_id), "offset": str(order.queue_offset)},
    }
    for mode, values in lookups.items():
        page.open(f"messages?by={mode}")
        form = page.browser.find_element(By.ID, "lookup")
        page.fill(form, topic=data.topic, **values)
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        page.wait_for("#found-count", mode)
        assert [r[0] for r in page.rows("results")] == [order.msg_id], mode
    page.open("messages?by=time")
    form = page.browser.find_element(By.ID, "lookup")
    page.fill(form, topic=data.topic, begin=page.local_input(data.begin_ms), end=page.local_input(data.end_ms))
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    page.wait_for("#found-count")
    assert {r[0] for r in page.rows("results")} == {r.msg_id for r in [*data.orders, data.binary]}
    page.browser.find_element(By.LINK_TEXT, data.binary.msg_id).click()
    page.ready("message")
    assert page.browser.find_element(By.ID, "body").get_attribute("data-view") == "hex"


def _mqadmin(*args: str) -> subprocess.CompletedProcess[str]:
    """Our mqadmin as a process, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "broker.tools", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=60)


def test_a_topic_made_in_the_page_exists_for_mqadmin_until_deleted(page: Page, data: ConsoleData) -> None:
    topic = "ConsolePageMade"
    page.open("topics")
    form = page.browser.find_element(By.ID, "create-topic")
    page.fill(form, topic=topic, readQueueNums="2", writeQueueNums="2")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    page.ready("topic")
    assert len(page.rows("queues")) == 2
    route = _mqadmin("topicRoute", "-n", data.namesrv_addr, "-t", topic, "-l")
    assert route.returncode == 0, route.stderr
    (row,) = [line.split() for line in route.stdout.splitlines() if line.startswith(DEFAULT_CLUSTER)]
    assert (row[1], row[-3:]) == ("broker-a", ["2", "2", "6"])  # read and write queues, read-write

    send = page.browser.find_element(By.ID, "send-message")
    page.fill(send, body='{"hello": "page"}', keys="page-key")
    send.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    result = page.wait_for("#send-result p")
    assert result.text.startswith("SEND_OK: message ")
    assert mqadmin_ok("queryMsgByKey", "-n", data.namesrv_addr, "-t", topic, "-k", "page-key").count("\n") == 2

    page.browser.find_element(By.ID, "delete-topic").click()
    dialog = page.wait_for(".dialog")
    confirm = dialog.find_element(By.CSS_SELECTOR, "button.danger")
    typed = dialog.find_element(By.NAME, "confirm")
    typed.send_keys(topic[:-1])
    assert not confirm.is_enabled()
    typed.send_keys(topic[-1])
    assert confirm.is_enabled()
    confirm.click()
    page.ready("topics")
    assert page.browser.current_url.endswith("#/topics")
    gone = mqadmin("topicRoute", "-n", data.namesrv_addr, "-t", topic)  # in-process: one process run is enough
    assert gone.code == 1 and "No topic route info" in gone.err


def test_offsets_reset_by_time_in_the_page(page: Page, data: ConsoleData) -> None:
    group = "ConsolePageResetGroup"
    mqadmin_ok("updateSubGroup", "-n", data.namesrv_addr, "-c", DEFAULT_CLUSTER, "-g", group)
    with BlockingClient(data.namesrv_addr) as client:  # offsets at each queue's end: nothing left to consume
        for mq in client.fetch_message_queues(data.topic):
            commit = protocol.update_consumer_offset_request(group, mq, client.get_max_offset(mq))
            assert client.client(client.broker_addr(mq)).invoke(commit, 5000).code == 0
    page.open(f"group/{group}")
    assert all(r[5] == "0" for r in page.rows("progress"))
    form = page.browser.find_element(By.ID, "reset-offsets")
    page.fill(form, topic=data.topic, time=page.local_input(data.begin_ms))
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    page.wait_for("#reset-result table")
    offsets = {q["queueId"]: q["consumerOffset"] for q in api_ok(page.console, "GET", f"/api/groups/{group}")["queues"]}
    assert offsets == {0: 0, 1: 0, 2: 0, 3: 0}


def test_a_dead_letter_resent_from_the_page(page: Page, data: ConsoleData) -> None:
    def held(topic: str) -> int:
        try:
            return sum(q["maxOffset"] for q in api_ok(page.console, "GET", f"/api/topics/{topic}")["queues"])
        except AssertionError:  # no retry topic yet
            return 0

    before = held(retry_topic(data.dlq_group))
    page.open(f"group/{data.dlq_group}")
    page.wait_for("#dlq button.resend")
    assert [r[0] for r in page.rows("dlq")][0] == data.dead_letter_id
    page.browser.find_element(By.CSS_SELECTOR, "#dlq button.resend").click()
    page.wait_for("#dlq .badge.ok")
    assert held(retry_topic(data.dlq_group)) == before + 1
    assert held(dlq_topic(data.dlq_group)) == 1  # the dead letter stays where it was


CHART_STATE_JS = """return Array.from(document.querySelectorAll('figure.chart'), f => [
    f.querySelector('figcaption').textContent, Number(f.dataset.points),
    f.querySelectorAll('circle.pt').length > 0 && f.querySelectorAll('polyline.series').length > 0])"""


def test_charts_draw_points(page: Page, data: ConsoleData) -> None:
    """Read in one script each time: the page redraws its charts every sample, so elements found one call earlier
    may be gone."""
    page.open("charts")
    charts = WebDriverWait(page.browser, WAIT_S).until(lambda d: (
        state if (state := d.execute_script(CHART_STATE_JS)) and all(points >= 2 for _, points, _ in state) else None))
    assert [caption for caption, _, _ in charts] == [
        "Messages in per second", "Messages out per second", "Consumer lag (messages)", "CommitLog disk used (%)"]
    assert all(drawn for _, _, drawn in charts)
