"""The sink's resolver: answers the broker's CHECK_TRANSACTION_STATE for the sink's half messages from its decision log.

Why a process of its own: PySpark runs the driver side of a write (commit/abort) in short-lived Python workers, and
the broker asks about open half messages whenever it likes (after their immunity time, every
transactionCheckInterval), possibly while no driver runs at all. The resolver heartbeats as a producer of the sink's
group ``RMQ_SINK_<sinkId>``, so the broker sends it those checks; it answers COMMIT for the winners of a decided batch,
ROLLBACK for losers (and for aborted batch jobs, and streaming batches older than a decided one), UNKNOWN while a
batch is undecided (connector/decisions.py ``DecisionState.resolve``; the process: connector/resolver_service.py).
With ``--trace-topic`` (the sink's ``enableMsgTrace``) each answer is traced as a Java producer traces its answers
to checks: an EndTransaction record with fromTransactionCheck true, sent to that topic with the sink's keys.

Two ways to run it:

- **Started by the sink** (one per sinkId and host): it holds an exclusive flock on ``<dir>/<sinkId>.lock`` (dir:
  ``resolverDir``, default ~/.cache/rmq/sink) and writes ``<dir>/<sinkId>.pid`` ("<pid> ready") once it heartbeats.
  The sink starts one, detached (its own session: it outlives the driver), when none holds the lock and none is
  starting: a batch job with the topic option when Spark plans it (``start_resolver``, not waiting), else the
  commit, which waits until it is ready. It exits once **settled** (connector/settle.py): every batch it saw
  decided or aborted is either ended by its driver (an "ended" record: a batch job whose driver ended every half
  itself, all sent by first attempts; the resolver then exits within a poll) or old enough that the broker has
  checked whatever was left of it (``--check-immunity-s`` plus two check rounds), no check came for two rounds,
  and a streaming query's next decision is overdue (twice the longest gap between its decisions). A driver that
  leaves halves to the check makes sure a resolver is ready afterwards (``settle_commit``). ``--idle-timeout-s``
  stays an upper bound (exit after that long without a check or a new decision). On exit it removes its pid and
  lock files.
- **As a service** (``--service``; for drivers in containers, Kubernetes or YARN cluster mode, whose host goes away
  with them): long-lived, for the sinks named with ``--sink-id`` or every sink of the decision topic
  (``--all-sinks``), with a pid file (``--pid-file``, default ``<dir>/resolver.pid``; a second service on the same
  pid file refuses to start), a rotating log file (``<log-dir>/<pid file's name>.log``, ``--log-dir`` default
  ``<dir>``), no idle timeout unless given; SIGTERM stops it and removes its pid files.

Examples::

    python -m connector.resolver --namesrv 127.0.0.1:9876 --sink-id my_sink [--decision-topic RMQ_SINK_DECISIONS]
        [--idle-timeout-s 900] [--check-immunity-s 120] [--dir ~/.cache/rmq/sink] [--topic T ...]
        [--trace-topic RMQ_SYS_TRACE_TOPIC]
    python -m connector.resolver --service --namesrv 127.0.0.1:9876 --all-sinks [--sink-id S ...]
        [--pid-file ~/.cache/rmq/sink/resolver.pid] [--log-dir DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import logging
import logging.handlers
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from broker.common.errors import ConnectorError
from broker.remoting.signing import SessionCredentials
from connector.options import (
    DEFAULT_CHECK_IMMUNITY_S,
    DEFAULT_DECISION_TOPIC,
    DEFAULT_RESOLVER_IDLE_S,
    SINK_ID_PATTERN,
    SinkOptions,
)
from connector.resolver_service import ResolverService, ServiceSpec, sink_paths

if TYPE_CHECKING:
    from connector.decisions import DecisionLog
    from connector.sink_task import TaskCommit

log = logging.getLogger("connector.resolver")

DEFAULT_DIR = Path.home() / ".cache" / "rmq" / "sink"
READY_TIMEOUT_S = 60.0
STARTING = "0 starting"  # the pid file's text from start_resolver until the resolver says "<pid> ready"
SERVICE_PID_FILE = "resolver.pid"  # in --dir, unless --pid-file says otherwise
LOG_MAX_BYTES = 10 * 1024 * 1024  # the service's log file rolls over at this size ...
LOG_BACKUPS = 5  # ... keeping this many old ones (<name>.log.1 ... .5)
# The keys a resolver signs its requests with (a sink's accessKey/secretKey; set them by hand for a service).
ACCESS_KEY_ENV, SECRET_KEY_ENV = "RMQ_ACCESS_KEY", "RMQ_SECRET_KEY"


def resolver_dir(opts_dir: str | None) -> Path:
    path = Path(opts_dir).expanduser() if opts_dir else DEFAULT_DIR
    path.mkdir(parents=True, exist_ok=True)
    return path


def resolver_pid(directory: Path, sink_id: str) -> int | None:
    """The pid of the live, ready resolver of ``sink_id`` on this host, else None."""
    lock, pid_file, _ = sink_paths(directory, sink_id)
    if not _lock_held(lock):
        return None
    try:
        pid_text, _, state = pid_file.read_text().partition(" ")
    except FileNotFoundError:
        return None
    return int(pid_text) if state.strip() == "ready" and pid_text.isdigit() else None


def start_resolver(opts: SinkOptions, topics: list[str] | None = None) -> bool:
    """Start the resolver of ``opts.sink_id`` on this host, detached, unless one is alive or starting; do not wait.
    The batch writer calls this when Spark plans the job, so the resolver's start-up (a Python process, a second or
    two) overlaps the tasks instead of delaying the commit. True when a process was started."""
    directory = resolver_dir(opts.resolver_dir)
    lock, pid_file, log_file = sink_paths(directory, opts.sink_id)
    if _lock_held(lock) or _starting(pid_file):
        return False
    argv = [sys.executable, "-m", "connector.resolver", "--namesrv", opts.namesrv_addr, "--sink-id", opts.sink_id,
            "--decision-topic", opts.decision_topic, "--idle-timeout-s", str(opts.resolver_idle_timeout_s),
            "--check-immunity-s", str(opts.check_immunity_s), "--dir", str(directory)]
    for topic in topics or ():
        argv += ["--topic", topic]
    if opts.trace_topic is not None:
        argv += ["--trace-topic", opts.trace_topic]
    pid_file.write_text(STARTING)  # the resolver overwrites it with "<pid> ready"
    with log_file.open("ab") as out:
        # sh backgrounds the resolver and exits at once: the resolver is re-parented to init (no zombie in a
        # long-lived Python worker) and, with the new session, outlives the driver's process group.
        subprocess.run(["/bin/sh", "-c", 'exec "$@" </dev/null &', "sh", *argv], stdout=out, stderr=out,
                       start_new_session=True, check=True, env=credentials_env(opts.credentials))
    return True


def credentials_env(credentials: SessionCredentials | None) -> dict[str, str]:
    """The resolver's environment: ours, plus the sink's keys in ACCESS_KEY_ENV/SECRET_KEY_ENV. The environment, not
    the command line: ``ps`` shows every user the arguments, while /proc/<pid>/environ is readable by the owner
    only."""
    env = {k: v for k, v in os.environ.items() if k not in (ACCESS_KEY_ENV, SECRET_KEY_ENV)}
    if credentials is not None:
        env[ACCESS_KEY_ENV], env[SECRET_KEY_ENV] = credentials.access_key, credentials.secret_key
    return env


def env_credentials(environ: Mapping[str, str] = os.environ) -> SessionCredentials | None:
    """The keys a resolver signs with: ACCESS_KEY_ENV and SECRET_KEY_ENV, both or neither (ConnectorError)."""
    access_key, secret_key = environ.get(ACCESS_KEY_ENV, ""), environ.get(SECRET_KEY_ENV, "")
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        raise ConnectorError(f"{ACCESS_KEY_ENV} and {SECRET_KEY_ENV} go together: one of them is not set")
    return SessionCredentials(access_key, secret_key)


def ensure_resolver(opts: SinkOptions, topics: list[str] | None = None) -> int:
    """Start the resolver of ``opts.sink_id`` on this host unless one is ready; wait until one is. A resolver that
    is exiting (settled) either stays (it read something new) or goes, and then a new one is started."""
    directory = resolver_dir(opts.resolver_dir)
    pid = resolver_pid(directory, opts.sink_id)
    if pid is not None:
        return pid
    _, _, log_file = sink_paths(directory, opts.sink_id)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while (pid := resolver_pid(directory, opts.sink_id)) is None:
        start_resolver(opts, topics)  # nothing while one holds the lock or is starting
        if time.monotonic() > deadline:
            tail = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
            raise ConnectorError(f"rmq sink {opts.sink_id}: the resolver did not start within {READY_TIMEOUT_S:.0f} s "
                                 f"(log {log_file}):\n{tail}")
        time.sleep(0.05)
    return pid


def settle_commit(decisions: DecisionLog, opts: SinkOptions, batch: str, commits: Sequence[TaskCommit],
                  ended: int) -> None:
    """After the driver's END_TRANSACTIONs of a decided batch (connector/settle.py). A batch job whose every half
    the driver ended itself (``ended``), with no dropped copies and every task a first attempt (a retried task's
    failed attempt left halves the commit messages do not show), is recorded "ended": nothing of it is left to
    answer, so the resolver started for it exits at once. Otherwise the check ends what is left, and a resolver
    that read the log before this decision may be exiting: make sure one is ready."""
    halves = sum(h.count for c in commits for h in c.brokers)
    if not opts.streaming and ended == halves and all(not c.drops and c.attempt == 0 for c in commits):
        try:
            decisions.append([{"kind": "ended", "batch": batch}])  # not worth waiting for a master that went away
        except ConnectorError as err:  # nothing is left to answer: the resolver exits by its rule all the same
            log.warning("rmq sink %s: batch %s: could not record that every half is ended: %s", opts.sink_id,
                        batch, err)
        return
    ensure_resolver(opts, sorted({t for c in commits for t in c.topics}))


def _lock_held(lock: Path) -> bool:
    """A resolver holds ``lock`` (it lives, ready or not)."""
    try:
        handle = lock.open("r")  # not "a": a lock file a resolver removed as it exited is not made again here
    except FileNotFoundError:
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def _starting(pid_file: Path) -> bool:
    """A resolver was started less than READY_TIMEOUT_S ago and has not taken its lock yet (Python start-up)."""
    try:
        if pid_file.read_text() != STARTING:
            return False
        return time.time() - pid_file.stat().st_mtime < READY_TIMEOUT_S
    except FileNotFoundError:
        return False




# -- the process ---------------------------------------------------------------------------------------------------


class PidFile:
    """A service's pid file, held with an flock while the service runs: a second service on the same file refuses
    to start; one left behind by a killed service (no lock) is taken over."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: IO[str] | None = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "?"
            handle.close()
            raise ConnectorError(f"a resolver service already runs with the pid file {self.path} (pid {owner})") \
                from None
        handle.truncate(0)
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._handle = handle

    def release(self) -> None:
        if self._handle is not None:
            self.path.unlink(missing_ok=True)
            self._handle.close()
            self._handle = None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m connector.resolver", description=__doc__.split("\n\n")[0])
    parser.add_argument("--namesrv", required=True, help="NameServer address(es), 'host:port;host:port'")
    parser.add_argument("--sink-id", action="append", default=[],
                        help="a sink identity (the sinkId option, or ckpt-... / job-...); repeatable with --service")
    parser.add_argument("--all-sinks", action="store_true",
                        help="with --service: every sink with records in the decision topic, as they appear")
    parser.add_argument("--decision-topic", default=DEFAULT_DECISION_TOPIC)
    parser.add_argument("--idle-timeout-s", type=float, default=None,
                        help=f"exit after this long without checks or decisions; 0: never (default "
                             f"{DEFAULT_RESOLVER_IDLE_S}, with --service 0)")
    parser.add_argument("--check-immunity-s", type=float, default=None,
                        help=f"without --service: the sink's checkImmunitySeconds, for when it may exit (default "
                             f"{DEFAULT_CHECK_IMMUNITY_S})")
    parser.add_argument("--dir", default=None, help=f"per-sink lock and pid files (default {DEFAULT_DIR})")
    parser.add_argument("--topic", action="append", default=[], help="a data topic whose brokers to heartbeat")
    parser.add_argument("--trace-topic", default=None,
                        help="trace each answer to a check (an EndTransaction record) to this topic")
    parser.add_argument("--service", action="store_true", help="run as a long-lived service (see above)")
    parser.add_argument("--pid-file", default=None, help=f"with --service (default <dir>/{SERVICE_PID_FILE})")
    parser.add_argument("--log-dir", default=None,
                        help="with --service: the rotating log file's directory (default <dir>)")
    return parser


