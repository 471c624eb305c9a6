"""What the Prometheus metrics (metricsExporterType=PROM) cost our broker: send TPS and the broker's CPU per message
with metrics off and on, measured in the same run.

Two clusters of ours run side by side, the same in everything but ``metricsExporterType``: "off" (the default,
DISABLE) and "on" (PROM, scraped every ``--scrape-interval`` seconds by a thread of this process while it is
measured, a harsher rate than Prometheus' usual 15 s). Only one of them is under load at a time. Rounds alternate
which goes first. Each case is ``broker_throughput.py``'s: the official Java client (tests/java/bench/BenchClient)
with N threads of synchronous sends (or batches), a warm-up, the measured window, then a push consumer reading
everything back. Columns as there: send msg/s, the broker's CPU (its process and its dispatch child) per message
stored, consume msg/s and CPU per message read; on/off is the ratio, per case the median of the rounds.

The in-process part times what metrics add to one request, without sockets: a send's records (messages in,
throughput in, message size), a pull's (messages out, throughput out) and an answered request's latency, as
``BrokerMetricsManager`` and ``RpcLatency`` record them; and one rendering of the page.

Nothing here asserts on time.

Examples
--------
    python bench/metrics_cost.py                       # 128 B sync and batches of 16, 10 s per case, 3 rounds
    python bench/metrics_cost.py --quick               # smoke run: 2 s per case, one round
    python bench/metrics_cost.py --in-process-only
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))  # run as a script from anywhere without installing the package

from bench.throughput_runner import (  # noqa: E402
    Case,
    Result,
    Running,
    Settings,
    add_case_arguments,
    case_line,
    case_settings,
    create_topic,
    java_case,
    machine,
    running_target,
    warm_up,
)
from broker.metrics import names as n  # noqa: E402
from broker.metrics.instruments import MetricsRegistry  # noqa: E402
from broker.metrics.remoting import RpcLatency  # noqa: E402
from broker.remoting.codes import RequestCode, ResponseCode  # noqa: E402
from broker.remoting.command import create_request, create_response  # noqa: E402
from broker.server.broker_metrics import RequestMetrics  # noqa: E402
from broker.tools.local_cluster import free_port  # noqa: E402

MODES = ("off", "on")


# -- in process -------------------------------------------------------------------------------------------------------


def in_process(requests: int, topics: int = 50) -> str:
    """Nanoseconds of this thread's CPU per request for what the metrics record, and per rendered page."""
    registry = MetricsRegistry({n.LABEL_CLUSTER: "DefaultCluster", n.LABEL_NODE_TYPE: "broker",
                                n.LABEL_NODE_ID: "broker-a"}, n.BROKER_METER)
    recorded, latency = RequestMetrics(registry), RpcLatency(registry)
    props = {"UNIQ_KEY": "AC11000100002A9F0000000000000000", "KEYS": "k", "TAGS": "TagA", "WAIT": "true"}
    names = [f"BenchTopic{i}" for i in range(topics)]
    request = create_request(RequestCode.SEND_MESSAGE_V2, {})
    response = create_response(request, ResponseCode.SUCCESS)

    def send(i: int) -> None:
        recorded.record_in(names[i % topics], props, 1, 300)

    def pull(i: int) -> None:
        recorded.record_out(names[i % topics], "BenchGroup", 32, 32 * 300)

    def answer(i: int) -> None:
        latency.record(request, response, time.monotonic_ns())

    lines = []
    for label, step in (("a send's records (in, bytes, size)", send), ("a pull's records (out, bytes)", pull),
                        ("an answer's latency", answer)):
        begin = time.thread_time_ns()
        for i in range(requests):
            step(i)
        lines.append(f"  {label:40} {(time.thread_time_ns() - begin) / requests:8.0f} ns per request")
    begin, pages = time.thread_time_ns(), 20
    for _ in range(pages):
        page = registry.render()
    lines.append(f"  {'rendering the page (' + str(topics) + ' topics)':40} "
                 f"{(time.thread_time_ns() - begin) / pages / 1e6:8.2f} ms per page ({len(page):,} bytes)")
    return "\n".join(lines)


# -- the brokers ------------------------------------------------------------------------------------------------------


class Scraper(threading.Thread):
    """GETs a metrics page every ``interval`` seconds while ``active`` is set."""

    def __init__(self, port: int, interval: float) -> None:
        super().__init__(daemon=True)
        self.url = f"http://127.0.0.1:{port}/metrics"
        self.interval = interval
        self.active = threading.Event()
        self.stopped = threading.Event()
        self.pages = 0
        self.page_bytes = 0

    def run(self) -> None:
        while not self.stopped.is_set():
            if self.active.wait(0.1):
                with urllib.request.urlopen(self.url, timeout=10) as answer:
                    self.page_bytes = len(answer.read())
                self.pages += 1
                self.stopped.wait(self.interval)


