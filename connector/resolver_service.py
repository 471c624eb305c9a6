"""The running resolver: one process answering the broker's CHECK_TRANSACTION_STATE for one or more sinks.

``python -m connector.resolver`` (connector/resolver.py: its command line, and how the sink starts it) runs a
``ResolverService``: one client instance, and per served sink a ``Resolver`` (the decision log, folded) behind a
TransactionProducer of the sink's group ``RMQ_SINK_<sinkId>``, so the broker sends that group's checks here. The
sinks are those named, or (``all_sinks``) every sink with records in the decision topic, picked up as they appear.

Per sink it claims ``<dir>/<sinkId>.lock`` (an flock) and, once it answers, writes ``<dir>/<sinkId>.pid``
("<pid> ready"): a driver on this host with that resolverDir then uses it instead of starting a resolver of its
own. A sink whose lock another resolver holds is served all the same (both answer from the same log) when the
process runs as a service; a resolver started for one sink exits instead. ``stop()`` (SIGTERM) ends the loop; the
claims are released and their pid and lock files removed. A resolver started for one sink also exits once settled
(connector/settle.py: nothing left it may be asked about), saying "<pid> exiting" in its pid file for one poll
first; a service runs until stopped (or idle for ``--idle-timeout-s``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from broker.client.blocking import BlockingClient
from broker.client.instance import ClientConfig, MQClientInstance
from broker.client.message import MessageExt
from broker.client.producer import ProducerConfig
from broker.client.route import MASTER_ID, TopicPublishInfo
from broker.client.transaction import TransactionProducer
from broker.client.transaction_protocol import LocalTransactionState
from broker.common.message import PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from broker.common.properties import parse_properties
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from broker.remoting.signing import SessionCredentials
from connector.decisions import (
    PROPERTY_SINK_BATCH,
    PROPERTY_SINK_ID,
    PROPERTY_SINK_RUN,
    DecisionLog,
    Resolution,
    SinkScan,
)
from connector.settle import FALLBACK_INTERVAL_S, Settling

log = logging.getLogger("connector.resolver")

POLL_S = 1.0  # how often the logs are read for new decisions (and the decision topic for new sinks)
CHECK_REFRESH_S = 0.2  # at most this often, a check about an undecided batch re-reads the log first
HEARTBEAT_MS = 5_000
BROKER_CONFIG_TIMEOUT_MS = 3_000
APACHE_TRANSACTION_TIMEOUT_MS = 6_000  # transactionTimeOut's default, for a config without the key
_STATES = {Resolution.COMMIT: LocalTransactionState.COMMIT_MESSAGE,
           Resolution.ROLLBACK: LocalTransactionState.ROLLBACK_MESSAGE,
           Resolution.UNKNOWN: LocalTransactionState.UNKNOW}


def sink_paths(directory: Path, sink_id: str) -> tuple[Path, Path, Path]:
    """A sink's lock, pid and (when the sink started the resolver) log file in ``directory``."""
    return directory / f"{sink_id}.lock", directory / f"{sink_id}.pid", directory / f"{sink_id}.log"


class Resolver:
    """The listener of one sink group's TransactionProducer: checks are answered from the decision log."""

    def __init__(self, namesrv: str, sink_id: str, decision_topic: str, settling: Settling | None = None,
                 credentials: SessionCredentials | None = None) -> None:
        self.sink_id = sink_id
        self.client = BlockingClient(namesrv, credentials=credentials)
        self.decisions = DecisionLog(self.client, decision_topic, sink_id)
        self.settling = settling  # None: a service's, which does not exit when settled
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
            if self.settling is not None:
                self.settling.note_log(self.decisions.state, time.time())
            if len(self.decisions.state.decided) + len(self.decisions.state.aborted) != before:
                self.last_activity = time.monotonic()

    async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        self.last_activity = time.monotonic()
        props = msg.properties
        if self.settling is not None:
            immunity = props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS, "")
            self.settling.note_check(time.time(), float(immunity) if immunity.isdigit() else None)
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
        log.info("check %s sink %s batch %s run %s: %s", msg.msg_id, self.sink_id, batch, run, resolution.value)
        return _STATES[resolution]

    def execute_local_transaction(self, msg: object, arg: object) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW  # the resolver sends nothing


