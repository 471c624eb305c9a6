"""What every job shares: conf/jobs.conf defaults, the common flags, the fast NameServer check, topic range bounds,
topic creation, and the CLI wrapper that turns a JobError into one line on stderr and exit status 2.

A job is a function taking a SparkSession and a frozen job dataclass (so tests and other programs call it
in-process), plus ``main(argv)`` that parses flags into that dataclass, checks the NameServer *before* paying for
Spark's start, builds a session with jobs/spark.py and prints a summary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NoReturn, TypeVar

from broker.client.blocking import BlockingRemotingClient
from broker.client.protocol import get_route_request
from broker.client.route import TopicRouteData
from broker.common.errors import ConfigError, ConnectorError, JobError, RemotingError
from broker.common.properties import read_properties
from broker.remoting.codes import ResponseCode
from broker.remoting.exchange import parse_address
from broker.remoting.signing import SessionCredentials
from jobs.spark import default_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T = TypeVar("T")
JOBS_CONF = default_conf("jobs.conf")  # conf/jobs.conf of the checkout, or the copy the package ships
JOBS_CONF_ENV = "RMQ_JOBS_CONF"  # another jobs.conf, e.g. one per environment
AUTO_CREATE_TOPIC = "TBW102"  # a topic every broker registers, so a route query always has something to say
# Spark's own console bar fights with ours (jobs/progress.py) for the terminal line.
JOB_SPARK_CONF = {"spark.ui.showConsoleProgress": "false"}


# -- conf/jobs.conf ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobsConf:
    """Defaults for every job's flags (a flag given on the command line wins)."""

    namesrv_addr: str = "127.0.0.1:9876"
    namesrv_timeout_ms: int = 3000
    progress_interval_s: float = 2.0
    ingest_trigger: str = "available-now"
    ingest_interval: str = "10 seconds"
    ingest_starting_offsets: str = "earliest"
    max_offsets_per_trigger: int | None = None
    access_key: str | None = None  # ACL keys every request is signed with (--access-key/--secret-key win)
    secret_key: str | None = field(default=None, repr=False)

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> JobsConf:
        """``path``, else $RMQ_JOBS_CONF, else conf/jobs.conf; a missing default file means built-in defaults."""
        explicit = path or os.environ.get(JOBS_CONF_ENV)
        file = Path(explicit) if explicit else JOBS_CONF
        if not file.exists():
            if explicit:
                raise JobError(f"jobs config {file} does not exist (given by {'argument' if path else JOBS_CONF_ENV})")
            return cls()
        try:
            props = read_properties(file)
        except ConfigError as err:
            raise JobError(f"cannot read jobs config {file}: {err}") from err
        return cls.from_properties(props, str(file))

    @classmethod
    def from_properties(cls, props: Mapping[str, str], where: str = "jobs.conf") -> JobsConf:
        known = {"namesrvAddr", "namesrvTimeoutMs", "progressIntervalSeconds", "ingest.trigger", "ingest.interval",
                 "ingest.startingOffsets", "ingest.maxOffsetsPerTrigger", "accessKey", "secretKey"}
        unknown = sorted(set(props) - known)
        if unknown:
            raise JobError(f"{where}: unknown key(s) {', '.join(unknown)}; known keys: {', '.join(sorted(known))}")
        base = cls()

        def number(key: str, kind: Callable[[str], float], default: float | None) -> float | None:
            text = props.get(key, "").strip()
            if not text:
                return default
            try:
                return kind(text)
            except ValueError:
                raise JobError(f"{where}: {key} must be a number, got {text!r}") from None

        return cls(
            namesrv_addr=props.get("namesrvAddr", base.namesrv_addr).strip() or base.namesrv_addr,
            namesrv_timeout_ms=int(number("namesrvTimeoutMs", int, base.namesrv_timeout_ms)),
            progress_interval_s=float(number("progressIntervalSeconds", float, base.progress_interval_s)),
            ingest_trigger=props.get("ingest.trigger", base.ingest_trigger).strip(),
            ingest_interval=props.get("ingest.interval", base.ingest_interval).strip(),
            ingest_starting_offsets=props.get("ingest.startingOffsets", base.ingest_starting_offsets).strip(),
            max_offsets_per_trigger=number("ingest.maxOffsetsPerTrigger", int, None),  # type: ignore[arg-type]
            access_key=props.get("accessKey", "").strip() or None,
            secret_key=props.get("secretKey", "").strip() or None,
        )