def _spec(args: argparse.Namespace, parser: argparse.ArgumentParser, directory: Path) -> ServiceSpec:
    import re

    for sink_id in args.sink_id:
        if not re.fullmatch(SINK_ID_PATTERN, sink_id):
            parser.error(f"--sink-id must match {SINK_ID_PATTERN}, got {sink_id!r}")
    if args.service:
        if not args.sink_id and not args.all_sinks:
            parser.error("--service needs --sink-id (repeatable) or --all-sinks")
    else:
        for flag, given in (("--all-sinks", args.all_sinks), ("--pid-file", args.pid_file),
                            ("--log-dir", args.log_dir)):
            if given:
                parser.error(f"{flag} needs --service")
    if args.service and args.check_immunity_s is not None:
        parser.error("--check-immunity-s is for a resolver of one sink (a service runs until stopped)")
    immunity = None if args.service else args.check_immunity_s
    if immunity is None and not args.service:
        immunity = float(DEFAULT_CHECK_IMMUNITY_S)
    if immunity is not None and immunity <= 0:
        parser.error(f"--check-immunity-s must be > 0, got {immunity}")
        if len(args.sink_id) != 1:
            parser.error("give one --sink-id (several, or --all-sinks, with --service)")
    idle = args.idle_timeout_s
    if idle is None:
        idle = 0.0 if args.service else float(DEFAULT_RESOLVER_IDLE_S)
    if idle < 0:
        parser.error(f"--idle-timeout-s must be >= 0, got {idle}")
    return ServiceSpec(namesrv=args.namesrv, decision_topic=args.decision_topic, directory=directory,
                       sink_ids=tuple(dict.fromkeys(args.sink_id)), all_sinks=args.all_sinks, idle_timeout_s=idle,
                       topics=tuple(args.topic), exclusive=not args.service, check_immunity_s=immunity,
                       credentials=env_credentials(), trace_topic=args.trace_topic or None)


