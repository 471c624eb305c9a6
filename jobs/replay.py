"""Replay: rows of a Delta table written by the jobs, or a version or time range of it, sent back into a topic through
the transactional sink (``df.write.format("rmq")``: all of the job's rows become visible, or none).

What is sent:
  (default)                          the table as it is now
  --version N | --as-of TIME         the table as it was (Delta time travel)
  --from-version A [--to-version B]  the rows versions A..B added (Delta's change data feed, on in tables the jobs
  --from-time T [--to-time U]        create), e.g. what one ingest run brought in
  --where EXPR                       only rows matching a Spark SQL predicate (tags = 'paid', storeDate >= '2024-05-01')

Each message keeps its body, keys, tags and user properties (the broker's and producer's system properties, such as
UNIQ_KEY or MIN_OFFSET, are left for the new send to set). Order is kept per source queue: rows of one (topic,
brokerName, queueId) are sent in queueOffset order with one sharding key, so they land in one queue of the target,
in order (--no-keep-order spreads them freely).

Examples:
    python -m jobs.replay --table ./data/delta/orders --topic OrdersReplay
    python -m jobs.replay --table ./data/delta/orders --topic OrdersFix --from-version 3 --to-version 5
    python -m jobs.replay --table ./data/delta/orders --topic Paid --as-of 2024-05-01T12:00 --where "tags = 'paid'"
"""

from __future__ import annotations

import argparse
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from broker.common.errors import JobError
from broker.remoting.signing import SessionCredentials
from connector.columns import SYSTEM_PROPERTIES
from jobs import lake
from jobs.common import (
    JobsConf,
    credential_options,
    job_credentials,
    job_parser,
    key_value_arg,
    key_value_pairs,
    parse_bound,
    run_cli,
    run_in_session,
)
from jobs.progress import StageProgress

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PROG = "python -m jobs.replay"
CDF_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")


@dataclass(frozen=True, slots=True)
class ReplayJob:
    namesrv: str
    table: str
    topic: str
    version: int | None = None
    as_of: str | None = None  # a timestamp Delta understands ("2024-05-01 12:00:00")
    from_version: int | None = None
    to_version: int | None = None
    from_time: str | None = None
    to_time: str | None = None
    where: str | None = None
    sink_id: str | None = None
    keep_order: bool = True
    sink_options: dict[str, str] = field(default_factory=dict)
    credentials: SessionCredentials | None = None
    progress_interval_s: float = 2.0

    def __post_init__(self) -> None:
        snapshot = self.version is not None or self.as_of is not None
        versions = self.from_version is not None or self.to_version is not None
        times = self.from_time is not None or self.to_time is not None
        if sum((snapshot, versions, times)) > 1:
            raise JobError("choose one selection: --version/--as-of (a snapshot), --from-version/--to-version or "
                           "--from-time/--to-time (rows added in a range)")
        if self.version is not None and self.as_of is not None:
            raise JobError("--version and --as-of both pick a snapshot; give one")
        if versions and self.from_version is None:
            raise JobError("--to-version needs --from-version")
        if times and self.from_time is None:
            raise JobError("--to-time needs --from-time")
        for name, value in (("--version", self.version), ("--from-version", self.from_version),
                            ("--to-version", self.to_version)):
            if value is not None and value < 0:
                raise JobError(f"{name} must be >= 0, got {value}")
        if self.from_version is not None and self.to_version is not None and self.to_version < self.from_version:
            raise JobError(f"--to-version {self.to_version} is before --from-version {self.from_version}")

    def effective_sink_id(self) -> str:
        """--sink-id, else one per target topic (sink ids allow [A-Za-z0-9_-]; topics also % and |), so repeated
        replays into a topic share the sink's resolver process."""
        return self.sink_id or ("replay-" + re.sub(r"[^A-Za-z0-9_-]", "_", self.topic))[:64]


@dataclass(frozen=True, slots=True)
class ReplaySummary:
    rows: int
    selection: str
    seconds: float

    def render(self, job: ReplayJob) -> str:
        return (f"replay {job.table} ({self.selection}) into topic {job.topic}: {self.rows} messages sent and "
                f"committed, {self.seconds:.1f} s")


def select_rows(spark: SparkSession, job: ReplayJob) -> tuple[DataFrame, str]:
    """The table rows to send, and a description of the selection."""
    from pyspark.sql import functions as F

    if not lake.is_delta_table(spark, job.table):
        raise JobError(f"{job.table} is not a Delta table")
    reader = spark.read.format("delta")
    if job.version is not None:
        reader, what = reader.option("versionAsOf", job.version), f"version {job.version}"
    elif job.as_of is not None:
        reader, what = reader.option("timestampAsOf", job.as_of), f"as of {job.as_of}"
    elif job.from_version is not None or job.from_time is not None:
        reader = reader.option("readChangeFeed", "true")
        if job.from_version is not None:
            reader = reader.option("startingVersion", job.from_version)
            if job.to_version is not None:
                reader = reader.option("endingVersion", job.to_version)
            what = f"rows added by versions {job.from_version}..{'' if job.to_version is None else job.to_version}"
        else:
            reader = reader.option("startingTimestamp", job.from_time)
            if job.to_time is not None:
                reader = reader.option("endingTimestamp", job.to_time)
            what = f"rows added from {job.from_time} to {job.to_time or 'now'}"
    else:
        what = "latest version"
    rows = reader.load(job.table)
    if "_change_type" in rows.columns:
        rows = rows.where(F.col("_change_type").isin("insert", "update_postimage")).drop(*CDF_COLUMNS)
    if job.where:
        rows = rows.where(job.where)
        what += f", where {job.where}"
    return rows, what


