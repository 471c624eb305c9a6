"""The rmq source (connector/source.py) against our NameServer and two brokers as processes, through the shared
local Spark session: starting options, admission control, Trigger.AvailableNow, restarts, queues added while a
query runs, filters, consumer group commits, bad options. Retention (failOnDataLoss) has its own module
(test_source_retention.py), Apache's cluster and the official mqadmin another (test_source_interop.py).

Every topic spans both brokers (``mqadmin updateTopic -c DefaultCluster``), so every test also reads from two
brokers under one NameServer.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest
from chispa import assert_df_equality
from pyspark.errors import StreamingQueryException
from pyspark.sql import Row

from broker.client import BlockingClient, protocol
from broker.client.blocking import BlockingRemotingClient
from broker.client.message import MessageQueue
from broker.common.errors import ConnectorError, ConnectorOptionError
from connector.offsets import OffsetOracle, from_json, rate_limit, to_json
from connector.options import SourceOptions
from connector.source import QueueRange, RmqStreamReader, plan_partitions, read_partition
from tests.connector.conftest import create_topic, produce
from tests.helpers import wait_until
from tests.integration.cluster import Cluster, start_cluster

pytestmark = pytest.mark.slow

BROKERS = ("broker-a", "broker-b")
COLUMNS = ["topic", "brokerName", "queueId", "queueOffset", "keys", "tags", "body"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A NameServer and two brokers; SQL92 filters on."""
    with start_cluster(tmp_path_factory.mktemp("rmq2"), brokers=2, enablePropertyFilter=True) as c:
        yield c


def options(cluster: Cluster, topic: str, **extra: object) -> dict[str, str]:
    return {"namesrvAddr": cluster.namesrv_addr, "topic": topic, **{k: str(v) for k, v in extra.items()}}


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


def expected_rows(results: dict[MessageQueue, list], per_queue: int) -> set[tuple[str, int, int, bytes]]:
    return {(mq.broker_name, mq.queue_id, i, f"{mq.topic}/{mq.broker_name}/{mq.queue_id}/{i}".encode())
            for mq in results for i in range(per_queue)}


def read_bodies(cluster: Cluster, topic: str) -> list[bytes]:
    """Every body of ``topic`` through plan_partitions and read_partition (what a batch query runs), sorted."""
    opts = SourceOptions.parse(options(cluster, topic), streaming=False)
    oracle = OffsetOracle(opts)
    try:
        queues = oracle.queues()
        parts = plan_partitions(oracle, opts, oracle.min_offsets(queues), oracle.max_offsets(queues))
    finally:
        oracle.close()
    return sorted(bytes(body) for part in parts for batch in read_partition(part)
                  for body in batch.column("body").to_pylist())


def as_set(rows: list[Row]) -> set[tuple[str, int, int, bytes]]:
    return {(r.brokerName, r.queueId, r.queueOffset, bytes(r.body)) for r in rows}


# -- batch reads -------------------------------------------------------------------------------------------------------


@pytest.mark.smoke
def test_batch_read_of_an_offset_range_equals_what_was_produced(spark, cluster: Cluster, topic_name: str) -> None:
    queues = create_topic(cluster.namesrv_addr, topic_name, 2, brokers=2)
    assert {mq.broker_name for mq in queues} == set(BROKERS)
    produce(cluster.namesrv_addr, queues, 20, tags=lambda mq, i: f"tag{i % 3}")
    qa, qb = queues[0], queues[-1]  # broker-a queue 0, broker-b queue 1
    start = {topic_name: {qa.broker_name: {str(qa.queue_id): 5}, qb.broker_name: {str(qb.queue_id): 0}}}
    end = {topic_name: {qa.broker_name: {str(qa.queue_id): 12}, qb.broker_name: {str(qb.queue_id): -1}}}
    import json

    df = (spark.read.format("rmq").options(**options(cluster, topic_name, startingOffsets=json.dumps(start),
                                                      endingOffsets=json.dumps(end))).load())
    # queues not named start at earliest (startingOffsets) and end at latest (endingOffsets)
    expected = [(topic_name, mq.broker_name, mq.queue_id, i, f"k{i}", f"tag{i % 3}",
                 f"{topic_name}/{mq.broker_name}/{mq.queue_id}/{i}".encode())
                for mq in queues
                for i in range(5 if mq == qa else 0, 12 if mq == qa else 20)]
    expected_df = spark.createDataFrame(expected, df.select(*COLUMNS).schema)
    assert_df_equality(df.select(*COLUMNS), expected_df, ignore_row_order=True, ignore_nullable=True)


