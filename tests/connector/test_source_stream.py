"""The rmq source's streaming reads (``spark.readStream.format("rmq")``) against the shared NameServer with two
brokers (``source_cluster``): starting options, Trigger.AvailableNow, restarts, admission control, queues added
while a query runs and consumer group commits.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import Row

from broker.tools.local_cluster import free_port, start_cluster
from connector.offsets import from_json, to_json
from connector.source_metrics import latest_offsets, source_metrics
from tests.connector.conftest import (
    BROKERS,
    COLUMNS,
    as_set,
    create_topic,
    expected_rows,
    options,
    produce,
)
from tests.helpers import mqadmin_ok, wait_until
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.slow


def run_available_now(spark, opts: dict[str, str], checkpoint: str) -> tuple[list[Row], list[dict]]:
    """One Trigger.AvailableNow run of the source into foreachBatch; (rows read, the query's progress per batch)."""
    rows: list[Row] = []

    def collect(df, batch_id: int) -> None:
        rows.extend(df.select(*COLUMNS).collect())

    query = (spark.readStream.format("rmq").options(**opts).load().writeStream.foreachBatch(collect)
             .trigger(availableNow=True).option("checkpointLocation", checkpoint).start())
    try:
        assert query.awaitTermination(180), "the AvailableNow query did not end within 180 s"
    finally:
        query.stop()
    return rows, query.recentProgress


def keyed(rows: list[Row]) -> list[tuple[str, int, int]]:
    return sorted((r.brokerName, r.queueId, r.queueOffset) for r in rows)


def test_stream_earliest_available_now_reads_everything_once(spark, source_cluster: Cluster, topic_name: str,
                                                               checkpoint: str) -> None:
    queues = create_topic(source_cluster.namesrv_addr, topic_name, 2, brokers=2)
    sent = produce(source_cluster.namesrv_addr, queues, 25)
    rows, _ = run_available_now(spark, options(source_cluster, topic_name, startingOffsets="earliest"), checkpoint)
    assert len(rows) == 100 and as_set(rows) == expected_rows(sent, 25)
    assert {r.brokerName for r in rows} == set(BROKERS)


def test_stream_latest_then_restarts_skip_nothing_and_repeat_nothing(spark, source_cluster: Cluster, topic_name: str,
                                                                      checkpoint: str) -> None:
    queues = create_topic(source_cluster.namesrv_addr, topic_name, 2, brokers=2)
    produce(source_cluster.namesrv_addr, queues, 5, body=lambda mq, i: b"before")
    rows, _ = run_available_now(spark, options(source_cluster, topic_name), checkpoint)  # startingOffsets=latest
    assert rows == []
    produce(source_cluster.namesrv_addr, queues, 3, body=lambda mq, i: b"between")  # while no query runs
    rows, _ = run_available_now(spark, options(source_cluster, topic_name), checkpoint)
    assert sorted(bytes(r.body) for r in rows) == [b"between"] * 12
    assert keyed(rows) == sorted((mq.broker_name, mq.queue_id, o) for mq in queues for o in range(5, 8))
    produce(source_cluster.namesrv_addr, queues, 2, body=lambda mq, i: b"after")
    rows, _ = run_available_now(spark, options(source_cluster, topic_name), checkpoint)
    assert keyed(rows) == sorted((mq.broker_name, mq.queue_id, o) for mq in queues for o in range(8, 10))


def test_stream_json_starting_offsets(spark, source_cluster: Cluster, topic_name: str, checkpoint: str) -> None:
    queues = create_topic(source_cluster.namesrv_addr, topic_name, 2, brokers=2)
    produce(source_cluster.namesrv_addr, queues, 10)
    a0, a1, b0, _ = queues
    starting = to_json({a0: 7, a1: -2, b0: -1})  # the fourth queue is not named: earliest
    opts = options(source_cluster, topic_name, startingOffsets=json.dumps(starting))
    rows, _ = run_available_now(spark, opts, checkpoint)
    per_queue = {}
    for r in rows:
        per_queue.setdefault((r.brokerName, r.queueId), []).append(r.queueOffset)
    assert {k: sorted(v) for k, v in per_queue.items()} == {
        (a0.broker_name, a0.queue_id): [7, 8, 9],
        (a1.broker_name, a1.queue_id): list(range(10)),
        (queues[3].broker_name, queues[3].queue_id): list(range(10)),
    }


def test_stream_starting_timestamp(spark, source_cluster: Cluster, topic_name: str, checkpoint: str) -> None:
    queues = create_topic(source_cluster.namesrv_addr, topic_name, 1, brokers=2)
    produce(source_cluster.namesrv_addr, queues, 4)
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    produce(source_cluster.namesrv_addr, queues, 2, body=lambda mq, i: b"late")
    rows, _ = run_available_now(spark, options(source_cluster, topic_name, startingTimestamp=middle), checkpoint)
    assert sorted(bytes(r.body) for r in rows) == [b"late"] * 4


def test_max_offsets_per_trigger_splits_batches_without_starving_small_queues(
        spark, source_cluster: Cluster, topic_name: str, checkpoint: str) -> None:
    queues = create_topic(source_cluster.namesrv_addr, topic_name, 2, brokers=2)
    big, *small = queues
    produce(source_cluster.namesrv_addr, [big], 200)
    produce(source_cluster.namesrv_addr, small, 4)
    rows, progress = run_available_now(
        spark, options(source_cluster, topic_name, startingOffsets="earliest", maxOffsetsPerTrigger=50), checkpoint)
    assert [p["numInputRows"] for p in progress] == [50, 50, 50, 50, 12]
    assert len(rows) == 212 and len(set(keyed(rows))) == 212
    first_batch_queues = {(r.brokerName, r.queueId) for r in rows[:50]}
    assert first_batch_queues == {(mq.broker_name, mq.queue_id) for mq in queues}

    # Each batch's progress carries Kafka's three figures (connector/source_metrics.py): per queue, the latest offset
    # (under AvailableNow the run's target: what was produced) minus the batch's end; min, max and mean.
    latest = {mq: 200 if mq == big else 4 for mq in queues}
    assert all(latest_offsets(p["sources"][0]) == to_json(latest) for p in progress)
    behind_total = []
    for p in progress:
        end = from_json(json.loads(p["sources"][0]["endOffset"]))
        behind = [latest[mq] - end[mq] for mq in queues]
        assert source_metrics(p["sources"][0]) == {
            "minOffsetsBehindLatest": str(min(behind)), "maxOffsetsBehindLatest": str(max(behind)),
            "avgOffsetsBehindLatest": str(sum(behind) / len(behind))}
        behind_total.append(sum(behind))
    assert behind_total == [162, 112, 62, 12, 0]
    assert source_metrics(progress[-1]["sources"][0]) == {
        "minOffsetsBehindLatest": "0", "maxOffsetsBehindLatest": "0", "avgOffsetsBehindLatest": "0.0"}


def test_min_offsets_per_trigger_does_not_hang_available_now(spark, source_cluster: Cluster, topic_name: str,
                                                             checkpoint: str) -> None:
    queues = create_topic(source_cluster.namesrv_addr, topic_name, 1, brokers=2)
    produce(source_cluster.namesrv_addr, queues, 5)
    opts = options(source_cluster, topic_name, startingOffsets="earliest", minOffsetsPerTrigger=1000,
                   maxTriggerDelay="1h")
    rows, _ = run_available_now(spark, opts, checkpoint)
    assert len(rows) == 10


def test_queue_added_while_the_query_runs(spark, source_cluster: Cluster, topic_name: str, checkpoint: str) -> None:
    queues = create_topic(source_cluster.namesrv_addr, topic_name, 1, brokers=2)
    produce(source_cluster.namesrv_addr, queues, 3)
    seen: list[Row] = []
    lock = threading.Lock()

    def collect(df, batch_id: int) -> None:
        got = df.select(*COLUMNS).collect()
        with lock:
            seen.extend(got)

    query = (spark.readStream.format("rmq").options(**options(source_cluster, topic_name, startingOffsets="earliest"))
             .load().writeStream.foreachBatch(collect).trigger(processingTime="300 milliseconds")
             .option("checkpointLocation", checkpoint).start())
    try:
        wait_until("the first 6 rows", lambda: len(seen) >= 6, 60)
        grown = create_topic(source_cluster.namesrv_addr, topic_name, 3, brokers=2)  # 1 -> 3 queues on each broker
        added = [mq for mq in grown if mq not in queues]
        assert len(added) == 4
        produce(source_cluster.namesrv_addr, added, 2)
        wait_until("the rows of the added queues", lambda: len(seen) >= 14, 60)
        time.sleep(1)  # a few more triggers: nothing may come twice
    finally:
        query.stop()
    assert query.exception() is None
    want = {(mq.broker_name, mq.queue_id, i) for mq in queues for i in range(3)}
    want |= {(mq.broker_name, mq.queue_id, i) for mq in added for i in range(2)}
    assert keyed(seen) == sorted(want)


PROGRESS_ROW = re.compile(r"^(\S+)\s+(\S+)\s+(\d+)\s+(-?\d+)\s+(-?\d+)\s+(-?\d+)\s")


def consumer_progress(namesrv: str, group: str, topic: str) -> dict[tuple[str, int], tuple[int, int, int]]:
    """``mqadmin consumerProgress -g group -t topic``: (broker offset, consumer offset, diff) per queue."""
    rows = {}
    for line in mqadmin_ok("consumerProgress", "-g", group, "-t", topic, "-n", namesrv).splitlines():
        if match := PROGRESS_ROW.match(line):
            rows[(match.group(2), int(match.group(3)))] = tuple(int(match.group(i)) for i in (4, 5, 6))
    return rows


def test_consumer_group_shows_the_query_lag_after_each_trigger(spark, source_cluster: Cluster, topic_name: str,
                                                               checkpoint: str) -> None:
    """consumerGroup: once Spark plans a batch, the previous one's end is the group's offset on the brokers, so
    ``mqadmin consumerProgress -g`` shows what the query has processed and, as the diff, what it has not."""
    namesrv = source_cluster.namesrv_addr
    queues = create_topic(namesrv, topic_name, 1, brokers=2)
    produce(namesrv, queues, 6)
    group = f"G_{topic_name}"[:100]
    second_batch, release = threading.Event(), threading.Event()
    counted: list[int] = []

    def hold_second_batch(df, batch_id: int) -> None:
        counted.append(df.count())
        if batch_id == 1:
            second_batch.set()
            release.wait(120)

    opts = options(source_cluster, topic_name, startingOffsets="earliest", consumerGroup=group, maxOffsetsPerTrigger=4)
    query = (spark.readStream.format("rmq").options(**opts).load().writeStream.foreachBatch(hold_second_batch)
             .trigger(processingTime="200 milliseconds").option("checkpointLocation", checkpoint).start())
    try:
        assert second_batch.wait(120), query.exception()
        # batch 0 read 2 of each queue's 6 (maxOffsetsPerTrigger 4 over 2 queues); batch 1 is running. The group's
        # diff is the lag the query's own progress reported for batch 0
        first = query.recentProgress[0]["sources"][0]
        assert from_json(json.loads(first["endOffset"])) == dict.fromkeys(queues, 2)
        assert source_metrics(first) == {"minOffsetsBehindLatest": "4", "maxOffsetsBehindLatest": "4",
                                         "avgOffsetsBehindLatest": "4.0"}
        want = {(mq.broker_name, mq.queue_id): (6, 2, 4) for mq in queues}
        assert consumer_progress(namesrv, group, topic_name) == want
        release.set()
        done = {(mq.broker_name, mq.queue_id): (6, 6, 0) for mq in queues}
        wait_until("the group at the end of every queue", lambda: consumer_progress(namesrv, group, topic_name) == done,
                   60)
    finally:
        release.set()
        query.stop()
    assert query.exception() is None and sum(counted) == 12


def consumer_lag(metrics_port: int, group: str, topic: str) -> float | None:
    """``rocketmq_consumer_lag_messages`` of ``group`` on ``topic`` in one scrape of a broker's metrics page (None:
    the broker reports no lag for the group, as for a group with no client online)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30) as page:
        text = page.read().decode()
    found = [s.value for family in text_string_to_metric_families(text) for s in family.samples
             if s.name == "rocketmq_consumer_lag_messages" and s.labels.get("consumer_group") == group
             and s.labels.get("topic") == topic]
    return found[0] if found else None


def test_a_running_query_group_shows_in_the_broker_lag_metric(spark, tmp_path, topic_name: str,
                                                              checkpoint: str) -> None:
    """A broker with Prometheus metrics on counts a running query's consumerGroup among its online groups: its
    rocketmq_consumer_lag_messages is what the query has not processed yet, and 0 once it has read everything."""
    metrics_port = free_port()
    with start_cluster(tmp_path / "metrics", 1, metricsExporterType="PROM", metricsPromExporterHost="127.0.0.1",
                       metricsPromExporterPort=metrics_port) as cluster:
        namesrv = cluster.namesrv_addr
        queues = create_topic(namesrv, topic_name, 2)
        produce(namesrv, queues, 6)
        group = f"G_{topic_name}"[:100]
        second_batch, release = threading.Event(), threading.Event()

        def hold_second_batch(df, batch_id: int) -> None:
            df.count()
            if batch_id == 1:
                second_batch.set()
                release.wait(120)

        opts = {"namesrvAddr": namesrv, "topic": topic_name, "startingOffsets": "earliest", "consumerGroup": group,
                "maxOffsetsPerTrigger": "4"}
        query = (spark.readStream.format("rmq").options(**opts).load().writeStream.foreachBatch(hold_second_batch)
                 .trigger(processingTime="200 milliseconds").option("checkpointLocation", checkpoint).start())
        try:
            assert second_batch.wait(120), query.exception()
            # batch 0 read 2 of each queue's 6 and is committed; batch 1 is held: 4 + 4 left
            assert consumer_lag(metrics_port, group, topic_name) == 8
            release.set()
            wait_until("no lag left", lambda: consumer_lag(metrics_port, group, topic_name) == 0, 60)
        finally:
            release.set()
            query.stop()
        assert query.exception() is None