def to_messages(rows: DataFrame, *, keep_order: bool) -> DataFrame:
    """The sink's input columns: body, tags, keys, user properties, and a sharding key per source queue."""
    from pyspark.sql import functions as F

    properties = F.map_filter("properties", lambda k, _: ~k.isin(*SYSTEM_PROPERTIES))
    columns = [F.col("body"), F.col("tags"), F.col("keys"), properties.alias("properties")]
    if not keep_order:
        return rows.select(*columns)
    sharding = F.concat_ws("/", "topic", "brokerName", F.col("queueId").cast("string"))
    return (rows.withColumn("shardingKey", sharding).repartition("shardingKey")
            .sortWithinPartitions("shardingKey", "queueOffset").select(*columns, "shardingKey"))


def replay(spark: SparkSession, job: ReplayJob) -> ReplaySummary:
    started = time.monotonic()
    rows, what = select_rows(spark, job)
    messages = to_messages(rows, keep_order=job.keep_order).persist()
    try:
        with StageProgress(spark.sparkContext.statusTracker(), "replay", interval_s=job.progress_interval_s):
            count = messages.count()
            if count:
                writer = (messages.write.format("rmq").mode("append").option("namesrvAddr", job.namesrv)
                          .option("topic", job.topic).option("sinkId", job.effective_sink_id()))
                for key, value in {**job.sink_options, **credential_options(job.credentials)}.items():
                    writer = writer.option(key, value)
                writer.save()
    finally:
        messages.unpersist()
    return ReplaySummary(count, what, time.monotonic() - started)


def _delta_time(text: str, flag: str) -> str:
    """A --as-of / --from-time / --to-time value as the UTC timestamp string Delta's options take."""
    bound = parse_bound(text, flag)
    if bound.kind != "timestamp":
        raise JobError(f"{flag} must be a time (ISO 8601, epoch ms or -2h), got {text!r}")
    moment = datetime.fromtimestamp(bound.timestamp_ms / 1000, UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def parse_args(argv: list[str] | None, conf: JobsConf) -> tuple[ReplayJob, argparse.Namespace]:
    parser = job_parser(PROG, __doc__, conf)
    parser.add_argument("--table", required=True, help="the Delta table's path")
    parser.add_argument("--topic", required=True, help="the topic to send to (it must exist)")
    parser.add_argument("--version", type=int, help="the table as of this version")
    parser.add_argument("--as-of", help="the table as of this time")
    parser.add_argument("--from-version", type=int, help="rows added from this version on (change data feed)")
    parser.add_argument("--to-version", type=int, help="... up to this version, inclusive")
    parser.add_argument("--from-time", help="rows added from this time on (change data feed)")
    parser.add_argument("--to-time", help="... up to this time, inclusive")
    parser.add_argument("--where", help="a Spark SQL predicate on the table's columns")
    parser.add_argument("--sink-id", help="the transactional sink's identity (default: replay-TOPIC)")
    parser.add_argument("--no-keep-order", dest="keep_order", action="store_false",
                        help="do not keep the per-queue order (spread rows over the target's queues)")
    parser.add_argument("--sink-option", action="append", default=[], metavar="KEY=VALUE", type=key_value_arg,
                        help="another format('rmq') sink option (repeatable)")
    args = parser.parse_args(argv)
    try:
        job = ReplayJob(namesrv=args.namesrv, table=args.table, topic=args.topic, version=args.version,
                        as_of=_delta_time(args.as_of, "--as-of") if args.as_of else None,
                        from_version=args.from_version, to_version=args.to_version,
                        from_time=_delta_time(args.from_time, "--from-time") if args.from_time else None,
                        to_time=_delta_time(args.to_time, "--to-time") if args.to_time else None,
                        where=args.where, sink_id=args.sink_id, keep_order=args.keep_order,
                        sink_options=_sink_options(args.sink_option), credentials=job_credentials(args),
                        progress_interval_s=conf.progress_interval_s)
    except JobError as err:
        parser.error(str(err))
    return job, args


def _sink_options(pairs: list[str]) -> dict[str, str]:
    options = key_value_pairs(pairs, "--sink-option")
    reserved = {k for k in options if k.lower() in ("namesrvaddr", "topic", "sinkid")}
    if reserved:
        raise JobError(f"--sink-option {', '.join(sorted(reserved))}: use --namesrv, --topic and --sink-id")
    return options


def main(argv: list[str] | None = None) -> int:
    conf = JobsConf.load()
    job, args = parse_args(argv, conf)
    summary = run_in_session("rmq-replay", args, conf, job.namesrv, [job.topic], lambda spark: replay(spark, job))
    print(summary.render(job))
    return 0


if __name__ == "__main__":
    run_cli(main, prog=PROG)
