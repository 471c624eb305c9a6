"""Spark with rmq beside Spark with Apache Kafka: the same rows, the same Spark jobs, Spark's own Kafka connector.

Setup (not timed in the results): one NameServer and one of our brokers (as bench/connector_source.py starts them:
larger pulls, 256 MiB CommitLog files) and one Kafka 4.x broker in KRaft mode (bench/kafka.py). Our topic gets
``--rows`` messages of ``--body`` bytes (incompressible, bench/connector_source.py's bodies, sent in batches by
``--producers`` processes); a batch read of it writes a Parquet copy; Spark's Kafka sink copies the Parquet rows into
a Kafka topic of as many partitions as our topic has queues, each row into the partition of its queue id.

Measured, one local Spark session (``--master``), each ``--repeat`` times interleaved, best kept:
- **source**: a streaming query per system, startingOffsets=earliest, Trigger.AvailableNow, a fresh checkpoint,
  writing to the ``noop`` sink, timed from ``start()`` to its end (``whole``); ``start`` is the time until its
  first trigger began, ``first batch`` until that trigger ended, ``batches`` the sum of the triggers. Beside them
  the Parquet copy read by ``spark.read.parquet`` into noop. Printed: rows/s and rmq / Kafka, rmq / Parquet
  (targets >= 1.0 and >= 0.6).
- **sink**: ``--sink-rows`` of the same rows (cached) written with ``df.write.format("rmq")`` (exactly once: a half
  message per row, the decision, END_TRANSACTIONs), with ``guarantee=at-least-once`` when the connector has that
  option (probed), and with Spark's Kafka sink (at least once), each into a fresh topic of the same partitions.

Examples
--------
    python bench/spark_vs_kafka.py                                  # 2,000,000 rows of 1 KB, 200,000 for the sinks
    python bench/spark_vs_kafka.py --rows 200000 --sink-rows 20000 --repeat 1   # smoke run
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.connector_sink import stop_resolvers  # noqa: E402
from bench.connector_source import QUEUES, TOPIC, fill, start_servers, timed  # noqa: E402
from bench.kafka import KAFKA_VERSION, SPARK_KAFKA_PACKAGE, start_kafka  # noqa: E402

SINK_TOPIC = "SinkBench"


@dataclass(frozen=True, slots=True)
class StreamRun:
    """One AvailableNow query, in seconds: ``start()`` to its end, to its first trigger's start and end; the sum of
    its triggers; its rows; Spark's ``durationMs`` of the first trigger."""

    whole: float
    start: float
    first_batch: float
    batches: float
    rows: int
    first_durations: dict[str, int]


def _epoch(progress_timestamp: str) -> float:
    return datetime.fromisoformat(progress_timestamp.replace("Z", "+00:00")).timestamp()


def run_stream(reader: Callable[[], object], checkpoint: Path) -> StreamRun:
    """``reader()`` (a streaming DataFrame) into noop with Trigger.AvailableNow, timed from ``start()``."""
    began, wall = time.monotonic(), time.time()
    query = (reader().writeStream.format("noop").trigger(availableNow=True)
             .option("checkpointLocation", str(checkpoint)).start())
    query.awaitTermination()
    whole = time.monotonic() - began
    progress = [p for p in query.recentProgress if p["numInputRows"] or p["batchId"] == 0]
    first = progress[0]
    first_start = _epoch(first["timestamp"]) - wall
    return StreamRun(whole, first_start, first_start + first["durationMs"].get("triggerExecution", 0) / 1000,
                     sum(p["durationMs"].get("triggerExecution", 0) for p in query.recentProgress) / 1000,
                     sum(p["numInputRows"] for p in query.recentProgress), dict(first["durationMs"]))


def guarantee_option(namesrv: str) -> dict[str, str] | None:
    """{"guarantee": "at-least-once"} when this checkout's sink accepts that option, else None."""
    from broker.common.errors import ConnectorOptionError
    from connector.options import SinkOptions

    option = {"guarantee": "at-least-once"}
    try:
        SinkOptions.parse({"namesrvAddr": namesrv, **option}, streaming=False)
    except ConnectorOptionError:
        return None
    return option


