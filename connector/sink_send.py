"""How the sink's tasks send rows (connector/sink.py, step 1): routes, one pipelined connection per master, requests
in flight, SYSTEM_BUSY re-sends and a master that goes away. ``RowSender`` holds all of that; its subclasses say
what a row becomes: ``HalfSender`` (connector/sink_task.py) half messages, ``PlainSender`` (below) plain messages
(``guarantee=at-least-once``).

Rule 1: which request carries which rows is decided here. A broker either takes **batches**
(SEND_BATCH_MESSAGE: a queue's rows in one request, up to BATCH_MAX_ROWS rows and BATCH_MAX_BYTES bytes, the rows
of a topic going round robin over its queues batch by batch) or **one request per row** (SEND_MESSAGE_V2, round
robin row by row). Plain messages always go in batches (every RocketMQ broker takes them); half messages go in
batches only to a broker that says it takes prepared batches (rmq's extension, asked once per task and master:
``supports_batch``), else one per row as RocketMQ's own producer sends them. A row whose body is COMPRESS_OVER
bytes or more is sent on its own either way, compressed as the producer compresses it: a batch body holds its
items uncompressed (the sysFlag that says "compressed" belongs to the request), and such rows are few and large.

Every row gets its own UNIQ_KEY; rows with a sharding key go to the queue ``java_hash(key) % queues`` picks, and a
queue's requests leave in row order.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from broker.client import protocol
from broker.client.blocking import BlockingClient, Pipeline, RequestTemplate
from broker.client.message import MessageQueue, compress_body
from broker.client.route import MASTER_ID
from broker.client.transaction_protocol import batch_message_template, half_message_template, supports_transaction_batch
from broker.common.errors import ClientErrorCode, ConnectorError, MQBrokerError, MQClientError, RemotingError
from broker.common.message import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    create_uniq_id,
    encode_properties,
    java_hash,
)
from broker.common.message_batch import encode_batch_item
from broker.common.topic import is_writeable
from broker.remoting.codes import ResponseCode
from broker.remoting.command import RemotingCommand
from connector.access import access_denied, is_refusal, write_need
from connector.columns import user_properties
from connector.options import SinkOptions
from connector.replicas import broker_addrs, wait_for_master

if TYPE_CHECKING:
    from connector.tracing import SinkTracer

log = logging.getLogger(__name__)

COMPRESS_OVER = 4096  # the producer's compressMsgBodyOverHowmuch
# A batch closes at this many rows or bytes (well below the broker's maxMessageSize, 4 MiB by default).
BATCH_MAX_ROWS = 256
BATCH_MAX_BYTES = 1024 * 1024
# Batches in flight per connection at most (maxInFlight if lower): a few keep the broker busy, while a deep queue of
# them only makes the last one wait longer for its answer (sendTimeoutMs counts from its send).
BATCHES_IN_FLIGHT = 4
# A broker in flow control answers SYSTEM_BUSY without storing anything; the request is sent again after a pause
# that doubles each time (Java's producer retries SYSTEM_BUSY too), this many times at most.
BUSY_RETRIES = 5
BUSY_PAUSE_S = 0.1


class Request:
    """One request of a task: the rows it carries (row numbers and UNIQ_KEYs, in row order), the queue, the frame
    (kept to send it again), how often it was sent, the run it belongs to, its order key (requests of one key
    are in flight one at a time, so they are stored in the order sent) and its born time (ms; a trace's start)."""

    __slots__ = ("seqs", "uniqs", "topic_index", "queue_id", "opaque", "frame", "tries", "run", "order_key", "born")

    def __init__(self, seqs: list[int], uniqs: list[str], topic_index: int, queue_id: int, opaque: int,
                 frame: bytes, run: str, order_key: object | None, born: int) -> None:
        self.seqs, self.uniqs, self.topic_index, self.queue_id = seqs, uniqs, topic_index, queue_id
        self.opaque, self.frame, self.tries, self.run, self.order_key = opaque, frame, 0, run, order_key
        self.born = born

    def __lt__(self, other: Request) -> bool:
        return self.seqs[0] < other.seqs[0]


class _Target:
    """One write queue of a topic as the sender uses it: the queue id as sent, the broker, its frame templates, and
    (batched brokers) the batch being filled."""

    __slots__ = ("queue_id", "queue_text", "address", "broker_name", "topic_index", "row_template", "batch_template",
                 "batched", "items", "seqs", "uniqs", "size")

    def __init__(self, mq: MessageQueue, address: str, topic_index: int, templates: tuple[RequestTemplate, ...],
                 batched: bool) -> None:
        self.queue_id, self.queue_text, self.topic_index = mq.queue_id, str(mq.queue_id), topic_index
        self.address, self.broker_name, self.batched = address, mq.broker_name, batched
        self.row_template, self.batch_template = templates
        self.items: list[bytes] = []
        self.seqs: list[int] = []
        self.uniqs: list[str] = []
        self.size = 0


class RowSender:
    """Sends one task's rows over pipelined connections, per row or in batches (module docstring).

    Per row, only what differs is made: frames come from templates per (topic, broker) (queue id, born time,
    sysFlag and properties spliced in), the properties string is the row's entries around constant parts encoded
    once; per-row frames of a broker go out ``chunk`` at a time in one socket write; responses are read in bulk.
    Subclasses give the sysFlags, the properties every row carries (``_tail``), what a stored request leaves
    behind (``_stored``) and what happens to the requests in flight when a master's connection breaks
    (``_lost``)."""

    SYS_FLAG = 0  # of every request; a compressed row's adds the compression bits
    ALWAYS_BATCHED = True  # False: batches only to brokers that say they take prepared batches

    def __init__(self, opts: SinkOptions, run: str) -> None:
        self.opts = opts
        self.group = opts.producer_group
        self.client = BlockingClient(opts.namesrv_addr, timeout_ms=opts.send_timeout_ms, producer_group=self.group,
                                     credentials=opts.credentials)
        self.run = run
        self.rows = 0
        self.first_born_ms = 0
        self.ordered = False
        self.chunk = max(1, opts.max_in_flight // 4)
        # WAIT first, the row's user properties (system ones dropped: connector/columns.py), ``_tail``, then a fresh
        # UNIQ_KEY.
        self._row_head = encode_properties({PROPERTY_WAIT_STORE_MSG_OK: "true"})
        self._tail = ""
        self._topics: dict[str, int] = {}
        self._targets: dict[str, list[_Target]] = {}
        self._next_queue: dict[str, int] = {}
        self._pipes: dict[str, Pipeline] = {}
        self._batched: dict[str, bool] = {}  # by address: does it take this sender's batches
        self._broker_names: dict[str, str] = {}
        self._out: dict[str, list[tuple[int, bytes, Request]]] = {}
        self._in_flight: dict[str, dict[int, Request]] = {}  # by address: opaque -> request sent, not yet answered
        self.tracer: SinkTracer | None = None  # enableMsgTrace (connector/tracing.py): a Pub per stored row

    def close(self) -> None:
        self.client.close()

    # -- hooks ---------------------------------------------------------------------------------------------------------

    def _stored(self, addr: str, request: Request, offset_msg_ids: list[str], queue_offset: int) -> None:
        raise NotImplementedError

    def _lost(self, addr: str, lost: list[Request]) -> list[Request]:
        """The requests to send again after ``addr``'s connection broke with ``lost`` in flight."""
        raise NotImplementedError

    def _orders(self) -> bool:
        """Whether requests of one queue must be stored in the order sent (each waits for the one before)."""
        return False

    # -- routes and targets --------------------------------------------------------------------------------------------

    def _targets_of(self, topic: str) -> list[_Target]:
        targets = self._targets.get(topic)
        if targets is None:
            found = self._publish_queues(topic)
            index = self._topics.setdefault(topic, len(self._topics))
            templates: dict[str, tuple[RequestTemplate, RequestTemplate]] = {}
            targets = []
            for mq in sorted(found, key=lambda q: (q.broker_name, q.queue_id)):
                addr = self._addr(mq)
                pair = templates.get(mq.broker_name)
                if pair is None:
                    keys = self.opts.credentials
                    pair = templates[mq.broker_name] = (
                        half_message_template(self.group, topic, mq.broker_name, keys),
                        batch_message_template(self.group, topic, mq.broker_name, keys))
                if addr not in self._pipes:
                    self._batched[addr] = self.ALWAYS_BATCHED or supports_batch(self.client, addr, self.opts)
                    self._pipes[addr] = self._pipeline(addr)
                    self._broker_names[addr] = mq.broker_name
                    self._in_flight[addr] = {}
                    self._out[addr] = []
                targets.append(_Target(mq, addr, index, pair, self._batched[addr]))
            self._targets[topic] = targets
        return targets

    def _pipeline(self, addr: str) -> Pipeline:
        window = min(self.opts.max_in_flight, BATCHES_IN_FLIGHT) if self._batched[addr] else self.opts.max_in_flight
        return Pipeline(self.client.client(addr), window=window, timeout_ms=self.opts.send_timeout_ms)

    def _publish_queues(self, topic: str) -> list[MessageQueue]:
        """The queues to send ``topic``'s rows to: those of brokers with a master (as the producer's), waiting up
        to masterWaitTimeoutMs while none has one (a slave takes no message)."""
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

    def _addr(self, mq: MessageQueue) -> str:
        try:
            return self.client.broker_addr(mq)
        except (MQClientError, RemotingError) as err:
            raise ConnectorError(f"rmq sink: no master address for {mq}: {err}") from err

    # -- rows to requests ----------------------------------------------------------------------------------------------

    def send(self, topic: str, body: bytes, tags: str | None, keys: str | None,
             properties: Sequence[tuple[str, str]] | dict[str, str] | None, sharding_key: str | None) -> None:
        targets = self._targets.get(topic) or self._targets_of(topic)
        rotate = sharding_key is None
        if rotate:
            index = self._next_queue.get(topic, 0)
            target = targets[index % len(targets)]
            if not target.batched:  # per row: the next row goes to the next queue
                self._next_queue[topic] = index + 1
        else:
            target = targets[abs(java_hash(sharding_key) % len(targets))]
            self.ordered = True
        row = self._row_head
        if keys or tags:  # an empty one is left out too
            row = encode_properties(((PROPERTY_KEYS, keys or None), (PROPERTY_TAGS, tags or None))) + row
        if properties:
            row += encode_properties(user_properties(properties))
        uniq = create_uniq_id()
        born = time.time_ns() // 1_000_000
        if not self.first_born_ms:
            self.first_born_ms = born
        props = row + self._tail + encode_properties(((PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, uniq),))
        seq = self.rows
        self.rows += 1
        if target.batched and len(body) < COMPRESS_OVER:
            item = encode_batch_item(body, props.encode())
            if target.items and target.size + len(item) > BATCH_MAX_BYTES:
                self._close_batch(target)
            target.items.append(item)
            target.seqs.append(seq)
            target.uniqs.append(uniq)
            target.size += len(item)
            if len(target.items) >= BATCH_MAX_ROWS or target.size >= BATCH_MAX_BYTES:
                self._close_batch(target)
                if rotate:  # the next batch goes to the next queue
                    self._next_queue[topic] = self._next_queue.get(topic, 0) + 1
            return
        if target.items:  # a queue's requests leave in row order
            self._close_batch(target)
        sys_flag = self.SYS_FLAG
        if len(body) >= COMPRESS_OVER:
            body, flags = compress_body(body)
            sys_flag |= flags
        opaque, frame = target.row_template.frame((target.queue_text, str(sys_flag), str(born), props), body)
        self._dispatch(target, Request([seq], [uniq], target.topic_index, target.queue_id, opaque, frame, self.run,
                                       self._order_key(target), born))

    def _order_key(self, target: _Target) -> object | None:
        return (target.topic_index, target.queue_id) if self._orders() else None

    def _close_batch(self, target: _Target) -> None:
        batch_uniq = encode_properties(((PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, create_uniq_id()),))
        born = time.time_ns() // 1_000_000
        opaque, frame = target.batch_template.frame(
            (target.queue_text, str(self.SYS_FLAG), str(born), self._row_head + batch_uniq), b"".join(target.items))
        request = Request(target.seqs, target.uniqs, target.topic_index, target.queue_id, opaque, frame, self.run,
                          self._order_key(target), born)
        target.items, target.seqs, target.uniqs, target.size = [], [], [], 0
        self._dispatch(target, request)

    def _dispatch(self, target: _Target, request: Request) -> None:
        """Per-row requests of a broker without batches wait to go ``chunk`` at a time; others go at once."""
        addr = target.address
        if target.batched or request.order_key is not None:
            self._submit(addr, [request])
            return
        out = self._out[addr]
        out.append((request.opaque, request.frame, request))
        if len(out) >= self.chunk:
            self._submit_out(addr)

    # -- requests on the wire ------------------------------------------------------------------------------------------

    def _submit_out(self, addr: str) -> None:
        out = self._out[addr]
        requests = [r for _, _, r in out]
        out.clear()
        self._submit(addr, requests)

    def _submit(self, addr: str, requests: Sequence[Request]) -> None:
        """Send ``requests`` on ``addr``'s pipeline (at most a window of them) and record what was answered
        meanwhile; a request with an order key first waits for the answer of the one before it (and for that
        one's re-sends); a broken connection is recovered from (``_recover``)."""
        in_flight = self._in_flight[addr]
        for request in requests:  # from here on, a broken connection sends them again
            in_flight[request.opaque] = request
        try:
            if len(requests) == 1 and requests[0].order_key is not None:
                request = requests[0]
                while (done := self._pipes[addr].wait_for(request.order_key)):
                    self._record(addr, done)
                    if self._in_flight[addr] is not in_flight:  # recovered meanwhile: sent again with the rest
                        return
                done = self._pipes[addr].submit_frame(request.opaque, request.frame, request, request.order_key)
            else:
                done = self._pipes[addr].submit_frames([(r.opaque, r.frame, r) for r in requests])
        except RemotingError as err:
            self._recover(addr, err)
            return
        self._record(addr, done)

    def flush(self) -> None:
        for targets in self._targets.values():
            for target in targets:
                if target.items:
                    self._close_batch(target)
        for addr in list(self._pipes):
            if self._out[addr]:
                self._submit_out(addr)
            while self._pipes[addr].in_flight:  # a request sent again (SYSTEM_BUSY) is in flight once more
                try:
                    done = self._pipes[addr].drain()
                except RemotingError as err:
                    self._recover(addr, err)
                    continue
                self._record(addr, done)

    def _record(self, addr: str, done: list[tuple[object, RemotingCommand]]) -> None:
        """Hand what ``addr`` stored to ``_stored``; send again what it turned away in flow control; raise on any
        other refusal."""
        if not done:
            return
        in_flight = self._in_flight[addr]
        busy = []
        for request, response in done:
            in_flight.pop(request.opaque, None)
            if response.code == ResponseCode.SYSTEM_BUSY and request.tries < BUSY_RETRIES:
                busy.append(request)
                continue
            ext = response.ext_fields
            if response.code == ResponseCode.SUCCESS:
                offset_msg_id, queue_offset = ext["msgId"], int(ext["queueOffset"])
            else:  # refused (raises), or stored without the flush or replica confirmation (kept, as before)
                offset_msg_id, queue_offset = self._stored_anyway(addr, request, response)
            ids = offset_msg_id.split(",")
            if len(ids) != len(request.seqs):
                raise ConnectorError(f"rmq sink: {addr} answered a request of {len(request.seqs)} messages with "
                                     f"{len(ids)} message ids ({offset_msg_id[:200]})")
            self._stored(addr, request, ids, queue_offset)
            if self.tracer is not None:
                self.tracer.stored(addr, request, ids, response)
        if busy:
            tries = max(request.tries for request in busy)
            log.warning("rmq sink: %s is busy (flow control); sending %d requests again in %.2f s", addr, len(busy),
                        BUSY_PAUSE_S * 2 ** tries)
            time.sleep(BUSY_PAUSE_S * 2 ** tries)
            for request in busy:
                request.tries += 1
            self._send_again(addr, busy)

    def _stored_anyway(self, addr: str, request: Request, response: RemotingCommand) -> tuple[str, int]:
        topic = next(t for t, i in self._topics.items() if i == request.topic_index)
        broker_name = self._broker_names[addr]
        what = "half message" if self.SYS_FLAG else "message"
        what = f"batch of {len(request.seqs)} {what}s" if len(request.seqs) > 1 else what
        try:
            result = protocol.parse_send_response(response, topic, broker_name, addr, request.uniqs)
        except MQBrokerError as err:
            if is_refusal(err):
                raise access_denied(write_need(topic), err, self.opts.credentials) from err
            raise ConnectorError(f"rmq sink: the {what} to {topic}@{broker_name}:{request.queue_id} was refused by "
                                 f"{addr}: {err}") from err
        return result.offset_msg_id, result.queue_offset

    def _send_again(self, addr: str, requests: Sequence[Request]) -> None:
        ordered = [r for r in requests if r.order_key is not None]
        others = [r for r in requests if r.order_key is None]
        for request in sorted(ordered):
            self._submit(addr, [request])
        window = self._pipes[addr].window
        for start in range(0, len(others), window):
            self._submit(addr, others[start:start + window])

    def _recover(self, addr: str, err: RemotingError) -> None:
        """``addr``'s connection broke, or a request on it timed out: wait (masterWaitTimeoutMs) until the broker's
        master answers there again, then send again what ``_lost`` makes of the requests that were in flight (they
        may or may not have been stored). The connection is closed first: after a timeout it may still be up, still
        expecting the answers to the requests about to be sent again under the same opaques."""
        broker_name = self._broker_names[addr]
        lost = sorted(self._in_flight[addr].values())
        self._in_flight[addr] = {}
        self.client.client(addr).close()
        log.warning("rmq sink: the master of broker %s (%s) went away with %d requests (%d rows) in flight: %s",
                    broker_name, addr, len(lost), sum(len(r.seqs) for r in lost), err)
        wait_for_master(f"sending rows ({sum(len(r.seqs) for r in lost)} in flight)", broker_name,
                        self.opts.master_wait_ms, lambda: self._reconnect(addr, broker_name))
        self._pipes[addr] = self._pipeline(addr)
        if lost:
            self._send_again(addr, self._lost(addr, lost))

    def _reconnect(self, addr: str, broker_name: str) -> None:
        """Connect to ``addr`` if the route still names it ``broker_name``'s master (a master restarted on its
        port); a master routed elsewhere fails the task: its rows so far were sent to the old address."""
        topic = next(t for t, targets in self._targets.items() if any(x.address == addr for x in targets))
        master = broker_addrs(self.client.get_route(topic, refresh=True), broker_name).get(MASTER_ID)
        if master is None:
            raise MQClientError(ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION, f"broker {broker_name} has no master "
                                "in the route")
        if master != addr:
            raise ConnectorError(f"rmq sink: the master of broker {broker_name} moved from {addr} to {master} "
                                 "while this task sent to it; the task fails (Spark may run it again)")
        self.client.client(addr).connect()


def supports_batch(client: BlockingClient, addr: str, opts: SinkOptions) -> bool:
    """Whether the master at ``addr`` takes prepared batches and END_TRANSACTION_BATCH (rmq's extension, its
    GET_BROKER_CONFIG says so); a broker that does not know it (Apache's) or does not answer gets one request per
    row."""
    try:
        return supports_transaction_batch(client.client(addr), opts.send_timeout_ms)
    except (MQClientError, RemotingError) as err:
        log.warning("rmq sink: cannot ask %s whether it takes transactional batches (%s); one request per row",
                    addr, err)
        return False


class PlainSender(RowSender):
    """``guarantee=at-least-once``: plain messages in batches (no half message, no decision). A request in flight
    when its master went away may have been stored: it is sent again as it was (its rows may then be stored twice,
    with the same UNIQ_KEYs, as a Java producer's retry stores them). Rows of a task that used sharding keys are
    sent one request per queue at a time, so a queue holds them in row order."""

    SYS_FLAG = 0
    ALWAYS_BATCHED = True

    def __init__(self, opts: SinkOptions) -> None:
        super().__init__(opts, "")
        self.stored = 0

    def _orders(self) -> bool:
        return self.ordered

    def _stored(self, addr: str, request: Request, offset_msg_ids: list[str], queue_offset: int) -> None:
        self.stored += len(request.seqs)

    def _lost(self, addr: str, lost: list[Request]) -> list[Request]:
        log.warning("rmq sink: sending %d requests (%d rows) again to %s; rows they stored before are stored twice",
                    len(lost), sum(len(r.seqs) for r in lost), addr)
        return lost