# -- flags shared by the jobs -----------------------------------------------------------------------------------------


def job_parser(prog: str, description: str, conf: JobsConf, *, namesrv: bool = True) -> argparse.ArgumentParser:
    """A parser with the flags every job has: --namesrv, --master and --conf KEY=VALUE (Spark settings)."""
    parser = argparse.ArgumentParser(prog=prog, description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    if namesrv:
        parser.add_argument("--namesrv", default=conf.namesrv_addr, metavar="HOST:PORT[;HOST:PORT]",
                            help="NameServer address(es) (default from conf/jobs.conf: %(default)s)")
    parser.add_argument("--access-key", default=conf.access_key, metavar="KEY",
                        help="ACL: the user every request is signed as (default from conf/jobs.conf's accessKey)")
    parser.add_argument("--secret-key", default=conf.secret_key, metavar="SECRET",
                        help="ACL: that user's secret (conf/jobs.conf's secretKey keeps it off the command line)")
    parser.add_argument("--master", help="Spark master (default: spark-submit's or SPARK_CONF_DIR's, else local[2] "
                                         "from conf/spark-defaults.conf)")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", type=key_value_arg,
                        help="a Spark setting, over conf/spark-defaults.conf (repeatable)")
    return parser


def job_credentials(args: argparse.Namespace) -> SessionCredentials | None:
    """--access-key and --secret-key (or jobs.conf's accessKey and secretKey): both or neither."""
    access_key, secret_key = (args.access_key or "").strip(), (args.secret_key or "").strip()
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        raise JobError("--access-key and --secret-key (accessKey and secretKey in jobs.conf) go together: "
                       f"{'--secret-key' if not secret_key else '--access-key'} is missing")
    return SessionCredentials(access_key, secret_key)


def credential_options(credentials: SessionCredentials | None) -> dict[str, str]:
    """The connector options that sign a job's reads and writes."""
    if credentials is None:
        return {}
    return {"accessKey": credentials.access_key, "secretKey": credentials.secret_key}


def key_value_arg(text: str) -> str:
    if "=" not in text or not text.partition("=")[0].strip():
        raise argparse.ArgumentTypeError(f"expects KEY=VALUE, got {text!r}")
    return text


def key_value_pairs(pairs: Iterable[str], flag: str = "--conf") -> dict[str, str]:
    """Repeated KEY=VALUE flags as a dict (later wins)."""
    conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise JobError(f"{flag} expects KEY=VALUE, got {pair!r}")
        conf[key.strip()] = value.strip()
    return conf


def session_for(app_name: str, args: argparse.Namespace) -> SparkSession:
    """The job's SparkSession (jobs/spark.py: spark-defaults.conf, Delta, rmq) with --master and --conf applied."""
    from jobs.spark import build_session

    return build_session(app_name, master=args.master, conf={**JOB_SPARK_CONF, **key_value_pairs(args.conf)})


def run_in_session(app_name: str, args: argparse.Namespace, conf: JobsConf, namesrv: str, topics: Iterable[str],
                   work: Callable[[SparkSession], T]) -> T:
    """A job's CLI body: the NameServer and topics checked first (fast, before Spark starts), then ``work`` in the
    job's session, which is stopped however ``work`` ends."""
    check_namesrv(namesrv, topics, timeout_ms=conf.namesrv_timeout_ms)
    spark = session_for(app_name, args)
    try:
        return work(spark)
    finally:
        spark.stop()


def topics_of(values: Sequence[str]) -> tuple[str, ...]:
    """--topic may be repeated and each may be a comma list."""
    topics = tuple(t.strip() for value in values for t in value.split(",") if t.strip())
    if len(set(topics)) != len(topics):
        raise JobError(f"--topic names a topic twice: {', '.join(topics)}")
    return topics