def run(args: argparse.Namespace, settings: Settings, cases: list[Case]) -> dict[tuple[str, Case], list[Result]]:
    results: dict[tuple[str, Case], list[Result]] = {}
    port = free_port()
    confs = {"off": {}, "on": {"metricsExporterType": "PROM", "metricsPromExporterHost": "127.0.0.1",
                               "metricsPromExporterPort": port}}
    scraper = Scraper(port, args.scrape_interval)
    with contextlib.ExitStack() as stack:
        running: dict[str, Running] = {mode: stack.enter_context(running_target("ours", settings.work / mode,
                                                                                settings, confs[mode]))
                                       for mode in MODES}
        for mode in MODES:
            warm_up(settings, running[mode], cases=cases)
        scraper.start()
        for round_no in range(args.repeat):
            order = MODES if round_no % 2 == 0 else tuple(reversed(MODES))
            print(f"round {round_no + 1}: {', '.join(order)}", flush=True)
            for case in cases:
                for mode in order:
                    topic = f"Bench_{mode}_{case.slug}_{round_no}"
                    create_topic(settings, running[mode], topic)
                    if mode == "on":
                        scraper.active.set()
                    try:
                        result = java_case(settings, running[mode], case, topic)
                    finally:
                        scraper.active.clear()
                    results.setdefault((mode, case), []).append(result)
                    print(case_line(f"metrics {mode}", case.label, result), flush=True)
        scraper.stopped.set()
    print(f"\npages scraped from the broker with metrics on: {scraper.pages} (the last {scraper.page_bytes:,} bytes)")
    return results


def report(results: dict[tuple[str, Case], list[Result]], cases: list[Case]) -> str:
    head = ["case", "off msg/s", "on msg/s", "on/off", "off CPU us/msg", "on CPU us/msg", "on/off",
            "off consume msg/s", "on consume msg/s", "off consume CPU us/msg", "on consume CPU us/msg"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case in cases:
        off, on = results.get(("off", case)), results.get(("on", case))
        if not off or not on:
            continue

        def med(rows: list[Result], field: str) -> float:
            return statistics.median(getattr(r, field) for r in rows)

        send = (med(off, "send_mps"), med(on, "send_mps"))
        cpu = (med(off, "cpu_us_per_msg"), med(on, "cpu_us_per_msg"))
        lines.append(f"| {case.label} | {send[0]:,.0f} | {send[1]:,.0f} | {send[1] / send[0]:.3f} | {cpu[0]:.1f} | "
                     f"{cpu[1]:.1f} | {cpu[1] / cpu[0]:.3f} | {med(off, 'consume_mps'):,.0f} | "
                     f"{med(on, 'consume_mps'):,.0f} | {med(off, 'consume_cpu_us_per_msg'):.1f} | "
                     f"{med(on, 'consume_cpu_us_per_msg'):.1f} |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_case_arguments(parser)
    parser.add_argument("--repeat", type=int, default=3, help="rounds; each case's median is reported")
    parser.add_argument("--scrape-interval", type=float, default=1.0, help="seconds between scrapes (metrics on)")
    parser.add_argument("--requests", type=int, default=200_000, help="requests per in-process measure")
    parser.add_argument("--in-process-only", action="store_true")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 s per case, one round")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.warmup, args.repeat, args.broker_warmup, args.requests = 2.0, 1.0, 1, 2.0, 20_000
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    print(f"machine: {machine()}")
    print(f"command: python bench/metrics_cost.py {' '.join(argv if argv is not None else sys.argv[1:])}\n")
    print(f"what the metrics record, in process ({args.requests:,} requests each):")
    print(in_process(args.requests), "\n", flush=True)
    if args.in_process_only:
        return
    settings = case_settings(args, "metrics-cost")
    cases = [Case("java", size, batch) for size in args.sizes for batch in (1, args.batch)]
    print(f"{args.threads} senders, {args.warmup:g} s warm-up + {args.seconds:g} s measured per case, "
          f"{args.repeat} rounds, a scrape every {args.scrape_interval:g} s with metrics on\n", flush=True)
    results = run(args, settings, cases)
    print()
    print(report(results, cases))
    if args.work_dir is None:
        shutil.rmtree(settings.work, ignore_errors=True)


if __name__ == "__main__":
    main()
