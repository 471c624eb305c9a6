"""The exactly-once sink (connector/sink.py) against our broker, in the session's local Spark: batch writes with
every column, sharding-key order, all-or-nothing on failure, and clear errors for bad input.

The failure and restart scenarios that need a killable driver live in test_sink_recovery.py."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from chispa import assert_df_equality

from broker.client import BlockingClient
from broker.common.errors import ConnectorOptionError
from connector.decisions import DecisionLog
from connector.options import SinkOptions
from tests.connector.conftest import (
    SINK_IMMUNITY_S,
    read_topic,
    resolver_gone,
    resolver_pids,
    routed_queues,
    takes_transaction_batches,
)
from tests.helpers import wait_until
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.slow


def sink_options(cluster: Cluster, resolver_dir: Path, **extra: object) -> dict[str, str]:
    options = {"namesrvAddr": cluster.namesrv_addr, "checkImmunitySeconds": str(SINK_IMMUNITY_S),
               "resolverDir": str(resolver_dir), "resolverIdleTimeoutSeconds": "60"}
    options.update({k: str(v) for k, v in extra.items()})
    return options


@pytest.mark.smoke
def test_batch_write_every_column(spark, sink_cluster_both: Cluster, resolver_dir: Path, topic_name: str,
                                  request: pytest.FixtureRequest) -> None:
    """Both ways of sending (prepared batches and END_TRANSACTION_BATCH; one half message and END_TRANSACTION per
    row): every column arrives, a sharding key's rows in one queue in row order, each row once; rows of 4 KiB and
    more go alone, compressed, beside the batches."""
    from pyspark.sql import Row

    sink_cluster = sink_cluster_both
    assert takes_transaction_batches(sink_cluster) == ("batched" in request.node.callspec.id)
    rows = [Row(body=f"b{i}".encode() + (b"x" * 5000 if i % 10 == 7 else b""), tags=f"t{i % 3}",
                keys=f"k{i} kk{i}", properties={"p": str(i)}, shardingKey=f"s{i % 4}") for i in range(600)]
    # three tasks, each with a slice of the rows in order (no shuffle: the order within a task is known)
    schema = "body binary, tags string, keys string, properties map<string,string>, shardingKey string"
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 3), schema)
    df.write.format("rmq").options(**sink_options(sink_cluster, resolver_dir, topic=topic_name)).mode("append").save()

    # the driver commits what it can at once; anything it left (a slow machine) the resolver commits on the check
    wait_until("every row visible", lambda: len(read_topic(sink_cluster.namesrv_addr, topic_name)) >= len(rows),
               timeout=90)
    seen = read_topic(sink_cluster.namesrv_addr, topic_name)
    assert sorted(m.body for m in seen) == sorted(r.body for r in rows)
    got = spark.createDataFrame([(m.body, m.tags, m.keys, m.properties["p"]) for m in seen],
                                "body binary, tags string, keys string, p string")
    want = df.selectExpr("body", "tags", "keys", "properties['p'] as p")
    assert_df_equality(got, want, ignore_row_order=True)
    # one sharding key, one queue, in the order of the rows of its partition
    queues = {}
    for m in seen:
        queues.setdefault(m.properties["p"] and f"s{int(m.properties['p']) % 4}", set()).add(m.queue_id)
    assert all(len(q) == 1 for q in queues.values()), queues
    assert Counter(m.body for m in seen).most_common(1)[0][1] == 1
    partition_of = dict(df.rdd.mapPartitionsWithIndex(lambda i, it: ((int(r.properties["p"]), i) for r in it))
                        .collect())
    by_queue: dict[tuple[int, int], list[int]] = {}
    for m in sorted(seen, key=lambda m: (m.queue_id, m.queue_offset)):
        p = int(m.properties["p"])
        by_queue.setdefault((m.queue_id, partition_of[p]), []).append(p)
    assert all(ps == sorted(ps) for ps in by_queue.values()), by_queue


def test_batch_write_ended_by_the_driver_leaves_no_resolver(spark, sink_cluster: Cluster, resolver_dir: Path,
                                                            topic_name: str) -> None:
    """The driver ends every half itself (all sent by first attempts, within half the immunity time: 60 s here, so
    a busy machine does not leave rows to the check): the decision log says so, and the resolver the job started
    (the sink id is the job's own) exits at once, leaving no pid or lock file."""
    bodies = [f"e{i}" for i in range(10)]
    df = spark.createDataFrame([(b,) for b in bodies], "body string").repartition(2)
    df.write.format("rmq").options(**sink_options(sink_cluster, resolver_dir, topic=topic_name,
                                                  checkImmunitySeconds=120)).mode("append").save()

    assert Counter(m.body.decode() for m in read_topic(sink_cluster.namesrv_addr, topic_name)) == Counter(bodies)
    (log,) = resolver_dir.glob("job-*.log")
    with BlockingClient(sink_cluster.namesrv_addr) as client:
        state = DecisionLog(client, "RMQ_SINK_DECISIONS", log.stem).refresh()
    assert len(state.decided) == 1 and state.ended == set(state.decided)
    assert resolver_pids(resolver_dir, log.stem), log.read_text()
    wait_until("the job's resolver gone", lambda: resolver_gone(resolver_dir, log.stem), timeout=30)
    assert "resolver settled" in log.read_text()


@pytest.mark.parametrize(("partitions", "failing"), [(2, 1), (1, 0)], ids=["one-of-two-fails", "every-task-fails"])
def test_batch_write_aborted_leaves_nothing(spark, sink_cluster: Cluster, resolver_dir: Path, topic_name: str,
                                            partitions: int, failing: int) -> None:
    """A task fails (local[2] does not retry): the job aborts; the other task's halves (if any) are rolled back by
    abort(), the failed task's by the check (the job is recorded aborted, also when no task reported anything);
    no row ever becomes visible."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    from tests.connector.conftest import SINK_CHECK_IMMUNITY_S
    from tests.connector.test_sink_recovery import resolver_answers

    sink_id = "abort_" + topic_name[-40:].replace("-", "_")
    df = spark.range(20).selectExpr("cast(id as string) as body").repartition(partitions)
    options = sink_options(sink_cluster, resolver_dir, topic=topic_name, sinkId=sink_id,
                           checkImmunitySeconds=SINK_CHECK_IMMUNITY_S,
                           faultInjection=f'{{"failTask": {{"partition": {failing}, "afterRows": 3}}}}')
    with pytest.raises((PySparkException, Py4JJavaError), match="injected task failure"):
        df.write.format("rmq").options(**options).mode("append").save()
    wait_until("the failed task's halves rolled back by the check",
               lambda: sum(1 for _, _, a in resolver_answers(resolver_dir, sink_id) if a == "ROLLBACK") >= 3,
               timeout=60)
    assert not [a for a in resolver_answers(resolver_dir, sink_id) if a[2] == "COMMIT"]
    assert routed_queues(sink_cluster.namesrv_addr, topic_name), "the halves' sends created the topic"
    assert read_topic(sink_cluster.namesrv_addr, topic_name) == []


@pytest.mark.parametrize(("options", "schema", "message"), [
    ({}, "body string", "namesrvAddr is required"),
    ({"namesrvAddr": "x:1"}, "body string", "needs a topic"),
    ({"namesrvAddr": "x:1", "topic": "T"}, "value string", "unknown column|needs a body column|does not know"),
    ({"namesrvAddr": "x:1", "topic": "T"}, "body int", "column body must be binary or string"),
    ({"namesrvAddr": "x:1", "topic": "T"}, "body string, properties map<string,int>", "map<string,string>"),
    ({"namesrvAddr": "x:1", "topic": "T", "sinkId": "bad id!"}, "body string", "sinkId must match"),
    ({"namesrvAddr": "x:1", "topic": "T", "maxInFlight": "0"}, "body string", "maxInFlight must be >= 1"),
    ({"namesrvAddr": "x:1", "topic": "T", "sinkid2": "a"}, "body string", "unknown rmq sink option"),
    ({"namesrvAddr": "x:1", "topic": "bad topic"}, "body string", "not a valid topic name"),
    ({"namesrvAddr": "x:1", "topic": "T", "decisionTopic": "bad topic"}, "body string",
     "option decisionTopic 'bad topic' is not a valid topic name"),
    ({"namesrvAddr": "x:1", "topic": "T", "faultInjection": "[1]"}, "body string",
     "option faultInjection must be a JSON object"),
    ({"namesrvAddr": "x:1", "topic": "T", "guarantee": "exactly_once"}, "body string",
     "option guarantee must be exactly-once or at-least-once, got 'exactly_once'"),
    ({"namesrvAddr": "x:1", "topic": "T", "guarantee": "at-least-once", "decisionTopic": "D"}, "body string",
     "option.s. decisionTopic apply only to guarantee=exactly-once"),
])
def test_bad_options_fail_clearly(options: dict, schema: str, message: str) -> None:
    from pyspark.sql.types import _parse_datatype_string

    with pytest.raises(ConnectorOptionError, match=message):
        SinkOptions.parse(options, _parse_datatype_string(schema), streaming=False)


def test_streaming_sink_identity() -> None:
    from pyspark.sql.types import _parse_datatype_string

    schema = _parse_datatype_string("body string")
    base = {"namesrvAddr": "x:1", "topic": "T"}
    with pytest.raises(ConnectorOptionError, match="stable identity"):
        SinkOptions.parse(base, schema, streaming=True)
    a = SinkOptions.parse({**base, "checkpointlocation": "/tmp/q1"}, schema, streaming=True)
    again = SinkOptions.parse({**base, "checkpointlocation": "/tmp/q1"}, schema, streaming=True)
    other = SinkOptions.parse({**base, "checkpointlocation": "/tmp/q2"}, schema, streaming=True)
    assert a.sink_id == again.sink_id != other.sink_id and a.producer_group == f"RMQ_SINK_{a.sink_id}"
    assert SinkOptions.parse({**base, "sinkId": "mine"}, schema, streaming=True).sink_id == "mine"
    # batch jobs: a fresh identity per job unless given
    assert SinkOptions.parse(base, schema, streaming=False).sink_id != SinkOptions.parse(base, schema,
                                                                                         streaming=False).sink_id


def test_bad_rows_fail_the_write(spark, sink_cluster: Cluster, resolver_dir: Path, topic_name: str) -> None:
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    options = sink_options(sink_cluster, resolver_dir, topic=topic_name)
    df = spark.createDataFrame([("a", 2)], "body string, delayLevel int")
    with pytest.raises((PySparkException, Py4JJavaError), match="does not delay transactional messages"):
        df.write.format("rmq").options(**options).mode("append").save()
    df = spark.createDataFrame([(None,)], "body string")
    with pytest.raises((PySparkException, Py4JJavaError), match="null body"):
        df.write.format("rmq").options(**options).mode("append").save()
    assert read_topic(sink_cluster.namesrv_addr, topic_name) == []


def test_at_least_once_writes_every_row_in_plain_batches(spark, sink_cluster: Cluster, topic_name: str) -> None:
    """guarantee=at-least-once: plain batches (no half message, no decision); every row arrives (once here: nothing
    failed), a sharding key's rows in one queue in row order; a write whose task fails leaves what it stored."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    options = {"namesrvAddr": sink_cluster.namesrv_addr, "topic": topic_name, "guarantee": "at-least-once"}
    rows = 1500  # several batches per queue
    df = spark.range(rows).selectExpr("concat('r-', cast(id as string)) as body",
                                      "concat('s', cast(id % 5 as string)) as shardingKey",
                                      "'TagA' as tags").repartition(1)
    df.write.format("rmq").options(**options).mode("append").save()
    seen = read_topic(sink_cluster.namesrv_addr, topic_name)
    assert Counter(m.body.decode() for m in seen) == Counter(f"r-{i}" for i in range(rows))
    assert not any(k.startswith(("TRAN_MSG", "RMQ_SINK")) for m in seen for k in m.properties)
    assert len({m.properties["UNIQ_KEY"] for m in seen}) == rows and {m.tags for m in seen} == {"TagA"}
    by_key: dict[str, list] = {}
    for m in sorted(seen, key=lambda m: (m.queue_id, m.queue_offset)):
        by_key.setdefault(f"s{int(m.body.decode()[2:]) % 5}", []).append(m)
    assert all(len({m.queue_id for m in ms}) == 1 for ms in by_key.values())
    assert all([int(m.body.decode()[2:]) for m in ms] == sorted(int(m.body.decode()[2:]) for m in ms)
               for ms in by_key.values())

    failing = {**options, "faultInjection": '{"failTask": {"partition": 0, "afterRows": 300}}'}
    with pytest.raises((PySparkException, Py4JJavaError), match="injected task failure"):
        spark.range(400).selectExpr("concat('f-', cast(id as string)) as body").repartition(1) \
            .write.format("rmq").options(**failing).mode("append").save()
    failed = [m for m in read_topic(sink_cluster.namesrv_addr, topic_name) if m.body.startswith(b"f-")]
    assert Counter(m.body.decode() for m in failed) == Counter(f"f-{i}" for i in range(300))
