"""The sink's decision log: which attempt of each (sinkId, batchId) won, recorded in a RocketMQ topic.

A decision is written before any END_TRANSACTION of its batch, so that whoever is asked later (the resolver, answering
the broker's CHECK_TRANSACTION_STATE; a restarted driver re-running the batch) finds the same answer. The log lives
in the broker cluster the sink writes to (topic ``decisionTopic``, default RMQ_SINK_DECISIONS, one queue on each
master that holds the sink's half messages), so drivers, executors and a resolver on other hosts all read it with the
standard protocol.

Records (JSON bodies; tag = sinkId, so a reader pulls only its own sink's records; keys = "<sinkId>:<batchId>"):

    {"kind": "winners", "batch": B, "commit": C, "chunk": i, "runs": {runId: rows, ...},
     "drops": {runId: [UNIQ_KEY, ...], ...}}                                                 i = 0..n-1
    {"kind": "decided", "batch": B, "commit": C, "chunks": n, "rows": total, "immunity": s}  the decision itself
    {"kind": "aborted", "batch": B}                                                          batch jobs only
    {"kind": "ended", "batch": B}                  batch jobs whose driver ended every half itself (connector/settle.py)

``C`` is a fresh id per commit() call: chunks of a commit that died before its "decided" record are ignored.
``immunity`` (absent in older logs) is the batch's checkImmunitySeconds: how long after their birth the broker
leaves its halves unchecked, which tells a resolver how long it must wait for the checks of what the driver left.
``drops`` (absent when empty) names half messages of a winning run that lose all the same: a task whose master
went away with halves in flight does not know which of them were stored, so it sends them again under a new run
and drops the first copies by (run, UNIQ_KEY) (connector/sink_task.py). All
records of one sink go, in order, to one queue (chosen by the hash of the sinkId, as SelectMessageQueueByHash), so
"the first decided record of a batch" is well defined. One writer per sinkId at a time is assumed (Spark runs one
driver per checkpoint; two live queries must not share a sinkId).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

import orjson

from broker.client.blocking import BlockingClient, create_topic
from broker.client.message import Message, MessageExt, MessageQueue, PullStatus
from broker.common.errors import ConnectorError, MQBrokerError, MQClientError, RemotingError
from broker.common.message import java_hash
from broker.remoting.codes import ResponseCode
from connector.replicas import wait_for_master

log = logging.getLogger(__name__)

# Properties every half message of the sink carries; the resolver answers checks from them.
PROPERTY_SINK_ID = "RMQ_SINK_ID"
PROPERTY_SINK_BATCH = "RMQ_SINK_BATCH"
PROPERTY_SINK_RUN = "RMQ_SINK_RUN"

CHUNK_RUNS = 2000  # task runs per winners record (~90 KB)
PULL_BATCH = 32
ROUTE_WAIT_S = 15.0


class Resolution(Enum):
    """The answer for one half message: its attempt won, lost, or its batch is not decided yet."""

    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    UNKNOWN = "UNKNOWN"


@dataclass(frozen=True, slots=True)
class BatchDecision:
    batch: str
    commit: str
    winners: Mapping[str, int]  # task-run id -> rows it sent
    drops: Mapping[str, frozenset[str]] = field(default_factory=dict)  # task-run id -> UNIQ_KEYs that lose
    immunity_s: int | None = None  # the halves' checkImmunitySeconds (None: an older record without it)

    @property
    def rows(self) -> int:
        return sum(self.winners.values())


def _batch_number(batch: str) -> int | None:
    return int(batch) if batch.isdigit() else None


@dataclass
class DecisionState:
    """A sink's log folded: decided batches (the first "decided" record of each wins), aborted batch jobs, batch
    jobs whose driver ended every half, and when each decided or aborted record was stored (the broker's clock)."""

    decided: dict[str, BatchDecision] = field(default_factory=dict)
    aborted: set[str] = field(default_factory=set)
    ended: set[str] = field(default_factory=set)
    stored_ms: dict[str, int] = field(default_factory=dict)  # batch -> store time of its decided/aborted record
    max_decided: int | None = None  # the highest numeric (streaming) batch id decided
    _chunks: dict[tuple[str, str], dict[int, Mapping[str, object]]] = field(default_factory=dict)

    def apply(self, record: Mapping[str, object], stored_ms: int = 0) -> None:
        kind, batch = record.get("kind"), str(record.get("batch"))
        if kind in ("decided", "aborted"):
            self.stored_ms.setdefault(batch, stored_ms)
        if kind == "winners":
            key = (batch, str(record["commit"]))
            self._chunks.setdefault(key, {})[int(record["chunk"])] = record
        elif kind == "decided":
            if batch in self.decided:
                return  # a later decided record of the same batch lost (there should be none)
            commit, chunks = str(record["commit"]), int(record["chunks"])
            parts = self._chunks.pop((batch, commit), {})
            if len(parts) != chunks:
                raise ConnectorError(f"decision log: batch {batch} commit {commit} is decided with {chunks} chunks "
                                     f"but {len(parts)} were read")
            winners: dict[str, int] = {}
            drops: dict[str, frozenset[str]] = {}
            for i in range(chunks):
                winners.update(parts[i]["runs"])
                drops.update({run: frozenset(keys) for run, keys in (parts[i].get("drops") or {}).items()})
            immunity = record.get("immunity")
            self.decided[batch] = BatchDecision(batch, commit, winners, drops,
                                                int(immunity) if isinstance(immunity, int) else None)
            number = _batch_number(batch)
            if number is not None and (self.max_decided is None or number > self.max_decided):
                self.max_decided = number
        elif kind == "aborted":
            self.aborted.add(batch)
        elif kind == "ended":
            self.ended.add(batch)

    def resolve(self, batch: str, run: str, uniq: str = "") -> Resolution:
        """COMMIT for a half of a run among its batch's winners, unless the decision drops it (``uniq``, its
        UNIQ_KEY); ROLLBACK for a loser of a decided batch, any run of an aborted batch job, or a run of a streaming
        batch older than one already decided (Spark never goes back); UNKNOWN otherwise (the batch may still be
        decided)."""
        decision = self.decided.get(batch)
        if decision is not None:
            won = run in decision.winners and uniq not in decision.drops.get(run, ())
            return Resolution.COMMIT if won else Resolution.ROLLBACK
        if batch in self.aborted:
            return Resolution.ROLLBACK
        number = _batch_number(batch)
        if number is not None and self.max_decided is not None and number < self.max_decided:
            return Resolution.ROLLBACK
        return Resolution.UNKNOWN


def decision_records(batch: str, commit: str, winners: Mapping[str, int],
                     drops: Mapping[str, list[str]] | None = None, *,
                     immunity_s: int | None = None) -> list[dict[str, object]]:
    """The winners chunks (each with the drops of its runs) then the decided record of one commit (with the
    halves' check immunity, when given)."""
    runs = sorted(winners.items())
    chunks = [dict(runs[i:i + CHUNK_RUNS]) for i in range(0, len(runs), CHUNK_RUNS)] or [{}]
    records: list[dict[str, object]] = []
    for i, chunk in enumerate(chunks):
        record: dict[str, object] = {"kind": "winners", "batch": batch, "commit": commit, "chunk": i, "runs": chunk}
        dropped = {run: sorted(keys) for run, keys in (drops or {}).items() if run in chunk and keys}
        if dropped:
            record["drops"] = dropped
        records.append(record)
    decided: dict[str, object] = {"kind": "decided", "batch": batch, "commit": commit, "chunks": len(chunks),
                                  "rows": sum(winners.values())}
    if immunity_s is not None:
        decided["immunity"] = immunity_s
    records.append(decided)
    return records


def read_queue(client: BlockingClient, mq: MessageQueue, offset: int | None, tags: str,
               on_record: Callable[[MessageExt], None]) -> int:
    """Hand every record of ``mq`` from ``offset`` (None: the queue's minimum) matching the tag expression ``tags``
    to ``on_record``, in queue order; returns the offset to go on from."""
    if offset is None:
        offset = client.get_min_offset(mq)
    while True:
        result = client.pull(mq, offset, PULL_BATCH, sub_expression=tags, decode=True)
        if result.status is PullStatus.OFFSET_ILLEGAL:
            offset = max(result.next_begin_offset, result.min_offset)
            continue
        for msg in sorted(result.messages, key=lambda m: m.queue_offset):
            on_record(msg)
        if result.status is not PullStatus.FOUND or result.next_begin_offset <= offset:
            return max(offset, result.next_begin_offset)
        offset = result.next_begin_offset


class SinkScan:
    """Which sinks have records in a decision topic (a record's tag is its sinkId, its keys "<sinkId>:<batch>"),
    read incrementally: a resolver serving every sink of the topic learns new sinks from it."""

    def __init__(self, client: BlockingClient, topic: str) -> None:
        self.client = client
        self.topic = topic
        self.sinks: set[str] = set()
        self._next: dict[MessageQueue, int] = {}

    def refresh(self) -> set[str]:
        try:
            queues = self.client.fetch_message_queues(self.topic)
        except MQClientError as err:
            if err.code == ResponseCode.TOPIC_NOT_EXIST:
                return self.sinks
            raise
        for mq in queues:
            self._next[mq] = read_queue(self.client, mq, self._next.get(mq), "*", self._note)
        return self.sinks

    def _note(self, msg: MessageExt) -> None:
        if msg.tags and msg.keys and msg.keys.startswith(f"{msg.tags}:"):
            self.sinks.add(msg.tags)


class DecisionLog:
    """Reads (incrementally) and appends one sink's records in the decision topic, over a BlockingClient."""

    def __init__(self, client: BlockingClient, topic: str, sink_id: str) -> None:
        self.client = client
        self.topic = topic
        self.sink_id = sink_id
        self.state = DecisionState()
        self._next: dict[MessageQueue, int] = {}

    # -- the topic ------------------------------------------------------------------------------------------------

    def ensure_topic(self, brokers: Mapping[str, str], *, master_wait_ms: int = 0) -> None:
        """Create the decision topic (one queue) on each of ``brokers`` ({brokerName: master address}) that does not
        have it yet (waiting up to ``master_wait_ms`` for a master that does not answer), and wait until the
        NameServer routes it there."""
        have = self._route_brokers()
        missing = {name: addr for name, addr in brokers.items() if name not in have}
        if not missing:
            return
        for name, addr in sorted(missing.items()):
            try:
                wait_for_master(f"creating the decision topic {self.topic}", name, master_wait_ms,
                                lambda a=addr: create_topic(self.client.client(a), self.topic, queue_nums=1))
            except (MQBrokerError, RemotingError) as err:
                raise ConnectorError(f"cannot create the sink's decision topic {self.topic} on broker {name} "
                                     f"({addr}): {err}") from err
        deadline = time.monotonic() + ROUTE_WAIT_S
        while not set(missing) <= self._route_brokers(refresh=True):
            if time.monotonic() > deadline:
                raise ConnectorError(f"decision topic {self.topic} was created on {sorted(missing)} but the NameServer "
                                     f"{self.client.namesrv_addrs} does not route it there after {ROUTE_WAIT_S:.0f} s")
            time.sleep(0.2)

    def _route_brokers(self, *, refresh: bool = False) -> set[str]:
        try:
            route = self.client.get_route(self.topic, refresh=refresh)
        except MQClientError as err:
            if err.code == ResponseCode.TOPIC_NOT_EXIST:
                return set()
            raise
        return {b.broker_name for b in route.broker_datas}

    def queues(self) -> list[MessageQueue]:
        try:
            return sorted(self.client.fetch_message_queues(self.topic),
                          key=lambda q: (q.broker_name, q.queue_id))
        except MQClientError as err:
            if err.code == ResponseCode.TOPIC_NOT_EXIST:
                return []
            raise

    def own_queue(self) -> MessageQueue:
        """The queue this sink appends to: SelectMessageQueueByHash over the sorted queues."""
        queues = self.queues()
        if not queues:
            raise ConnectorError(f"the decision topic {self.topic} has no route; it is created at the first commit")
        return queues[abs(java_hash(self.sink_id) % len(queues))]

    # -- reading --------------------------------------------------------------------------------------------------

    def refresh(self, *, master_wait_ms: int = 0) -> DecisionState:
        """Pull what was appended since the last call (from each queue's minimum offset the first time), tag-filtered
        at the broker to this sink, and fold it into ``state``; a queue whose master does not answer is asked again
        for up to ``master_wait_ms`` (folding a record twice changes nothing)."""
        for mq in self.queues():
            wait_for_master(f"reading the decision log in {mq}", mq.broker_name, master_wait_ms,
                            lambda q=mq: self._read_queue(q), lambda: self.client.get_route(self.topic, refresh=True))
        return self.state

    def _read_queue(self, mq: MessageQueue) -> None:
        self._next[mq] = read_queue(self.client, mq, self._next.get(mq), self.sink_id,
                                    lambda msg: self._apply(msg.body, msg.keys, msg.store_timestamp))

    def _apply(self, body: bytes, keys: str | None, stored_ms: int = 0) -> None:
        if not keys or not keys.startswith(f"{self.sink_id}:"):
            return  # another sink whose tag hash collided
        try:
            record = orjson.loads(body)
        except orjson.JSONDecodeError:
            log.warning("decision log %s: record with keys %s is not JSON; skipped", self.topic, keys)
            return
        if isinstance(record, dict):
            self.state.apply(record, stored_ms)

    # -- writing --------------------------------------------------------------------------------------------------

    def append(self, records: Iterable[Mapping[str, object]], *, master_wait_ms: int = 0) -> None:
        """Send ``records`` in order to the sink's queue, each acknowledged before the next is sent. A record whose
        master does not answer is sent again for up to ``master_wait_ms``: sending one twice is harmless (chunks of
        one commit id are the same; the first decided record of a batch wins)."""
        mq = self.own_queue()
        for record in records:
            msg = Message(self.topic, orjson.dumps(record), tags=self.sink_id,
                          keys=f"{self.sink_id}:{record['batch']}")
            try:
                wait_for_master(f"recording the decision ({record['kind']} of batch {record['batch']}) in {mq}",
                                mq.broker_name, master_wait_ms, lambda m=msg: self.client.send(m, mq),
                                lambda: self.client.get_route(self.topic, refresh=True))
            except (MQBrokerError, MQClientError, RemotingError) as err:
                raise ConnectorError(f"cannot record the sink decision ({record['kind']} of batch {record['batch']}) "
                                     f"in {mq}: {err}") from err
