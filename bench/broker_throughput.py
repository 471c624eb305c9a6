"""Broker throughput: send and consume TPS of our broker against Apache RocketMQ's, measured in the same run.

Each broker under test runs with its own NameServer: Apache's NamesrvStartup + BrokerStartup (5.5.0), or our
``python -m broker.namesrv`` + ``python -m broker``. Only one pair runs at a time, so they do not compete for the
cores. Both use the same settings: ASYNC_FLUSH, 1 GiB CommitLog files (the default), long polling, and one topic of
8 queues per case.

Load comes from two clients:
- **java**: the official Java client, through ``tests/java/bench/BenchClient.java``. It is shaped like RocketMQ's own
  benchmark Producer / BatchProducer / Consumer: N threads of synchronous sends, SEND_MESSAGE_V2
  (``-Dorg.apache.rocketmq.client.sendSmartMsg=true``, as producer.sh), ROCKETMQ headers. The consume pass is a
  push consumer (20 threads) that reads the case's topic from the first offset.
- **python**: our asyncio ``Producer`` (N concurrent sends, in this process) and ``LitePullConsumer``.

Cases are body size (128 B, 1 KB) x (single sends, batches of 16). Before any measured case each broker gets a
warm-up pass of every case: ``--broker-warmup`` seconds of untimed Java sends in all, shared equally by the cases
(each with its own body size and batch), then a consume pass over them. Apache's JVM has then compiled its hot paths
for every shape, so a case's figure does not depend on which case ran before it (without that pass, Apache's 1 KB
cases ran on a JIT its 128 B cases had warmed, ours on a store their pages had warmed). Rounds alternate the order
of the targets and of the cases (odd rounds run both reversed), and each round prints its order. For each case the
client, a fresh JVM on both brokers, warms up for ``--warmup`` seconds, and then ``--seconds`` are measured. The
consume pass then reads every message of the case.

Columns:
- **send msg/s**: messages stored per second in the measured window (for a batch: messages, not requests).
- **RT**: average and maximum round trip per request (one batch is one request).
- **CPU us/msg**: the broker's CPU time (user + system; its process and the processes it started, i.e. our dispatch
  process) over the whole produce run, warm-up included, divided by the messages it stored. This moves much less
  than msg/s when the machine is shared.
- **consume msg/s**: messages per second, from the first message received to the last.
- **consume CPU us/msg**: the broker's CPU time over the consume pass divided by the messages read.
- **ours/apache**: the ratio, measured in the same run.

Nothing here asserts on time. ``--profile DIR`` also records our broker with py-spy during each produce case and
consume pass of the Java client (collapsed stacks in DIR, and a top-functions summary printed). ``ours-asyncio`` runs
our broker on the standard asyncio loop (``RMQ_EVENT_LOOP=asyncio``), for comparison with the default uvloop. The
machinery (targets, the Java client, CPU from /proc, py-spy) is ``bench/throughput_runner.py``, shared with
``acl_trace_cost.py``.

Examples
--------
    python bench/broker_throughput.py                        # all cases, 10 s each, ours vs apache
    python bench/broker_throughput.py --quick                # smoke run: 128 B only, 1.5 s each
    python bench/broker_throughput.py --targets ours ours-asyncio apache --repeat 2
    python bench/broker_throughput.py --clients java --sizes 128 --profile /tmp/prof --targets ours
    python bench/broker_throughput.py --clients java --modes batch --targets ours --thread-cpu
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))  # run as a script from anywhere without installing the package

from bench.throughput_runner import (  # noqa: E402
    COMMIT_LOG_FILE_SIZE,
    QUEUES,
    REFERENCE,
    Case,
    Result,
    Running,
    Settings,
    add_case_arguments,
    best,
    case_line,
    case_settings,
    cpu_seconds,
    create_topic,
    java_case,
    machine,
    ratio,
    running_target,
    warm_up,
)
from broker.client import LitePullConfig, LitePullConsumer, Message, Producer  # noqa: E402
from broker.client.offsets import ConsumeFromWhere  # noqa: E402

TARGETS = ("ours", "ours-asyncio", "apache")


# -- the Python client ------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _SendStats:
    messages: int = 0
    requests: int = 0
    rt_total: float = 0.0
    rt_max: float = 0.0
    rts: list[float] = field(default_factory=list)  # each request's, for the p99
    failed: int = 0


async def _send_loop(producer: Producer, topic: str, body: bytes, batch: int, stats: list[_SendStats],
                     stop: asyncio.Event) -> None:
    while not stop.is_set():
        begin = time.perf_counter()
        try:
            if batch > 1:
                await producer.send_batch([Message(topic, body) for _ in range(batch)])
            else:
                await producer.send(Message(topic, body))
        except Exception:  # a failed send is counted, as the Java client's are
            stats[-1].failed += 1
            await asyncio.sleep(0.1)
            continue
        rt = time.perf_counter() - begin
        window = stats[-1]
        window.messages += batch
        window.requests += 1
        window.rt_total += rt
        window.rt_max = max(window.rt_max, rt)
        window.rts.append(rt)


async def python_produce(namesrv_addr: str, topic: str, case: Case, settings: Settings) -> Result:
    """N concurrent send loops on one asyncio Producer: a warm-up window, then the measured one."""
    body = os.urandom(case.size // 2 + 1).hex()[: case.size].encode()
    stats = [_SendStats()]  # the loops add to the last window
    stop = asyncio.Event()
    async with Producer(f"{topic}_producer", namesrv_addr) as producer:
        tasks = [asyncio.create_task(_send_loop(producer, topic, body, case.batch, stats, stop))
                 for _ in range(settings.threads)]
        await asyncio.sleep(settings.warmup)
        stats.append(_SendStats())
        begin = time.perf_counter()
        await asyncio.sleep(settings.seconds)
        elapsed = time.perf_counter() - begin
        stats.append(_SendStats())
        stop.set()
        await asyncio.gather(*tasks)
    window = stats[1]
    rts = sorted(window.rts) or [0.0]
    return Result(send_mps=window.messages / elapsed, avg_rt_ms=window.rt_total * 1000 / max(1, window.requests),
                  p99_rt_ms=rts[min(len(rts) - 1, int(len(rts) * 0.99))] * 1000, max_rt_ms=window.rt_max * 1000,
                  failed=sum(s.failed for s in stats),
                  total=sum(s.messages for s in stats))


async def python_consume(namesrv_addr: str, topic: str, expect: int, timeout_s: float) -> tuple[float, int]:
    """(messages/s from the first to the last message, messages) with a LitePullConsumer on every queue."""
    config = LitePullConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, pull_batch_size=32)
    async with LitePullConsumer(f"{topic}_consumer", namesrv_addr, config=config) as consumer:
        consumer.assign(await consumer.fetch_message_queues(topic))
        count, first, last = 0, 0.0, 0.0
        deadline = time.monotonic() + timeout_s
        while count < expect and time.monotonic() < deadline:
            messages = await consumer.poll(timeout_ms=1000)
            if messages:
                last = time.perf_counter()
                first = first or last
                count += len(messages)
    return (count / (last - first) if last > first else 0.0), count


def python_case(settings: Settings, running: Running, case: Case, topic: str) -> Result:
    cpu_before = cpu_seconds(running.broker_pid)
    result = asyncio.run(python_produce(running.namesrv_addr, topic, case, settings))
    result.cpu_us_per_msg = (cpu_seconds(running.broker_pid) - cpu_before) * 1e6 / max(1, result.total)
    cpu_before = cpu_seconds(running.broker_pid)
    result.consume_mps, result.consumed = asyncio.run(
        python_consume(running.namesrv_addr, topic, result.total, settings.consume_seconds))
    result.consume_cpu_us_per_msg = (cpu_seconds(running.broker_pid) - cpu_before) * 1e6 / max(1, result.consumed)
    return result


# -- the run ----------------------------------------------------------------------------------------------------------


def run_target(target: str, round_no: int, cases: list[Case], settings: Settings) -> None:
    home = settings.work / f"{target}-{round_no}"
    with running_target(target, home, settings) as running:
        warm_up(settings, running, cases=[case for case in cases if case.client == "java"])
        for case in cases:
            topic = f"Bench_{case.slug}_{round_no}"
            create_topic(settings, running, topic)
            run = java_case if case.client == "java" else python_case
            result = run(settings, running, case, topic)
            settings.results.setdefault((target, case), []).append(result)
            print(case_line(target, case.label, result), flush=True)
    shutil.rmtree(home, ignore_errors=True)  # GiB-sized CommitLog files


def report(targets: list[str], cases: list[Case], settings: Settings) -> str:
    """Markdown tables: send (msg/s, RT, CPU) and consume, with each target's ratio to apache."""
    others = [t for t in targets if t != REFERENCE]
    compare = REFERENCE in targets
    head = ["case", *(f"{t} msg/s" for t in targets), *(f"{t}/{REFERENCE}" for t in others if compare),
            *(f"{t} RT avg/p99/max ms" for t in targets), *(f"{t} CPU us/msg" for t in targets)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case in cases:
        got = {t: best(settings.results[(t, case)]) for t in targets if (t, case) in settings.results}
        if len(got) != len(targets):
            continue
        row = [case.label, *(f"{got[t].send_mps:,.0f}" for t in targets),
               *(ratio(got[t].send_mps, got[REFERENCE].send_mps) for t in others if compare),
               *(f"{got[t].avg_rt_ms:.2f} / {got[t].p99_rt_ms:.1f} / {got[t].max_rt_ms:.0f}" for t in targets),
               *(f"{got[t].cpu_us_per_msg:.1f}" for t in targets)]
        lines.append("| " + " | ".join(row) + " |")
    head = ["case", *(f"{t} consume msg/s" for t in targets), *(f"{t}/{REFERENCE}" for t in others if compare),
            *(f"{t} consume CPU us/msg" for t in targets)]
    lines += ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case in cases:
        got = {t: best(settings.results[(t, case)]) for t in targets if (t, case) in settings.results}
        if len(got) != len(targets):
            continue
        row = [case.label, *(f"{got[t].consume_mps:,.0f}" for t in targets),
               *(ratio(got[t].consume_mps, got[REFERENCE].consume_mps) for t in others if compare),
               *(f"{got[t].consume_cpu_us_per_msg:.1f}" for t in targets)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_case_arguments(parser, sizes=(128, 1024))
    parser.add_argument("--modes", nargs="+", choices=("sync", "batch"), default=["sync", "batch"],
                        help="single sends, batches of --batch, or both")
    parser.add_argument("--clients", nargs="+", choices=("java", "python"), default=["java", "python"])
    parser.add_argument("--targets", nargs="+", choices=TARGETS, default=["ours", "apache"])
    parser.add_argument("--repeat", type=int, default=1, help="rounds; the best send rate per case is kept")
    parser.add_argument("--commit-log-size", type=int, default=COMMIT_LOG_FILE_SIZE)
    parser.add_argument("--profile", type=Path, help="py-spy our broker during Java produce cases, into this dir")
    parser.add_argument("--thread-cpu", action="store_true",
                        help="print each broker's CPU and page faults per message by thread, per Java produce case")
    parser.add_argument("--quick", action="store_true", help="smoke run: 128 B only, 1.5 s per case")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.warmup, args.sizes, args.consume_seconds = 1.5, 0.5, [128], 30.0
        args.broker_warmup = min(args.broker_warmup, 2.0)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    settings = case_settings(args, "broker-throughput", commit_log_size=args.commit_log_size, profile=args.profile,
                             thread_cpu=args.thread_cpu)
    batches = [batch for mode, batch in (("sync", 1), ("batch", args.batch)) if mode in args.modes]
    cases = [Case(client, size, batch) for client in args.clients for size in args.sizes for batch in batches]
    print(f"machine: {machine()}")
    print(f"command: python bench/broker_throughput.py {' '.join(argv if argv is not None else sys.argv[1:])}")
    print(f"{args.threads} senders, {args.warmup:g} s warm-up + {args.seconds:g} s measured per case, "
          f"{QUEUES} queues, ASYNC_FLUSH, CommitLog files of {args.commit_log_size:,} B\n", flush=True)
    for round_no in range(args.repeat):
        forward = round_no % 2 == 0
        targets = args.targets if forward else list(reversed(args.targets))
        ordered = cases if forward else list(reversed(cases))
        print(f"round {round_no + 1}: targets {', '.join(targets)}; cases {', '.join(c.label for c in ordered)}",
              flush=True)
        for target in targets:
            run_target(target, round_no, ordered, settings)
    print()
    print(report(args.targets, cases, settings))
    if args.work_dir is None:
        shutil.rmtree(settings.work, ignore_errors=True)


if __name__ == "__main__":
    main()