def load_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} {five:.1f} {fifteen:.1f} on {os.cpu_count()} cores"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--sink-rows", type=int, default=200_000)
    parser.add_argument("--body", type=int, default=1024)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--pull-count", type=int, default=1024, help="our broker's max messages per pull")
    parser.add_argument("--pull-batch-size", type=int, default=1024, help="the rmq source's pullBatchSize")
    parser.add_argument("--skip-sink", action="store_true")
    parser.add_argument("--dir", help="work directory (default: a fresh temporary one, deleted at the end)")
    args = parser.parse_args()

    print(f"# start: {load_line()} (a shared machine: other engineers' jobs run beside this one)", flush=True)
    home = Path(args.dir or tempfile.mkdtemp(prefix="rmq-bench-kafka-"))
    namesrv, closers, _ = start_servers("ours", home / "rmq", args.pull_count)
    try:
        with start_kafka(home / "kafka") as kafka:
            return measure(args, home, namesrv, kafka)
    finally:
        for close in closers:
            close()
        if not args.dir:
            shutil.rmtree(home, ignore_errors=True)


def measure(args: argparse.Namespace, home: Path, namesrv: str, kafka) -> int:
    from pyspark import __version__ as pyspark_version

    from jobs.spark import DELTA_JARS, build_session
    from tests.connector.conftest import create_topic

    create_topic(namesrv, TOPIC, QUEUES)
    create_topic(namesrv, SINK_TOPIC, QUEUES)
    kafka.create_topic(TOPIC, QUEUES)
    kafka.create_topic(SINK_TOPIC, QUEUES)
    fill_s = fill(namesrv, args.rows, args.body, args.producers)
    print(f"rmq: {args.rows:,} x {args.body} B into {QUEUES} queues in {fill_s:.1f} s (not counted)", flush=True)

    packages = f"{DELTA_JARS},{SPARK_KAFKA_PACKAGE.format(spark=pyspark_version)}"
    spark = build_session("bench-spark-vs-kafka", master=args.master, conf={"spark.jars.packages": packages},
                          jvm_log=home / "spark.log")
    rmq_opts = {"namesrvAddr": namesrv, "topic": TOPIC, "pullBatchSize": str(args.pull_batch_size)}
    kafka_opts = {"kafka.bootstrap.servers": kafka.bootstrap, "subscribe": TOPIC}
    parquet = str(home / "copy.parquet")
    copy_s = timed(lambda: spark.read.format("rmq").options(**rmq_opts).load().write.parquet(parquet))
    to_kafka_s = timed(lambda: spark.read.parquet(parquet).selectExpr("body AS value", "queueId AS partition")
                       .write.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
                       .option("topic", TOPIC).option("kafka.linger.ms", "20")
                       .option("kafka.batch.size", str(1 << 20)).save())
    print(f"Parquet copy {copy_s:.1f} s, Kafka fill (Spark's Kafka sink, from the copy) {to_kafka_s:.1f} s "
          "(not counted)", flush=True)

    streams: dict[str, list[StreamRun]] = {"rmq": [], "kafka": []}
    parquet_s: list[float] = []
    for n in range(args.repeat):
        print(f"# source round {n + 1}: {load_line()}", flush=True)
        parquet_s.append(timed(lambda: spark.read.parquet(parquet).write.format("noop").mode("overwrite").save()))
        streams["rmq"].append(run_stream(
            lambda: spark.readStream.format("rmq").options(**rmq_opts, startingOffsets="earliest").load(),
            home / f"cp-rmq-{n}"))
        streams["kafka"].append(run_stream(
            lambda: spark.readStream.format("kafka").options(**kafka_opts, startingOffsets="earliest").load(),
            home / f"cp-kafka-{n}"))
        for name, runs in streams.items():
            if runs[-1].rows != args.rows:
                raise SystemExit(f"the {name} stream read {runs[-1].rows} rows, not {args.rows}")
        print(f"  parquet {parquet_s[-1]:.1f} s, " + ", ".join(
            f"{name} {runs[-1].whole:.1f} s (start {runs[-1].start:.1f}, first batch {runs[-1].first_batch:.1f})"
            for name, runs in streams.items()), flush=True)
    print_source(args, streams, parquet_s)
    if not args.skip_sink:
        measure_sink(args, spark, home, namesrv, kafka, parquet)
    spark.stop()
    print(f"# end: {load_line()}")
    return 0


