"""Ingest: topics streamed into a Delta table with a checkpoint, exactly once into the table.

Two triggers: ``available-now`` (the default; for scheduled runs: read everything up to the offsets seen at start,
in micro-batches of at most --max-offsets-per-trigger, then stop) and ``processing-time`` (Spark's
Trigger.ProcessingTime: a micro-batch every --interval until stopped with Ctrl-C, SIGTERM or --timeout). The older
name ``continuous`` still works, with a note on stderr: it never meant Spark's continuous processing trigger.

Exactly once: Spark's checkpoint holds the source offsets of every micro-batch, and each batch is written by
foreachBatch with Delta's idempotent-write options txnAppId (this query's identity, derived from the checkpoint
location unless --app-id is given) and txnVersion (the batch id), recorded in the same Delta commit as the rows. A
batch that Spark runs again after a crash (its rows committed to Delta, its end not yet in the checkpoint) is
skipped by Delta. With --merge each batch is MERGEd on (topic, brokerName, queueId, queueOffset) instead of
appended, so the table may also receive backfills of overlapping ranges without duplicates.

Examples:
    python -m jobs.ingest --topic Orders --table ./data/delta/orders --checkpoint ./data/checkpoints/orders
    python -m jobs.ingest --topic A,B --table t --checkpoint c --trigger processing-time --interval '5 seconds'
    python -m jobs.ingest --topic-pattern 'Orders.*' --table t --checkpoint c --from -1d --merge

--from applies to the first run only (later runs resume from the checkpoint): earliest | latest | an ISO 8601 time |
epoch milliseconds | -15m, -2h, -1d | per-queue offsets as JSON {"topic": {"brokerName": {"queueId": offset}}}.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from broker.common.errors import JobError
from broker.remoting.signing import SessionCredentials
from connector.source_metrics import latest_offsets
from jobs import lake
from jobs.common import (
    Bound,
    JobsConf,
    credential_options,
    format_table,
    job_credentials,
    job_parser,
    parse_bound,
    run_cli,
    run_in_session,
    subscription_options,
    topics_of,
)
from jobs.progress import StageProgress, duration, eta_seconds

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

PROG = "python -m jobs.ingest"
TRIGGERS = ("available-now", "processing-time")
# Older names still accepted, each with a one-line note on stderr, so scripts and jobs.conf files keep working.
RENAMED_TRIGGERS = {"continuous": "processing-time"}


@dataclass(frozen=True, slots=True)
class IngestJob:
    namesrv: str
    table: str
    checkpoint: str
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    trigger: Literal["available-now", "processing-time"] = "available-now"
    interval: str = "10 seconds"
    start: Bound = field(default_factory=lambda: Bound("earliest"))
    max_offsets_per_trigger: int | None = None
    filter: str | None = None
    filter_type: str = "TAG"
    consumer_group: str | None = None
    merge: bool = False
    app_id: str | None = None
    timeout_s: float | None = None
    progress_interval_s: float = 2.0
    credentials: SessionCredentials | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "trigger", trigger_named(self.trigger))

    def source_options(self) -> dict[str, str]:
        options = {"namesrvAddr": self.namesrv, **subscription_options(self.topics, self.topic_pattern),
                   **credential_options(self.credentials)}
        if self.start.kind == "timestamp":
            options["startingTimestamp"] = str(self.start.timestamp_ms)
        else:
            options["startingOffsets"] = self.start.offsets_json or self.start.kind
        if self.max_offsets_per_trigger is not None:
            options["maxOffsetsPerTrigger"] = str(self.max_offsets_per_trigger)
        if self.filter:
            options.update(filter=self.filter, filterType=self.filter_type)
        if self.consumer_group:
            options["consumerGroup"] = self.consumer_group
        return options

    def txn_app_id(self) -> str:
        """The query's identity for Delta's idempotent writes: stable across restarts from the same checkpoint."""
        if self.app_id:
            return self.app_id
        where = self.checkpoint if "://" in self.checkpoint else os.path.abspath(self.checkpoint)
        return "rmq-ingest-" + hashlib.sha256(where.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class IngestSummary:
    batches: int
    rows: int
    end_offsets: dict[str, Any]
    table_version: int
    seconds: float

    def render(self, job: IngestJob) -> str:
        head = (f"ingest into {job.table}: {self.batches} micro-batch(es), {self.rows} rows, table version "
                f"{self.table_version}, {self.seconds:.1f} s (checkpoint {job.checkpoint})")
        queues = [(topic, broker, queue, offset) for topic, brokers in sorted(self.end_offsets.items())
                  for broker, queue_offsets in sorted(brokers.items())
                  for queue, offset in sorted(queue_offsets.items(), key=lambda kv: int(kv[0]))]
        if not queues:
            return head
        return head + "\n" + format_table(("topic", "broker", "queue", "next offset"), queues)


def trigger_named(name: str) -> str:
    """The trigger called ``name`` (a renamed one with a note on stderr); a JobError naming the choices otherwise."""
    if name in RENAMED_TRIGGERS:
        new = RENAMED_TRIGGERS[name]
        print(f"{PROG}: --trigger {name} is deprecated, use --trigger {new} (micro-batches every --interval; Spark's "
              f"continuous trigger is something else)", file=sys.stderr)
        return new
    if name not in TRIGGERS:
        raise JobError(f"--trigger must be one of {', '.join(TRIGGERS)}, got {name!r}")
    return name


def start_ingest(spark: SparkSession, job: IngestJob) -> StreamingQuery:
    """Start the streaming query (the table is created first, so it exists even before any row arrives)."""
    reader = spark.readStream.format("rmq")
    for key, value in job.source_options().items():
        reader = reader.option(key, value)
    stream = lake.with_store_date(reader.load())
    lake.ensure_table(spark, job.table, stream.schema)
    app_id = job.txn_app_id()

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        if job.merge:
            batch = batch.persist()
            try:
                dates = [r[0] for r in batch.select(lake.PARTITION_COLUMN).distinct().collect()]
                if dates:
                    lake.merge_new_rows(batch.sparkSession, job.table, batch, dates)
            finally:
                batch.unpersist()
        else:
            lake.append_batch(batch, job.table, app_id, batch_id)

    writer = (stream.writeStream.queryName(app_id).foreachBatch(write_batch)
              .option("checkpointLocation", job.checkpoint))
    if job.trigger == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=job.interval)
    return writer.start()


def run_ingest(spark: SparkSession, job: IngestJob, *, out: Any = None) -> IngestSummary:
    """Run the query to its end (available-now), or until --timeout / Ctrl-C (processing-time); print one line per
    micro-batch to ``out`` (stderr by default)."""
    out = out or sys.stderr
    started = time.monotonic()
    query = start_ingest(spark, job)
    seen: dict[int, dict[str, Any]] = {}
    eta_from = started if job.trigger == "available-now" else None  # a run with an end: its ETA in messages
    with StageProgress(spark.sparkContext.statusTracker(), "ingest", interval_s=job.progress_interval_s) as progress:
        try:
            while query.isActive:
                query.awaitTermination(job.progress_interval_s)
                _report(query, seen, progress, out, eta_from)
                if job.timeout_s is not None and time.monotonic() - started > job.timeout_s and query.isActive:
                    query.stop()
        except KeyboardInterrupt:
            query.stop()
        _report(query, seen, progress, out, eta_from)
    query.awaitTermination()  # raises the query's failure, if any
    last = seen[max(seen)] if seen else None
    end_offsets = _source_offsets(last, "endOffset") if last else {}
    return IngestSummary(len(seen), sum(p["numInputRows"] for p in seen.values()), end_offsets,
                         lake.latest_version(spark, job.table), time.monotonic() - started)


def _report(query: StreamingQuery, seen: dict[int, dict[str, Any]], progress: StageProgress, out: Any,
            eta_from: float | None) -> None:
    """A line per new micro-batch: rows, rows/s, messages behind the latest offsets (under available-now, the run's
    target: what is left to read) and, from that and the rows read since ``eta_from``, an ETA."""
    for batch in query.recentProgress:
        batch_id = batch["batchId"]
        if batch_id in seen or not batch.get("sources"):
            continue
        seen[batch_id] = batch
        behind = _behind(batch)
        lag = f", {behind} behind" if behind is not None else ""
        if behind and eta_from is not None:
            done = sum(p["numInputRows"] for p in seen.values())
            eta = eta_seconds(done, done + behind, time.monotonic() - eta_from)
            lag += f", ETA {duration(eta)}" if eta is not None else ""
        progress.note(f"ingest: batch {batch_id}: {batch['numInputRows']} rows "
                      f"({batch.get('processedRowsPerSecond') or 0:.0f} rows/s){lag}", out)


def _source_offsets(progress: dict[str, Any], key: str) -> dict[str, Any]:
    value = progress["sources"][0].get(key)
    if not value:
        return {}
    return json.loads(value) if isinstance(value, str) else value


def _behind(progress: dict[str, Any]) -> int | None:
    """Messages between the batch's end and the newest offsets the source reported (reportLatestOffset)."""
    try:
        end, latest = _source_offsets(progress, "endOffset"), latest_offsets(progress["sources"][0])
    except (ValueError, KeyError, IndexError):
        return None
    if not latest:
        return None
    return sum(max(0, int(off) - int(end.get(t, {}).get(b, {}).get(q, 0)))
               for t, brokers in latest.items() for b, queues in brokers.items() for q, off in queues.items())


