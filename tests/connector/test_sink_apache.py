"""The sink against Apache RocketMQ 5.5.0's own NameServer and broker (java processes, short transaction check
timings): a batch write and a streaming query (two micro-batches) land exactly once, as the official Java consumer
sees them; a batch job whose task fails leaves nothing visible; guarantee=at-least-once writes every row in plain
batches. Only standard requests are used (half sends, END_TRANSACTION, plain batches, UPDATE_AND_CREATE_TOPIC, pull,
heartbeat, CHECK_TRANSACTION_STATE answers, and the GET_BROKER_CONFIG that tells the sink the broker takes no
transactional batches)."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from tests.apache import apache_client
from tests.connector.conftest import SINK_CHECK_IMMUNITY_S, read_topic, routed_queues
from tests.connector.test_sink_recovery import resolver_answers
from tests.helpers import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.java]


def java_bodies(namesrv: str, topic: str, log_dir: Path) -> Counter:
    out = apache_client(log_dir).run("consume-pull", namesrv=namesrv, topic=topic, body_format="utf8",
                                     timeout_ms=60_000)
    return Counter(r["body"] for r in out.records)


def test_batch_and_stream_exactly_once(spark, apache: str, tmp_path: Path, resolver_dir: Path) -> None:
    options = {"namesrvAddr": apache, "resolverDir": str(resolver_dir), "resolverIdleTimeoutSeconds": "60",
               "checkImmunitySeconds": "30"}
    spark.range(30).selectExpr("concat('b-', cast(id as string)) as body", "'TagA' as tags").repartition(2) \
        .write.format("rmq").options(**options).option("topic", "SinkBatch").mode("append").save()
    wait_until("batch rows visible", lambda: len(read_topic(apache, "SinkBatch")) >= 30, timeout=90)
    assert java_bodies(apache, "SinkBatch", tmp_path / "java") == Counter(f"b-{i}" for i in range(30))

    source = tmp_path / "input"
    source.mkdir()
    for batch in range(2):
        part = source / f"part-{batch}.json"
        part.write_text("".join(json.dumps({"id": i}) + "\n" for i in range(batch * 10, batch * 10 + 10)))
        os.utime(part, (1_700_000_000 + batch, 1_700_000_000 + batch))  # the file source takes older files first
    query = (spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).json(str(source))
             .selectExpr("concat('s-', cast(id as string)) as body", "cast(id % 2 as string) as shardingKey")
             .writeStream.format("rmq").options(**options).option("topic", "SinkStream")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    query.awaitTermination()
    wait_until("stream rows visible", lambda: len(read_topic(apache, "SinkStream")) >= 20, timeout=90)
    assert java_bodies(apache, "SinkStream", tmp_path / "java") == Counter(f"s-{i}" for i in range(20))
    # same sharding key, same queue, in row order
    by_key: dict[str, list] = {}
    for m in sorted(read_topic(apache, "SinkStream"), key=lambda m: (m.queue_id, m.queue_offset)):
        by_key.setdefault(str(int(m.body.decode()[2:]) % 2), []).append(m)
    assert all(len({m.queue_id for m in ms}) == 1 for ms in by_key.values())
    order = {k: [(int(m.body.decode()[2:]), m.queue_id, m.queue_offset) for m in ms] for k, ms in by_key.items()}
    assert all([i for i, _, _ in seq] == sorted(i for i, _, _ in seq) for seq in order.values()), order


def test_aborted_job_leaves_nothing(spark, apache: str, resolver_dir: Path) -> None:
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    options = {"namesrvAddr": apache, "resolverDir": str(resolver_dir), "resolverIdleTimeoutSeconds": "60",
               "checkImmunitySeconds": str(SINK_CHECK_IMMUNITY_S), "sinkId": "apache_abort", "topic": "SinkAbort",
               "faultInjection": '{"failTask": {"partition": 1, "afterRows": 3}}'}
    with pytest.raises((PySparkException, Py4JJavaError), match="injected task failure"):
        spark.range(20).selectExpr("cast(id as string) as body").repartition(2) \
            .write.format("rmq").options(**options).mode("append").save()
    wait_until("the failed task's halves rolled back by Apache's check",
               lambda: sum(1 for _, _, a in resolver_answers(resolver_dir, "apache_abort") if a == "ROLLBACK") >= 3,
               timeout=90)
    assert routed_queues(apache, "SinkAbort")
    assert read_topic(apache, "SinkAbort") == []


def test_at_least_once_in_plain_batches(spark, apache: str, tmp_path: Path) -> None:
    """guarantee=at-least-once on Apache's broker: plain batches, every row visible at once (once here: nothing
    failed), each with its own UNIQ_KEY, as the official Java consumer sees them."""
    rows = 700
    spark.range(rows).selectExpr("concat('a-', cast(id as string)) as body",
                                 "cast(id % 3 as string) as shardingKey").repartition(2) \
        .write.format("rmq").option("namesrvAddr", apache).option("topic", "SinkAtLeastOnce") \
        .option("guarantee", "at-least-once").mode("append").save()
    seen = read_topic(apache, "SinkAtLeastOnce")
    assert Counter(m.body.decode() for m in seen) == Counter(f"a-{i}" for i in range(rows))
    assert len({m.msg_id for m in seen}) == rows
    assert not any(k.startswith(("TRAN_MSG", "RMQ_SINK")) for m in seen for k in m.properties)
    assert java_bodies(apache, "SinkAtLeastOnce", tmp_path / "java") == Counter(f"a-{i}" for i in range(rows))
