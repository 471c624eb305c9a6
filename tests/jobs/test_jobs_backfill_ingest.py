"""backfill and ingest end to end: a real broker, the rmq source, real Delta tables read back with chispa, their
history checked; re-runs and replayed micro-batches add nothing."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from chispa import assert_df_equality
from pyspark.sql import functions as F

from jobs import lake
from jobs.backfill import BackfillJob, backfill
from jobs.common import Bound
from jobs.ingest import IngestJob, run_ingest, start_ingest
from jobs.main import TAGS


def expected_orders(spark, numbers):
    """The (keys, tags, body) rows jobs.main.produce_orders sends for these order numbers, bodies aside."""
    return spark.createDataFrame([(f"order-{n}", TAGS[n % len(TAGS)]) for n in numbers], "keys string, tags string")


def table(spark, path):
    return spark.read.format("delta").load(str(path))


def orders_in(spark, path):
    return table(spark, path).select("keys", "tags")


def test_backfill_range_merge_and_rerun(spark, namesrv, new_topic, produce, lake_dir):
    topic = new_topic(4)
    produce(topic, 0, 200)
    path = str(lake_dir / "orders")
    job = BackfillJob(namesrv=namesrv, table=path, topics=(topic,))

    first = backfill(spark, job)
    assert (first.rows_read, first.rows_inserted) == (200, 200)
    assert sum(q.rows for q in first.queues) == 200 and {q.queue_id for q in first.queues} == {0, 1, 2, 3}
    assert all(q.first_offset == 0 and q.last_offset == q.rows - 1 for q in first.queues)
    stored = table(spark, path)
    assert stored.where(F.col("storeDate") != F.to_date("storeTimestamp")).count() == 0
    assert lake.history(spark, path) == [(1, "MERGE", 200), (0, "CREATE TABLE", 0)]
    details = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
    assert details["partitionColumns"] == ["storeDate"]

    again = backfill(spark, job)  # the same range: read again, nothing new, no new table version
    assert (again.rows_read, again.rows_inserted, again.table_version) == (200, 0, 1)

    produce(topic, 200, 100)  # an overlapping range: from each queue's middle to the new end
    middle = {str(q.queue_id): q.last_offset // 2 for q in first.queues}
    overlap = BackfillJob(namesrv=namesrv, table=path, topics=(topic,),
                          start=Bound("offsets", offsets_json=json.dumps({topic: {"broker-a": middle}})))
    third = backfill(spark, overlap)
    assert third.rows_inserted == 100
    assert third.rows_read == 100 + sum(q.rows - int(middle[str(q.queue_id)]) for q in first.queues)
    assert {q.queue_id: q.first_offset for q in third.queues} == {int(k): v for k, v in middle.items()}
    # every order once (a duplicate would make the lists differ), the first range included
    assert_df_equality(orders_in(spark, path), expected_orders(spark, range(300)), ignore_row_order=True,
                       ignore_nullable=True)


def test_backfill_time_range(spark, namesrv, new_topic, produce, lake_dir):
    topic = new_topic(2)
    produce(topic, 0, 40)
    time.sleep(0.05)
    middle_ms = int(time.time() * 1000)
    time.sleep(0.05)
    produce(topic, 40, 30)
    path = str(lake_dir / "late")
    summary = backfill(spark, BackfillJob(namesrv=namesrv, table=path, topics=(topic,),
                                          start=Bound("timestamp", timestamp_ms=middle_ms)))
    assert summary.rows_inserted == 30
    assert_df_equality(orders_in(spark, path), expected_orders(spark, range(40, 70)), ignore_row_order=True,
                       ignore_nullable=True)


def test_ingest_available_now_exactly_once(spark, namesrv, new_topic, produce, tmp_path):
    topic = new_topic(3)
    produce(topic, 0, 150)
    path, checkpoint = str(tmp_path / "t"), tmp_path / "ckpt"
    job = IngestJob(namesrv=namesrv, table=path, checkpoint=str(checkpoint), topics=(topic,),
                    max_offsets_per_trigger=60, progress_interval_s=0.5)

    first = run_ingest(spark, job)
    assert first.rows == 150 and first.batches >= 3  # at most 60 per micro-batch
    assert_df_equality(orders_in(spark, path), expected_orders(spark, range(150)), ignore_row_order=True,
                       ignore_nullable=True)
    versions = lake.history(spark, path)
    assert [op for _, op, _ in versions] == ["WRITE"] * first.batches + ["CREATE TABLE"]
    assert sum(rows for _, _, rows in versions) == 150
    assert table_txns(path) == [(job.txn_app_id(), batch) for batch in range(first.batches)]

    idle = run_ingest(spark, job)  # nothing new: no batch, no commit
    assert (idle.rows, len(lake.history(spark, path))) == (0, first.batches + 1)

    # A crash after a batch's Delta commit, before Spark recorded the batch as done: drop the last commit marker,
    # so the restarted query runs that batch again. Delta sees (txnAppId, batchId) again and writes nothing.
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    for marker in (checkpoint / "commits" / str(last), checkpoint / "commits" / f".{last}.crc"):
        marker.unlink(missing_ok=True)
    produce(topic, 150, 45)
    rerun = run_ingest(spark, job)
    assert rerun.rows >= 45
    assert_df_equality(orders_in(spark, path), expected_orders(spark, range(195)), ignore_row_order=True,
                       ignore_nullable=True)


def table_txns(path: str) -> list[tuple[str, int]]:
    """The (appId, version) txn actions of the table's commits, oldest first."""
    txns = []
    for entry in sorted(Path(path, "_delta_log").glob("*.json")):
        for line in entry.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                txns.append((action["txn"]["appId"], action["txn"]["version"]))
    return txns


def test_ingest_processing_time_with_merge(spark, namesrv, new_topic, produce, tmp_path):
    topic = new_topic(2)
    produce(topic, 0, 50)
    path = str(tmp_path / "t")
    # A backfill first, then a processing-time ingest with --merge into the same table: overlapping rows land once.
    backfill(spark, BackfillJob(namesrv=namesrv, table=path, topics=(topic,)))
    job = IngestJob(namesrv=namesrv, table=path, checkpoint=str(tmp_path / "c"), topics=(topic,),
                    trigger="processing-time", interval="1 second", merge=True)
    query = start_ingest(spark, job)
    try:
        query.processAllAvailable()
        produce(topic, 50, 20)
        query.processAllAvailable()
    finally:
        query.stop()
    assert_df_equality(orders_in(spark, path), expected_orders(spark, range(70)), ignore_row_order=True,
                       ignore_nullable=True)
    shutil.rmtree(tmp_path / "c")
