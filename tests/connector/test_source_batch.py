"""The rmq source's batch reads (``spark.read.format("rmq")``) against the shared NameServer with two brokers
(``source_cluster``): offset and timestamp ranges, every column, tag and SQL92 filters, minPartitions, and what is
never read (half messages) or read only once due (delayed messages).
"""

from __future__ import annotations

import asyncio
import time

import pytest
from chispa import assert_df_equality

from broker.client import BlockingClient
from connector.offsets import OffsetOracle
from connector.options import SourceOptions
from connector.source import plan_partitions, read_partition
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


@pytest.mark.smoke
def test_batch_read_of_an_offset_range_equals_what_was_produced(spark, source_cluster: Cluster,
                                                                topic_name: str) -> None:
    queues = create_topic(source_cluster.namesrv_addr, topic_name, 2, brokers=2)
    assert {mq.broker_name for mq in queues} == set(BROKERS)
    produce(source_cluster.namesrv_addr, queues, 20, tags=lambda mq, i: f"tag{i % 3}")
    qa, qb = queues[0], queues[-1]  # broker-a queue 0, broker-b queue 1
    start = {topic_name: {qa.broker_name: {str(qa.queue_id): 5}, qb.broker_name: {str(qb.queue_id): 0}}}
    end = {topic_name: {qa.broker_name: {str(qa.queue_id): 12}, qb.broker_name: {str(qb.queue_id): -1}}}
    import json

    df = (spark.read.format("rmq").options(**options(source_cluster, topic_name, startingOffsets=json.dumps(start),
                                                      endingOffsets=json.dumps(end))).load())
    # queues not named start at earliest (startingOffsets) and end at latest (endingOffsets)
    expected = [(topic_name, mq.broker_name, mq.queue_id, i, f"k{i}", f"tag{i % 3}",
                 f"{topic_name}/{mq.broker_name}/{mq.queue_id}/{i}".encode())
                for mq in queues
                for i in range(5 if mq == qa else 0, 12 if mq == qa else 20)]
    expected_df = spark.createDataFrame(expected, df.select(*COLUMNS).schema)
    assert_df_equality(df.select(*COLUMNS), expected_df, ignore_row_order=True, ignore_nullable=True)


def test_batch_read_has_every_column(spark, source_cluster: Cluster, topic_name: str) -> None:
    queues = create_topic(source_cluster.namesrv_addr, topic_name, 1, brokers=2)
    sent = produce(source_cluster.namesrv_addr, queues[:1], 3, batch=1, properties=lambda mq, i: {"color": "red"})
    df = spark.read.format("rmq").options(**options(source_cluster, topic_name)).load()
    row = df.where("queueOffset = 1").first()
    result = sent[queues[0]][1]
    assert row.msgId == result.msg_id and row.offsetMsgId == result.offset_msg_id
    assert row.properties["color"] == "red" and row.properties["KEYS"] == "k1" and row.keys == "k1"
    assert row.tags is None and row.reconsumeTimes == 0 and row.sysFlag == 0
    assert row.storeHost == source_cluster.brokers[0].addr and row.bornHost.startswith("127.0.0.1:")
    assert row.bornTimestamp <= row.storeTimestamp


def test_batch_read_by_timestamps(spark, source_cluster: Cluster, topic_name: str) -> None:
    queues = create_topic(source_cluster.namesrv_addr, topic_name, 1, brokers=2)
    produce(source_cluster.namesrv_addr, queues, 5)
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    produce(source_cluster.namesrv_addr, queues, 3, body=lambda mq, i: b"late")
    later = spark.read.format("rmq").options(**options(source_cluster, topic_name, startingTimestamp=middle)).load()
    assert later.count() == 6 and {bytes(r.body) for r in later.select("body").collect()} == {b"late"}
    before = spark.read.format("rmq").options(**options(source_cluster, topic_name, endingTimestamp=middle)).load()
    assert before.count() == 10
    qa = queues[0]
    by_queue = f'{{"{topic_name}": {{"{qa.broker_name}": {{"{qa.queue_id}": {middle}}}}}}}'
    mixed = spark.read.format("rmq").options(**options(source_cluster, topic_name, startingOffsetsByTimestamp=by_queue))
    assert mixed.load().count() == 3 + 8  # that queue from the timestamp, the other from earliest


