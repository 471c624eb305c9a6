"""How fast can anything go through PySpark's Python Data Source API? A source and a sink that do no I/O at all,
beside Spark's Kafka connector and ours, in the same run (bench/spark_vs_kafka.py's setup: our broker and Kafka 4.x
holding the same ``--rows`` rows of ``--body`` bytes, a Parquet copy of them, one local Spark session).

- **ceiling source** (``format("ceiling")``, defined here): a Python streaming data source with our schema
  (connector/datasource.py SOURCE_SCHEMA) and as many partitions as our topic has queues, whose ``read`` yields one
  Arrow RecordBatch, built once per partition before the first yield, again and again (only ``queueOffset``
  changes): ``--ceiling-batch-rows`` rows each (1,024 by default: one of our pulls of 1,024 messages is one batch),
  the same columns our source fills (1 KB bodies, a properties map of our rows' entries, ids, hosts, timestamps).
  What it costs is Spark's Python data source path alone: the query's start (Spark's Python processes), the Arrow
  IPC from the Python worker, the JVM turning Arrow rows into UnsafeRows. Run as an AvailableNow stream into
  ``noop`` and as a batch read, beside our ``format("rmq")`` stream, Spark's Kafka stream and ``read.parquet``,
  rounds interleaved, best of ``--repeat``.
- **ceiling sink**: a ``DataSourceArrowWriter`` (the kind our sink is, connector/sink.py) and a row-iterator
  ``DataSourceWriter`` that count the rows they get and drop them, beside Spark's Kafka sink (at least once) and ours
  (at least once and exactly once), ``--sink-rows`` of the same cached rows.

If the ceiling cannot reach Kafka's whole-query time or Kafka's sink, no connector on this API can.

Examples
--------
    python bench/spark_ceiling.py --rows 2000000 --sink-rows 100000 --repeat 2
    python bench/spark_ceiling.py --rows 200000 --sink-rows 20000 --repeat 1     # smoke run
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.connector_source import QUEUES, TOPIC  # noqa: E402
from bench.spark_vs_kafka import (  # noqa: E402
    add_arguments,
    measure_sink,
    print_sink,
    print_source,
    running_peers,
    source_rounds,
)
from connector.datasource import SOURCE_SCHEMA  # noqa: E402

BROKER_NAME = "broker-a"
HOST = "127.0.0.1:10911"
# What Spark checks a source's batches against. The classes and functions below are pickled by value into Spark's
# Python processes (this file runs as __main__): what they use must be plain values or pyspark / pyarrow, so that the
# ceiling's workers import nothing of ours.
ARROW_SCHEMA = to_arrow_schema(SOURCE_SCHEMA, timezone="UTC")


# -- the ceiling data source (Spark pickles these classes into its Python processes) --------------------------------


@dataclass(frozen=True)
class Slice(InputPartition):
    """Rows ``[start, end)`` of one of the ceiling's partitions (a queue of ours)."""

    queue_id: int
    start: int
    end: int
    batch_rows: int
    body_size: int