def test_batch_read_has_every_column(spark, cluster: Cluster, topic_name: str) -> None:
    queues = create_topic(cluster.namesrv_addr, topic_name, 1, brokers=2)
    sent = produce(cluster.namesrv_addr, queues[:1], 3, batch=1, properties=lambda mq, i: {"color": "red"})
    row = spark.read.format("rmq").options(**options(cluster, topic_name)).load().where("queueOffset = 1").first()
    result = sent[queues[0]][1]
    assert row.msgId == result.msg_id and row.offsetMsgId == result.offset_msg_id
    assert row.properties["color"] == "red" and row.properties["KEYS"] == "k1" and row.keys == "k1"
    assert row.tags is None and row.reconsumeTimes == 0 and row.sysFlag == 0
    assert row.storeHost == cluster.brokers[0].addr and row.bornHost.startswith("127.0.0.1:")
    assert row.bornTimestamp <= row.storeTimestamp


def test_batch_read_by_timestamps(spark, cluster: Cluster, topic_name: str) -> None:
    queues = create_topic(cluster.namesrv_addr, topic_name, 1, brokers=2)
    produce(cluster.namesrv_addr, queues, 5)
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    produce(cluster.namesrv_addr, queues, 3, body=lambda mq, i: b"late")
    later = spark.read.format("rmq").options(**options(cluster, topic_name, startingTimestamp=middle)).load()
    assert later.count() == 6 and {bytes(r.body) for r in later.select("body").collect()} == {b"late"}
    before = spark.read.format("rmq").options(**options(cluster, topic_name, endingTimestamp=middle)).load()
    assert before.count() == 10
    qa = queues[0]
    by_queue = f'{{"{topic_name}": {{"{qa.broker_name}": {{"{qa.queue_id}": {middle}}}}}}}'
    mixed = spark.read.format("rmq").options(**options(cluster, topic_name, startingOffsetsByTimestamp=by_queue))
    assert mixed.load().count() == 3 + 8  # that queue from the timestamp, the other from earliest


def test_filters_tag_and_sql92_at_the_broker(spark, cluster: Cluster, topic_name: str) -> None:
    queues = create_topic(cluster.namesrv_addr, topic_name, 2, brokers=2)
    produce(cluster.namesrv_addr, queues, 30, tags=lambda mq, i: ("A", "B", "C")[i % 3],
            properties=lambda mq, i: {"n": str(i)})
    base = options(cluster, topic_name)
    tag = spark.read.format("rmq").options(**base, filter="A || C").load()
    assert sorted({r.tags for r in tag.select("tags").collect()}) == ["A", "C"] and tag.count() == 4 * 20
    sql = spark.read.format("rmq").options(**base, filter="n >= 25 AND TAGS <> 'B'", filterType="SQL92").load()
    got = sorted((r.queueOffset, r.tags) for r in sql.where("brokerName = 'broker-a' AND queueId = 0").collect())
    assert got == [(i, ("A", "B", "C")[i % 3]) for i in range(25, 30) if i % 3 != 1]


def test_min_partitions_splits_queues(spark, cluster: Cluster, topic_name: str) -> None:
    queues = create_topic(cluster.namesrv_addr, topic_name, 1, brokers=2)
    produce(cluster.namesrv_addr, queues, 40)
    df = spark.read.format("rmq").options(**options(cluster, topic_name, minPartitions=8)).load()
    assert df.rdd.getNumPartitions() == 8
    assert as_set(df.collect()) == expected_rows({mq: [] for mq in queues}, 40)