def subscription_options(topics: Sequence[str], pattern: str | None) -> dict[str, str]:
    """The source's topic / topics / topicPattern option from --topic and --topic-pattern."""
    if bool(topics) == bool(pattern):
        raise JobError("give the topics to read: --topic NAME (repeatable, or a comma list) or --topic-pattern REGEX, "
                       "not both")
    if pattern:
        try:
            re.compile(pattern)
        except re.error as err:
            raise JobError(f"--topic-pattern {pattern!r} is not a regular expression: {err}") from None
        return {"topicPattern": pattern}
    return {"topic": topics[0]} if len(topics) == 1 else {"topics": ",".join(topics)}


# -- range bounds (--from / --to) -------------------------------------------------------------------------------------

_RELATIVE = re.compile(r"^-(\d+)\s*([smhd])$")
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


@dataclass(frozen=True, slots=True)
class Bound:
    """One end of a topic range: earliest/latest, a time (epoch ms), or per-queue offsets (the source's JSON)."""

    kind: Literal["earliest", "latest", "timestamp", "offsets"]
    timestamp_ms: int | None = None
    offsets_json: str | None = None

    def describe(self) -> str:
        if self.kind == "timestamp":
            return datetime.fromtimestamp(self.timestamp_ms / 1000, UTC).isoformat(timespec="milliseconds")
        return self.offsets_json if self.kind == "offsets" else self.kind


