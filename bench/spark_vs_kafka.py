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

Beside each time, the CPU the run cost (bench/cpu.py): Spark's JVM with the Python processes it starts, plus the
server's (our broker, or Kafka's), the least of the rounds: on a shared machine wall times move with the load more
than CPU does. bench/spark_ceiling.py builds on this module (``running_peers``, ``source_rounds``, ``measure_sink``).

Examples
--------
    python bench/spark_vs_kafka.py                                  # 2,000,000 rows of 1 KB, 200,000 for the sinks
    python bench/spark_vs_kafka.py --rows 200000 --sink-rows 20000 --repeat 1   # smoke run
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.connector_sink import stop_resolvers  # noqa: E402
from bench.connector_source import QUEUES, TOPIC, fill, start_servers, timed  # noqa: E402
from bench.cpu import child_with, tree_cpu  # noqa: E402
from bench.kafka import KAFKA_VERSION, SPARK_KAFKA_PACKAGE, KafkaBroker, start_kafka  # noqa: E402

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


def _setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every bench built on ``running_peers`` takes."""
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
    parser.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE", type=_setting,
                        help="a setting of the Spark session (repeatable), e.g. "
                             "spark.python.unix.domain.socket.enabled=true")


@dataclass(frozen=True, slots=True)
class Peers:
    """Our NameServer and Kafka holding the same rows, a Parquet copy of them, and the Spark session that reads
    them (``rmq_opts`` / ``kafka_opts``: each source's options, without startingOffsets)."""

    spark: object
    home: Path
    namesrv: str
    kafka: KafkaBroker
    rmq_opts: dict[str, str]
    kafka_opts: dict[str, str]
    parquet: str
    server_pids: dict[str, list[int]]  # a source's name -> the server processes it reads from


@contextlib.contextmanager
def running_peers(args: argparse.Namespace, app_name: str) -> Iterator[Peers]:
    """Our servers and Kafka started, both filled with ``args.rows`` rows (module docstring), the Parquet copy
    written, a Spark session with Spark's Kafka connector; everything stopped (and the work directory removed unless
    ``--dir``) when the block ends."""
    print(f"# start: {load_line()} (a shared machine: other engineers' jobs run beside this one)", flush=True)
    home = Path(args.dir or tempfile.mkdtemp(prefix="rmq-bench-kafka-"))
    namesrv, closers, broker_pids = start_servers("ours", home / "rmq", args.pull_count)
    try:
        with start_kafka(home / "kafka") as kafka:
            peers = _prepare(args, home, namesrv, kafka, app_name, broker_pids)
            try:
                yield peers
            finally:
                peers.spark.stop()
    finally:
        for close in closers:
            close()
        if not args.dir:
            shutil.rmtree(home, ignore_errors=True)
    print(f"# end: {load_line()}")


def _prepare(args: argparse.Namespace, home: Path, namesrv: str, kafka: KafkaBroker, app_name: str,
             broker_pids: list[int]) -> Peers:
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
    conf = dict(args.spark_conf)
    spark = build_session(app_name, master=args.master, conf={"spark.jars.packages": packages, **conf},
                          jvm_log=home / "spark.log")
    peers = Peers(spark, home, namesrv, kafka,
                  {"namesrvAddr": namesrv, "topic": TOPIC, "pullBatchSize": str(args.pull_batch_size)},
                  {"kafka.bootstrap.servers": kafka.bootstrap, "subscribe": TOPIC}, str(home / "copy.parquet"),
                  {"rmq": broker_pids, "kafka": [kafka.popen.pid]})
    rmq_opts, parquet = peers.rmq_opts, peers.parquet
    copy_s = timed(lambda: spark.read.format("rmq").options(**rmq_opts).load().write.parquet(parquet))
    to_kafka_s = timed(lambda: spark.read.parquet(parquet).selectExpr("body AS value", "queueId AS partition")
                       .write.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)
                       .option("topic", TOPIC).option("kafka.linger.ms", "20")
                       .option("kafka.batch.size", str(1 << 20)).save())
    print(f"Parquet copy {copy_s:.1f} s, Kafka fill (Spark's Kafka sink, from the copy) {to_kafka_s:.1f} s "
          "(not counted)", flush=True)
    return peers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    args = parser.parse_args()
    with running_peers(args, "bench-spark-vs-kafka") as peers:
        spark = peers.spark
        streams = {
            "rmq": lambda: spark.readStream.format("rmq").options(**peers.rmq_opts, startingOffsets="earliest").load(),
            "kafka": lambda: (spark.readStream.format("kafka").options(**peers.kafka_opts, startingOffsets="earliest")
                              .load()),
        }
        batches = {"parquet": lambda: spark.read.parquet(peers.parquet).write.format("noop").mode("overwrite").save()}
        results = source_rounds(args, peers, streams, batches)
        print_source(args, results)
        rate = {name: args.rows / run.whole for name, run in results.streams.items()}
        parquet_rate = args.rows / results.batches["parquet"]
        print(f"rmq / Kafka {rate['rmq'] / rate['kafka']:.2f} (target >= 1.0), rmq / Parquet "
              f"{rate['rmq'] / parquet_rate:.2f} (target >= 0.6)", flush=True)
        if not args.skip_sink:
            print_sink(args, *measure_sink(args, peers))
    return 0