def test_half_messages_never_and_delayed_messages_once_due(spark, cluster: Cluster, topic_name: str) -> None:
    """Transactional half messages (open or rolled back) and delayed messages not yet due live in the broker's
    internal topics: a read of the user topic sees the committed one, and the delayed one only once delivered."""
    from broker.client import Message
    from broker.client.transaction import TransactionProducer
    from broker.client.transaction_protocol import LocalTransactionState

    create_topic(cluster.namesrv_addr, topic_name, 1, brokers=2)

    class Listener:
        def execute_local_transaction(self, msg: Message, arg: LocalTransactionState) -> LocalTransactionState:
            return arg

        def check_local_transaction(self, msg: Message) -> LocalTransactionState:
            return LocalTransactionState.UNKNOW

    async def send() -> None:
        async with TransactionProducer(f"P_{topic_name}"[:100], cluster.namesrv_addr, listener=Listener()) as p:
            for text, state in (("committed", LocalTransactionState.COMMIT_MESSAGE),
                                ("rolled back", LocalTransactionState.ROLLBACK_MESSAGE),
                                ("open", LocalTransactionState.UNKNOW)):
                await p.send_message_in_transaction(Message(topic_name, text.encode()), arg=state)

    asyncio.run(send())
    delayed = Message(topic_name, b"delayed")
    delayed.delay_time_level = 3  # 10 s
    with BlockingClient(cluster.namesrv_addr) as client:
        client.send(delayed)
    assert read_bodies(cluster, topic_name) == [b"committed"]  # the executors' read path, without Spark's start-up
    with BlockingClient(cluster.namesrv_addr) as client:
        queues = client.fetch_message_queues(topic_name)
        wait_until("the delayed message delivered", lambda: sum(map(client.get_max_offset, queues)) == 2, 60)
    df = spark.read.format("rmq").options(**options(cluster, topic_name)).load()
    assert sorted(bytes(r.body) for r in df.select("body").collect()) == [b"committed", b"delayed"]


# -- streaming ---------------------------------------------------------------------------------------------------------


def test_stream_earliest_available_now_reads_everything_once(spark, cluster: Cluster, topic_name: str,
                                                               checkpoint: str) -> None:
    queues = create_topic(cluster.namesrv_addr, topic_name, 2, brokers=2)
    sent = produce(cluster.namesrv_addr, queues, 25)
    rows, _ = run_available_now(spark, options(cluster, topic_name, startingOffsets="earliest"), checkpoint)
    assert len(rows) == 100 and as_set(rows) == expected_rows(sent, 25)
    assert {r.brokerName for r in rows} == set(BROKERS)


def test_stream_latest_then_restarts_skip_nothing_and_repeat_nothing(spark, cluster: Cluster, topic_name: str,
                                                                      checkpoint: str) -> None:
    queues = create_topic(cluster.namesrv_addr, topic_name, 2, brokers=2)
    produce(cluster.namesrv_addr, queues, 5, body=lambda mq, i: b"before")
    rows, _ = run_available_now(spark, options(cluster, topic_name), checkpoint)  # startingOffsets=latest
    assert rows == []
    produce(cluster.namesrv_addr, queues, 3, body=lambda mq, i: b"between")  # while no query runs
    rows, _ = run_available_now(spark, options(cluster, topic_name), checkpoint)
    assert sorted(bytes(r.body) for r in rows) == [b"between"] * 12
    assert keyed(rows) == sorted((mq.broker_name, mq.queue_id, o) for mq in queues for o in range(5, 8))
    produce(cluster.namesrv_addr, queues, 2, body=lambda mq, i: b"after")
    rows, _ = run_available_now(spark, options(cluster, topic_name), checkpoint)
    assert keyed(rows) == sorted((mq.broker_name, mq.queue_id, o) for mq in queues for o in range(8, 10))


def test_stream_json_starting_offsets(spark, cluster: Cluster, topic_name: str, checkpoint: str) -> None:
    queues = create_topic(cluster.namesrv_addr, topic_name, 2, brokers=2)
    produce(cluster.namesrv_addr, queues, 10)
    a0, a1, b0, _ = queues
    starting = to_json({a0: 7, a1: -2, b0: -1})  # the fourth queue is not named: earliest
    import json

    rows, _ = run_available_now(spark, options(cluster, topic_name, startingOffsets=json.dumps(starting)), checkpoint)
    per_queue = {}
    for r in rows:
        per_queue.setdefault((r.brokerName, r.queueId), []).append(r.queueOffset)
    assert {k: sorted(v) for k, v in per_queue.items()} == {
        (a0.broker_name, a0.queue_id): [7, 8, 9],
        (a1.broker_name, a1.queue_id): list(range(10)),
        (queues[3].broker_name, queues[3].queue_id): list(range(10)),
    }


def test_stream_starting_timestamp(spark, cluster: Cluster, topic_name: str, checkpoint: str) -> None:
    queues = create_topic(cluster.namesrv_addr, topic_name, 1, brokers=2)
    produce(cluster.namesrv_addr, queues, 4)
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    produce(cluster.namesrv_addr, queues, 2, body=lambda mq, i: b"late")
    rows, _ = run_available_now(spark, options(cluster, topic_name, startingTimestamp=middle), checkpoint)
    assert sorted(bytes(r.body) for r in rows) == [b"late"] * 4


