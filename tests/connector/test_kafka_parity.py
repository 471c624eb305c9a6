"""What engineers who know Spark's Kafka connector expect of ``format("rmq")``, against our broker in the session's
local Spark: the sink's ``topic`` option overrides a ``topic`` column; a DataFrame read with ``format("rmq")`` is
written back unchanged (the read's own columns ignored, system properties not copied); ``subscribe``,
``subscribePattern`` and ``assign`` read what Kafka's names say."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.common.errors import ConnectorError, ConnectorOptionError
from connector.columns import SYSTEM_PROPERTIES
from connector.options import SourceOptions
from tests.connector.conftest import create_topic, produce, read_topic
from tests.connector.test_sink import sink_options
from tests.helpers import wait_until
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.slow

PER_QUEUE = 6


def _user(properties: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in properties.items() if k not in SYSTEM_PROPERTIES}


def test_a_read_is_written_back_unchanged(spark, sink_cluster: Cluster, resolver_dir: Path, topic_name: str) -> None:
    """Read a topic with known messages, write the DataFrame as it is to another topic, read that back: bodies,
    keys, tags and user properties are the same, and the copies have message ids of their own. The topic option
    overrides the read's topic column (as Kafka's does): every row lands in the option's topic, none in the
    column's (the source topic, which exists)."""
    namesrv = sink_cluster.namesrv_addr
    target = f"{topic_name}_copy"
    queues = create_topic(namesrv, topic_name, 2)
    produce(namesrv, queues, PER_QUEUE, tags=lambda mq, i: f"tag{i % 2}",
            properties=lambda mq, i: {"origin": f"{mq.queue_id}/{i}", "kind": "order"})
    read = spark.read.format("rmq").option("namesrvAddr", namesrv).option("topic", topic_name).load()
    assert {"UNIQ_KEY", "KEYS", "TAGS"} <= set(read.first().properties), "a read has system properties"

    read.write.format("rmq").options(**sink_options(sink_cluster, resolver_dir, topic=target)).mode("append").save()

    source = read_topic(namesrv, topic_name)
    wait_until("every row copied", lambda: len(read_topic(namesrv, target)) >= len(source), timeout=60)
    back = spark.read.format("rmq").option("namesrvAddr", namesrv).option("topic", target).load().collect()
    assert len(back) == len(source) == 2 * PER_QUEUE

    def content(body: bytes, keys: str | None, tags: str | None, properties: dict[str, str]) -> tuple:
        return body, keys, tags, sorted(_user(properties).items())

    assert sorted(content(r.body, r.keys, r.tags, r.properties) for r in back) == \
        sorted(content(m.body, m.keys, m.tags, m.properties) for m in source)
    assert all(_user(r.properties).keys() == {"origin", "kind"} for r in back)
    assert not {r.msgId for r in back} & {m.msg_id for m in source}, "a copy has a message id of its own"
    assert {r.topic for r in back} == {target}
    assert len(read_topic(namesrv, topic_name)) == len(source), "no row went to the topic column's topic"


def test_kafka_subscription_names(spark, sink_cluster: Cluster, topic_name: str) -> None:
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    namesrv = sink_cluster.namesrv_addr
    queues = create_topic(namesrv, topic_name, 2)
    produce(namesrv, queues, PER_QUEUE)
    create_topic(namesrv, f"{topic_name}_b", 1)

    def bodies(**option: str) -> list[bytes]:
        df = spark.read.format("rmq").option("namesrvAddr", namesrv).options(**option).load()
        return sorted(r.body for r in df.select("body").collect())

    everything = bodies(topic=topic_name)
    assert len(everything) == 2 * PER_QUEUE
    assert bodies(subscribe=f"{topic_name},{topic_name}_b") == everything
    assert bodies(subscribePattern=f"{topic_name}(_b)?") == everything
    queue = queues[1]
    assigned = bodies(assign=f'{{"{topic_name}": {{"{queue.broker_name}": [{queue.queue_id}]}}}}')
    assert assigned == sorted(f"{topic_name}/{queue.broker_name}/{queue.queue_id}/{i}".encode()
                              for i in range(PER_QUEUE))
    missing = f'{{"{topic_name}": {{"{queue.broker_name}": [7]}}}}'
    expected = f"assign names queue\\(s\\) {topic_name}/{queue.broker_name}/7"
    with pytest.raises((PySparkException, Py4JJavaError), match=expected):
        bodies(assign=missing)


@pytest.mark.parametrize(("extra", "message"), [
    ({"subscribe": "a", "topic": "a"}, "exactly one of the options topic, topics, topicPattern, subscribe, "
                                       "subscribePattern, assign is required; got topic, subscribe"),
    ({"subscribePattern": "("}, "option subscribePattern '(' is not a valid regex"),
    ({"assign": "[1]"}, "option assign must be a JSON object"),
    ({"assign": '{"T": [0, 1]}'}, "topic 'T' must map broker names to lists of queue ids"),
    ({"assign": '{"T": {"broker-a": []}}'}, "T/broker-a must be a non-empty list of queue ids"),
    ({"assign": '{"T": {"broker-a": [-1]}}'}, "T/broker-a must be a non-empty list of queue ids"),
    ({"assign": '{"RMQ_SYS_TRANS_HALF_TOPIC": {"broker-a": [0]}}'}, "broker-internal store"),
])
def test_kafka_subscription_options_fail_clearly(extra: dict[str, str], message: str) -> None:
    with pytest.raises(ConnectorOptionError) as err:
        SourceOptions.parse({"namesrvAddr": "127.0.0.1:1", **extra}, streaming=True)
    assert message in str(err.value)


def test_kafka_aliases_parse_as_ours() -> None:
    base = {"namesrvAddr": "127.0.0.1:1"}
    assert (SourceOptions.parse({**base, "subscribe": "a, b"}, streaming=True)
            == SourceOptions.parse({**base, "topics": "a,b"}, streaming=True))
    assert (SourceOptions.parse({**base, "subscribePattern": "a.*"}, streaming=True)
            == SourceOptions.parse({**base, "topicPattern": "a.*"}, streaming=True))
    opts = SourceOptions.parse({**base, "assign": '{"b": {"x": [1, 0]}, "a": {"x": [2]}}'}, streaming=True)
    assert opts.topics == ("a", "b") and opts.assigned == (("a", "x", 2), ("b", "x", 0), ("b", "x", 1))


def test_the_sink_ignores_only_the_columns_of_a_read() -> None:
    from pyspark.sql.types import StringType, StructField, StructType

    from connector.datasource import SOURCE_SCHEMA
    from connector.options import SinkOptions

    schema = SOURCE_SCHEMA
    assert SinkOptions.parse({"namesrvAddr": "x:1", "topic": "T", "sinkId": "s"}, schema, streaming=False)
    misspelt = StructType([*schema.fields, StructField("tag", StringType())])
    with pytest.raises(ConnectorError, match="does not know the column\\(s\\) tag;"):
        SinkOptions.parse({"namesrvAddr": "x:1", "topic": "T"}, misspelt, streaming=False)
