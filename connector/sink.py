"""The exactly-once sink: ``df.writeStream.format("rmq")`` and ``df.write.format("rmq")``.

Protocol (one micro-batch, or one batch job, is one unit of all-or-nothing):

1. **Tasks** (executors) send every row as a half message of the sink's producer group ``RMQ_SINK_<sinkId>``
   (TRAN_MSG=true, PGROUP; invisible to consumers), pipelined, up to ``maxInFlight`` per broker connection (RocketMQ
   refuses transactional batches). Each half carries RMQ_SINK_ID, RMQ_SINK_BATCH and RMQ_SINK_RUN: the sink, the
   batch (streaming: Spark's ``streaming.sql.batchId`` local property; batch jobs: a fresh "job-<uuid>")
   and a task-run id, fresh for every ``write()`` call, so a retried or speculative attempt has its own. Halves carry
   CHECK_IMMUNITY_TIME_IN_SECONDS (``checkImmunitySeconds``, default 120): the broker does not check them earlier,
   and refuses the producer's own END_TRANSACTION later. A task returns a TaskCommit: its run id, row count, and
   the handles END_TRANSACTION needs (broker, commit log offset, half queue offset, UNIQ_KEY).
2. **commit(messages, batchId)** on the driver, in a short-lived Python worker (PySpark re-creates the writer for
   each call, so nothing lives in the driver's memory between calls):

   a. make sure the **resolver** of this sink runs on this host (connector/resolver.py: a detached process, one per
      sinkId and host, holding a lock file; it heartbeats as a producer of the sink's group, so the broker sends it
      the CHECK_TRANSACTION_STATE of the sink's half messages, and answers them from the decision log; a batch job
      with the topic option starts it when Spark plans the job, so its start-up overlaps the tasks);
   b. read the **decision log** (connector/decisions.py, a topic in the same cluster). If the batch is already
      decided (Spark re-runs a batch after a driver restart), the decided attempt wins: the new attempt's halves are
      rolled back at once, the decided ones are left to the resolver (see 3), and commit returns;
   c. else record the decision durably first (the winning run ids, then a "decided" record; acknowledged sends);
   d. then END_TRANSACTION COMMIT (two-way, pipelined, in order per queue when rows had a shardingKey) for the
      handles of tasks whose first half is younger than half the immunity time. Older ones are left to the check.
3. **The check finishes what the driver did not**: halves of a lost attempt (a failed or speculative task, a
   re-run) are answered ROLLBACK once their batch is decided; the decided winners are answered COMMIT. A driver
   that dies after 2c loses nothing: the resolver (detached, it outlives the driver) commits the winners when the
   broker asks, however long the driver stays down, and a restarted query rolls its re-run back (2b).
4. **abort(messages[, batchId])** rolls back the handles it gets. A batch job also records "aborted" (its id is never
   reused), so the resolver rolls back the halves of failed tasks too; a streaming abort records nothing: the
   batch is re-run after the restart and decided then, and its old halves lose.

Why the driver never re-sends COMMIT for a decided batch it did not commit itself: Apache's EndTransactionProcessor
does not look for an earlier end of the same half, so a second COMMIT stores the message twice. Exactly one COMMIT
reaches each winner: the driver's (only within half the immunity time, before the broker may check it) or the
resolver's (only when the broker asks, which it does only after the immunity time and only for halves without an
op record). See README "Exactly-once sink" for the guarantee and its limits.

Rows: ``body`` (binary or string, required), ``topic`` (else the option), ``tags``, ``keys`` (space-separated),
``properties`` (map<string,string>), ``shardingKey`` (same key, same queue: SelectMessageQueueByHash over the
topic's write queues; in order), ``delayLevel`` (RocketMQ cannot delay a transactional message: a row with a
level > 0 fails the task with an error saying so; null or 0 is accepted).
"""

from __future__ import annotations