def test_max_offsets_per_trigger_splits_batches_without_starving_small_queues(
        spark, cluster: Cluster, topic_name: str, checkpoint: str) -> None:
    queues = create_topic(cluster.namesrv_addr, topic_name, 2, brokers=2)
    big, *small = queues
    produce(cluster.namesrv_addr, [big], 200)
    produce(cluster.namesrv_addr, small, 4)
    rows, sizes = run_available_now(
        spark, options(cluster, topic_name, startingOffsets="earliest", maxOffsetsPerTrigger=50), checkpoint)
    assert sizes == [50, 50, 50, 50, 12] and len(rows) == 212 and len(set(keyed(rows))) == 212
    first_batch_queues = {(r.brokerName, r.queueId) for r in rows[:50]}
    assert first_batch_queues == {(mq.broker_name, mq.queue_id) for mq in queues}


def test_min_offsets_per_trigger_does_not_hang_available_now(spark, cluster: Cluster, topic_name: str,
                                                             checkpoint: str) -> None:
    queues = create_topic(cluster.namesrv_addr, topic_name, 1, brokers=2)
    produce(cluster.namesrv_addr, queues, 5)
    opts = options(cluster, topic_name, startingOffsets="earliest", minOffsetsPerTrigger=1000, maxTriggerDelay="1h")
    rows, _ = run_available_now(spark, opts, checkpoint)
    assert len(rows) == 10


def test_queue_added_while_the_query_runs(spark, cluster: Cluster, topic_name: str, checkpoint: str) -> None:
    queues = create_topic(cluster.namesrv_addr, topic_name, 1, brokers=2)
    produce(cluster.namesrv_addr, queues, 3)
    seen: list[Row] = []
    lock = threading.Lock()

    def collect(df, batch_id: int) -> None:
        got = df.select(*COLUMNS).collect()
        with lock:
            seen.extend(got)

    query = (spark.readStream.format("rmq").options(**options(cluster, topic_name, startingOffsets="earliest"))
             .load().writeStream.foreachBatch(collect).trigger(processingTime="300 milliseconds")
             .option("checkpointLocation", checkpoint).start())
    try:
        wait_until("the first 6 rows", lambda: len(seen) >= 6, 60)
        grown = create_topic(cluster.namesrv_addr, topic_name, 3, brokers=2)  # 1 -> 3 queues on each broker
        added = [mq for mq in grown if mq not in queues]
        assert len(added) == 4
        produce(cluster.namesrv_addr, added, 2)
        wait_until("the rows of the added queues", lambda: len(seen) >= 14, 60)
        time.sleep(1)  # a few more triggers: nothing may come twice
    finally:
        query.stop()
    assert query.exception() is None
    want = {(mq.broker_name, mq.queue_id, i) for mq in queues for i in range(3)}
    want |= {(mq.broker_name, mq.queue_id, i) for mq in added for i in range(2)}
    assert keyed(seen) == sorted(want)


def test_consumer_group_commit_writes_processed_offsets(spark, cluster: Cluster, topic_name: str,
                                                        checkpoint: str) -> None:
    queues = create_topic(cluster.namesrv_addr, topic_name, 1, brokers=2)
    produce(cluster.namesrv_addr, queues, 6)
    group = f"G_{topic_name}"[:100]
    run_available_now(spark, options(cluster, topic_name, startingOffsets="earliest", consumerGroup=group,
                                     maxOffsetsPerTrigger=5), checkpoint)
    addrs = {b.conf["brokerName"]: b.addr for b in cluster.brokers}
    for mq in queues:
        with BlockingRemotingClient(addrs[mq.broker_name]) as remote:
            response = remote.invoke(protocol.query_consumer_offset_request(group, mq))
        assert int(response.ext_fields["offset"]) == 6, mq


# -- the reader without Spark: AvailableNow target, admission control --------------------------------------------------


def stream_reader(cluster: Cluster, topic: str, **extra: object) -> RmqStreamReader:
    return RmqStreamReader(SourceOptions.parse(options(cluster, topic, **extra), streaming=True))


def test_available_now_never_goes_past_its_target(cluster: Cluster, topic_name: str) -> None:
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    queues = create_topic(cluster.namesrv_addr, topic_name, 1, brokers=2)
    produce(cluster.namesrv_addr, queues, 4)
    reader = stream_reader(cluster, topic_name, startingOffsets="earliest")
    try:
        start = reader.initialOffset()
        reader.prepareForTriggerAvailableNow()
        produce(cluster.namesrv_addr, queues, 3)  # after the target was taken
        end = reader.latestOffset(start, ReadAllAvailable())
        assert from_json(end) == dict.fromkeys(queues, 4)
        assert reader.latestOffset(end, ReadAllAvailable()) == end
        assert from_json(reader.reportLatestOffset()) == dict.fromkeys(queues, 7)
    finally:
        reader.stop()