def print_source(args: argparse.Namespace, streams: dict[str, list[StreamRun]], parquet_s: list[float]) -> None:
    best = {name: min(runs, key=lambda r: r.whole) for name, runs in streams.items()}
    parquet_rate = args.rows / min(parquet_s)
    rate = {name: args.rows / run.whole for name, run in best.items()}
    print(f"\n{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, master {args.master}, "
          f"Kafka {KAFKA_VERSION}, {args.rows:,} rows of {args.body} B, best of {args.repeat}")
    print("| source | whole s | rows/s | start s | first batch s | batches s | rows/s of batches |")
    print("|---|---|---|---|---|---|---|")
    for name, run in best.items():
        print(f"| {name} stream | {run.whole:.1f} | {rate[name]:,.0f} | {run.start:.1f} | {run.first_batch:.1f} "
              f"| {run.batches:.1f} | {args.rows / run.batches:,.0f} |")
    print(f"| parquet (batch read) | {min(parquet_s):.1f} | {parquet_rate:,.0f} | | | | |")
    print(f"rmq / Kafka {rate['rmq'] / rate['kafka']:.2f} (target >= 1.0), rmq / Parquet "
          f"{rate['rmq'] / parquet_rate:.2f} (target >= 0.6)", flush=True)


def measure_sink(args: argparse.Namespace, spark, home: Path, namesrv: str, kafka, parquet: str) -> None:
    df = spark.read.parquet(parquet).select("body").limit(args.sink_rows).cache()
    rows = df.count()
    resolvers = home / "resolvers"
    rmq = {"namesrvAddr": namesrv, "topic": SINK_TOPIC}
    resolver = {"resolverDir": str(resolvers), "resolverIdleTimeoutSeconds": "60"}  # exactly once only
    writers: dict[str, Callable[[object], None]] = {
        "rmq exactly-once": lambda d: d.write.format("rmq").options(**rmq, **resolver).mode("append").save(),
        "kafka at-least-once": lambda d: (d.selectExpr("body AS value").write.format("kafka")
                                          .option("kafka.bootstrap.servers", kafka.bootstrap)
                                          .option("topic", SINK_TOPIC).save()),
    }
    at_least_once = guarantee_option(namesrv)
    if at_least_once is not None:
        writers["rmq at-least-once"] = lambda d: (d.write.format("rmq").options(**rmq, **at_least_once)
                                                  .mode("append").save())
    try:
        for write in writers.values():  # warm-up: routes, the resolver, the producers' metadata
            write(df.limit(10))
        times: dict[str, list[float]] = {name: [] for name in writers}
        for n in range(args.repeat):
            print(f"# sink round {n + 1}: {load_line()}", flush=True)
            for name, write in writers.items():
                times[name].append(timed(lambda write=write: write(df)))
                print(f"  {name}: {times[name][-1]:.1f} s", flush=True)
    finally:
        stop_resolvers(resolvers)
    print(f"\n{rows:,} rows of {args.body} B, best of {args.repeat}"
          + ("" if at_least_once else "; this checkout's rmq sink has no guarantee option"))
    print("| sink | seconds | rows/s | / kafka |")
    print("|---|---|---|---|")
    kafka_rate = rows / min(times["kafka at-least-once"])
    for name, runs in times.items():
        print(f"| {name} | {min(runs):.1f} | {rows / min(runs):,.0f} | {rows / min(runs) / kafka_rate:.3f} |")


if __name__ == "__main__":
    sys.exit(main())
