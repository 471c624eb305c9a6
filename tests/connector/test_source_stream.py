"""The rmq source's streaming reads (``spark.readStream.format("rmq")``) against the shared NameServer with two
brokers (``source_cluster``): starting options, Trigger.AvailableNow, restarts, admission control, queues added
while a query runs and consumer group commits.
"""

from __future__ import annotations

import threading
import time

import pytest
from pyspark.sql import Row

from broker.client import protocol
from broker.client.blocking import BlockingRemotingClient
from connector.offsets import to_json
from tests.connector.conftest import (
    BROKERS,
    COLUMNS,
    as_set,
    create_topic,
    expected_rows,
    options,
    produce,
)
from tests.helpers import wait_until
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.slow


def run_available_now(spark, opts: dict[str, str], checkpoint: str) -> tuple[list[Row], list[int]]:
    """One Trigger.AvailableNow run of the source into foreachBatch; (rows read, numInputRows per batch)."""
    rows: list[Row] = []

    def collect(df, batch_id: int) -> None:
        rows.extend(df.select(*COLUMNS).collect())

    query = (spark.readStream.format("rmq").options(**opts).load().writeStream.foreachBatch(collect)
             .trigger(availableNow=True).option("checkpointLocation", checkpoint).start())
    try:
        assert query.awaitTermination(180), "the AvailableNow query did not end within 180 s"
    finally:
        query.stop()
    return rows, [p["numInputRows"] for p in query.recentProgress]


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
    import json

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
    rows, sizes = run_available_now(
        spark, options(source_cluster, topic_name, startingOffsets="earliest", maxOffsetsPerTrigger=50), checkpoint)
    assert sizes == [50, 50, 50, 50, 12] and len(rows) == 212 and len(set(keyed(rows))) == 212
    first_batch_queues = {(r.brokerName, r.queueId) for r in rows[:50]}
    assert first_batch_queues == {(mq.broker_name, mq.queue_id) for mq in queues}


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


def test_consumer_group_commit_writes_processed_offsets(spark, source_cluster: Cluster, topic_name: str,
                                                        checkpoint: str) -> None:
    queues = create_topic(source_cluster.namesrv_addr, topic_name, 1, brokers=2)
    produce(source_cluster.namesrv_addr, queues, 6)
    group = f"G_{topic_name}"[:100]
    run_available_now(spark, options(source_cluster, topic_name, startingOffsets="earliest", consumerGroup=group,
                                     maxOffsetsPerTrigger=5), checkpoint)
    addrs = {b.conf["brokerName"]: b.addr for b in source_cluster.brokers}
    for mq in queues:
        with BlockingRemotingClient(addrs[mq.broker_name]) as remote:
            response = remote.invoke(protocol.query_consumer_offset_request(group, mq))
        assert int(response.ext_fields["offset"]) == 6, mq
