"""The README's pictures of the console: a local NameServer and broker, the tests' scenario plus a few minutes' worth
of traffic (a producer and a push consumer, so the charts move), then a PNG of each main page.

    python -m tests.console.screenshots [--out broker/console/screenshots] [--seconds 40]

It needs what the browser tests need (``.[test]``, Debian's chromium and chromium-driver).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import threading
import time
from pathlib import Path

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from broker.client import ConsumeConcurrentlyStatus, Message, Producer, PushConsumer
from broker.console import start_console
from broker.tools.local_cluster import REPO, start_cluster
from tests.console.conftest import make_scenario, start_browser

OUT = REPO / "broker" / "console" / "screenshots"
WIDTH, MAX_HEIGHT = 1280, 1500


stop = threading.Event()


async def traffic(namesrv: str, topic: str, seconds: float) -> None:
    """Orders at about 40 a second, a push consumer reading them, for ``seconds`` or until ``stop``."""

    async def listener(msgs, context):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.01 * len(msgs))  # a consumer a little slower than the producer: lag shows
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("DemoShipping", namesrv)
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    await consumer.start()
    try:
        async with Producer("DemoShop", namesrv) as producer:
            end, n = time.monotonic() + seconds, 0
            while time.monotonic() < end and not stop.is_set():
                burst = 20 + 20 * (int(time.monotonic()) % 7 == 0)
                for _ in range(burst):
                    order = {"order": n, "amount": 17 * n % 500, "customer": f"c-{n % 97}"}
                    await producer.send(Message(topic, json.dumps(order).encode(), keys=f"order-{n}", tags="created"))
                    n += 1
                await asyncio.sleep(0.5)
    finally:
        await consumer.shutdown()


def shoot(driver, url: str, path: str, page: str, out: Path, wait_css: str | None = None) -> None:  # type: ignore[no-untyped-def]
    driver.set_window_size(WIDTH, 900)
    driver.get(f"{url}?shot={page}#/{path}")
    WebDriverWait(driver, 30).until(lambda d: d.find_element(By.ID, "main").get_attribute("data-ready") == page)
    if wait_css:
        WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, wait_css))
    time.sleep(0.5)
    height = min(MAX_HEIGHT, driver.execute_script("return document.documentElement.scrollHeight") + 140)
    driver.set_window_size(WIDTH, height)
    time.sleep(0.3)
    driver.save_screenshot(str(out / f"{page}.png"))
    print(f"{out / f'{page}.png'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--seconds", type=float, default=40.0, help="seconds of traffic before the pictures")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="rmq-shots-") as tmp, start_cluster(Path(tmp) / "cluster") as cluster:
        ns = cluster.namesrv_addr
        data, query = make_scenario(ns, "DemoOrders")
        driver = start_browser(Path(tmp) / "chromium")
        try:
            with start_console(ns, port=0, sample_interval_s=1.0) as console:
                busy = threading.Thread(target=asyncio.run, args=(traffic(ns, data.topic, args.seconds + 60),),
                                        daemon=True)
                busy.start()  # the pictures are taken while it runs: clients online, charts moving
                time.sleep(args.seconds)
                for path, page, wait in [
                    ("cluster", "cluster", None), ("topics", "topics", None), (f"topic/{data.topic}", "topic", None),
                    ("groups", "groups", None), ("group/DemoShipping", "group", None),
                    (f"messages?by=key&topic={data.topic}&key=order-3", "messages", "#results"),
                    (f"message/{data.topic}/{data.traced.msg_id}", "message", "table#trace"),
                    ("charts", "charts", None),
                ]:
                    shoot(driver, console.url, path, page, args.out, wait)
                stop.set()
                busy.join(30)
        finally:
            driver.quit()
            query.close()


if __name__ == "__main__":
    main()