@dataclass(frozen=True, slots=True)
class ServiceSpec:
    """What one resolver process serves, parsed from its command line."""

    namesrv: str
    decision_topic: str
    directory: Path  # the per-sink lock and pid files
    sink_ids: tuple[str, ...] = ()
    all_sinks: bool = False  # also every sink with records in the decision topic
    idle_timeout_s: float = 0.0  # exit after this long without checks or decisions; 0: only when stopped
    topics: tuple[str, ...] = ()  # data topics whose brokers to heartbeat (the decision topic's always are)
    exclusive: bool = True  # a sink whose lock another resolver holds: exit (True) or serve it all the same
    check_immunity_s: float | None = None  # the sink's checkImmunitySeconds: exit once settled; None: a service
    credentials: SessionCredentials | None = None  # every request is signed with them (RMQ_ACCESS_KEY/SECRET_KEY)
    trace_topic: str | None = None  # the sinks' enableMsgTrace: answers to checks traced there (EndTransaction)


class ResolverService:
    """The resolvers of one process, their producers on one client instance, and the loop that keeps them current."""

    def __init__(self, spec: ServiceSpec) -> None:
        self.spec = spec
        config = ClientConfig(namesrv_addr=spec.namesrv, instance_name=f"rmq-sink-resolver-{os.getpid()}",
                              heartbeat_broker_interval=HEARTBEAT_MS, poll_name_server_interval=HEARTBEAT_MS)
        self.instance = MQClientInstance(config, credentials=spec.credentials)
        self.resolvers: dict[str, Resolver] = {}
        self._producers: list[TransactionProducer] = []
        self._claims: dict[str, IO[str]] = {}
        self._scan = (SinkScan(BlockingClient(spec.namesrv, credentials=spec.credentials), spec.decision_topic)
                      if spec.all_sinks else None)
        self._stopping = asyncio.Event()
        self._started = time.time()
        self._timings: dict[str, tuple[float, float]] = {}  # master address -> (check interval, timeout), s
        self._exiting = False

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> bool:
        """Serve until stopped or idle; False when a sink of a one-sink resolver already has one on this host."""
        await self.instance.start()
        try:
            for sink_id in self.spec.sink_ids:
                if not await self.add_sink(sink_id):
                    return False
            await self._discover()
            log.info("resolver ready (pid %d, namesrv %s, decision topic %s, sinks %s%s)", os.getpid(),
                     self.spec.namesrv, self.spec.decision_topic, ", ".join(sorted(self.resolvers)) or "none yet",
                     "; and every sink of the decision topic" if self.spec.all_sinks else "")
            await self._loop()
            return True
        finally:
            await self._close()

    async def add_sink(self, sink_id: str) -> bool:
        """Serve ``sink_id``: claim its lock, heartbeat as its group's producer, read its log, write its pid file."""
        if not self._claim(sink_id) and self.spec.exclusive:
            log.info("a resolver of sink %s already runs on this host; exiting", sink_id)
            return False
        immunity = self.spec.check_immunity_s
        settling = None if immunity is None else Settling(immunity_s=immunity, started=self._started)
        resolver = Resolver(self.spec.namesrv, sink_id, self.spec.decision_topic, settling, self.spec.credentials)
        # traced as Apache's producer traces its answers to checks: EndTransaction, fromTransactionCheck true
        trace = (None if self.spec.trace_topic is None
                 else ProducerConfig(enable_msg_trace=True, trace_topic=self.spec.trace_topic))
        producer = TransactionProducer(f"RMQ_SINK_{sink_id}", listener=resolver, instance=self.instance, config=trace)
        for topic in [self.spec.decision_topic, *self.spec.topics]:  # their brokers are heartbeated: checks reach us
            producer.topic_publish_info.setdefault(topic, TopicPublishInfo())
        self.resolvers[sink_id] = resolver
        self._producers.append(producer)
        await producer.start()
        await self.instance.update_all_topic_routes()
        await self.instance.send_heartbeat_to_all_brokers()
        try:
            await resolver.refresh()
        except Exception as err:  # a master away: the loop reads the log once it is back
            log.warning("decision log of %s unreadable at start: %s", sink_id, err)
        if sink_id in self._claims:
            sink_paths(self.spec.directory, sink_id)[1].write_text(f"{os.getpid()} ready")
        log.info("serving sink %s (group RMQ_SINK_%s)", sink_id, sink_id)
        return True

    def _claim(self, sink_id: str) -> bool:
        """Hold the sink's lock file. A resolver that exits removes the file while it holds it, so a lock taken on
        a file no longer at that path (removed meanwhile) is dropped and the path's new file claimed instead."""
        lock = sink_paths(self.spec.directory, sink_id)[0]
        while True:
            handle = lock.open("a")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                log.info("sink %s: another resolver holds %s", sink_id, lock)
                return False
            try:
                current = os.stat(lock).st_ino == os.fstat(handle.fileno()).st_ino
            except FileNotFoundError:
                current = False
            if current:
                self._claims[sink_id] = handle
                return True
            handle.close()

    async def _discover(self) -> None:
        if self._scan is None:
            return
        try:
            found = await asyncio.to_thread(self._scan.refresh)
        except Exception as err:
            log.warning("decision topic %s unreadable while looking for sinks: %s", self.spec.decision_topic, err)
            return
        for sink_id in sorted(found - set(self.resolvers)):
            await self.add_sink(sink_id)

    async def _loop(self) -> None:
        while not self._idle():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), POLL_S)
            if self._stopping.is_set():
                log.info("resolver stopping (answers: %s)", self._answers())
                return
            for sink_id, resolver in list(self.resolvers.items()):
                try:
                    await resolver.refresh()
                except Exception as err:
                    log.warning("decision log of %s unreadable: %s", sink_id, err)
            await self._discover()
            if self.spec.check_immunity_s is not None and await self._settled():
                log.info("resolver settled: nothing left to be asked about; exiting (answers: %s)", self._answers())
                return
        log.info("resolver idle for %.0f s; exiting (answers: %s)", self.spec.idle_timeout_s, self._answers())

    async def _settled(self) -> bool:
        """connector/settle.py: settled at two polls in a row (the first says "exiting" in the pid files, so a
        driver that recorded a decision meanwhile waits for this resolver to stay or go; the log read in between
        shows that decision)."""
        await self._learn_timings()
        now = time.time()
        waiting = [w for r in self.resolvers.values() if r.settling is not None
                   and (w := r.settling.waiting_for(r.decisions.state, now)) is not None]
        if waiting:
            if self._exiting:
                log.info("resolver stays: waiting for %s", waiting[0])
                self._write_pid_files("ready")
            self._exiting = False
            return False
        if not self._exiting:
            self._exiting = True
            self._write_pid_files("exiting")
            return False
        return True

    async def _learn_timings(self) -> None:
        """The transactionCheckInterval and transactionTimeOut of each master heartbeated (asked once each; a
        broker that does not answer counts as FALLBACK_INTERVAL_S and Apache's timeout)."""
        masters = {addr for _, broker_id, addr in self.instance.route_table.all_addresses() if broker_id == MASTER_ID}
        for addr in sorted(masters - set(self._timings)):
            try:
                response = await self.instance.invoke(addr, create_request(RequestCode.GET_BROKER_CONFIG),
                                                      BROKER_CONFIG_TIMEOUT_MS)
                if response.code != ResponseCode.SUCCESS:
                    raise ValueError(f"code {response.code} {response.remark}")
                config = parse_properties((response.body or b"").decode("utf-8", "replace"))
                timing = (int(config.get("transactionCheckInterval", FALLBACK_INTERVAL_S * 1000)) / 1000,
                          int(config.get("transactionTimeOut", APACHE_TRANSACTION_TIMEOUT_MS)) / 1000)
            except Exception as err:
                log.warning("config of broker %s unreadable (%s); its check interval counts as %.0f s", addr, err,
                            FALLBACK_INTERVAL_S)
                timing = (FALLBACK_INTERVAL_S, APACHE_TRANSACTION_TIMEOUT_MS / 1000)
            self._timings[addr] = timing
            log.info("broker %s: transactionCheckInterval %.1f s, transactionTimeOut %.1f s", addr, *timing)
        if self._timings:
            interval = max(t[0] for t in self._timings.values())
            timeout = max(t[1] for t in self._timings.values())
            for resolver in self.resolvers.values():
                if resolver.settling is not None:
                    resolver.settling.note_brokers(interval, timeout)

    def _write_pid_files(self, state: str) -> None:
        for sink_id in self._claims:
            sink_paths(self.spec.directory, sink_id)[1].write_text(f"{os.getpid()} {state}")

    def _idle(self) -> bool:
        if not self.spec.idle_timeout_s or not self.resolvers:
            return False
        last = max(r.last_activity for r in self.resolvers.values())
        return time.monotonic() - last >= self.spec.idle_timeout_s

    def _answers(self) -> dict[str, dict[str, int]]:
        return {sink: {k.value: v for k, v in r.answers.items()} for sink, r in sorted(self.resolvers.items())}

    async def _close(self) -> None:
        for sink_id, handle in self._claims.items():
            lock, pid_file, _ = sink_paths(self.spec.directory, sink_id)
            pid_file.unlink(missing_ok=True)
            lock.unlink(missing_ok=True)  # still held: a resolver claiming it meanwhile sees it gone (``_claim``)
            handle.close()
        self._claims.clear()
        for producer in self._producers:
            await producer.shutdown()
        await self.instance.shutdown()
        for resolver in self.resolvers.values():
            resolver.client.close()
        if self._scan is not None:
            self._scan.client.close()