def _log_to(handler: logging.Handler) -> None:
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.INFO)


async def _serve(spec: ServiceSpec) -> bool:
    service = ResolverService(spec)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, service.stop)
    return await service.run()


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    directory = resolver_dir(args.dir)
    spec = _spec(args, parser, directory)
    if not args.service:  # started by the sink: its stderr goes to <dir>/<sinkId>.log
        _log_to(logging.StreamHandler(sys.stderr))
        asyncio.run(_serve(spec))
        return 0
    pid_file = PidFile(Path(args.pid_file).expanduser() if args.pid_file else directory / SERVICE_PID_FILE)
    try:
        pid_file.acquire()
    except ConnectorError as err:
        print(f"python -m connector.resolver: {err}", file=sys.stderr)
        return 1
    try:
        log_dir = Path(args.log_dir).expanduser() if args.log_dir else directory
        log_dir.mkdir(parents=True, exist_ok=True)
        _log_to(logging.handlers.RotatingFileHandler(log_dir / f"{pid_file.path.stem}.log", maxBytes=LOG_MAX_BYTES,
                                                     backupCount=LOG_BACKUPS))
        log.info("resolver service starting (pid file %s)", pid_file.path)
        asyncio.run(_serve(spec))
        log.info("resolver service stopped")
    finally:
        pid_file.release()
    return 0


if __name__ == "__main__":
    sys.exit(main())