def template_batch(queue_id: int, rows: int, size: int) -> pa.RecordBatch:
    """``rows`` rows as our source decodes them (same columns, types, and about the same strings), bodies
    ``size`` bytes of incompressible data."""
    import random

    pool = random.Random(queue_id).randbytes(rows * size)
    ids = [f"7F00000100{queue_id:02X}{n:020X}" for n in range(rows)]
    properties = [[("UNIQ_KEY", i), ("WAIT", "true")] for i in ids]
    millis = pa.array([1_700_000_000_000_000 + n for n in range(rows)], pa.timestamp("us", tz="UTC"))
    columns = [
        pa.array([TOPIC] * rows, pa.string()),
        pa.array([BROKER_NAME] * rows, pa.string()),
        pa.array([queue_id] * rows, pa.int32()),
        pa.array(range(rows), pa.int64()),
        pa.array(ids, pa.string()),
        pa.array([f"7F00000100002A9F{n * 1200:016X}" for n in range(rows)], pa.string()),
        pa.nulls(rows, pa.string()),
        pa.nulls(rows, pa.string()),
        pa.array([pool[n * size:(n + 1) * size] for n in range(rows)], pa.binary()),
        pa.array(properties, pa.map_(pa.string(), pa.string())),
        millis,
        millis,
        pa.array([HOST] * rows, pa.string()),
        pa.array([HOST] * rows, pa.string()),
        pa.array([0] * rows, pa.int32()),
        pa.array([0] * rows, pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def read_slice(part: Slice) -> Iterator[pa.RecordBatch]:
    """The partition's rows: one template batch yielded again and again with its queueOffset column replaced."""
    template = template_batch(part.queue_id, part.batch_rows, part.body_size)
    columns = template.columns
    offset_at = template.schema.get_field_index("queueOffset")
    for first in range(part.start, part.end, part.batch_rows):
        n = min(part.batch_rows, part.end - first)
        columns[offset_at] = pa.array(range(first, first + n), pa.int64())
        yield pa.RecordBatch.from_arrays([c.slice(0, n) for c in columns], schema=template.schema)


def slices(options: dict[str, str], start: int, end: int) -> list[Slice]:
    """``[start, end)`` of the ceiling's row count spread over its partitions, as our topic's queues hold them."""
    parts, batch_rows, size = int(options["partitions"]), int(options["batchRows"]), int(options["bodySize"])
    per, extra = divmod(end - start, parts)
    result, cursor = [], start
    for queue_id in range(parts):
        n = per + (1 if queue_id < extra else 0)
        if n:
            result.append(Slice(queue_id, cursor, cursor + n, batch_rows, size))
        cursor += n
    return result


class CeilingStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{"rows": n}``; every row is there from the start, so AvailableNow reads all in one trigger."""

    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def initialOffset(self) -> dict:
        return {"rows": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        return {"rows": int(self.options["rows"])}

    def partitions(self, start: dict, end: dict) -> list[Slice]:
        return slices(self.options, start["rows"], end["rows"])

    def read(self, partition: Slice) -> Iterator[pa.RecordBatch]:
        return read_slice(partition)


class CeilingBatchReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.options = options

    def partitions(self) -> list[Slice]:
        return slices(self.options, 0, int(self.options["rows"]))

    def read(self, partition: Slice) -> Iterator[pa.RecordBatch]:
        return read_slice(partition)


@dataclass(frozen=True)
class Dropped(WriterCommitMessage):
    rows: int


class DropArrowWriter(DataSourceArrowWriter):
    """Gets the task's rows as Arrow RecordBatches (as our sink does) and drops them."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Dropped:
        return Dropped(sum(batch.num_rows for batch in iterator))

    def commit(self, messages: list[Dropped | None]) -> None:
        pass


class DropRowWriter(DataSourceWriter):
    """Gets the task's rows as Rows (PySpark converts Arrow to Row objects first) and drops them."""

    def write(self, iterator: Iterator) -> Dropped:
        return Dropped(sum(1 for _ in iterator))

    def commit(self, messages: list[Dropped | None]) -> None:
        pass


class CeilingDataSource(DataSource):
    """``format("ceiling")``: options rows, partitions, batchRows, bodySize (source); writer = arrow | rows (sink)."""

    @classmethod
    def name(cls) -> str:
        return "ceiling"

    def schema(self):
        return SOURCE_SCHEMA

    def reader(self, schema) -> DataSourceReader:
        return CeilingBatchReader(self.options)

    def streamReader(self, schema) -> DataSourceStreamReader:
        return CeilingStreamReader(self.options)

    def writer(self, schema, overwrite: bool) -> DataSourceWriter:
        return DropRowWriter() if self.options.get("writer") == "rows" else DropArrowWriter()


# -- the bench --------------------------------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    parser.add_argument("--ceiling-batch-rows", type=int, default=1024, help="rows per RecordBatch the ceiling yields")
    args = parser.parse_args()
    with running_peers(args, "bench-spark-ceiling") as peers:
        spark = peers.spark
        spark.dataSource.register(CeilingDataSource)
        ceiling = {"rows": str(args.rows), "partitions": str(QUEUES), "batchRows": str(args.ceiling_batch_rows),
                   "bodySize": str(args.body)}
        streams = {
            "rmq": lambda: spark.readStream.format("rmq").options(**peers.rmq_opts, startingOffsets="earliest").load(),
            "kafka": lambda: (spark.readStream.format("kafka").options(**peers.kafka_opts, startingOffsets="earliest")
                              .load()),
            "ceiling": lambda: spark.readStream.format("ceiling").options(**ceiling).load(),
        }
        batches = {
            "parquet": lambda: spark.read.parquet(peers.parquet).write.format("noop").mode("overwrite").save(),
            "ceiling": lambda: (spark.read.format("ceiling").options(**ceiling).load().write.format("noop")
                                .mode("overwrite").save()),
        }
        results = source_rounds(args, peers, streams, batches)
        print_source(args, results)
        best, batch_s = results.streams, results.batches
        whole = {name: run.whole for name, run in best.items()}
        triggers = {name: run.batches for name, run in best.items()}
        print(f"whole query (rows/s ratios): rmq / Kafka {whole['kafka'] / whole['rmq']:.2f} (target >= 1.0), "
              f"ceiling / Kafka {whole['kafka'] / whole['ceiling']:.2f}, rmq / ceiling "
              f"{whole['ceiling'] / whole['rmq']:.2f}, ceiling / Parquet {batch_s['parquet'] / whole['ceiling']:.2f}, "
              f"rmq / Parquet {batch_s['parquet'] / whole['rmq']:.2f} (target >= 0.6)")
        print(f"triggers only: rmq / Kafka {triggers['kafka'] / triggers['rmq']:.2f}, ceiling / Kafka "
              f"{triggers['kafka'] / triggers['ceiling']:.2f}, "
              f"rmq / ceiling {triggers['ceiling'] / triggers['rmq']:.2f}"
              f"; batch reads: ceiling / Parquet {batch_s['parquet'] / batch_s['ceiling']:.2f}", flush=True)
        if not args.skip_sink:
            def drop(kind: str):
                return lambda d: d.write.format("ceiling").option("writer", kind).mode("append").save()

            rows, times, cpu = measure_sink(args, peers, {"ceiling arrow writer": drop("arrow"),
                                                          "ceiling row writer": drop("rows")})
            print_sink(args, rows, times, cpu)
            best_s = {name: min(runs) for name, runs in times.items()}
            print(f"ceiling arrow writer / Kafka {best_s['kafka at-least-once'] / best_s['ceiling arrow writer']:.2f}"
                  f", rmq exactly-once / ceiling {best_s['ceiling arrow writer'] / best_s['rmq exactly-once']:.2f}"
                  + (f", rmq at-least-once / ceiling "
                     f"{best_s['ceiling arrow writer'] / best_s['rmq at-least-once']:.2f}"
                     if "rmq at-least-once" in best_s else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
