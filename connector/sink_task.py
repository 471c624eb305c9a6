"""The sink's tasks (Spark executors): every row of a partition as a half message, and what the task hands the
driver (step 1 of the protocol in connector/sink.py).

``write_task`` runs one task: a ``HalfSender`` sends the rows, pipelined per broker, and keeps the handles
END_TRANSACTION will need; the task returns them in a ``TaskCommit``, which Spark pickles to the driver.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from pyspark.sql.datasource import WriterCommitMessage

from broker.client import protocol
from broker.client.blocking import BlockingClient, Pipeline, RequestTemplate
from broker.client.message import MessageQueue, compress_body
from broker.client.route import MASTER_ID
from broker.client.transaction import half_message_template, half_properties
from broker.common.errors import ClientErrorCode, ConnectorError, MQBrokerError, MQClientError, RemotingError
from broker.common.message import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_PREPARED_TYPE,
    create_uniq_id,
    decode_offset_msg_id,
    encode_properties,
    java_hash,
)
from broker.common.topic import is_writeable
from broker.remoting import command
from broker.remoting.codes import ResponseCode
from broker.remoting.command import RemotingCommand
from broker.remoting.frame import FrameDecoder
from connector.columns import user_properties
from connector.decisions import PROPERTY_SINK_BATCH, PROPERTY_SINK_ID, PROPERTY_SINK_RUN
from connector.options import SinkOptions
from connector.replicas import broker_addrs, wait_for_master

log = logging.getLogger(__name__)

COMPRESS_OVER = 4096  # the producer's compressMsgBodyOverHowmuch
# A broker in flow control answers SYSTEM_BUSY without storing anything; the half message is sent again after a
# pause that doubles each time (Java's producer retries SYSTEM_BUSY too), this many times at most.
BUSY_RETRIES = 5
BUSY_PAUSE_S = 0.1
# What a task keeps of a half message until the broker answers: (row, topic index, queue id, UNIQ_KEY, opaque,
# frame, tries, run), the frame to send it again.
_Sent = tuple[int, int, int, str, int, bytes, int, str]


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
        # WAIT first, the row's user properties (system ones dropped: connector/columns.py), the half-message and
        # sink properties, then a fresh UNIQ_KEY.
        self._row_head = encode_properties({PROPERTY_WAIT_STORE_MSG_OK: "true"})
        self._tail = half_properties(self.group, self.sink_props)
        self.batch, self.run = batch, run
        self.runs: dict[str, int] = {run: 0}  # halves stored (acknowledged) under each run id
        self.drops: dict[str, list[str]] = {}  # UNIQ_KEYs of halves of a run in flight when their master went away
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
        self._in_flight: dict[str, dict[int, _Sent]] = {}  # by address: opaque -> half sent, not yet answered

    def close(self) -> None:
        self.client.close()

    def _targets_of(self, topic: str) -> list[_Target]:
        targets = self._targets.get(topic)
        if targets is None:
            found = self._publish_queues(topic)
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
                    self._in_flight[addr] = {}
                targets.append(_Target(mq, addr, template, self._out.setdefault(addr, [])))
            self._targets[topic] = targets
            self._topics.setdefault(topic, len(self._topics))
        return targets

    def _publish_queues(self, topic: str) -> list[MessageQueue]:
        """The queues to send ``topic``'s rows to: those of brokers with a master (as the producer's), waiting up
        to masterWaitTimeoutMs while none has one (a slave takes no half message)."""
        try:
            found = self.client.fetch_publish_queues(topic)
            if found:
                return found
            route = self.client.get_route(topic)
        except (MQClientError, RemotingError) as err:
            raise ConnectorError(f"rmq sink: no route to topic {topic} through {self.opts.namesrv_addr}: "
                                 f"{err}") from err
        names = sorted({qd.broker_name for qd in route.queue_datas if is_writeable(qd.perm)})
        if not names:
            raise ConnectorError(f"rmq sink: topic {topic} has no writable queue")

        def attempt() -> list[MessageQueue]:
            queues = self.client.fetch_publish_queues(topic)
            if not queues:
                raise MQClientError(ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION, f"no master of {', '.join(names)} "
                                    f"is routed for topic {topic}")
            return queues

        return wait_for_master(f"sending the rows of topic {topic}", ", ".join(names), self.opts.master_wait_ms,
                               attempt, lambda: self.client.get_route(topic, refresh=True))

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
        if properties:
            row += encode_properties(user_properties(properties))
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
        out.append((opaque, frame, (self.rows, self._topics[topic], target.queue_id, uniq, opaque, frame, 0,
                                    self.run)))
        self.rows += 1
        if len(out) >= self.chunk:
            self._submit(target.address, out)
            out.clear()

    def _addr(self, mq: MessageQueue) -> str:
        try:
            return self.client.broker_addr(mq)
        except (MQClientError, RemotingError) as err:
            raise ConnectorError(f"rmq sink: no master address for {mq}: {err}") from err

    def _submit(self, addr: str, frames: Sequence[tuple[int, bytes, _Sent]]) -> None:
        """Send ``frames`` on ``addr``'s pipeline and record what was answered meanwhile; a broken connection is
        recovered from (``_recover``)."""
        in_flight = self._in_flight[addr]
        for _, _, context in frames:
            in_flight[context[4]] = context
        try:
            done = self._pipes[addr].submit_frames(frames)
        except RemotingError as err:
            self._recover(addr, err)
            return
        self._record(addr, done)

    def flush(self) -> None:
        for addr in list(self._pipes):
            out = self._out[addr]
            if out:
                self._submit(addr, out)
                out.clear()
            while self._pipes[addr].in_flight:  # a half message sent again (SYSTEM_BUSY) is in flight once more
                try:
                    done = self._pipes[addr].drain()
                except RemotingError as err:
                    self._recover(addr, err)
                    continue
                self._record(addr, done)

    def _record(self, addr: str, done: list[tuple[object, RemotingCommand]]) -> None:
        """Keep the handles of the half messages ``addr`` stored; send again those it turned away in flow control;
        raise on any other refusal."""
        if not done:
            return
        halves = self._handles[addr].halves
        in_flight = self._in_flight[addr]
        busy = []
        for context, response in done:
            seq, topic_index, queue_id, uniq, opaque, _, tries, run = context
            in_flight.pop(opaque, None)
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
            halves.append((seq, topic_index, queue_id, commit_log_offset, queue_offset, uniq, run))
            self.runs[run] += 1
        if busy:
            tries = max(context[6] for context in busy)
            log.warning("rmq sink: %s is busy (flow control); sending %d half messages again in %.2f s", addr,
                        len(busy), BUSY_PAUSE_S * 2 ** tries)
            time.sleep(BUSY_PAUSE_S * 2 ** tries)
            self._send_again(addr, [(*c[:6], c[6] + 1, c[7]) for c in busy])

    def _send_again(self, addr: str, contexts: Sequence[_Sent]) -> None:
        window = self._pipes[addr].window
        for start in range(0, len(contexts), window):
            self._submit(addr, [(c[4], c[5], c) for c in contexts[start:start + window]])

    def _recover(self, addr: str, err: RemotingError) -> None:
        """``addr``'s connection broke: wait (masterWaitTimeoutMs) until the broker's master answers there again,
        then go on under a new run id. Halves in flight may or may not have been stored: the task drops them
        (``drops``, by their run and UNIQ_KEY; the resolver rolls those back) and sends them again under the new
        run, so each row is committed once whichever copy was stored."""
        broker_name = self._handles[addr].broker_name
        lost = sorted(self._in_flight[addr].values())
        self._in_flight[addr] = {}
        log.warning("rmq sink: the master of broker %s (%s) went away with %d half messages in flight: %s",
                    broker_name, addr, len(lost), err)
        wait_for_master(f"sending half messages ({len(lost)} in flight)", broker_name, self.opts.master_wait_ms,
                        lambda: self._reconnect(addr, broker_name))
        self._pipes[addr] = Pipeline(self.client.client(addr), window=self.opts.max_in_flight,
                                     timeout_ms=self.opts.send_timeout_ms)
        if not lost:
            return
        for context in lost:
            self.drops.setdefault(context[7], []).append(context[3])
        old = {context[7] for context in lost}
        self._new_run()
        again = [(seq, topic_index, queue_id, uniq, opaque, _with_run(frame, run, self.run), tries, self.run)
                 for seq, topic_index, queue_id, uniq, opaque, frame, tries, run in lost]
        log.warning("rmq sink: sending %d half messages again to %s under run %s (they lose under run %s)",
                    len(again), addr, self.run, ", ".join(sorted(old)))
        self._send_again(addr, again)

    def _reconnect(self, addr: str, broker_name: str) -> None:
        """Connect to ``addr`` if the route still names it ``broker_name``'s master (a master restarted on its
        port); a master routed elsewhere fails the task: its halves so far were sent to the old address."""
        topic = next(t for t, targets in self._targets.items() if any(x.address == addr for x in targets))
        master = broker_addrs(self.client.get_route(topic, refresh=True), broker_name).get(MASTER_ID)
        if master is None:
            raise MQClientError(ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION, f"broker {broker_name} has no master "
                                "in the route")
        if master != addr:
            raise ConnectorError(f"rmq sink: the master of broker {broker_name} moved from {addr} to {master} "
                                 "while this task sent to it; the task fails (Spark may run it again)")
        self.client.client(addr).connect()

    def _new_run(self) -> None:
        self.run = uuid.uuid4().hex
        self.runs[self.run] = 0
        self.sink_props[PROPERTY_SINK_RUN] = self.run
        self._tail = half_properties(self.group, self.sink_props)

    def task_commit(self) -> TaskCommit:
        """The handles in row order (a broker may answer pipelined sends out of order), without the row numbers
        and runs."""
        for handles in self._handles.values():
            handles.halves.sort()
            for half in handles.halves:
                if half[5] in self.drops.get(half[6], ()):
                    raise ConnectorError(f"rmq sink: two rows of this task carry the UNIQ_KEY {half[5]}, and one "
                                         "of them was in flight when its master went away: the task cannot tell "
                                         "them apart and fails (Spark may run it again)")
            handles.halves = [h[1:6] for h in handles.halves]
        topics = sorted(self._topics, key=self._topics.__getitem__)
        return TaskCommit(self.opts.sink_id, self.batch, {r: n for r, n in self.runs.items() if n},
                          {r: keys for r, keys in self.drops.items()}, self.rows, self.first_born_ms, self.ordered,
                          topics, [h for h in self._handles.values() if h.halves])


def _with_run(frame: bytes, old: str, new: str) -> bytes:
    """A half message's frame with its RMQ_SINK_RUN ``old`` replaced by ``new`` (opaque and all else kept)."""
    (parsed,) = FrameDecoder().feed(frame)
    request = command.decode(parsed)
    before, after = f"{PROPERTY_SINK_RUN}\x01{old}\x02", f"{PROPERTY_SINK_RUN}\x01{new}\x02"
    fields = {name: value.replace(before, after) for name, value in request.ext_fields.items()}
    return command.encode(replace(request, ext_fields=fields))


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
            topics = none if opts.topic else _column(batch, "topic") or none
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
                topic = opts.topic or topics[i]  # the option overrides the column, as in Kafka's sink
                if topic is None:
                    raise ConnectorError(f"rmq sink: row {sender.rows} has a null topic and no topic option is set")
                row_props = props[i]
                sender.send(topic, body, tags[i], keys[i], row_props, shards[i])
                if fail_after is not None and sender.rows >= fail_after:
                    sender.flush()
                    raise RuntimeError(f"rmq sink: injected task failure after {sender.rows} rows (faultInjection)")
        sender.flush()
        return _attempt_of(context, sender.task_commit())
    finally:
        sender.close()


def _attempt_of(context: object, commit: TaskCommit) -> TaskCommit:
    """Say which attempt this is: the driver lets the sink's resolver go only when no other attempt it can know of
    may have left half messages (connector/settle.py)."""
    if context is not None:
        commit.attempt = context.attemptNumber()
    return commit


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
