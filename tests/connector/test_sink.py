"""The exactly-once sink (connector/sink.py) against our broker, in the session's local Spark: batch writes with
every column, sharding-key order, all-or-nothing on failure, and clear errors for bad input.

The failure and restart scenarios that need a killable driver live in test_sink_recovery.py."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from chispa import assert_df_equality

from tests.connector.conftest import SINK_IMMUNITY_S, read_topic, wait_until
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.slow


def sink_options(cluster: Cluster, resolver_dir: Path, **extra: object) -> dict[str, str]:
    options = {"namesrvAddr": cluster.namesrv_addr, "checkImmunitySeconds": str(SINK_IMMUNITY_S),
               "resolverDir": str(resolver_dir), "resolverIdleTimeoutSeconds": "60"}
    options.update({k: str(v) for k, v in extra.items()})
    return options


def test_batch_write_every_column(spark, sink_cluster: Cluster, resolver_dir: Path, topic_name: str) -> None:
    from pyspark.sql import Row

    rows = [Row(body=f"b{i}".encode(), tags=f"t{i % 3}", keys=f"k{i} kk{i}", properties={"p": str(i)},
                shardingKey=f"s{i % 4}") for i in range(40)]
    df = spark.createDataFrame(rows, "body binary, tags string, keys string, properties map<string,string>, "
                                     "shardingKey string").repartition(3)
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