@dataclass(frozen=True, slots=True)
class Cpu:
    """CPU seconds a run cost: Spark's (its JVM, with the Python processes it starts) and its server's."""

    spark: float
    server: float

    @property
    def total(self) -> float:
        return self.spark + self.server


def measured(action: Callable[[], object], server_pids: list[int]) -> tuple[object, float, Cpu]:
    """``action()``'s result, wall seconds and CPU (bench/cpu.py: the Spark JVM's tree, and ``server_pids``')."""
    jvm = child_with("SparkSubmit")
    servers = [tree_cpu(pid) for pid in server_pids]
    spark_before = tree_cpu(jvm) if jvm else 0.0
    began = time.monotonic()
    result = action()
    wall = time.monotonic() - began
    spark_cpu = (tree_cpu(jvm) - spark_before) if jvm else float("nan")
    server_cpu = sum(tree_cpu(pid) for pid in server_pids) - sum(servers)
    return result, wall, Cpu(spark_cpu, server_cpu)


@dataclass(frozen=True, slots=True)
class SourceResults:
    """The best of ``--repeat`` rounds: each stream's run of the shortest whole query, each batch read's shortest
    time; and the least CPU each took in a round."""

    streams: dict[str, StreamRun]
    batches: dict[str, float]
    cpu: dict[str, Cpu]


def source_rounds(args: argparse.Namespace, peers: Peers, streams: dict[str, Callable[[], object]],
                  batches: dict[str, Callable[[], None]]) -> SourceResults:
    """``args.repeat`` rounds, each running every batch read then every stream (an AvailableNow query into noop,
    a fresh checkpoint) once, the load printed at each."""
    runs: dict[str, list[StreamRun]] = {name: [] for name in streams}
    batch_s: dict[str, list[float]] = {name: [] for name in batches}
    cpu: dict[str, list[Cpu]] = {name: [] for name in [*batches, *streams]}
    for n in range(args.repeat):
        print(f"# source round {n + 1}: {load_line()}", flush=True)
        for name, action in batches.items():
            _, wall, used = measured(action, [])
            batch_s[name].append(wall)
            cpu[name].append(used)
        for name, reader in streams.items():
            checkpoint = peers.home / f"cp-{name.replace(' ', '-')}-{n}"
            run, _, used = measured(lambda reader=reader, cp=checkpoint: run_stream(reader, cp),
                                    peers.server_pids.get(name, []))
            if run.rows != args.rows:
                raise SystemExit(f"the {name} stream read {run.rows} rows, not {args.rows}")
            runs[name].append(run)
            cpu[name].append(used)
        print("  " + ", ".join(f"{name} {times[-1]:.1f} s" for name, times in batch_s.items()) + ", " + ", ".join(
            f"{name} {r[-1].whole:.1f} s (start {r[-1].start:.1f}, first batch {r[-1].first_batch:.1f})"
            for name, r in runs.items()), flush=True)
        print("  CPU s (Spark + server): " + ", ".join(f"{name} {c[-1].spark:.1f} + {c[-1].server:.1f}"
                                                        for name, c in cpu.items()), flush=True)
    return SourceResults({name: min(r, key=lambda run: run.whole) for name, r in runs.items()},
                         {name: min(times) for name, times in batch_s.items()},
                         {name: min(c, key=lambda used: used.total) for name, c in cpu.items()})


