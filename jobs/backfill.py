"""Backfill: a range of one or more topics, read as a batch with ``format("rmq")``, MERGEd into a Delta table.

The table is partitioned by the UTC date of storeTimestamp (jobs/lake.py). Re-running the same or an overlapping
range adds no duplicate: rows are matched on (topic, brokerName, queueId, queueOffset), the message's place in the
broker. The range is read from the brokers once (cached), then counted per queue and merged.

Examples:
    python -m jobs.backfill --namesrv 127.0.0.1:9876 --topic Orders --table ./data/delta/orders
    python -m jobs.backfill --topic Orders --from 2024-05-01 --to 2024-05-02 --table ./data/delta/orders
    python -m jobs.backfill --topic Orders --from -2h --table /lake/orders --filter "paid || shipped"
    python -m jobs.backfill --topic Orders --from '{"Orders": {"broker-a": {"0": 100}}}' --to latest --table t

--from / --to take: earliest | latest | an ISO 8601 time (UTC unless it has an offset) | epoch milliseconds |
-15m, -2h, -1d (before now) | per-queue offsets as JSON {"topic": {"brokerName": {"queueId": offset}}}.
A time range is resolved per queue with the broker's SEARCH_OFFSET_BY_TIMESTAMP; --to is exclusive.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.common.errors import JobError
from broker.remoting.signing import SessionCredentials
from jobs import lake
from jobs.common import (
    Bound,
    JobsConf,
    credential_options,
    format_table,
    job_credentials,
    job_parser,
    parse_bound,
    range_options,
    run_cli,
    run_in_session,
    subscription_options,
    topics_of,
)
from jobs.progress import StageProgress

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

PROG = "python -m jobs.backfill"


@dataclass(frozen=True, slots=True)
class BackfillJob:
    namesrv: str
    table: str
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    start: Bound = field(default_factory=lambda: Bound("earliest"))
    end: Bound = field(default_factory=lambda: Bound("latest"))
    filter: str | None = None
    filter_type: str = "TAG"
    progress_interval_s: float = 2.0
    credentials: SessionCredentials | None = None

    def source_options(self) -> dict[str, str]:
        options = {"namesrvAddr": self.namesrv, **subscription_options(self.topics, self.topic_pattern),
                   **range_options(self.start, self.end), **credential_options(self.credentials)}
        if self.filter:
            options.update(filter=self.filter, filterType=self.filter_type)
        return options


@dataclass(frozen=True, slots=True)
class QueueRange:
    topic: str
    broker_name: str
    queue_id: int
    first_offset: int
    last_offset: int
    rows: int


@dataclass(frozen=True, slots=True)
class BackfillSummary:
    rows_read: int
    rows_inserted: int
    queues: list[QueueRange]
    table_version: int | None
    seconds: float

    def render(self, job: BackfillJob) -> str:
        head = (f"backfill {job.start.describe()} .. {job.end.describe()} into {job.table}: read {self.rows_read} "
                f"rows, inserted {self.rows_inserted} new ({self.rows_read - self.rows_inserted} already there), "
                f"table version {self.table_version}, {self.seconds:.1f} s")
        if not self.queues:
            return head + "\n(no message in range)"
        table = format_table(("topic", "broker", "queue", "first offset", "last offset", "rows"),
                             ((q.topic, q.broker_name, q.queue_id, q.first_offset, q.last_offset, q.rows)
                              for q in self.queues))
        return f"{head}\n{table}"


def backfill(spark: SparkSession, job: BackfillJob) -> BackfillSummary:
    """Read the range, count it per queue, MERGE it into the table; returns what happened."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    started = time.monotonic()
    reader = spark.read.format("rmq")
    for key, value in job.source_options().items():
        reader = reader.option(key, value)
    rows = lake.with_store_date(reader.load()).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        with StageProgress(spark.sparkContext.statusTracker(), "backfill", interval_s=job.progress_interval_s):
            per_queue = (rows.groupBy("topic", "brokerName", "queueId")
                         .agg(F.min("queueOffset"), F.max("queueOffset"), F.count(F.lit(1)),
                              F.collect_set(lake.PARTITION_COLUMN))
                         .orderBy("topic", "brokerName", "queueId").collect())
            queues = [QueueRange(r[0], r[1], int(r[2]), int(r[3]), int(r[4]), int(r[5])) for r in per_queue]
            rows_read = sum(q.rows for q in queues)
            if rows_read == 0:
                lake.ensure_table(spark, job.table, rows.schema)  # an empty range still leaves a table to query
                return BackfillSummary(0, 0, [], lake.latest_version(spark, job.table), time.monotonic() - started)
            dates = sorted({d for r in per_queue for d in r[6]})
            merged = lake.merge_new_rows(spark, job.table, rows, dates)
    finally:
        rows.unpersist()
    return BackfillSummary(rows_read, merged.inserted, queues, merged.version, time.monotonic() - started)


def parse_args(argv: list[str] | None, conf: JobsConf) -> tuple[BackfillJob, object]:
    parser = job_parser(PROG, __doc__, conf)
    parser.add_argument("--topic", action="append", default=[], help="a topic to read (repeatable, or a comma list)")
    parser.add_argument("--topic-pattern", metavar="REGEX", help="read every topic whose name matches")
    parser.add_argument("--from", dest="start", default="earliest", help="range start (default: %(default)s)")
    parser.add_argument("--to", dest="end", default="latest", help="range end, exclusive (default: %(default)s)")
    parser.add_argument("--table", required=True, help="the Delta table's path (created when missing)")
    parser.add_argument("--filter", help="a tag expression (TagA || TagB) or, with --filter-type SQL92, a property "
                        "expression; evaluated by the broker")
    parser.add_argument("--filter-type", choices=("TAG", "SQL92"), default="TAG")
    args = parser.parse_args(argv)
    try:
        job = BackfillJob(namesrv=args.namesrv, table=args.table, topics=topics_of(args.topic),
                          topic_pattern=args.topic_pattern, start=parse_bound(args.start, "--from"),
                          end=parse_bound(args.end, "--to"), filter=args.filter, filter_type=args.filter_type,
                          progress_interval_s=conf.progress_interval_s, credentials=job_credentials(args))
        job.source_options()  # every flag checked before anything starts
    except JobError as err:
        parser.error(str(err))
    return job, args


def main(argv: list[str] | None = None) -> int:
    conf = JobsConf.load()
    job, args = parse_args(argv, conf)
    summary = run_in_session("rmq-backfill", args, conf, job.namesrv, job.topics, lambda spark: backfill(spark, job))
    print(summary.render(job), file=sys.stdout)
    return 0


if __name__ == "__main__":
    run_cli(main, prog=PROG)
