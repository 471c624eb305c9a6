"""Did every row arrive exactly once? A topic read back (format("rmq"), batch) counted per message key against the
Delta table its messages came from.

The replayed messages sit at new queue positions, so the table's key (topic, brokerName, queueId, queueOffset) cannot
match them; the message keys (``keys``, e.g. order-17) travel with each message and can. A key that the table holds
n times must be read back n times: fewer is a lost row, more a duplicate.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.client.blocking import BlockingClient

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True, slots=True)
class ArrivalCheck:
    """Rows of the table, messages read back, and how their per-key counts compare."""

    table_rows: int
    messages: int
    keys: int
    keys_exact: int  # keys read back exactly as often as the table holds them
    missing: int  # rows of the table with no message (summed over keys)
    duplicates: int  # messages beyond the table's count of their key (summed over keys)
    seconds: float

    @property
    def exactly_once(self) -> bool:
        return self.missing == 0 and self.duplicates == 0 and self.table_rows == self.messages

    def render(self) -> str:
        verdict = ("every row of the table arrived exactly once" if self.exactly_once
                   else "NOT exactly once: see the counts above")
        return (f"read back {self.messages} messages in {self.seconds:.1f} s, counted per key against the table's "
                f"{self.table_rows} rows:\n{self.keys_exact} of {self.keys} keys match, {self.missing} rows missing, "
                f"{self.duplicates} duplicates\n=> {verdict}")


def topic_end_offsets(namesrv: str, topic: str) -> str:
    """The topic's max offset per queue, as the source's startingOffsets JSON: where the next message of each queue
    will be, so a later read starts at what was sent after this call."""
    offsets: dict[str, dict[str, int]] = {}
    with BlockingClient(namesrv) as client:
        for mq in client.fetch_message_queues(topic):
            offsets.setdefault(mq.broker_name, {})[str(mq.queue_id)] = client.get_max_offset(mq)
    return json.dumps({topic: offsets})


def check_arrival(spark: SparkSession, table: str, namesrv: str, topic: str, starting_offsets: str) -> ArrivalCheck:
    """Read ``topic`` from ``starting_offsets`` to its end and compare its count per message key with ``table``'s."""
    from pyspark.sql import functions as F

    started = time.monotonic()
    key = F.coalesce("keys", F.lit("")).alias("keys")  # messages without keys compare as one key, not as unequal nulls
    expected = spark.read.format("delta").load(table).groupBy(key).agg(F.count(F.lit(1)).alias("expected"))
    landed = (spark.read.format("rmq").option("namesrvAddr", namesrv).option("topic", topic)
              .option("startingOffsets", starting_offsets).load()
              .groupBy(key).agg(F.count(F.lit(1)).alias("landed")))
    both = expected.join(landed, "keys", "full_outer").fillna(0, ["expected", "landed"])
    gap = F.col("expected") - F.col("landed")
    row = both.agg(F.sum("expected"), F.sum("landed"), F.count(F.lit(1)),
                   F.sum((gap == 0).cast("int")), F.sum(F.greatest(gap, F.lit(0))),
                   F.sum(F.greatest(-gap, F.lit(0)))).first()
    table_rows, messages, keys, exact, missing, duplicates = (int(v or 0) for v in row)
    return ArrivalCheck(table_rows, messages, keys, exact, missing, duplicates, time.monotonic() - started)
