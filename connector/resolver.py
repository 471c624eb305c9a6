"""The sink's resolver: answers the broker's CHECK_TRANSACTION_STATE for one sink from its decision log.

Why a process of its own: PySpark runs the driver side of a write (commit/abort) in short-lived Python workers, and
the broker asks about open half messages whenever it likes (after their immunity time, every
transactionCheckInterval), possibly while no driver runs at all. The resolver heartbeats as a producer of the sink's
group ``RMQ_SINK_<sinkId>``, so the broker sends it those checks; it answers COMMIT for the winners of a decided batch,
ROLLBACK for losers (and for aborted batch jobs, and streaming batches older than a decided one), UNKNOWN while a
batch is undecided (connector/decisions.py ``DecisionState.resolve``).

One resolver per sinkId and host: it holds an exclusive flock on ``<dir>/<sinkId>.lock`` (dir: ``resolverDir``,
default ~/.cache/rmq/sink) and writes ``<dir>/<sinkId>.pid`` ("<pid> ready") once it heartbeats. The sink starts
one, detached (its own session: it outlives the driver), when none holds the lock and none is starting: a batch job
when Spark plans it (``start_resolver``, not waiting), else the commit, which waits until it is ready. It exits after
``--idle-timeout-s`` without a check or a new decision; that timeout must exceed the broker's check window of an open
half (immunity + transactionCheckInterval), which the defaults (900 s; 120 s; Apache's 30 s) do.

Run it standalone (e.g. on another host while the query's driver is down)::

    python -m connector.resolver --namesrv 127.0.0.1:9876 --sink-id my_sink [--decision-topic RMQ_SINK_DECISIONS]
        [--idle-timeout-s 900] [--dir ~/.cache/rmq/sink] [--topic T ...]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

from broker.client.blocking import BlockingClient
from broker.client.instance import ClientConfig
from broker.client.message import MessageExt
from broker.client.route import TopicPublishInfo
from broker.client.transaction import LocalTransactionState, TransactionProducer
from broker.common.errors import ConnectorError
from broker.common.message import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from connector.decisions import (
    PROPERTY_SINK_BATCH,
    PROPERTY_SINK_ID,
    PROPERTY_SINK_RUN,
    DecisionLog,
    Resolution,
)
from connector.options import DEFAULT_DECISION_TOPIC, DEFAULT_RESOLVER_IDLE_S, SinkOptions

log = logging.getLogger("connector.resolver")

DEFAULT_DIR = Path.home() / ".cache" / "rmq" / "sink"
POLL_S = 1.0  # how often the log is read for new decisions
CHECK_REFRESH_S = 0.2  # at most this often, a check about an undecided batch re-reads the log first
READY_TIMEOUT_S = 60.0
STARTING = "0 starting"  # the pid file's text from start_resolver until the resolver says "<pid> ready"
HEARTBEAT_MS = 5_000
_STATES = {Resolution.COMMIT: LocalTransactionState.COMMIT_MESSAGE,
           Resolution.ROLLBACK: LocalTransactionState.ROLLBACK_MESSAGE,
           Resolution.UNKNOWN: LocalTransactionState.UNKNOW}


def resolver_dir(opts_dir: str | None) -> Path:
    path = Path(opts_dir).expanduser() if opts_dir else DEFAULT_DIR
    path.mkdir(parents=True, exist_ok=True)
    return path


def _paths(directory: Path, sink_id: str) -> tuple[Path, Path, Path]:
    return directory / f"{sink_id}.lock", directory / f"{sink_id}.pid", directory / f"{sink_id}.log"


def resolver_pid(directory: Path, sink_id: str) -> int | None:
    """The pid of the live, ready resolver of ``sink_id`` on this host, else None."""
    lock, pid_file, _ = _paths(directory, sink_id)
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
    lock, pid_file, log_file = _paths(directory, opts.sink_id)
    if _lock_held(lock) or _starting(pid_file):
        return False
    argv = [sys.executable, "-m", "connector.resolver", "--namesrv", opts.namesrv_addr, "--sink-id", opts.sink_id,
            "--decision-topic", opts.decision_topic, "--idle-timeout-s", str(opts.resolver_idle_timeout_s),
            "--dir", str(directory)]
    for topic in topics or ():
        argv += ["--topic", topic]
    pid_file.write_text(STARTING)  # the resolver overwrites it with "<pid> ready"
    with log_file.open("ab") as out:
        # sh backgrounds the resolver and exits at once: the resolver is re-parented to init (no zombie in a
        # long-lived Python worker) and, with the new session, outlives the driver's process group.
        subprocess.run(["/bin/sh", "-c", 'exec "$@" </dev/null &', "sh", *argv], stdout=out, stderr=out,
                       start_new_session=True, check=True)
    return True


def ensure_resolver(opts: SinkOptions, topics: list[str] | None = None) -> int:
    """Start the resolver of ``opts.sink_id`` on this host unless one is alive; wait until it heartbeats."""
    directory = resolver_dir(opts.resolver_dir)
    pid = resolver_pid(directory, opts.sink_id)
    if pid is not None:
        return pid
    _, _, log_file = _paths(directory, opts.sink_id)
    start_resolver(opts, topics)
    deadline = time.monotonic() + READY_TIMEOUT_S
    while (pid := resolver_pid(directory, opts.sink_id)) is None:
        if time.monotonic() > deadline:
            tail = log_file.read_text(errors="replace")[-2000:] if log_file.exists() else ""
            raise ConnectorError(f"rmq sink {opts.sink_id}: the resolver did not start within {READY_TIMEOUT_S:.0f} s "
                                 f"(log {log_file}):\n{tail}")
        time.sleep(0.05)
    return pid


def _lock_held(lock: Path) -> bool:
    """A resolver holds ``lock`` (it lives, ready or not)."""
    if not lock.exists():
        return False
    with lock.open("a") as handle:
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


class Resolver:
    """The listener of the sink group's TransactionProducer: checks are answered from the decision log."""

    def __init__(self, namesrv: str, sink_id: str, decision_topic: str) -> None:
        self.sink_id = sink_id
        self.client = BlockingClient(namesrv)
        self.decisions = DecisionLog(self.client, decision_topic, sink_id)
        self.last_activity = time.monotonic()
        self.answers = {r: 0 for r in Resolution}
        self._refreshed = 0.0
        self._lock = asyncio.Lock()

    async def refresh(self, *, min_interval: float = 0.0) -> None:
        async with self._lock:
            if time.monotonic() - self._refreshed < min_interval:
                return
            before = len(self.decisions.state.decided) + len(self.decisions.state.aborted)
            await asyncio.to_thread(self.decisions.refresh)
            self._refreshed = time.monotonic()
            if len(self.decisions.state.decided) + len(self.decisions.state.aborted) != before:
                self.last_activity = time.monotonic()

    async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        self.last_activity = time.monotonic()
        props = msg.properties
        if props.get(PROPERTY_SINK_ID) != self.sink_id:
            log.warning("check of %s: not a half message of sink %s; UNKNOW", msg.msg_id, self.sink_id)
            return LocalTransactionState.UNKNOW
        batch, run = props.get(PROPERTY_SINK_BATCH, ""), props.get(PROPERTY_SINK_RUN, "")
        uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")
        resolution = self.decisions.state.resolve(batch, run, uniq)
        if resolution is Resolution.UNKNOWN:
            try:
                await self.refresh(min_interval=CHECK_REFRESH_S)
            except Exception as err:  # the broker asks again later
                log.warning("decision log unreadable while answering a check: %s", err)
            resolution = self.decisions.state.resolve(batch, run, uniq)
        self.answers[resolution] += 1
        log.info("check %s batch %s run %s: %s", msg.msg_id, batch, run, resolution.value)
        return _STATES[resolution]

    def execute_local_transaction(self, msg: object, arg: object) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW  # the resolver sends nothing


