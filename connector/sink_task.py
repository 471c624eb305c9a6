"""The sink's tasks (Spark executors): every row of a partition as a half message, and what the task hands the
driver (step 1 of the protocol in connector/sink.py).

``write_task`` runs one task: a ``HalfSender`` sends the rows (connector/sink_send.py: pipelined per broker, in
prepared batches where the broker takes them) and keeps the handles END_TRANSACTION will need; the task returns
them in a ``TaskCommit``, which Spark pickles to the driver. With ``guarantee=at-least-once`` a ``PlainSender``
sends plain batches instead and the task returns only its row count (``PlainCommit``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from pyspark.sql.datasource import WriterCommitMessage

from broker.client.transaction_protocol import half_properties
from broker.common.errors import ConnectorError
from broker.common.message import PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS, TRANSACTION_PREPARED_TYPE
from broker.common.message_batch import BatchMessage, decode_batch_body, encode_batch_body
from broker.remoting import command
from broker.remoting.codes import RequestCode
from broker.remoting.frame import FrameDecoder
from broker.remoting.transaction_batch import COUNT, decode_end_batch_body, encode_end_batch_entries
from connector.decisions import PROPERTY_SINK_BATCH, PROPERTY_SINK_ID, PROPERTY_SINK_RUN
from connector.options import SinkOptions
from connector.sink_send import PlainSender, Request, RowSender

log = logging.getLogger(__name__)


# -- what a task hands back --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class HandleRun:
    """The half messages one stored request holds, in row order: ``count`` handles in END_TRANSACTION_BATCH's
    per-handle layout (``entries``: commit log offset, half queue offset, UNIQ_KEY each), made once from the
    broker's answer. A task keeps, pickles and hands over these bytes, and the driver joins them into its
    requests, instead of an object per row."""

    topic_index: int
    queue_id: int
    count: int
    entries: bytes

    def halves(self) -> list[tuple[int, int, int, int, str]]:
        """(topic index, real queue id, commit log offset, half queue offset, UNIQ_KEY) of each, decoded."""
        return [(self.topic_index, self.queue_id, *handle)
                for handle in decode_end_batch_body(COUNT.pack(self.count) + self.entries)]


@dataclass(slots=True)
class BrokerHandles:
    """The half messages one task sent to one broker, as runs of a request each, in row order."""

    address: str
    broker_name: str
    runs: list[HandleRun] = field(default_factory=list)

    @property
    def count(self) -> int:
        return sum(run.count for run in self.runs)

    @property
    def halves(self) -> list[tuple[int, int, int, int, str]]:
        """Each half as a tuple (``HandleRun.halves``), in row order: for per-row END_TRANSACTIONs, traces, tests."""
        return [half for run in self.runs for half in run.halves()]


@dataclass(slots=True)
class TaskCommit(WriterCommitMessage):
    """What one successful task attempt returns to the driver: ``runs`` counts the halves stored under each of its
    run ids (one, plus one per time its master went away and came back), ``drops`` the UNIQ_KEYs of halves of a
    run that lose all the same (in flight when the master went away: sent again under the next run)."""

    sink_id: str
    batch: str
    runs: dict[str, int]
    drops: dict[str, list[str]]
    rows: int
    first_born_ms: int
    ordered: bool
    topics: list[str]
    brokers: list[BrokerHandles]
    attempt: int = 0  # the task's attemptNumber: above 0, an earlier attempt may have left half messages
    traced: dict[str, tuple[str | None, str | None]] | None = None  # enableMsgTrace: (tags, keys) by UNIQ_KEY


# -- executors: rows to half messages ----------------------------------------------------------------------------------


class HalfSender(RowSender):
    """Sends one task's rows as half messages (connector/sink_send.py says how: in prepared batches to a broker
    that takes them, else one per row) and keeps their handles, run ids and drops."""

    SYS_FLAG = TRANSACTION_PREPARED_TYPE
    ALWAYS_BATCHED = False

    def __init__(self, opts: SinkOptions, batch: str, run: str) -> None:
        super().__init__(opts, run)
        self.sink_props = {PROPERTY_SINK_ID: opts.sink_id, PROPERTY_SINK_BATCH: batch, PROPERTY_SINK_RUN: run,
                           PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: str(opts.check_immunity_s)}
        self._tail = half_properties(self.group, self.sink_props)
        self.batch = batch
        self.runs: dict[str, int] = {run: 0}  # halves stored (acknowledged) under each run id
        self.drops: dict[str, list[str]] = {}  # UNIQ_KEYs of halves of a run in flight when their master went away
        # by address: (first row, run id, UNIQ_KEYs, the run of handles) of each stored request, in answer order
        self._stored_runs: dict[str, list[tuple[int, str, list[str], HandleRun]]] = {}

    def _stored(self, addr: str, request: Request, offset_msg_ids: list[str], queue_offset: int) -> None:
        """A stored request's halves, as one run of handles (commit log offsets from the offset msg ids, half queue
        offsets consecutive from the first)."""
        try:
            entries = encode_end_batch_entries(offset_msg_ids, queue_offset, request.uniqs)
        except ValueError as err:
            raise ConnectorError(f"rmq sink: {addr} answered a send of {len(request.seqs)} half messages with "
                                 f"unusable message ids: {err}") from err
        run = HandleRun(request.topic_index, request.queue_id, len(request.seqs), entries)
        self._stored_runs.setdefault(addr, []).append((request.seqs[0], request.run, request.uniqs, run))
        self.runs[request.run] += len(request.seqs)

    def _lost(self, addr: str, lost: list[Request]) -> list[Request]:
        """Halves in flight may or may not have been stored: the task drops them (``drops``, by their run and
        UNIQ_KEY; the resolver rolls those back) and sends them again under a new run, so each row is committed
        once whichever copy was stored. A batch is dropped and sent again whole."""
        for request in lost:
            self.drops.setdefault(request.run, []).extend(request.uniqs)
        old = {request.run for request in lost}
        self._new_run()
        for request in lost:
            request.frame = _with_run(request.frame, request.run, self.run)
            request.run = self.run
        log.warning("rmq sink: sending %d half messages again to %s under run %s (they lose under run %s)",
                    sum(len(r.seqs) for r in lost), addr, self.run, ", ".join(sorted(old)))
        return lost

    def _new_run(self) -> None:
        self.run = uuid.uuid4().hex
        self.runs[self.run] = 0
        self.sink_props[PROPERTY_SINK_RUN] = self.run
        self._tail = half_properties(self.group, self.sink_props)

    def task_commit(self) -> TaskCommit:
        """The runs of handles in row order of their first rows (a broker may answer pipelined sends out of order;
        a queue's requests hold disjoint rising rows, so its handles come in row order), without rows and runs."""
        brokers = []
        drops = {run: set(keys) for run, keys in self.drops.items()}
        for addr, stored in self._stored_runs.items():
            stored.sort(key=lambda s: s[0])
            for _, run, uniqs, _ in stored:
                dropped = drops.get(run)
                uniq = next((u for u in uniqs if u in dropped), None) if dropped else None
                if uniq is not None:
                    raise ConnectorError(f"rmq sink: two rows of this task carry the UNIQ_KEY {uniq}, and one "
                                         "of them was in flight when its master went away: the task cannot tell "
                                         "them apart and fails (Spark may run it again)")
            brokers.append(BrokerHandles(addr, self._broker_names[addr], [s[3] for s in stored]))
        topics = sorted(self._topics, key=self._topics.__getitem__)
        return TaskCommit(self.opts.sink_id, self.batch, {r: n for r, n in self.runs.items() if n},
                          {r: keys for r, keys in self.drops.items()}, self.rows, self.first_born_ms, self.ordered,
                          topics, brokers)


def _with_run(frame: bytes, old: str, new: str) -> bytes:
    """A request's frame with RMQ_SINK_RUN ``old`` replaced by ``new`` (opaque and all else kept): in the header's
    properties of a half message, in every item's of a prepared batch."""
    (parsed,) = FrameDecoder().feed(frame)
    request = command.decode(parsed)
    if request.code == RequestCode.SEND_BATCH_MESSAGE:
        items = [BatchMessage(m.body, {**m.properties, PROPERTY_SINK_RUN: new}, m.flag)
                 if m.properties.get(PROPERTY_SINK_RUN) == old else m for m in decode_batch_body(request.body)]
        return command.encode(replace(request, body=encode_batch_body(items)))
    before, after = f"{PROPERTY_SINK_RUN}\x01{old}\x02", f"{PROPERTY_SINK_RUN}\x01{new}\x02"
    fields = {name: value.replace(before, after) for name, value in request.ext_fields.items()}
    return command.encode(replace(request, ext_fields=fields))


def _column(batch: object, name: str) -> list | None:
    index = batch.schema.get_field_index(name)
    return None if index < 0 else batch.column(index).to_pylist()


@dataclass(slots=True)
class PlainCommit(WriterCommitMessage):
    """What a task of an at-least-once sink returns: how many rows it sent (they are visible already)."""

    sink_id: str
    batch: str
    rows: int


def write_task(opts: SinkOptions, batches: Iterator[object], batch_id: str) -> TaskCommit | PlainCommit:
    """One task: every row of ``batches`` (pyarrow RecordBatches) as a half message (the TaskCommit on success),
    or as a plain message (at-least-once: a PlainCommit)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    sender: RowSender = (HalfSender(opts, batch_id, uuid.uuid4().hex) if opts.exactly_once
                         else PlainSender(opts))
    if opts.trace_topic is not None:
        from connector.tracing import SinkTracer

        sender.tracer = SinkTracer(opts, half=opts.exactly_once)
    fail_after = _task_fault(opts, context, batch_id)
    try:
        for batch in batches:
            _send_rows(opts, sender, batch, fail_after)
        sender.flush()
        if isinstance(sender, HalfSender):
            commit = _attempt_of(context, sender.task_commit())
            if sender.tracer is not None:
                commit.traced = sender.tracer.stored_rows
            return commit
        return PlainCommit(opts.sink_id, batch_id, sender.rows)
    finally:
        sender.close()
        if sender.tracer is not None:
            sender.tracer.close()  # the task ends once its Pub records are sent


def _attempt_of(context: object, commit: TaskCommit) -> TaskCommit:
    """Say which attempt this is: the driver lets the sink's resolver go only when no other attempt it can know of
    may have left half messages (connector/settle.py)."""
    if context is not None:
        commit.attempt = context.attemptNumber()
    return commit


def _send_rows(opts: SinkOptions, sender: RowSender, batch: object, fail_after: int | None) -> None:
    bodies = _column(batch, "body")
    n = len(bodies)
    none = [None] * n
    topics = none if opts.topic else _column(batch, "topic") or none
    tags = _column(batch, "tags") or none
    keys = _column(batch, "keys") or none
    props = _column(batch, "properties") or none
    shards = _column(batch, "shardingKey") or none
    delays = _column(batch, "delayLevel") or none
    if sender.tracer is not None:  # before any send: answers to this batch's rows may come while it is sent
        sender.tracer.note_rows(sender.rows, [opts.topic or t for t in topics], tags, keys, bodies)
    for i in range(n):
        body = bodies[i]
        if body is None:
            raise ConnectorError(f"rmq sink: row {sender.rows} has a null body")
        if isinstance(body, str):
            body = body.encode()
        if not body:
            raise ConnectorError(f"rmq sink: row {sender.rows} has an empty body (RocketMQ refuses it)")
        if delays[i]:
            raise ConnectorError(_delay_refusal(opts, sender.rows, delays[i]))
        topic = opts.topic or topics[i]  # the option overrides the column, as in Kafka's sink
        if topic is None:
            raise ConnectorError(f"rmq sink: row {sender.rows} has a null topic and no topic option is set")
        sender.send(topic, body, tags[i], keys[i], props[i], shards[i])
        if fail_after is not None and sender.rows >= fail_after:
            sender.flush()
            raise RuntimeError(f"rmq sink: injected task failure after {sender.rows} rows (faultInjection)")


def _delay_refusal(opts: SinkOptions, row: int, level: int) -> str:
    if opts.exactly_once:
        return (f"rmq sink: row {row} has delayLevel {level}; RocketMQ does not delay transactional messages (the "
                "official TransactionMQProducer drops the level too), so the exactly-once sink cannot send it: "
                "remove the column or set it to null/0")
    return (f"rmq sink: row {row} has delayLevel {level}; the at-least-once sink sends rows in batches, which "
            "RocketMQ does not delay (\"TimeDelayLevel is not supported for batching\"): remove the column or set it "
            "to null/0")


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