import logging
import os
import signal
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from broker.client import protocol
from broker.client.blocking import BlockingClient, Pipeline, RequestTemplate
from broker.client.message import MessageQueue, compress_body, create_uniq_id
from broker.client.route import MASTER_ID
from broker.client.transaction import (
    LocalTransactionState,
    end_transaction_template,
    half_message_template,
    half_properties,
)
from broker.common.errors import ConnectorError, MQBrokerError, MQClientError, RemotingError
from broker.common.message import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_PREPARED_TYPE,
    decode_offset_msg_id,
    encode_properties,
    java_hash,
)
from broker.remoting.codes import ResponseCode
from broker.remoting.command import RemotingCommand
from connector.decisions import (
    PROPERTY_SINK_BATCH,
    PROPERTY_SINK_ID,
    PROPERTY_SINK_RUN,
    DecisionLog,
    decision_records,
)
from connector.options import SinkOptions

log = logging.getLogger(__name__)

COMPRESS_OVER = 4096  # the producer's compressMsgBodyOverHowmuch
# A broker in flow control answers SYSTEM_BUSY without storing anything; the half message is sent again after a
# pause that doubles each time (Java's producer retries SYSTEM_BUSY too), this many times at most.
BUSY_RETRIES = 5
BUSY_PAUSE_S = 0.1
# What a task keeps of a half message until the broker answers: (row, topic index, queue id, UNIQ_KEY, opaque,
# frame, tries), the frame to send it again.
_Sent = tuple[int, int, int, str, int, bytes, int]


# -- what a task hands back --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class BrokerHandles:
    """The half messages one task sent to one broker: (topic index, real queue id, commit log offset, half queue
    offset, UNIQ_KEY) each, in send order."""

    address: str
    broker_name: str
    halves: list[tuple[int, int, int, int, str]] = field(default_factory=list)


@dataclass(slots=True)
class TaskCommit(WriterCommitMessage):
    """What one successful task attempt returns to the driver."""

    sink_id: str
    batch: str
    run: str
    rows: int
    first_born_ms: int
    ordered: bool
    topics: list[str]
    brokers: list[BrokerHandles]


# -- executors: rows to half messages ----------------------------------------------------------------------------------


class _Target:
    """One write queue of a topic as the sender uses it: the queue id as sent, the broker, its frame template."""

    __slots__ = ("queue_id", "queue_text", "address", "broker_name", "template", "out")

    def __init__(self, mq: MessageQueue, address: str, template: RequestTemplate, out: list) -> None:
        self.queue_id, self.queue_text = mq.queue_id, str(mq.queue_id)
        self.address, self.broker_name, self.template, self.out = address, mq.broker_name, template, out