async def run(namesrv: str, sink_id: str, decision_topic: str, idle_timeout_s: float, directory: Path,
              topics: list[str]) -> None:
    _, pid_file, _ = _paths(directory, sink_id)
    resolver = Resolver(namesrv, sink_id, decision_topic)
    config = ClientConfig(namesrv_addr=namesrv, instance_name=f"rmq-sink-resolver-{sink_id}-{os.getpid()}",
                          heartbeat_broker_interval=HEARTBEAT_MS, poll_name_server_interval=HEARTBEAT_MS)
    producer = TransactionProducer(f"RMQ_SINK_{sink_id}", listener=resolver, client_config=config)
    for topic in [decision_topic, *topics]:  # their brokers are heartbeated, so their checks reach us
        producer.topic_publish_info.setdefault(topic, TopicPublishInfo())
    await producer.start()
    try:
        await producer.instance.update_all_topic_routes()
        await producer.instance.send_heartbeat_to_all_brokers()
        try:
            await resolver.refresh()
        except Exception as err:  # a master away: the loop below reads the log once it is back
            log.warning("decision log of %s unreadable at start: %s", sink_id, err)
        pid_file.write_text(f"{os.getpid()} ready")
        log.info("resolver of sink %s ready (pid %d, namesrv %s, idle timeout %.0f s)", sink_id, os.getpid(),
                 namesrv, idle_timeout_s)
        while time.monotonic() - resolver.last_activity < idle_timeout_s:
            await asyncio.sleep(POLL_S)
            try:
                await resolver.refresh()
            except Exception as err:
                log.warning("decision log of %s unreadable: %s", sink_id, err)
        log.info("resolver of sink %s idle for %.0f s; exiting (answers: %s)", sink_id, idle_timeout_s,
                 {k.value: v for k, v in resolver.answers.items()})
    finally:
        with contextlib.suppress(FileNotFoundError):
            pid_file.unlink()
        await producer.shutdown()
        resolver.client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m connector.resolver", description=__doc__.split("\n\n")[0])
    parser.add_argument("--namesrv", required=True, help="NameServer address(es), 'host:port;host:port'")
    parser.add_argument("--sink-id", required=True, help="the sink identity (the sinkId option, or ckpt-... / job-...)")
    parser.add_argument("--decision-topic", default=DEFAULT_DECISION_TOPIC)
    parser.add_argument("--idle-timeout-s", type=float, default=DEFAULT_RESOLVER_IDLE_S)
    parser.add_argument("--dir", default=None, help=f"lock/pid/log directory (default {DEFAULT_DIR})")
    parser.add_argument("--topic", action="append", default=[], help="a data topic whose brokers to heartbeat")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    directory = resolver_dir(args.dir)
    lock, _, _ = _paths(directory, args.sink_id)
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("a resolver of sink %s already runs on this host; exiting", args.sink_id)
            return 0
        asyncio.run(run(args.namesrv, args.sink_id, args.decision_topic, args.idle_timeout_s, directory,
                        args.topic))
    return 0


if __name__ == "__main__":
    sys.exit(main())
