"""replay end to end: Delta -> topic (the transactional sink) -> Delta gives an equal table, in per-queue order;
time travel and change-feed ranges select what is sent."""

from __future__ import annotations

from chispa import assert_df_equality
from pyspark.sql import functions as F

from broker.client.blocking import BlockingClient
from broker.client.message import Message
from jobs.backfill import BackfillJob, backfill
from jobs.replay import SYSTEM_PROPERTIES, ReplayJob, replay, select_rows


def content(df):
    """What a message is, apart from where it was stored: body, keys, tags and user properties (as sorted entries:
    maps cannot be sorted or compared)."""
    user = F.map_filter("properties", lambda k, _: ~k.isin(*SYSTEM_PROPERTIES))
    return df.select("body", "keys", "tags", F.array_sort(F.map_entries(user)).alias("properties"))


def test_round_trip_delta_topic_delta(spark, namesrv, new_topic, produce, tmp_path, resolver_dir):
    source_topic, target_topic, range_topic = new_topic(4), new_topic(4), new_topic(2)
    produce(source_topic, 0, 120)
    with BlockingClient(namesrv) as client:  # a few with user properties, which must survive the trip
        for n in range(3):
            client.send(Message(source_topic, f"with-props-{n}".encode(), keys=f"p-{n}", tags="props",
                                properties={"region": "eu", "n": str(n)}))
    first, second = str(tmp_path / "first"), str(tmp_path / "second")
    assert backfill(spark, BackfillJob(namesrv=namesrv, table=first, topics=(source_topic,))).rows_inserted == 123

    sink_options = {"resolverDir": str(resolver_dir)}  # stopped when the test ends
    sent = replay(spark, ReplayJob(namesrv=namesrv, table=first, topic=target_topic, sink_options=sink_options))
    assert sent.rows == 123
    assert backfill(spark, BackfillJob(namesrv=namesrv, table=second, topics=(target_topic,))).rows_inserted == 123
    before, after = spark.read.format("delta").load(first), spark.read.format("delta").load(second)
    assert_df_equality(content(after), content(before), ignore_row_order=True, ignore_nullable=True)
    assert after.where("tags = 'props'").select(F.col("properties")["region"]).distinct().collect()[0][0] == "eu"

    # Order per source queue: one source queue's messages land in one target queue, in the same order.
    pairs = (before.select("body", F.col("queueId").alias("q1"), F.col("queueOffset").alias("o1"))
             .join(after.select("body", F.col("queueId").alias("q2"), F.col("queueOffset").alias("o2")), "body")
             .collect())
    by_source: dict[int, list[tuple[int, int, int]]] = {}
    for row in pairs:
        by_source.setdefault(row["q1"], []).append((row["o1"], row["q2"], row["o2"]))
    for rows in by_source.values():
        assert len({q2 for _, q2, _ in rows}) == 1
        assert [o2 for _, _, o2 in sorted(rows)] == sorted(o2 for _, _, o2 in rows)

    # Time travel and the change feed: version 1 is the first backfill; what version 2 added goes to range_topic.
    produce(source_topic, 120, 30)
    assert backfill(spark, BackfillJob(namesrv=namesrv, table=first, topics=(source_topic,))).table_version == 2
    snapshot, what = select_rows(spark, ReplayJob(namesrv=namesrv, table=first, topic=range_topic, version=1))
    assert (snapshot.count(), what) == (123, "version 1")
    added = replay(spark, ReplayJob(namesrv=namesrv, table=first, topic=range_topic, from_version=2,
                                    where="tags != 'shipped'", sink_options=sink_options))
    assert added.rows == 20  # orders 120..149 without the shipped third
    landed = (spark.read.format("rmq").option("namesrvAddr", namesrv).option("topic", range_topic).load()
              .select("keys").collect())
    assert sorted(r[0] for r in landed) == sorted(f"order-{n}" for n in range(120, 150) if n % 3 != 2)