class HalfSender:
    """Sends one task's rows as half messages over pipelined connections and keeps their handles.

    Per row, only what differs is made: the frame comes from a template per (topic, broker) (queue id, born time,
    sysFlag and properties spliced in), the properties string is the row's entries around constant parts encoded
    once (all by ``encode_properties``), and the frames of a broker go out ``chunk`` at a time in one socket write;
    responses are read in bulk."""

    def __init__(self, opts: SinkOptions, batch: str, run: str) -> None:
        self.opts = opts
        self.group = opts.producer_group
        self.client = BlockingClient(opts.namesrv_addr, timeout_ms=opts.send_timeout_ms, producer_group=self.group)
        self.sink_props = {PROPERTY_SINK_ID: opts.sink_id, PROPERTY_SINK_BATCH: batch, PROPERTY_SINK_RUN: run,
                           PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: str(opts.check_immunity_s)}
        # WAIT first (a row's own properties may override it), the half-message and sink properties last (they win),
        # then the row's UNIQ_KEY.
        self._row_head = encode_properties({PROPERTY_WAIT_STORE_MSG_OK: "true"})
        self._tail = half_properties(self.group, self.sink_props)
        self._reserved = {PROPERTY_TRANSACTION_PREPARED, PROPERTY_PRODUCER_GROUP, PROPERTY_DELAY_TIME_LEVEL,
                          *self.sink_props}
        self.batch, self.run = batch, run
        self.rows = 0
        self.first_born_ms = 0
        self.ordered = False
        self.chunk = max(1, opts.max_in_flight // 4)
        self._topics: dict[str, int] = {}
        self._targets: dict[str, list[_Target]] = {}
        self._next_queue: dict[str, int] = {}
        self._pipes: dict[str, Pipeline] = {}
        self._out: dict[str, list[tuple[int, bytes, _Sent]]] = {}
        self._handles: dict[str, BrokerHandles] = {}

    def close(self) -> None:
        self.client.close()

    def _targets_of(self, topic: str) -> list[_Target]:
        targets = self._targets.get(topic)
        if targets is None:
            try:
                found = self.client.fetch_publish_queues(topic)
            except (MQClientError, RemotingError) as err:
                raise ConnectorError(f"rmq sink: no route to topic {topic} through {self.opts.namesrv_addr}: "
                                     f"{err}") from err
            if not found:
                raise ConnectorError(f"rmq sink: topic {topic} has no writable queue")
            templates: dict[str, RequestTemplate] = {}
            targets = []
            for mq in sorted(found, key=lambda q: (q.broker_name, q.queue_id)):
                addr = self._addr(mq)
                template = templates.get(mq.broker_name)
                if template is None:
                    template = templates[mq.broker_name] = half_message_template(self.group, topic, mq.broker_name)
                if addr not in self._pipes:
                    self._pipes[addr] = Pipeline(self.client.client(addr), window=self.opts.max_in_flight,
                                                 timeout_ms=self.opts.send_timeout_ms)
                    self._handles[addr] = BrokerHandles(addr, mq.broker_name)
                targets.append(_Target(mq, addr, template, self._out.setdefault(addr, [])))
            self._targets[topic] = targets
            self._topics.setdefault(topic, len(self._topics))
        return targets

    def send(self, topic: str, body: bytes, tags: str | None, keys: str | None,
             properties: Sequence[tuple[str, str]] | dict[str, str] | None, sharding_key: str | None) -> None:
        targets = self._targets.get(topic) or self._targets_of(topic)
        if sharding_key is not None:
            target = targets[abs(java_hash(sharding_key) % len(targets))]
            self.ordered = True
        else:
            index = self._next_queue.get(topic, 0)
            self._next_queue[topic] = index + 1
            target = targets[index % len(targets)]
        row = self._row_head
        if keys or tags:  # an empty one is left out too
            row = encode_properties(((PROPERTY_KEYS, keys or None), (PROPERTY_TAGS, tags or None))) + row
        uniq = None
        if properties:
            own = dict(properties)
            uniq = own.pop(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, None)  # kept, as set_uniq_id keeps one
            row += encode_properties({k: v for k, v in own.items() if k not in self._reserved})
        if not uniq:
            uniq = create_uniq_id()
        sys_flag = "4"  # TRANSACTION_PREPARED_TYPE
        if len(body) >= COMPRESS_OVER:
            body, flags = compress_body(body)
            sys_flag = str(TRANSACTION_PREPARED_TYPE | flags)
        born = time.time_ns() // 1_000_000
        if not self.first_born_ms:
            self.first_born_ms = born
        opaque, frame = target.template.frame(
            (target.queue_text, sys_flag, str(born),
             row + self._tail + encode_properties(((PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, uniq),))), body)
        out = target.out
        out.append((opaque, frame, (self.rows, self._topics[topic], target.queue_id, uniq, opaque, frame, 0)))
        self.rows += 1
        if len(out) >= self.chunk:
            self._record(target.address, self._pipes[target.address].submit_frames(out))
            out.clear()

    def _addr(self, mq: MessageQueue) -> str:
        try:
            return self.client.broker_addr(mq)
        except (MQClientError, RemotingError) as err:
            raise ConnectorError(f"rmq sink: no master address for {mq}: {err}") from err

    def flush(self) -> None:
        for addr, pipe in self._pipes.items():
            out = self._out[addr]
            if out:
                self._record(addr, pipe.submit_frames(out))
                out.clear()
            while pipe.in_flight:  # a half message sent again (SYSTEM_BUSY) is in flight once more
                self._record(addr, pipe.drain())

    def _record(self, addr: str, done: list[tuple[object, RemotingCommand]]) -> None:
        """Keep the handles of the half messages ``addr`` stored; send again those it turned away in flow control;
        raise on any other refusal."""
        if not done:
            return
        halves = self._handles[addr].halves
        busy = []
        for context, response in done:
            seq, topic_index, queue_id, uniq, _, _, tries = context
            if response.code == ResponseCode.SYSTEM_BUSY and tries < BUSY_RETRIES:
                busy.append(context)
                continue
            ext = response.ext_fields
            if response.code == ResponseCode.SUCCESS:
                offset_msg_id, queue_offset = ext["msgId"], int(ext["queueOffset"])
            else:  # refused (raises), or stored without the flush or replica confirmation (kept, as before)
                topic = next(t for t, i in self._topics.items() if i == topic_index)
                broker_name = self._handles[addr].broker_name
                try:
                    result = protocol.parse_send_response(response, topic, broker_name, addr, [uniq])
                except MQBrokerError as err:
                    raise ConnectorError(f"rmq sink: the half message to {topic}@{broker_name}:{queue_id} was "
                                         f"refused by {addr}: {err}") from err
                offset_msg_id, queue_offset = result.offset_msg_id, result.queue_offset
            _, commit_log_offset = decode_offset_msg_id(offset_msg_id)
            halves.append((seq, topic_index, queue_id, commit_log_offset, queue_offset, uniq))
        if busy:
            tries = max(context[6] for context in busy)
            log.warning("rmq sink: %s is busy (flow control); sending %d half messages again in %.2f s", addr,
                        len(busy), BUSY_PAUSE_S * 2 ** tries)
            time.sleep(BUSY_PAUSE_S * 2 ** tries)
            pipe = self._pipes[addr]
            for start in range(0, len(busy), pipe.window):
                self._record(addr, pipe.submit_frames([(c[4], c[5], (*c[:6], c[6] + 1))
                                                       for c in busy[start:start + pipe.window]]))

    def task_commit(self) -> TaskCommit:
        """The handles in row order (a broker may answer pipelined sends out of order), without the row numbers."""
        for handles in self._handles.values():
            handles.halves.sort()
            handles.halves = [h[1:] for h in handles.halves]
        topics = sorted(self._topics, key=self._topics.__getitem__)
        return TaskCommit(self.opts.sink_id, self.batch, self.run, self.rows, self.first_born_ms, self.ordered,
                          topics, [h for h in self._handles.values() if h.halves])


def _column(batch: object, name: str) -> list | None:
    index = batch.schema.get_field_index(name)
    return None if index < 0 else batch.column(index).to_pylist()


def write_task(opts: SinkOptions, batches: Iterator[object], batch_id: str) -> TaskCommit:
    """One task: every row of ``batches`` (pyarrow RecordBatches) as a half message; the TaskCommit on success."""
    from pyspark import TaskContext

    context = TaskContext.get()
    sender = HalfSender(opts, batch_id, uuid.uuid4().hex)
    fail_after = _task_fault(opts, context, batch_id)
    try:
        for batch in batches:
            bodies = _column(batch, "body")
            n = len(bodies)
            none = [None] * n
            topics = _column(batch, "topic") or none
            tags = _column(batch, "tags") or none
            keys = _column(batch, "keys") or none
            props = _column(batch, "properties") or none
            shards = _column(batch, "shardingKey") or none
            delays = _column(batch, "delayLevel") or none
            for i in range(n):
                body = bodies[i]
                if body is None:
                    raise ConnectorError(f"rmq sink: row {sender.rows} has a null body")
                if isinstance(body, str):
                    body = body.encode()
                if not body:
                    raise ConnectorError(f"rmq sink: row {sender.rows} has an empty body (RocketMQ refuses it)")
                if delays[i]:
                    raise ConnectorError(
                        f"rmq sink: row {sender.rows} has delayLevel {delays[i]}; RocketMQ does not delay "
                        "transactional messages (the official TransactionMQProducer drops the level too), so the "
                        "exactly-once sink cannot send it: remove the column or set it to null/0")
                topic = topics[i] or opts.topic
                if topic is None:
                    raise ConnectorError(f"rmq sink: row {sender.rows} has a null topic and no topic option is set")
                row_props = props[i]
                sender.send(topic, body, tags[i], keys[i], row_props, shards[i])
                if fail_after is not None and sender.rows >= fail_after:
                    sender.flush()
                    raise RuntimeError(f"rmq sink: injected task failure after {sender.rows} rows (faultInjection)")
        sender.flush()
        return sender.task_commit()
    finally:
        sender.close()


def _task_fault(opts: SinkOptions, context: object, batch_id: str) -> int | None:
    """faultInjection {"failTask": {"partition": p, "batch": "b", "afterRows": n}}: the first attempt of that
    partition (of that batch, if given) fails after n rows are stored as halves."""
    spec = (opts.fault or {}).get("failTask")
    if not spec or context is None or context.attemptNumber() != 0:
        return None
    if context.partitionId() != int(spec.get("partition", 0)):
        return None
    if spec.get("batch") is not None and str(spec["batch"]) != batch_id:
        return None
    return int(spec.get("afterRows", 1))


# -- the driver: decide, then end --------------------------------------------------------------------------------------


@dataclass(slots=True)
class EndCounts:
    ended: int = 0
    late: int = 0  # past the immunity time: left to the check
    failed: int = 0


def end_transactions(client: BlockingClient, opts: SinkOptions, commits: Sequence[TaskCommit],
                     state: LocalTransactionState) -> EndCounts:
    """END_TRANSACTION ``state`` for every handle of ``commits``, two-way and pipelined per broker (framed from a
    template per topic and broker, written a chunk at a time); in order per queue for tasks that used sharding keys.
    Failures are counted, not raised: what the driver does not end, the check ends (the decision is recorded
    already)."""
    counts = EndCounts()
    pipes: dict[str, Pipeline] = {}
    outs: dict[str, list[tuple[int, bytes, None]]] = {}
    templates: dict[tuple[str, str], RequestTemplate] = {}
    group = opts.producer_group
    chunk = max(1, opts.max_in_flight // 4)

    def tally(done: list[tuple[object, RemotingCommand]]) -> None:
        for _, response in done:
            if response.code == ResponseCode.SUCCESS:
                counts.ended += 1
            elif response.code == ResponseCode.ILLEGAL_OPERATION:
                counts.late += 1
            else:
                counts.failed += 1
                log.warning("rmq sink %s: END_TRANSACTION %s answered %s %s", opts.sink_id, state.value,
                            response.code, response.remark)

    def send_out(address: str) -> None:
        out = outs[address]
        try:
            tally(pipes[address].submit_frames(out))
        except RemotingError as err:
            counts.failed += len(out)
            log.warning("rmq sink %s: END_TRANSACTION to %s failed: %s", opts.sink_id, address, err)
        out.clear()

    for commit in commits:
        for handles in commit.brokers:
            address = handles.address
            pipe = pipes.get(address)
            if pipe is None:
                pipe = pipes[address] = Pipeline(client.client(address), window=opts.max_in_flight,
                                                 timeout_ms=opts.send_timeout_ms)
                outs[address] = []
            out = outs[address]
            by_topic = []
            for topic in commit.topics:
                template = templates.get((topic, handles.broker_name))
                if template is None:
                    template = templates[topic, handles.broker_name] = end_transaction_template(
                        group, topic, handles.broker_name, state)
                by_topic.append(template)
            for topic_index, queue_id, commit_log_offset, queue_offset, uniq in handles.halves:
                opaque, frame = by_topic[topic_index].frame((str(queue_offset), str(commit_log_offset), uniq, uniq))
                if not commit.ordered:
                    out.append((opaque, frame, None))
                    if len(out) >= chunk:
                        send_out(address)
                    continue
                try:
                    tally(pipe.submit_frame(opaque, frame, None, (commit.topics[topic_index], queue_id)))
                except RemotingError as err:
                    counts.failed += 1
                    log.warning("rmq sink %s: END_TRANSACTION to %s failed: %s", opts.sink_id, address, err)
    for address, pipe in pipes.items():
        if outs[address]:
            send_out(address)
        try:
            tally(pipe.drain())
        except RemotingError as err:
            counts.failed += pipe.in_flight
            log.warning("rmq sink %s: END_TRANSACTION responses from %s lost: %s", opts.sink_id, address, err)
    return counts


def _task_commits(opts: SinkOptions, messages: Sequence[object | None], batch: str) -> list[TaskCommit]:
    commits = [m for m in messages if m is not None]
    for m in commits:
        if not isinstance(m, TaskCommit) or m.sink_id != opts.sink_id or m.batch != batch:
            raise ConnectorError(f"rmq sink {opts.sink_id}: commit of batch {batch} got a commit message of "
                                 f"another sink or batch: {m!r}"[:500])
    return commits


def _brokers(commits: Sequence[TaskCommit]) -> dict[str, str]:
    return {h.broker_name: h.address for c in commits for h in c.brokers}


def commit_batch(opts: SinkOptions, messages: Sequence[object | None], batch: str) -> None:
    """Step 2 of the module docstring."""
    from connector.resolver import ensure_resolver

    commits = _task_commits(opts, messages, batch)
    if not any(c.rows for c in commits):
        return  # nothing was sent: nothing to decide
    with BlockingClient(opts.namesrv_addr, timeout_ms=opts.send_timeout_ms,
                        producer_group=opts.producer_group) as client:
        decisions = DecisionLog(client, opts.decision_topic, opts.sink_id)
        decisions.ensure_topic(_brokers(commits))
        ensure_resolver(opts, sorted({t for c in commits for t in c.topics}))
        decided = decisions.refresh().decided.get(batch)
        if decided is not None:
            losers = [c for c in commits if c.run not in decided.winners]
            counts = end_transactions(client, opts, losers, LocalTransactionState.ROLLBACK_MESSAGE)
            log.warning("rmq sink %s: batch %s was decided before (commit %s, %d rows); this re-run's %d rows are "
                        "rolled back (%d ended), the decided ones are committed by the resolver", opts.sink_id,
                        batch, decided.commit, decided.rows, sum(c.rows for c in losers), counts.ended)
            return
        decisions.append(decision_records(batch, uuid.uuid4().hex, {c.run: c.rows for c in commits}))
        _decision_fault(opts, batch)
        cutoff_ms = int(time.time() * 1000) - opts.check_immunity_s * 500
        direct = [c for c in commits if c.first_born_ms >= cutoff_ms]
        counts = end_transactions(client, opts, direct, LocalTransactionState.COMMIT_MESSAGE)
        left = sum(c.rows for c in commits) - counts.ended
        if left:
            log.warning("rmq sink %s: batch %s decided; %d of its rows are left to the broker's check (late: %d, "
                        "failed: %d, older than half the immunity time: %d)", opts.sink_id, batch, left, counts.late,
                        counts.failed, sum(c.rows for c in commits if c not in direct))


def _decision_fault(opts: SinkOptions, batch: str) -> None:
    """faultInjection {"killAfterDecision": {"batch": "b", "pgid": n}}: kill process group n (the driver) and this
    worker right after the decision of batch b is recorded, before any END_TRANSACTION."""
    spec = (opts.fault or {}).get("killAfterDecision")
    if not spec or str(spec.get("batch")) != batch:
        return
    pgid = int(spec["pgid"])
    log.warning("rmq sink %s: faultInjection kills process group %d after deciding batch %s", opts.sink_id, pgid,
                batch)
    try:
        os.killpg(pgid, signal.SIGKILL)
    finally:
        os._exit(137)


def abort_batch(opts: SinkOptions, messages: Sequence[object | None], batch: str, *, record: bool) -> None:
    """Step 4 of the module docstring. The abort of a batch job is recorded even when no task returned a commit
    message (all failed or were cancelled): their half messages exist all the same, and the resolver rolls them
    back on the broker's check only once the log says the job was aborted."""
    commits = [m for m in messages if isinstance(m, TaskCommit) and m.sink_id == opts.sink_id]
    if not commits and not record:
        return
    with BlockingClient(opts.namesrv_addr, timeout_ms=opts.send_timeout_ms,
                        producer_group=opts.producer_group) as client:
        if record:
            from connector.resolver import ensure_resolver

            topics = sorted({t for c in commits for t in c.topics} | ({opts.topic} if opts.topic else set()))
            brokers = _brokers(commits) or _master_brokers(client, topics)
            decisions = DecisionLog(client, opts.decision_topic, opts.sink_id)
            if brokers:
                decisions.ensure_topic(brokers)
            if decisions.queues():
                ensure_resolver(opts, topics)
                decisions.append([{"kind": "aborted", "batch": batch}])
            else:
                log.warning("rmq sink %s: batch %s aborted before any task reported where it wrote; its half "
                            "messages end when the broker stops checking them", opts.sink_id, batch)
        if commits:
            counts = end_transactions(client, opts, commits, LocalTransactionState.ROLLBACK_MESSAGE)
            log.warning("rmq sink %s: batch %s aborted; %d half messages rolled back", opts.sink_id, batch,
                        counts.ended)


def _master_brokers(client: BlockingClient, topics: Sequence[str]) -> dict[str, str]:
    """{brokerName: master address} of the brokers that hold ``topics`` (those without a route are skipped)."""
    brokers: dict[str, str] = {}
    for topic in topics:
        try:
            route = client.get_route(topic)
        except (MQClientError, RemotingError):
            continue
        brokers.update({b.broker_name: b.broker_addrs[MASTER_ID] for b in route.broker_datas
                        if MASTER_ID in b.broker_addrs})
    return brokers


# -- the Spark writers -----------------------------------------------------------------------------------------------


class RmqStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("rmq")``: one decision per micro-batch under the query's sinkId."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def write(self, iterator: Iterator[object]) -> TaskCommit:
        from pyspark import TaskContext

        context = TaskContext.get()
        batch = context.getLocalProperty("streaming.sql.batchId") if context is not None else None
        if batch is None:
            raise ConnectorError("rmq sink: the streaming batch id (local property streaming.sql.batchId) is not "
                                 "set in this task")
        return write_task(self.opts, iterator, str(batch))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (Spark's name)
        commit_batch(self.opts, messages, str(batchId))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        abort_batch(self.opts, messages, str(batchId), record=False)


class RmqBatchWriter(DataSourceArrowWriter):
    """``write.format("rmq")``: the whole job is one batch with an id of its own (made here: Spark pickles this
    object to the tasks and to the commit), under the sinkId option or a fresh sink id per job; decided once. On
    abort the job is recorded aborted, so no half of it is ever committed."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self.batch = f"job-{uuid.uuid4().hex}"
        if opts.topic is not None and "topic" not in getattr(schema, "names", ()):
            # the sink id is fresh per job by default: its resolver starts now, while the tasks run (commit waits)
            from connector.resolver import start_resolver

            start_resolver(opts, [opts.topic])

    def write(self, iterator: Iterator[object]) -> TaskCommit:
        return write_task(self.opts, iterator, self.batch)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        commit_batch(self.opts, messages, self.batch)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        abort_batch(self.opts, messages, self.batch, record=True)
