"""The rmq source's options: each bad one is refused with a clear message, at parse time and when a query starts;
unknown topics and offsets naming other topics are errors; topicPattern matches user topics only.
"""

from __future__ import annotations

import pytest
from pyspark.errors import StreamingQueryException

from broker.common.errors import ConnectorError, ConnectorOptionError
from connector.offsets import OffsetOracle
from connector.options import SourceOptions
from tests.connector.conftest import (
    create_topic,
    options,
    stream_reader,
)
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.slow


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


def test_a_bad_option_fails_the_query_at_start(spark, source_cluster: Cluster, topic_name: str,
                                                checkpoint: str) -> None:
    query = (spark.readStream.format("rmq").options(**options(source_cluster, topic_name, maxOffsetsPerTriger=5)).load()
             .writeStream.format("noop").option("checkpointLocation", checkpoint).start())
    with pytest.raises(StreamingQueryException, match="unknown streaming source option"):
        query.awaitTermination(60)


def test_unknown_topic_and_offsets_for_other_topics_are_errors(source_cluster: Cluster, topic_name: str) -> None:
    opts = SourceOptions.parse(options(source_cluster, "NoSuchTopic"), streaming=False)
    oracle = OffsetOracle(opts)
    try:
        with pytest.raises(ConnectorError, match="topic NoSuchTopic does not exist"):
            oracle.queues()
    finally:
        oracle.close()
    create_topic(source_cluster.namesrv_addr, topic_name, 1, brokers=2)
    reader = stream_reader(source_cluster, topic_name, startingOffsets='{"Other": {"broker-a": {"0": 1}}}')
    try:
        with pytest.raises(ConnectorError, match="offsets name topic\\(s\\) Other"):
            reader.initialOffset()
    finally:
        reader.stop()


def test_topic_pattern_matches_user_topics_only(source_cluster: Cluster, topic_name: str) -> None:
    create_topic(source_cluster.namesrv_addr, f"{topic_name}_x", 1, brokers=2)
    create_topic(source_cluster.namesrv_addr, f"{topic_name}_y", 1, brokers=2)
    pattern = f"{topic_name}_.*|%RETRY%.*|TBW.*"
    opts = SourceOptions.parse({"namesrvAddr": source_cluster.namesrv_addr, "topicPattern": pattern}, streaming=True)
    oracle = OffsetOracle(opts)
    try:
        assert oracle.topics() == [f"{topic_name}_x", f"{topic_name}_y"]
        assert {mq.topic for mq in oracle.queues()} == {f"{topic_name}_x", f"{topic_name}_y"}
    finally:
        oracle.close()
