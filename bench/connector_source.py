"""Spark source throughput: ``readStream.format("rmq")`` with Trigger.AvailableNow beside Spark reading the same rows
from a Parquet copy, in the same run and the same local Spark session.

Setup: one NameServer and one broker (ours, or Apache RocketMQ 5.5.0's with ``--broker apache``), one topic of 8
queues filled with ``--messages`` messages of 1 KB bodies (incompressible: slices of a random pool, so Parquet
cannot shrink them) by ``--producers`` processes sending batches of 128. Our broker runs with larger pulls
(``maxTransferCountOnMessageInMemory`` / ``maxTransferBytesOnMessageInMemory``, see ``--pull-count``); the source
asks for ``pullBatchSize`` messages per pull.

Measured (each ``--repeat`` times, best kept), every query writing to the ``noop`` sink so only the read counts
(each stream run also prints its CPU per row: the JVM, Spark's Python workers, the rest of Spark's tree, the broker;
bench/cpu.py):
- **stream**: ``readStream.format("rmq")``, startingOffsets=earliest, Trigger.AvailableNow, fresh checkpoint;
  **stream batches** is the same run without the query's start and stop (the sum of its triggers' time).
- **batch**: ``read.format("rmq")`` of the same offsets (this query also writes the Parquet copy, once).
- **parquet**: ``read.parquet`` of the copy.
The figure that matters is stream rows/s over parquet rows/s (target: >= 0.5).

Examples
--------
    python bench/connector_source.py                              # 2,000,000 messages, our broker
    python bench/connector_source.py --messages 200000 --repeat 1 # smoke run
    python bench/connector_source.py --broker apache
    python bench/connector_source.py --profile /tmp/src.svg       # py-spy of the Spark Python workers while streaming
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.cpu import child_with, spark_parts, tree_cpu  # noqa: E402
from broker.client import BlockingClient, Message  # noqa: E402
from broker.client.message import MessageQueue  # noqa: E402

TOPIC = "SourceBench"
QUEUES = 8
SEND_BATCH = 128
POOL = random.Random(7).randbytes(1 << 20)


def body(i: int, size: int) -> bytes:
    start = (i * 7919) % (len(POOL) - size)
    return POOL[start:start + size]


def fill_queues(namesrv: str, queues: list[MessageQueue], count: int, size: int) -> None:
    """One producer process: ``count`` messages round-robin over ``queues``, in batches of SEND_BATCH."""
    with BlockingClient(namesrv, timeout_ms=30_000) as client:
        sent = 0
        turn = 0
        while sent < count:
            mq = queues[turn % len(queues)]
            n = min(SEND_BATCH, count - sent)
            client.send_batch([Message(TOPIC, body(sent + k, size)) for k in range(n)], mq)
            sent += n
            turn += 1


def fill(namesrv: str, messages: int, size: int, producers: int) -> float:
    with BlockingClient(namesrv) as client:
        queues = client.fetch_message_queues(TOPIC)
    assert len(queues) == QUEUES, queues
    start = time.monotonic()
    per = [messages // producers + (1 if p < messages % producers else 0) for p in range(producers)]
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=fill_queues, args=(namesrv, queues[p::producers] or queues, per[p], size))
             for p in range(producers)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
        assert proc.exitcode == 0, f"a producer failed (exit {proc.exitcode})"
    with BlockingClient(namesrv) as client:
        while sum(client.get_max_offset(mq) for mq in queues) < messages:  # dispatch catching up
            time.sleep(0.2)
    return time.monotonic() - start


def start_servers(kind: str, home: Path, pull_count: int):
    """(namesrv address, closers) of a fresh NameServer + broker."""
    if kind == "ours":
        from tests.integration.cluster import start_cluster

        cluster = start_cluster(home, brokers=1, mappedFileSizeCommitLog=256 * 1024 * 1024,
                                maxTransferCountOnMessageInMemory=pull_count,
                                maxTransferBytesOnMessageInMemory=pull_count * 1200)
        return cluster.namesrv_addr, [cluster.close], [b.popen.pid for b in cluster.brokers]
    from tests.apache import start_apache_broker, start_apache_namesrv

    namesrv = start_apache_namesrv(home / "namesrv")
    broker = start_apache_broker(home / "broker", namesrv, mappedFileSizeCommitLog=256 * 1024 * 1024,
                                 maxTransferCountOnMessageInMemory=pull_count,
                                 maxTransferBytesOnMessageInMemory=pull_count * 1200)
    return namesrv.addr, [broker.close, namesrv.close], [broker.popen.pid]


def timed(action) -> float:
    start = time.monotonic()
    action()
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=2_000_000)
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--broker", choices=("ours", "apache"), default="ours")
    parser.add_argument("--pull-count", type=int, default=1024, help="the broker's max messages per pull")
    parser.add_argument("--pull-batch-size", type=int, default=1024, help="the source's pullBatchSize")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--profile", help="py-spy of the Spark Python workers during one stream run: a flame graph "
                        "(.svg) or collapsed stacks (.txt)")
    parser.add_argument("--dir", help="work directory (default: a fresh temporary one, deleted at the end)")
    args = parser.parse_args()

    home = Path(args.dir or tempfile.mkdtemp(prefix="rmq-bench-source-"))
    namesrv, closers, broker_pids = start_servers(args.broker, home, args.pull_count)
    try:
        from tests.connector.conftest import create_topic

        create_topic(namesrv, TOPIC, QUEUES)
        fill_s = fill(namesrv, args.messages, args.body, args.producers)
        print(f"filled {args.messages:,} x {args.body} B into {QUEUES} queues in {fill_s:.1f} s "
              f"({args.messages / fill_s:,.0f} msg/s, {args.producers} producer processes)", flush=True)

        from jobs.spark import build_session

        spark = build_session("bench-connector-source", master=args.master)
        jvm = child_with("java")
        opts = {"namesrvAddr": namesrv, "topic": TOPIC, "pullBatchSize": str(args.pull_batch_size)}
        parquet = str(home / "copy.parquet")
        runs: dict[str, list[float]] = {"stream": [], "stream batches": [], "batch": [], "parquet": []}

        def stream(n: int) -> None:
            query = (spark.readStream.format("rmq").options(**opts, startingOffsets="earliest").load()
                     .writeStream.format("noop").trigger(availableNow=True)
                     .option("checkpointLocation", str(home / f"cp-{n}")).start())
            query.awaitTermination()
            rows = sum(p["numInputRows"] for p in query.recentProgress)
            assert rows == args.messages, f"the stream read {rows} rows, not {args.messages}"
            runs["stream batches"].append(sum(p["durationMs"].get("triggerExecution", 0)
                                              for p in query.recentProgress) / 1000)

        batch_df = spark.read.format("rmq").options(**opts).load()
        runs["batch"].append(timed(lambda: batch_df.write.mode("overwrite").parquet(parquet)))
        copied = spark.read.parquet(parquet).count()
        assert copied == args.messages, copied
        for n in range(args.repeat):
            runs["parquet"].append(timed(lambda: spark.read.parquet(parquet).write.format("noop").mode("overwrite")
                                         .save()))
            profiler = None
            if args.profile and n == 0:
                raw = ["-f", "raw"] if args.profile.endswith(".txt") else []  # collapsed stacks, else a flame graph
                profiler = subprocess.Popen(["py-spy", "record", "--subprocesses", "--nonblocking", *raw, "-o",
                                             args.profile, "--pid", str(os.getpid())],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(1)
            before, broker_before = spark_parts(jvm), sum(tree_cpu(pid) for pid in broker_pids)
            runs["stream"].append(timed(lambda n=n: stream(n)))
            used = {name: spent - before[name] for name, spent in spark_parts(jvm).items()}
            used["broker"] = sum(tree_cpu(pid) for pid in broker_pids) - broker_before
            print(f"stream {n}: CPU us/row " + ", ".join(f"{name} {1e6 * spent / args.messages:.2f}"
                                                          for name, spent in used.items())
                  + f" (load average {os.getloadavg()[0]:.1f})", flush=True)
            if profiler is not None:
                profiler.send_signal(2)
                profiler.wait()
            runs["batch"].append(timed(lambda: batch_df.write.format("noop").mode("overwrite").save()))
        spark.stop()
    finally:
        for close in closers:
            close()
        if not args.dir:
            shutil.rmtree(home, ignore_errors=True)

    best = {name: min(times) for name, times in runs.items()}
    rate = {name: args.messages / seconds for name, seconds in best.items()}
    for name, times in runs.items():
        print(f"{name}: {', '.join(f'{t:.1f}' for t in times)} s", flush=True)
    print(f"\n{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, broker {args.broker}, "
          f"master {args.master}, pull {args.pull_count}/{args.pull_batch_size}, best of {args.repeat}")
    print("| read | seconds | rows/s | MB/s (bodies) | / parquet |")
    print("|---|---|---|---|---|")
    for name in ("stream", "stream batches", "batch", "parquet"):
        mb = args.messages * args.body / best[name] / 1e6
        print(f"| {name} | {best[name]:.1f} | {rate[name]:,.0f} | {mb:,.0f} | {rate[name] / rate['parquet']:.2f} |")


if __name__ == "__main__":
    main()
