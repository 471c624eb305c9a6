"""The README's main command: the whole pipeline on this machine, in a minute or two.

1. Starts a NameServer and a broker (real processes, free ports, files under --workdir) unless --namesrv is given.
2. Creates the topic DemoOrders (4 queues) and produces orders with keys (order-N) and tags (created, paid, shipped).
3. Runs jobs.ingest with Trigger.AvailableNow into a Delta table, produces more orders, runs it again: the second
   run reads only the new ones (the checkpoint).
4. Runs jobs.backfill over the topic's whole range into the same table: it reads every message again and inserts
   none (MERGE on the message's queue position).
5. Shows what landed (counts per tag, sample rows, the table's history).
6. Replays the table into DemoOrdersReplay through the exactly-once sink (jobs.replay), reads that topic back with
   the rmq source and counts each message key against the table: every row once, none missing, none twice.
7. Says how to look further and where the logs are, and ends with the web console's address (mqconsole, started
   beside the cluster). On a terminal the cluster and console stay up until Ctrl-C (``--keep-running``); otherwise,
   or with ``--no-keep-running``, it stops what it started. The Delta table, the checkpoint and the logs stay under
   --workdir.

What the terminal shows is the demo's own: a few lines per step and the jobs' progress line (jobs/progress.py).
Spark's, Ivy's and log4j's console output (the first run's jar downloads too, and the Python workers') go to demo.log
under --workdir, the NameServer's and broker's to their files under cluster/, the console's under console/. The last
line is where to look next: the web console's address (``print_next_steps``).

Usage: ``python -m jobs.main [--namesrv HOST:PORT] [--orders N] [--workdir DIR] [--[no-]keep-running]``
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from broker.client.blocking import BlockingClient
from broker.client.message import Message
from broker.common.errors import JobError
from broker.console.process import console_url, start_console_process
from broker.tools.local_cluster import start_cluster
from connector.resolver import resolver_pid
from jobs import lake
from jobs.backfill import BackfillJob, backfill
from jobs.common import JOB_SPARK_CONF, JobsConf, check_namesrv, create_topic, format_table, run_cli, topic_route
from jobs.ingest import IngestJob, run_ingest
from jobs.replay import ReplayJob, replay
from jobs.verify import check_arrival, topic_end_offsets

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROG = "python -m jobs.main"
TOPIC = "DemoOrders"
REPLAY_TOPIC = "DemoOrdersReplay"
QUEUES = 4
TAGS = ("created", "paid", "shipped")
BATCH = 64
LOG_NAME = "demo.log"
# A run of a minute: the JIT's optimising tier would spend more of 2 cores compiling than it gives back (about a fifth
# of the demo's time, measured on 2 cores).
DEMO_SPARK_CONF = {**JOB_SPARK_CONF, "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"}


def produce_orders(namesrv: str, first: int, count: int, topic: str = TOPIC) -> int:
    """``count`` orders numbered from ``first``: JSON bodies, KEYS order-N, TAGS by state, batches spread over the
    topic's queues."""
    rng = random.Random(first)
    sent = 0
    with BlockingClient(namesrv) as client:
        queues = client.fetch_publish_queues(topic)
        for start in range(first, first + count, BATCH):
            numbers = range(start, min(start + BATCH, first + count))
            msgs = [Message(topic, json.dumps({"order": n, "amount": rng.randint(1, 500)}).encode(),
                            keys=f"order-{n}", tags=TAGS[n % len(TAGS)]) for n in numbers]
            client.send_batch(msgs, queues[(start // BATCH) % len(queues)])
            sent += len(msgs)
    return sent


_STARTED = time.monotonic()


def step(text: str) -> None:
    print(f"\n== [{time.monotonic() - _STARTED:5.1f} s] {text}", flush=True)


def rate(rows: int, seconds: float) -> str:
    return f"{rows / seconds:.0f} rows/s" if seconds > 0 else "-"


def produce_step(namesrv: str, first: int, count: int) -> None:
    started = time.monotonic()
    produce_orders(namesrv, first, count)
    seconds = time.monotonic() - started
    print(f"{count} orders sent to {TOPIC} ({QUEUES} queues), {seconds:.1f} s, {rate(count, seconds)}")


def run_demo(namesrv: str | None, orders: int, workdir: Path, *, keep_running: bool = False) -> None:
    table, checkpoint = str(workdir / "delta" / "orders"), str(workdir / "checkpoints" / "orders")
    with ExitStack() as stack:
        if namesrv is None:
            step(f"a NameServer and a broker, files under {workdir / 'cluster'}")
            cluster = stack.enter_context(start_cluster(workdir / "cluster"))
            namesrv = cluster.namesrv_addr
            print(f"NameServer {namesrv}, broker {cluster.brokers[0].addr}, ready in "
                  f"{time.monotonic() - _STARTED:.1f} s")
        else:
            check_namesrv(namesrv)
        console = console_url(stack.enter_context(start_console_process(workdir / "console", namesrv)))
        print(f"console {console} (mqconsole: cluster, topics, groups, messages, charts)")
        for topic in (TOPIC, REPLAY_TOPIC):
            if topic_route(namesrv, topic) is None:
                create_topic(namesrv, topic, QUEUES)
        first_half = orders // 2
        step("producing orders")
        produce_step(namesrv, 0, first_half)

        step("starting Spark (local, Delta Lake, format('rmq'))")
        spark = start_spark(workdir / LOG_NAME)
        stack.callback(spark.stop)

        ingest_job = IngestJob(namesrv=namesrv, table=table, checkpoint=checkpoint, topics=(TOPIC,))
        step(f"ingest (Trigger.AvailableNow) into the Delta table {table}")
        ingest_step(spark, ingest_job)
        step(f"{orders - first_half} more orders, then ingest again (it resumes from its checkpoint)")
        produce_step(namesrv, first_half, orders - first_half)
        ingest_step(spark, ingest_job)

        step(f"backfill of {TOPIC}'s whole range into the same table (MERGE: nothing lands twice)")
        done = backfill(spark, BackfillJob(namesrv=namesrv, table=table, topics=(TOPIC,)))
        print(f"read {done.rows_read} rows, inserted {done.rows_inserted} new ({done.rows_read - done.rows_inserted} "
              f"already there), table version {done.table_version}, {done.seconds:.1f} s")

        show_table(spark, table)
        replay_step(spark, stack, namesrv, table, workdir)
        print_next_steps(table, workdir, console=console, keep_running=keep_running)
        if keep_running:
            wait_for_interrupt()


def start_spark(log: Path) -> SparkSession:
    from jobs.spark import build_session

    started = time.monotonic()
    spark = build_session("rmq-demo", conf=DEMO_SPARK_CONF, jvm_log=log)
    print(f"Spark {spark.version} {spark.sparkContext.master}, ready in {time.monotonic() - started:.1f} s "
          f"(its console output goes to {log})")
    return spark


def ingest_step(spark: SparkSession, job: IngestJob) -> None:
    summary = run_ingest(spark, job, out=sys.stdout)
    print(f"{summary.rows} rows in {summary.batches} micro-batch(es), table version {summary.table_version}, "
          f"{summary.seconds:.1f} s")


def replay_step(spark: SparkSession, stack: ExitStack, namesrv: str, table: str, workdir: Path) -> None:
    """The table into REPLAY_TOPIC through the exactly-once sink, then read back and counted per key."""
    resolvers = workdir / "resolvers"
    job = ReplayJob(namesrv=namesrv, table=table, topic=REPLAY_TOPIC, sink_options={"resolverDir": str(resolvers)})
    stack.callback(stop_resolver, resolvers, job.effective_sink_id())
    step(f"replay of the table into {REPLAY_TOPIC} through the exactly-once sink (jobs.replay)")
    since = topic_end_offsets(namesrv, REPLAY_TOPIC)  # a re-run against the same NameServer reads only its own
    sent = replay(spark, job)
    print(f"{sent.rows} messages sent as half messages and committed ({sent.selection}), {sent.seconds:.1f} s, "
          f"{rate(sent.rows, sent.seconds)}")
    step(f"{REPLAY_TOPIC} read back (format('rmq'), batch) and counted per message key against the table")
    print(check_arrival(spark, table, namesrv, REPLAY_TOPIC, since).render())


def stop_resolver(directory: Path, sink_id: str) -> None:
    """The sink's resolver answers the broker's checks of open half messages; the replay committed all of them, and
    the demo's broker stops with the demo, so it has nothing left to do."""
    pid = resolver_pid(directory, sink_id)
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10.0
    while resolver_pid(directory, sink_id) is not None and time.monotonic() < deadline:
        time.sleep(0.05)  # its lock goes with the process: gone before the demo says it stopped what it started


def show_table(spark: SparkSession, table: str) -> None:
    from pyspark.sql import functions as F

    df = spark.read.format("delta").load(table)
    step("what landed in the table")
    counts = df.agg(F.count(F.lit(1)), F.count_distinct(*lake.KEY_COLUMNS)).first()
    per_tag = df.groupBy("tags").agg(F.count(F.lit(1))).orderBy("tags").collect()
    print(f"{counts[0]} rows, {counts[1]} distinct messages (topic, brokerName, queueId, queueOffset); "
          + ", ".join(f"{tag} {rows}" for tag, rows in per_tag))
    sample = (df.orderBy("queueId", "queueOffset").limit(3)
              .select("queueId", "queueOffset", "keys", "tags", F.col("body").cast("string"), "storeTimestamp")
              .collect())
    print(format_table(("queue", "offset", "keys", "tags", "body", "storeTimestamp"), sample))
    print("history: " + "; ".join(f"version {version} {operation} {rows} rows"
                                  for version, operation, rows in reversed(lake.history(spark, table))))


def wait_for_interrupt() -> None:
    """Until Ctrl-C (or SIGTERM): the cluster and console stay up for a look around, then stop."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("stopping the cluster and the console", flush=True)


def print_next_steps(table: str, workdir: Path, *, console: str, keep_running: bool) -> None:
    """How to look further and where the logs are; the last line is the web console's address (``console``), where
    a newcomer goes next."""
    from jobs.spark import DELTA_JARS  # loaded already: the demo's session came from it

    step(f"done in {time.monotonic() - _STARTED:.0f} s; to look further")
    print(f"""\
  pyspark --packages {DELTA_JARS} \\
    --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \\
    --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog
  >>> spark.read.format("delta").load("{table}").groupBy("storeDate", "tags").count().show()
  >>> spark.sql("DESCRIBE HISTORY delta.`{table}`").show()

  python -m jobs.backfill --help    # a topic range into Delta (offsets or times), idempotent
  python -m jobs.ingest --help      # topics streamed into Delta, exactly once, available-now or processing-time
  python -m jobs.replay --help      # a Delta table (or a version range) back into a topic, transactionally
  python -m jobs.main --namesrv HOST:PORT   # this demo against a running NameServer
""")
    logs = [(workdir / LOG_NAME, "Spark, Ivy and log4j: the JVM's console"),
            (workdir / "cluster", "NameServer, broker"), (workdir / "console", "mqconsole"),
            (workdir / "resolvers", "the sink's resolver")]
    present = [f"{path}  ({what})" for path, what in logs if path.exists()]
    print("logs: " + "\n      ".join(present), flush=True)
    until = "up until Ctrl-C" if keep_running else "stops with the demo: --keep-running keeps it up"
    print(f"\nconsole: {console}  ({until})", flush=True)


def main(argv: list[str] | None = None) -> int:
    conf = JobsConf.load()
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.rsplit("\n\n", 1)[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--namesrv", help="use this NameServer instead of starting one (jobs.conf's namesrvAddr "
                        f"is {conf.namesrv_addr})")
    parser.add_argument("--orders", type=int, default=2000, help="orders to produce (default: %(default)s)")
    parser.add_argument("--workdir", type=Path, help="where the table, checkpoint and broker files go "
                        "(default: a new temporary directory)")
    parser.add_argument("--keep-running", action=argparse.BooleanOptionalAction, default=None,
                        help="keep the cluster and the console up after the demo until Ctrl-C (default: when run "
                        "on a terminal)")
    args = parser.parse_args(argv)
    if args.orders < 2:
        parser.error(f"--orders must be >= 2, got {args.orders}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="rmq-demo-"))
    if (workdir / "delta" / "orders").exists() and args.namesrv is None:
        raise JobError(f"{workdir} already holds a demo table from another broker; give a new --workdir")
    workdir.mkdir(parents=True, exist_ok=True)
    keep_running = args.keep_running if args.keep_running is not None else sys.stdin.isatty() and sys.stdout.isatty()
    run_demo(args.namesrv, args.orders, workdir.resolve(), keep_running=keep_running)
    return 0


if __name__ == "__main__":
    run_cli(main, prog=PROG)
