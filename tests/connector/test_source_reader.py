"""The rmq source without Spark: the stream reader's AvailableNow target and admission control, read_partition
(Arrow batches, a moved broker found through the NameServer) against the shared NameServer with two brokers
(``source_cluster``), and rate_limit.
"""

from __future__ import annotations

import time

import pytest

from broker.client.message import MessageQueue
from connector.offsets import OffsetOracle, from_json, rate_limit
from connector.options import SourceOptions
from connector.source import QueueRange, plan_partitions, read_partition
from connector.source_metrics import METRICS_KEY
from tests.connector.conftest import (
    create_topic,
    options,
    produce,
    stream_reader,
)
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.slow


def test_available_now_never_goes_past_its_target(source_cluster: Cluster, topic_name: str) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    queues = create_topic(source_cluster.namesrv_addr, topic_name, 1, brokers=2)
    produce(source_cluster.namesrv_addr, queues, 4)
    reader = stream_reader(source_cluster, topic_name, startingOffsets="earliest")
    try:
        start = reader.initialOffset()
        reader.prepareForTriggerAvailableNow()
        produce(source_cluster.namesrv_addr, queues, 3)  # after the target was taken
        end = reader.latestOffset(start, ReadAllAvailable())
        assert from_json(end) == dict.fromkeys(queues, 4)
        assert reader.latestOffset(end, ReadAllAvailable()) == end
        # as Kafka's source: what it reports as latest is the target, and the batch is not behind it
        reported = reader.reportLatestOffset()
        assert reported.pop(METRICS_KEY) == {"minOffsetsBehindLatest": "0", "maxOffsetsBehindLatest": "0",
                                             "avgOffsetsBehindLatest": "0.0"}
        assert from_json(reported) == dict.fromkeys(queues, 4)
    finally:
        reader.stop()


def test_min_offsets_per_trigger_waits_for_rows_or_the_delay(source_cluster: Cluster, topic_name: str) -> None:
    from pyspark.sql.streaming.datasource import ReadMaxRows, ReadMinRows

    queues = create_topic(source_cluster.namesrv_addr, topic_name, 1, brokers=2)
    reader = stream_reader(source_cluster, topic_name, startingOffsets="earliest", minOffsetsPerTrigger=10,
                           maxTriggerDelay="1s")
    try:
        start = reader.initialOffset()
        assert isinstance(reader.getDefaultReadLimit(), ReadMinRows)
        produce(source_cluster.namesrv_addr, queues, 2)  # 4 offsets < 10
        assert reader.latestOffset(start, ReadMinRows(10)) == start
        time.sleep(1.1)  # maxTriggerDelay passed: a batch with what there is
        assert from_json(reader.latestOffset(start, ReadMinRows(10))) == dict.fromkeys(queues, 2)
    finally:
        reader.stop()
    produce(source_cluster.namesrv_addr, queues, 3)
    reader = stream_reader(source_cluster, topic_name, startingOffsets="earliest", minOffsetsPerTrigger=3,
                           maxOffsetsPerTrigger=5)
    try:
        start = reader.initialOffset()
        assert reader.getDefaultReadLimit() == ReadMaxRows(5)
        end = from_json(reader.latestOffset(start, ReadMaxRows(5)))
        assert sum(end.values()) == 5  # 10 waiting, at least 3, at most 5
    finally:
        reader.stop()


def test_latest_start_is_logged_by_an_empty_first_batch(source_cluster: Cluster, topic_name: str) -> None:
    """The first batch of a query started at latest ends where it starts, so the offset log holds the resolved
    start; the next call moves on."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    queues = create_topic(source_cluster.namesrv_addr, topic_name, 1, brokers=2)
    produce(source_cluster.namesrv_addr, queues, 2)
    reader = stream_reader(source_cluster, topic_name)
    try:
        start = reader.initialOffset()
        produce(source_cluster.namesrv_addr, queues, 1)
        assert reader.latestOffset(start, ReadAllAvailable()) == start
        assert from_json(reader.latestOffset(start, ReadAllAvailable())) == dict.fromkeys(queues, 3)
    finally:
        reader.stop()


def test_read_partition_pulls_a_range_in_arrow(source_cluster: Cluster, topic_name: str) -> None:
    queues = create_topic(source_cluster.namesrv_addr, topic_name, 1, brokers=2)
    produce(source_cluster.namesrv_addr, queues[:1], 300)
    opts = SourceOptions.parse(options(source_cluster, topic_name, pullBatchSize=7), streaming=False)
    oracle = OffsetOracle(opts)
    try:
        (part,) = plan_partitions(oracle, opts, {queues[0]: 10}, {queues[0]: 290})
    finally:
        oracle.close()
    assert isinstance(part, QueueRange) and (part.start, part.end) == (10, 290)
    batches = list(read_partition(part))
    offsets = [o for b in batches for o in b.column("queueOffset").to_pylist()]
    assert offsets == list(range(10, 290))


def test_read_partition_finds_a_moved_broker_through_the_name_server(source_cluster: Cluster, topic_name: str) -> None:
    """The partition names the broker address the driver planned with; when nothing answers there any more,
    read() asks the NameServer where the broker's master is now."""
    from dataclasses import replace

    from tests.integration.cluster import free_port

    queues = create_topic(source_cluster.namesrv_addr, topic_name, 1, brokers=2)
    produce(source_cluster.namesrv_addr, queues[:1], 5)
    opts = SourceOptions.parse(options(source_cluster, topic_name), streaming=False)
    oracle = OffsetOracle(opts)
    try:
        (part,) = plan_partitions(oracle, opts, {queues[0]: 0}, {queues[0]: 5})
    finally:
        oracle.close()
    moved = replace(part, broker_addr=f"127.0.0.1:{free_port()}")
    offsets = [o for b in read_partition(moved) for o in b.column("queueOffset").to_pylist()]
    assert offsets == [0, 1, 2, 3, 4]


def _mqs(n: int) -> list[MessageQueue]:
    return [MessageQueue("T", "b", i) for i in range(n)]


def test_rate_limit_is_proportional_and_never_over_the_limit() -> None:
    a, b, c = _mqs(3)
    start = {a: 0, b: 100, c: 5}
    end = rate_limit(start, {a: 1000, b: 101, c: 105}, 100)
    assert sum(end[q] - start[q] for q in end) == 100
    assert end[b] == 101 and end[c] - 5 >= 9 and end[a] - 0 >= 80  # the small queue gets its one
    assert rate_limit(start, {a: 10, b: 100, c: 6}, 100) == {a: 10, b: 100, c: 6}  # under the limit: everything


def test_rate_limit_rotates_when_queues_outnumber_the_limit() -> None:
    queues = _mqs(5)
    start = dict.fromkeys(queues, 0)
    latest = dict.fromkeys(queues, 10)
    served = set()
    for _ in range(5):
        end = rate_limit(start, latest, 2)
        assert sum(end[q] - start[q] for q in queues) == 2
        served |= {q for q in queues if end[q] > start[q]}
        start = end
    assert served == set(queues)