def test_min_offsets_per_trigger_waits_for_rows_or_the_delay(cluster: Cluster, topic_name: str) -> None:
    from pyspark.sql.streaming.datasource import ReadMaxRows, ReadMinRows

    queues = create_topic(cluster.namesrv_addr, topic_name, 1, brokers=2)
    reader = stream_reader(cluster, topic_name, startingOffsets="earliest", minOffsetsPerTrigger=10,
                           maxTriggerDelay="1s")
    try:
        start = reader.initialOffset()
        assert isinstance(reader.getDefaultReadLimit(), ReadMinRows)
        produce(cluster.namesrv_addr, queues, 2)  # 4 offsets < 10
        assert reader.latestOffset(start, ReadMinRows(10)) == start
        time.sleep(1.1)  # maxTriggerDelay passed: a batch with what there is
        assert from_json(reader.latestOffset(start, ReadMinRows(10))) == dict.fromkeys(queues, 2)
    finally:
        reader.stop()
    produce(cluster.namesrv_addr, queues, 3)
    reader = stream_reader(cluster, topic_name, startingOffsets="earliest", minOffsetsPerTrigger=3,
                           maxOffsetsPerTrigger=5)
    try:
        start = reader.initialOffset()
        assert reader.getDefaultReadLimit() == ReadMaxRows(5)
        end = from_json(reader.latestOffset(start, ReadMaxRows(5)))
        assert sum(end.values()) == 5  # 10 waiting, at least 3, at most 5
    finally:
        reader.stop()


def test_latest_start_is_logged_by_an_empty_first_batch(cluster: Cluster, topic_name: str) -> None:
    """The first batch of a query started at latest ends where it starts, so the offset log holds the resolved
    start; the next call moves on."""
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    queues = create_topic(cluster.namesrv_addr, topic_name, 1, brokers=2)
    produce(cluster.namesrv_addr, queues, 2)
    reader = stream_reader(cluster, topic_name)
    try:
        start = reader.initialOffset()
        produce(cluster.namesrv_addr, queues, 1)
        assert reader.latestOffset(start, ReadAllAvailable()) == start
        assert from_json(reader.latestOffset(start, ReadAllAvailable())) == dict.fromkeys(queues, 3)
    finally:
        reader.stop()


def test_read_partition_pulls_a_range_in_arrow(cluster: Cluster, topic_name: str) -> None:
    queues = create_topic(cluster.namesrv_addr, topic_name, 1, brokers=2)
    produce(cluster.namesrv_addr, queues[:1], 300)
    opts = SourceOptions.parse(options(cluster, topic_name, pullBatchSize=7), streaming=False)
    oracle = OffsetOracle(opts)
    try:
        (part,) = plan_partitions(oracle, opts, {queues[0]: 10}, {queues[0]: 290})
    finally:
        oracle.close()
    assert isinstance(part, QueueRange) and (part.start, part.end) == (10, 290)
    batches = list(read_partition(part))
    offsets = [o for b in batches for o in b.column("queueOffset").to_pylist()]
    assert offsets == list(range(10, 290))


def test_read_partition_finds_a_moved_broker_through_the_name_server(cluster: Cluster, topic_name: str) -> None:
    """The partition names the broker address the driver planned with; when nothing answers there any more,
    read() asks the NameServer where the broker's master is now."""
    from dataclasses import replace

    from tests.integration.cluster import free_port

    queues = create_topic(cluster.namesrv_addr, topic_name, 1, brokers=2)
    produce(cluster.namesrv_addr, queues[:1], 5)
    opts = SourceOptions.parse(options(cluster, topic_name), streaming=False)
    oracle = OffsetOracle(opts)
    try:
        (part,) = plan_partitions(oracle, opts, {queues[0]: 0}, {queues[0]: 5})
    finally:
        oracle.close()
    moved = replace(part, broker_addr=f"127.0.0.1:{free_port()}")
    offsets = [o for b in read_partition(moved) for o in b.column("queueOffset").to_pylist()]
    assert offsets == [0, 1, 2, 3, 4]