def parse_bound(text: str, flag: str, *, now_ms: int | None = None) -> Bound:
    """``earliest`` | ``latest`` | ``{"topic": {"broker": {"queueId": offset}}}`` | an ISO 8601 time (UTC unless it
    carries an offset) | epoch milliseconds | a relative time ``-15m``, ``-2h``, ``-1d`` (before now)."""
    value = text.strip()
    if value in ("earliest", "latest"):
        return Bound(value)
    if value.startswith("{"):
        return Bound("offsets", offsets_json=_offsets_json(value, flag))
    if value.isdigit():
        return Bound("timestamp", timestamp_ms=int(value))
    relative = _RELATIVE.match(value)
    if relative:
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        return Bound("timestamp", timestamp_ms=now - int(relative[1]) * _UNIT_MS[relative[2]])
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise JobError(f"{flag} {text!r} is none of: earliest, latest, an offsets JSON, an ISO 8601 time "
                       f"(2024-05-01T12:00:00), epoch milliseconds, a relative time (-15m, -2h, -1d)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return Bound("timestamp", timestamp_ms=int(moment.timestamp() * 1000))


def _offsets_json(text: str, flag: str) -> str:
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as err:
        raise JobError(f"{flag}: not valid JSON ({err}): {text!r}") from None
    ok = isinstance(spec, dict) and all(
        isinstance(brokers, dict) and all(
            isinstance(queues, dict) and all(isinstance(off, int) and not isinstance(off, bool)
                                             for off in queues.values())
            for queues in brokers.values())
        for brokers in spec.values())
    if not ok:
        raise JobError(f'{flag}: offsets must look like {{"topic": {{"brokerName": {{"queueId": offset}}}}}}, '
                       f"got {text!r}")
    return json.dumps(spec, separators=(",", ":"))


def range_options(start: Bound, end: Bound) -> dict[str, str]:
    """The source's startingOffsets / startingTimestamp / endingOffsets / endingTimestamp for a batch range."""
    if start.kind == "latest":
        raise JobError("--from latest reads nothing; give earliest, a time or offsets")
    if end.kind == "earliest":
        raise JobError("--to earliest reads nothing; give latest, a time or offsets")
    if start.kind == end.kind == "timestamp" and start.timestamp_ms >= end.timestamp_ms:
        raise JobError(f"--from {start.describe()} is not before --to {end.describe()}")
    options: dict[str, str] = {}
    if start.kind == "timestamp":
        options["startingTimestamp"] = str(start.timestamp_ms)
    else:
        options["startingOffsets"] = start.offsets_json or start.kind
    if end.kind == "timestamp":
        options["endingTimestamp"] = str(end.timestamp_ms)
    else:
        options["endingOffsets"] = end.offsets_json or end.kind
    return options


# -- the NameServer ---------------------------------------------------------------------------------------------------


def check_namesrv(namesrv_addr: str, topics: Iterable[str] = (), *, timeout_ms: int = 3000) -> None:
    """Fail in seconds, before Spark starts, when no NameServer answers or a topic has no route. Each address is
    tried in turn; the first that answers decides about the topics."""
    addrs = [a.strip() for a in namesrv_addr.split(";") if a.strip()]
    if not addrs:
        raise JobError("--namesrv is empty; give HOST:PORT (several separated by ';')")
    failures: list[str] = []
    for addr in addrs:
        try:
            parse_address(addr)
            for topic in [AUTO_CREATE_TOPIC, *topics]:
                code = _route_code(addr, topic, timeout_ms)
                if topic != AUTO_CREATE_TOPIC and code == ResponseCode.TOPIC_NOT_EXIST:
                    raise JobError(f"topic {topic} does not exist (NameServer {addr} has no route for it); create it "
                                   f"with: mqadmin updateTopic -n {addr} -c DefaultCluster -t {topic}")
            return
        except RemotingError as err:
            failures.append(f"{addr}: {err}")
    raise JobError(f"no NameServer answers at {namesrv_addr} ({'; '.join(failures)}). Start one "
                   f"(mqnamesrv -c conf/namesrv.conf) or pass --namesrv HOST:PORT")


def _route_code(addr: str, topic: str, timeout_ms: int) -> int:
    with BlockingRemotingClient(addr, connect_timeout_ms=timeout_ms) as client:
        return client.invoke(get_route_request(topic), timeout_ms).code


def topic_route(namesrv_addr: str, topic: str, timeout_ms: int = 3000) -> TopicRouteData | None:
    """The topic's route from the first NameServer that has one, else None."""
    for addr in (a for a in namesrv_addr.split(";") if a.strip()):
        with BlockingRemotingClient(addr, connect_timeout_ms=timeout_ms) as client:
            response = client.invoke(get_route_request(topic), timeout_ms)
        if response.code == ResponseCode.SUCCESS and response.body:
            return TopicRouteData.decode(response.body)
    return None


def create_topic(namesrv_addr: str, topic: str, queues: int = 4, *, cluster: str = "DefaultCluster",
                 timeout_s: float = 10.0) -> TopicRouteData:
    """``mqadmin updateTopic -c cluster -t topic -r queues -w queues``, then wait until the route shows it."""
    from broker.common.topic import TopicConfig
    from broker.tools.admin import MQAdminExt

    async def update() -> None:
        async with MQAdminExt(namesrv_addr) as admin:
            masters = await admin.master_addrs_by_cluster(cluster)
            if not masters:
                raise JobError(f"cluster {cluster} has no master broker registered at {namesrv_addr}")
            for addr in masters:
                await admin.create_and_update_topic_config(addr, TopicConfig(topic, queues, queues))

    asyncio.run(update())
    deadline = time.monotonic() + timeout_s
    while (route := topic_route(namesrv_addr, topic)) is None or not route.queue_datas:
        if time.monotonic() > deadline:
            raise JobError(f"topic {topic} created but no route at {namesrv_addr} after {timeout_s}s")
        time.sleep(0.1)
    return route


# -- the command line -------------------------------------------------------------------------------------------------


def run_cli(main: Callable[[list[str] | None], int | None], *, prog: str, argv: list[str] | None = None) -> None:
    """Run ``main``; a JobError, or a connector error raised inside Spark, is one line on stderr and exit status 2
    instead of a traceback."""
    signal.signal(signal.SIGTERM, _interrupt)  # a scheduler's stop: the same orderly end as Ctrl-C
    try:
        code = main(argv)
    except JobError as err:
        _fail(prog, str(err))
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as err:
        reason = connector_error(err)
        if reason is None:
            raise
        _fail(prog, reason)
    sys.exit(code or 0)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _fail(prog: str, reason: str) -> NoReturn:
    print(f"{prog}: error: {reason}", file=sys.stderr)
    sys.exit(2)


_CONNECTOR_ERROR = re.compile(r"broker\.common\.errors\.(\w+): (.+)")


def connector_error(err: BaseException) -> str | None:
    """The message of a connector error (broker.common.errors.*) that Spark carried back from a Python worker inside
    its own exception text, or None for anything else."""
    if isinstance(err, ConnectorError):
        return str(err)
    found = _CONNECTOR_ERROR.findall(str(err))
    return f"{found[-1][0]}: {found[-1][1].strip()}" if found else None


def format_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A plain text table (jobs print summaries where a terminal or a CI log shows them)."""
    cells = [[str(h) for h in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