def test_filters_tag_and_sql92_at_the_broker(spark, source_cluster: Cluster, topic_name: str) -> None:
    queues = create_topic(source_cluster.namesrv_addr, topic_name, 2, brokers=2)
    produce(source_cluster.namesrv_addr, queues, 30, tags=lambda mq, i: ("A", "B", "C")[i % 3],
            properties=lambda mq, i: {"n": str(i)})
    base = options(source_cluster, topic_name)
    tag = spark.read.format("rmq").options(**base, filter="A || C").load()
    assert sorted({r.tags for r in tag.select("tags").collect()}) == ["A", "C"] and tag.count() == 4 * 20
    sql = spark.read.format("rmq").options(**base, filter="n >= 25 AND TAGS <> 'B'", filterType="SQL92").load()
    got = sorted((r.queueOffset, r.tags) for r in sql.where("brokerName = 'broker-a' AND queueId = 0").collect())
    assert got == [(i, ("A", "B", "C")[i % 3]) for i in range(25, 30) if i % 3 != 1]


def test_min_partitions_splits_queues(spark, source_cluster: Cluster, topic_name: str) -> None:
    queues = create_topic(source_cluster.namesrv_addr, topic_name, 1, brokers=2)
    produce(source_cluster.namesrv_addr, queues, 40)
    df = spark.read.format("rmq").options(**options(source_cluster, topic_name, minPartitions=8)).load()
    assert df.rdd.getNumPartitions() == 8
    assert as_set(df.collect()) == expected_rows({mq: [] for mq in queues}, 40)


def test_half_messages_never_and_delayed_messages_once_due(spark, source_cluster: Cluster, topic_name: str) -> None:
    """Transactional half messages (open or rolled back) and delayed messages not yet due live in the broker's
    internal topics: a read of the user topic sees the committed one, and the delayed one only once delivered."""
    from broker.client import Message
    from broker.client.transaction import TransactionProducer
    from broker.client.transaction_protocol import LocalTransactionState

    create_topic(source_cluster.namesrv_addr, topic_name, 1, brokers=2)

    class Listener:
        def execute_local_transaction(self, msg: Message, arg: LocalTransactionState) -> LocalTransactionState:
            return arg

        def check_local_transaction(self, msg: Message) -> LocalTransactionState:
            return LocalTransactionState.UNKNOW

    async def send() -> None:
        async with TransactionProducer(f"P_{topic_name}"[:100], source_cluster.namesrv_addr, listener=Listener()) as p:
            for text, state in (("committed", LocalTransactionState.COMMIT_MESSAGE),
                                ("rolled back", LocalTransactionState.ROLLBACK_MESSAGE),
                                ("open", LocalTransactionState.UNKNOW)):
                await p.send_message_in_transaction(Message(topic_name, text.encode()), arg=state)

    asyncio.run(send())
    delayed = Message(topic_name, b"delayed")
    delayed.delay_time_level = 3  # 10 s
    with BlockingClient(source_cluster.namesrv_addr) as client:
        client.send(delayed)
    # the executors' read path, without Spark's start-up
    assert read_bodies(source_cluster, topic_name) == [b"committed"]
    with BlockingClient(source_cluster.namesrv_addr) as client:
        queues = client.fetch_message_queues(topic_name)
        wait_until("the delayed message delivered", lambda: sum(map(client.get_max_offset, queues)) == 2, 60)
    df = spark.read.format("rmq").options(**options(source_cluster, topic_name)).load()
    assert sorted(bytes(r.body) for r in df.select("body").collect()) == [b"committed", b"delayed"]


def read_bodies(source_cluster: Cluster, topic: str) -> list[bytes]:
    """Every body of ``topic`` through plan_partitions and read_partition (what a batch query runs), sorted."""
    opts = SourceOptions.parse(options(source_cluster, topic), streaming=False)
    oracle = OffsetOracle(opts)
    try:
        queues = oracle.queues()
        parts = plan_partitions(oracle, opts, oracle.min_offsets(queues), oracle.max_offsets(queues))
    finally:
        oracle.close()
    return sorted(bytes(body) for part in parts for batch in read_partition(part)
                  for body in batch.column("body").to_pylist())