# -- options -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("extra", "streaming", "message"), [
    ({}, True, "exactly one of the options topic, topics, topicPattern"),
    ({"topic": "a", "topics": "a,b"}, True, "exactly one of the options topic, topics, topicPattern"),
    ({"topic": "a", "startingOffset": "earliest"}, True, "unknown streaming source option(s) startingoffset"),
    ({"topic": "a", "startingOffsets": "latest"}, False, "startingOffsets=latest is not allowed for a batch"),
    ({"topic": "a", "startingOffsets": "earliest", "startingTimestamp": "5"}, True, "contradict each other"),
    ({"topic": "a", "endingOffsets": "latest"}, True, "apply only to batch queries"),
    ({"topic": "a", "maxOffsetsPerTrigger": "5"}, False, "apply only to streaming queries"),
    ({"topic": "a", "maxOffsetsPerTrigger": "0"}, True, "maxOffsetsPerTrigger must be >= 1"),
    ({"topic": "a", "minOffsetsPerTrigger": "9", "maxOffsetsPerTrigger": "5"}, True, "is more than"),
    ({"topic": "a", "maxTriggerDelay": "5s"}, True, "maxTriggerDelay needs minOffsetsPerTrigger"),
    ({"topic": "a", "minOffsetsPerTrigger": "5", "maxTriggerDelay": "soon"}, True, "must be a duration"),
    ({"topic": "a", "filterType": "SQL92"}, True, "filterType needs filter"),
    ({"topic": "a", "filter": "x", "filterType": "REGEX"}, True, "filterType must be TAG or SQL92"),
    ({"topic": "a", "startingOffsets": '{"a": {"b": {"0": -3}}}'}, True, "must be >= 0 or -2 or -1"),
    ({"topic": "a", "startingOffsets": "{nope"}, True, "not valid JSON"),
    ({"topic": "RMQ_SYS_TRANS_HALF_TOPIC"}, True, "broker-internal store"),
    ({"topicPattern": "("}, True, "not a valid regex"),
    ({"topic": "a", "failOnDataLoss": "maybe"}, True, "failOnDataLoss must be true or false"),
    ({"topic": "a", "consumerGroup": "bad group"}, True, "not a valid group name"),
])
def test_bad_options_fail_with_a_clear_message(extra: dict[str, str], streaming: bool, message: str) -> None:
    with pytest.raises(ConnectorOptionError, match=None) as err:
        SourceOptions.parse({"namesrvAddr": "127.0.0.1:1", **extra}, streaming=streaming)
    assert message in str(err.value)


def test_a_bad_option_fails_the_query_at_start(spark, cluster: Cluster, topic_name: str, checkpoint: str) -> None:
    query = (spark.readStream.format("rmq").options(**options(cluster, topic_name, maxOffsetsPerTriger=5)).load()
             .writeStream.format("noop").option("checkpointLocation", checkpoint).start())
    with pytest.raises(StreamingQueryException, match="unknown streaming source option"):
        query.awaitTermination(60)


def test_unknown_topic_and_offsets_for_other_topics_are_errors(cluster: Cluster, topic_name: str) -> None:
    opts = SourceOptions.parse(options(cluster, "NoSuchTopic"), streaming=False)
    oracle = OffsetOracle(opts)
    try:
        with pytest.raises(ConnectorError, match="topic NoSuchTopic does not exist"):
            oracle.queues()
    finally:
        oracle.close()
    create_topic(cluster.namesrv_addr, topic_name, 1, brokers=2)
    reader = stream_reader(cluster, topic_name, startingOffsets='{"Other": {"broker-a": {"0": 1}}}')
    try:
        with pytest.raises(ConnectorError, match="offsets name topic\\(s\\) Other"):
            reader.initialOffset()
    finally:
        reader.stop()


def test_topic_pattern_matches_user_topics_only(cluster: Cluster, topic_name: str) -> None:
    create_topic(cluster.namesrv_addr, f"{topic_name}_x", 1, brokers=2)
    create_topic(cluster.namesrv_addr, f"{topic_name}_y", 1, brokers=2)
    pattern = f"{topic_name}_.*|%RETRY%.*|TBW.*"
    opts = SourceOptions.parse({"namesrvAddr": cluster.namesrv_addr, "topicPattern": pattern}, streaming=True)
    oracle = OffsetOracle(opts)
    try:
        assert oracle.topics() == [f"{topic_name}_x", f"{topic_name}_y"]
        assert {mq.topic for mq in oracle.queues()} == {f"{topic_name}_x", f"{topic_name}_y"}
    finally:
        oracle.close()


# -- rate_limit --------------------------------------------------------------------------------------------------------


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
