"""The README's main command: the whole pipeline on this machine, in about a minute.

1. Starts a NameServer and a broker (real processes, free ports, files under --workdir) unless --namesrv is given.
2. Creates the topic DemoOrders (4 queues) and produces orders with keys (order-N) and tags (created, paid, shipped).
3. Runs jobs.ingest with Trigger.AvailableNow into a Delta table, produces more orders, runs it again: the second
   run reads only the new ones (the checkpoint).
4. Runs jobs.backfill over the topic's whole range into the same table: it reads every message again and inserts
   none (MERGE on the message's queue position).
5. Prints what landed (counts per tag, sample rows, the table's history) and how to look further, then stops what it
   started. The Delta table and the checkpoint stay under --workdir.

Usage: ``python -m jobs.main [--namesrv HOST:PORT] [--orders N] [--workdir DIR]``
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from broker.client.blocking import BlockingClient
from broker.client.message import Message
from broker.common.errors import JobError
from broker.tools.local_cluster import start_cluster
from jobs import lake
from jobs.backfill import BackfillJob, backfill
from jobs.common import JOB_SPARK_CONF, JobsConf, check_namesrv, create_topic, format_table, run_cli, topic_route
from jobs.ingest import IngestJob, run_ingest

PROG = "python -m jobs.main"
TOPIC = "DemoOrders"
QUEUES = 4
TAGS = ("created", "paid", "shipped")
BATCH = 64


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


def run_demo(namesrv: str | None, orders: int, workdir: Path) -> None:
    started = time.monotonic()
    table, checkpoint = str(workdir / "delta" / "orders"), str(workdir / "checkpoints" / "orders")
    with ExitStack() as stack:
        if namesrv is None:
            step(f"starting a NameServer and a broker under {workdir / 'cluster'}")
            cluster = stack.enter_context(start_cluster(workdir / "cluster"))
            namesrv = cluster.namesrv_addr
            print(f"NameServer {namesrv}, broker {cluster.brokers[0].addr}")
        else:
            check_namesrv(namesrv)
        if topic_route(namesrv, TOPIC) is None:
            create_topic(namesrv, TOPIC, QUEUES)
        first_half = orders // 2
        step(f"producing {first_half} orders to {TOPIC}")
        produce_orders(namesrv, 0, first_half)

        step("starting Spark (local, Delta Lake, format('rmq'))")
        from jobs.spark import build_session

        spark = build_session("rmq-demo", conf=JOB_SPARK_CONF)
        stack.callback(spark.stop)
        ingest_job = IngestJob(namesrv=namesrv, table=table, checkpoint=checkpoint, topics=(TOPIC,))
        step(f"ingest (Trigger.AvailableNow) into {table}")
        print(run_ingest(spark, ingest_job).render(ingest_job))

        step(f"producing {orders - first_half} more orders, then ingest again (resumes from its checkpoint)")
        produce_orders(namesrv, first_half, orders - first_half)
        print(run_ingest(spark, ingest_job).render(ingest_job))

        backfill_job = BackfillJob(namesrv=namesrv, table=table, topics=(TOPIC,))
        step(f"backfill of {TOPIC}'s whole range into the same table (MERGE: nothing lands twice)")
        print(backfill(spark, backfill_job).render(backfill_job))

        show_table(spark, table)
        print_next_steps(table, started)


def show_table(spark: object, table: str) -> None:
    from pyspark.sql import functions as F

    df = spark.read.format("delta").load(table)
    step(f"what landed in {table}")
    counts = df.agg(F.count(F.lit(1)), F.count_distinct(*lake.KEY_COLUMNS)).first()
    total, distinct = counts[0], counts[1]
    print(f"{total} rows, {distinct} distinct messages (topic, brokerName, queueId, queueOffset)")
    per_tag = df.groupBy("tags").agg(F.count(F.lit(1)).alias("rows")).orderBy("tags").collect()
    print(format_table(("tags", "rows"), ((r["tags"], r["rows"]) for r in per_tag)))
    print()
    sample = (df.orderBy("queueId", "queueOffset").limit(5)
              .select("queueId", "queueOffset", "keys", "tags", F.col("body").cast("string").alias("body"),
                      "storeTimestamp").collect())
    print(format_table(("queue", "offset", "keys", "tags", "body", "storeTimestamp"),
                       ((r[0], r[1], r[2], r[3], r[4], r[5]) for r in sample)))
    print()
    print(format_table(("version", "operation", "rows written"), lake.history(spark, table)))


def print_next_steps(table: str, started: float) -> None:
    step(f"done in {time.monotonic() - started:.0f} s; to look further")
    print(f"""\
  pyspark --packages io.delta:delta-spark_4.2_2.13:4.4.0 \\
    --conf spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension \\
    --conf spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog
  >>> spark.read.format("delta").load("{table}").groupBy("storeDate", "tags").count().show()
  >>> spark.sql("DESCRIBE HISTORY delta.`{table}`").show()

  python -m jobs.backfill --help    # a topic range into Delta (offsets or times), idempotent
  python -m jobs.ingest --help      # topics streamed into Delta, exactly once, AvailableNow or continuous
  python -m jobs.replay --help      # a Delta table (or a version range) back into a topic, transactionally
  python -m jobs.main --namesrv HOST:PORT   # this demo against a running NameServer""")


def main(argv: list[str] | None = None) -> int:
    conf = JobsConf.load()
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.rsplit("\n\n", 1)[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--namesrv", help="use this NameServer instead of starting one (jobs.conf's namesrvAddr "
                        f"is {conf.namesrv_addr})")
    parser.add_argument("--orders", type=int, default=2000, help="orders to produce (default: %(default)s)")
    parser.add_argument("--workdir", type=Path, help="where the table, checkpoint and broker files go "
                        "(default: a new temporary directory)")
    args = parser.parse_args(argv)
    if args.orders < 2:
        parser.error(f"--orders must be >= 2, got {args.orders}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="rmq-demo-"))
    if (workdir / "delta" / "orders").exists() and args.namesrv is None:
        raise JobError(f"{workdir} already holds a demo table from another broker; give a new --workdir")
    workdir.mkdir(parents=True, exist_ok=True)
    run_demo(args.namesrv, args.orders, workdir.resolve())
    return 0


if __name__ == "__main__":
    run_cli(main, prog=PROG)
