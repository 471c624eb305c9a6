"""The Delta table the jobs write: the source's rows plus ``storeDate``, partitioned by it, keyed by queue position.

One table layout for backfill and ingest, so both may write the same table: the source schema (connector/source.py)
as it is, plus ``storeDate`` = the UTC date of ``storeTimestamp`` (spark.sql.session.timeZone is UTC in
conf/spark-defaults.conf). A message's identity is where the broker stored it, (topic, brokerName, queueId,
queueOffset): a MERGE on that key adds each message once however often a range is read. The change data feed is on,
so jobs/replay.py can send back exactly the rows a range of versions added.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

from broker.common.errors import JobError

if TYPE_CHECKING:
    from delta.tables import DeltaTable
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

KEY_COLUMNS = ("topic", "brokerName", "queueId", "queueOffset")
PARTITION_COLUMN = "storeDate"
TABLE_PROPERTIES = {"delta.enableChangeDataFeed": "true"}


def with_store_date(df: DataFrame) -> DataFrame:
    """The source's rows as the table stores them."""
    from pyspark.sql import functions as F

    return df.withColumn(PARTITION_COLUMN, F.to_date("storeTimestamp"))


def is_delta_table(spark: SparkSession, path: str) -> bool:
    from delta.tables import DeltaTable

    return DeltaTable.isDeltaTable(spark, path)


def ensure_table(spark: SparkSession, path: str, schema: StructType) -> DeltaTable:
    """The table at ``path``, created empty (partitioned, change data feed on) when nothing is there yet. An
    existing table must have the key columns; any other difference surfaces as Delta's own schema error on write."""
    from delta.tables import DeltaTable

    if DeltaTable.isDeltaTable(spark, path):
        table = DeltaTable.forPath(spark, path)
        missing = [c for c in (*KEY_COLUMNS, PARTITION_COLUMN) if c not in table.toDF().columns]
        if missing:
            raise JobError(f"Delta table {path} lacks column(s) {', '.join(missing)}: it was not written by these jobs")
        return table
    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema).partitionedBy(PARTITION_COLUMN)
    for key, value in TABLE_PROPERTIES.items():
        builder = builder.property(key, value)
    return builder.execute()


@dataclass(frozen=True, slots=True)
class MergeResult:
    inserted: int
    version: int


def merge_new_rows(spark: SparkSession, path: str, rows: DataFrame, dates: list[date]) -> MergeResult:
    """MERGE ``rows`` (already with storeDate) into the table, inserting only keys it lacks. ``dates``, the
    storeDate values among ``rows``, become a literal predicate on the target so Delta reads only those partitions."""
    from pyspark.sql import functions as F

    table = ensure_table(spark, path, rows.schema)
    condition = " AND ".join(f"t.{c} = s.{c}" for c in (PARTITION_COLUMN, *KEY_COLUMNS))
    condition = F.expr(condition) & F.col(f"t.{PARTITION_COLUMN}").isin(dates)
    metrics = (table.alias("t").merge(rows.alias("s"), condition).whenNotMatchedInsertAll().execute()).first()
    inserted = int(metrics["num_inserted_rows"]) if metrics is not None else 0
    return MergeResult(inserted, latest_version(spark, path))


def append_batch(rows: DataFrame, path: str, app_id: str, batch_id: int) -> None:
    """Append a micro-batch once: Delta records (txnAppId, txnVersion) in the same commit as the data and skips a
    write whose version it has already seen for that app id, so a batch Spark replays after a crash adds nothing."""
    (rows.write.format("delta").mode("append").partitionBy(PARTITION_COLUMN)
     .option("txnAppId", app_id).option("txnVersion", batch_id).save(path))


def latest_version(spark: SparkSession, path: str) -> int:
    from delta.tables import DeltaTable

    return int(DeltaTable.forPath(spark, path).history(1).first()["version"])


def history(spark: SparkSession, path: str, limit: int = 10) -> list[tuple[int, str, int]]:
    """(version, operation, rows written) of the last ``limit`` commits, newest first."""
    from delta.tables import DeltaTable

    rows = DeltaTable.forPath(spark, path).history(limit).select("version", "operation", "operationMetrics").collect()
    return [(int(r["version"]), r["operation"], _rows_written(r["operationMetrics"] or {})) for r in rows]


def _rows_written(metrics: dict[str, str]) -> int:
    for key in ("numTargetRowsInserted", "numOutputRows"):
        if key in metrics:
            return int(metrics[key])
    return 0