def print_source(args: argparse.Namespace, results: SourceResults) -> None:
    print(f"\n{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, master {args.master}, "
          f"Kafka {KAFKA_VERSION}, {args.rows:,} rows of {args.body} B, best of {args.repeat}; CPU: the least of "
          "the rounds, Spark's JVM with its Python processes + the server's")
    print("| source | whole s | rows/s | start s | first batch s | batches s | rows/s of batches | CPU s "
          "| CPU us/row |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, run in results.streams.items():
        used = results.cpu[name]
        print(f"| {name} stream | {run.whole:.1f} | {args.rows / run.whole:,.0f} | {run.start:.1f} "
              f"| {run.first_batch:.1f} | {run.batches:.1f} | {args.rows / run.batches:,.0f} "
              f"| {used.spark:.1f} + {used.server:.1f} | {used.total / args.rows * 1e6:.1f} |")
    for name, seconds in results.batches.items():
        used = results.cpu[name]
        print(f"| {name} (batch read) | {seconds:.1f} | {args.rows / seconds:,.0f} | | | | | {used.spark:.1f} "
              f"| {used.total / args.rows * 1e6:.1f} |")


def sink_writers(peers: Peers, resolvers: Path) -> dict[str, Callable[[object], None]]:
    """Spark's Kafka sink and ours (exactly once, and at least once when this checkout's sink has the option),
    each ``writer(df)`` into SINK_TOPIC."""
    kafka = peers.kafka
    rmq = {"namesrvAddr": peers.namesrv, "topic": SINK_TOPIC}
    resolver = {"resolverDir": str(resolvers), "resolverIdleTimeoutSeconds": "60"}  # exactly once only
    writers: dict[str, Callable[[object], None]] = {
        "rmq exactly-once": lambda d: d.write.format("rmq").options(**rmq, **resolver).mode("append").save(),
        "kafka at-least-once": lambda d: (d.selectExpr("body AS value").write.format("kafka")
                                          .option("kafka.bootstrap.servers", kafka.bootstrap)
                                          .option("topic", SINK_TOPIC).save()),
    }
    at_least_once = guarantee_option(peers.namesrv)
    if at_least_once is not None:
        writers["rmq at-least-once"] = lambda d: (d.write.format("rmq").options(**rmq, **at_least_once)
                                                  .mode("append").save())
    return writers


def measure_sink(args: argparse.Namespace, peers: Peers,
                 extra: dict[str, Callable[[object], None]] | None = None,
                 ) -> tuple[int, dict[str, list[float]], dict[str, Cpu]]:
    """``args.sink_rows`` of the copy (cached) written by each of ``sink_writers`` and ``extra``, after a warm-up
    write of 10 rows each (routes, the resolver, the producers' metadata), in ``args.repeat`` interleaved rounds:
    (rows, {writer: seconds of each round}, {writer: its least CPU in a round}). A writer's server is the one its
    name starts with ("rmq ...", "kafka ..."); the resolvers (detached) are not counted."""
    df = peers.spark.read.parquet(peers.parquet).select("body").limit(args.sink_rows).cache()
    rows = df.count()
    resolvers = peers.home / "resolvers"
    writers = {**sink_writers(peers, resolvers), **(extra or {})}
    try:
        for write in writers.values():
            write(df.limit(10))
        times: dict[str, list[float]] = {name: [] for name in writers}
        cpu: dict[str, list[Cpu]] = {name: [] for name in writers}
        for n in range(args.repeat):
            print(f"# sink round {n + 1}: {load_line()}", flush=True)
            for name, write in writers.items():
                _, wall, used = measured(lambda write=write: write(df), peers.server_pids.get(name.split()[0], []))
                times[name].append(wall)
                cpu[name].append(used)
                print(f"  {name}: {wall:.1f} s, CPU {used.spark:.1f} + {used.server:.1f} s", flush=True)
    finally:
        stop_resolvers(resolvers)
        df.unpersist()
    return rows, times, {name: min(c, key=lambda used: used.total) for name, c in cpu.items()}


def print_sink(args: argparse.Namespace, rows: int, times: dict[str, list[float]], cpu: dict[str, Cpu]) -> None:
    print(f"\n{rows:,} rows of {args.body} B, best of {args.repeat}"
          + ("" if "rmq at-least-once" in times else "; this checkout's rmq sink has no guarantee option")
          + "; CPU: the least of the rounds, Spark's JVM with its Python processes + the server's")
    print("| sink | seconds | rows/s | / kafka | CPU s | CPU us/row |")
    print("|---|---|---|---|---|---|")
    kafka_rate = rows / min(times["kafka at-least-once"])
    for name, runs in times.items():
        used = cpu[name]
        print(f"| {name} | {min(runs):.1f} | {rows / min(runs):,.0f} | {rows / min(runs) / kafka_rate:.3f} "
              f"| {used.spark:.1f} + {used.server:.1f} | {used.total / rows * 1e6:.0f} |")


if __name__ == "__main__":
    sys.exit(main())
