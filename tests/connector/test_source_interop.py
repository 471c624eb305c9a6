"""The rmq source against Apache RocketMQ 5.5.0's own NameServer and broker (tests/apache), and the query's
consumer group progress through the official ``mqadmin consumerProgress`` on both clusters.

A representative subset of the test_source_*.py modules: the source uses only standard requests (route,
min/max/search offset, PULL_MESSAGE with a subscription, UPDATE_CONSUMER_OFFSET, HEART_BEAT), so Apache's broker must
serve it the same.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from chispa import assert_df_equality

from tests.connector.conftest import create_topic, produce
from tests.helpers import wait_until
from tests.integration.cluster import Cluster
from tests.interop.test_official_mqadmin import Mqadmin, build_mqadmin

pytestmark = [pytest.mark.java, pytest.mark.slow]

COLUMNS = ["topic", "brokerName", "queueId", "queueOffset", "keys", "tags", "body"]
PROGRESS_ROW = re.compile(r"^(\S+)\s+(\S+)\s+(\d+)\s+(-?\d+)\s+(-?\d+)\s+(-?\d+)\s+(-?\d+)\s+")


@pytest.fixture(scope="module")
def official_mqadmin(tmp_path_factory: pytest.TempPathFactory) -> Mqadmin:
    return build_mqadmin(tmp_path_factory.mktemp("mqadmin-home"))


def read_options(namesrv: str, topic: str, **extra: object) -> dict[str, str]:
    return {"namesrvAddr": namesrv, "topic": topic, **{k: str(v) for k, v in extra.items()}}


def test_apache_batch_read_equals_what_was_produced(spark, apache: str) -> None:
    queues = create_topic(apache, "SourceBatch", 3)
    produce(apache, queues, 15, tags=lambda mq, i: f"t{i % 2}")
    df = spark.read.format("rmq").options(**read_options(apache, "SourceBatch")).load().select(*COLUMNS)
    expected = [("SourceBatch", mq.broker_name, mq.queue_id, i, f"k{i}", f"t{i % 2}",
                 f"SourceBatch/{mq.broker_name}/{mq.queue_id}/{i}".encode()) for mq in queues for i in range(15)]
    assert_df_equality(df, spark.createDataFrame(expected, df.schema), ignore_row_order=True, ignore_nullable=True)


def test_apache_available_now_with_max_offsets_per_trigger(spark, apache: str, tmp_path: Path) -> None:
    queues = create_topic(apache, "SourceStream", 2)
    produce(apache, queues, 30)
    rows: list = []
    query = (spark.readStream.format("rmq")
             .options(**read_options(apache, "SourceStream", startingOffsets="earliest", maxOffsetsPerTrigger=25))
             .load().writeStream.foreachBatch(lambda df, _: rows.extend(df.select(*COLUMNS).collect()))
             .trigger(availableNow=True).option("checkpointLocation", str(tmp_path / "cp")).start())
    assert query.awaitTermination(120)
    assert [p["numInputRows"] for p in query.recentProgress] == [25, 25, 10]
    assert sorted((r.queueId, r.queueOffset) for r in rows) == [(mq.queue_id, i) for mq in queues for i in range(30)]


def test_apache_filters_at_the_broker(spark, apache: str) -> None:
    queues = create_topic(apache, "SourceFilter", 2)
    produce(apache, queues, 12, tags=lambda mq, i: ("A", "B", "C")[i % 3], properties=lambda mq, i: {"n": str(i)})
    base = read_options(apache, "SourceFilter")
    tag = spark.read.format("rmq").options(**base, filter="B").load()
    assert sorted((r.queueId, r.queueOffset) for r in tag.collect()) == [
        (mq.queue_id, i) for mq in queues for i in range(12) if i % 3 == 1]
    sql = spark.read.format("rmq").options(**base, filter="n BETWEEN 3 AND 5", filterType="SQL92").load()
    assert sorted((r.queueId, r.queueOffset) for r in sql.collect()) == [
        (mq.queue_id, i) for mq in queues for i in (3, 4, 5)]


@pytest.fixture(params=["rmq", "apache"])
def namesrv(request: pytest.FixtureRequest) -> str:
    if request.param == "rmq":
        cluster: Cluster = request.getfixturevalue("sink_cluster")  # ours, one broker, shared
        return cluster.namesrv_addr
    return request.getfixturevalue("apache")


def test_consumer_group_progress_in_the_official_mqadmin(spark, namesrv: str, official_mqadmin: Mqadmin,
                                                         tmp_path: Path) -> None:
    topic, group = "SourceProgress", "SparkSourceProgress"
    queues = create_topic(namesrv, topic, 2)
    produce(namesrv, queues, 7)
    query = (spark.readStream.format("rmq")
             .options(**read_options(namesrv, topic, startingOffsets="earliest", consumerGroup=group,
                                     maxOffsetsPerTrigger=4))
             .load().writeStream.format("noop").trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "cp")).start())
    assert query.awaitTermination(120)
    produce(namesrv, queues[:1], 3)  # lag: 3 messages the query has not read
    rows: dict[int, tuple[int, int, int]] = {}

    def progress() -> bool:
        run = official_mqadmin.run("consumerProgress", "-g", group, "-n", namesrv)
        assert run.failure() is None, run.failure()
        for line in run.out.splitlines():
            match = PROGRESS_ROW.match(line)
            if match and match.group(1) == topic:
                rows[int(match.group(3))] = (int(match.group(4)), int(match.group(5)), int(match.group(6)))
        return len(rows) == 2

    wait_until("consumerProgress lists both queues", progress, 60)
    first, second = (mq.queue_id for mq in queues)
    assert rows == {first: (10, 7, 3), second: (7, 7, 0)}, rows