def parse_args(argv: list[str] | None, conf: JobsConf) -> tuple[IngestJob, object]:
    parser = job_parser(PROG, __doc__, conf)
    parser.add_argument("--topic", action="append", default=[], help="a topic to read (repeatable, or a comma list)")
    parser.add_argument("--topic-pattern", metavar="REGEX", help="read every topic whose name matches")
    parser.add_argument("--table", required=True, help="the Delta table's path (created when missing)")
    parser.add_argument("--checkpoint", required=True, help="the query's checkpoint directory")
    parser.add_argument("--trigger", default=conf.ingest_trigger, metavar="{" + ",".join(TRIGGERS) + "}",
                        help="available-now: up to now, then stop; processing-time: a micro-batch every --interval "
                        "until stopped (default: %(default)s)")
    parser.add_argument("--interval", default=conf.ingest_interval,
                        help="micro-batch interval of --trigger processing-time (default: %(default)s)")
    parser.add_argument("--from", dest="start", default=conf.ingest_starting_offsets,
                        help="where a new query starts (default: %(default)s)")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=conf.max_offsets_per_trigger,
                        metavar="N", help="messages per micro-batch at most (default: no limit)")
    parser.add_argument("--filter", help="a tag expression (TagA || TagB), or a SQL92 one with --filter-type SQL92")
    parser.add_argument("--filter-type", choices=("TAG", "SQL92"), default="TAG")
    parser.add_argument("--consumer-group", help="commit processed offsets to this group on the broker, so "
                        "mqadmin consumerProgress shows the query's lag (the checkpoint stays the truth)")
    parser.add_argument("--merge", action="store_true", help="MERGE each batch on the message key instead of "
                        "appending (when backfills write to the same table)")
    parser.add_argument("--app-id", help="Delta txnAppId (default: derived from the checkpoint location)")
    parser.add_argument("--timeout", type=float, metavar="SECONDS", help="stop a processing-time run after this long")
    args = parser.parse_args(argv)
    try:
        if args.max_offsets_per_trigger is not None and args.max_offsets_per_trigger < 1:
            raise JobError(f"--max-offsets-per-trigger must be >= 1, got {args.max_offsets_per_trigger}")
        if args.timeout is not None and args.timeout <= 0:
            raise JobError(f"--timeout must be > 0 seconds, got {args.timeout}")
        job = IngestJob(namesrv=args.namesrv, table=args.table, checkpoint=args.checkpoint,
                        topics=topics_of(args.topic), topic_pattern=args.topic_pattern, trigger=args.trigger,
                        interval=args.interval, start=parse_bound(args.start, "--from"),
                        max_offsets_per_trigger=args.max_offsets_per_trigger, filter=args.filter,
                        filter_type=args.filter_type, consumer_group=args.consumer_group, merge=args.merge,
                        app_id=args.app_id, timeout_s=args.timeout, progress_interval_s=conf.progress_interval_s,
                        credentials=job_credentials(args))
        job.source_options()
    except JobError as err:
        parser.error(str(err))
    return job, args


def main(argv: list[str] | None = None) -> int:
    conf = JobsConf.load()
    job, args = parse_args(argv, conf)
    summary = run_in_session("rmq-ingest", args, conf, job.namesrv, job.topics, lambda spark: run_ingest(spark, job))
    print(summary.render(job))
    return 0


if __name__ == "__main__":
    run_cli(main, prog=PROG)
