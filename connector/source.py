"""``spark.read.format("rmq")`` and ``spark.readStream.format("rmq")``: RocketMQ ConsumeQueues as Spark partitions.

Driver side (``RmqStreamReader`` / ``RmqBatchReader``): offsets are ``{topic: {brokerName: {queueId: nextOffset}}}``
(connector/offsets.py); each micro-batch is one input partition per queue with something to read, split further
when ``minPartitions`` asks for more. Executor side (``read_partition``): PULL_MESSAGE from the partition's broker
(found again through the NameServer if it moved), the pull bodies decoded in bulk into Arrow RecordBatches
(connector/records.py). Only standard requests are used, so Apache RocketMQ brokers serve it as well as ours.

What is never visible: half (transactional, uncommitted) messages and delayed messages not yet due live in the
broker's internal topics, which a user topic's ConsumeQueue never points at; those internal topics cannot be
subscribed (connector/options.py).

Initial offsets. Spark's offset log keeps each batch's end, not the first batch's start, and Python sources get no
metadata log of their own; so when ``startingOffsets`` involves "latest", the first batch of a run that starts from
freshly resolved offsets is empty: its end (the resolved offsets) goes into the offset log, and a restart resumes
from there instead of resolving "latest" again and skipping what arrived in between.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from broker.client import protocol
from broker.client.blocking import BlockingRemotingClient, get_route
from broker.client.message import MessageQueue, PullResult, PullStatus
from broker.common.errors import ConnectorError, DataLossError, MQBrokerError, MQClientError, RemotingError
from broker.common.validation import DEFAULT_CONSUMER_GROUP
from broker.remoting.command import RemotingCommand
from broker.remoting.frame import Buffer
from broker.remoting.heartbeat import build_subscription_data
from broker.remoting.signing import SessionCredentials
from connector.access import access_denied, is_refusal, read_need
from connector.offsets import OffsetOracle, Offsets, from_json, rate_limit, to_json, total_backlog
from connector.options import LATEST, SourceOptions
from connector.replicas import broker_addrs, is_master, read_addresses
from connector.source_metrics import METRICS_KEY, offsets_behind_latest

log = logging.getLogger(__name__)

BATCH_BYTES = 1 << 20  # pull bodies decoded into one RecordBatch for Spark: one big pull, or a few small ones
NO_NEW_MSG_RETRIES = 20  # a queue answering "nothing" below an end it reported: wait this many times 50 ms


# -- partitions and the executor side ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueRange(InputPartition):
    """Offsets ``[start, end)`` of one ConsumeQueue and what an executor needs to pull them (no driver state)."""

    topic: str
    broker_name: str
    queue_id: int
    start: int
    end: int
    broker_addr: str
    namesrv_addr: str
    group: str
    sub_expression: str | None
    expression_type: str
    pull_batch_size: int
    pull_timeout_ms: int
    fail_on_data_loss: bool
    credentials: SessionCredentials | None = None  # the pulls are signed with them (the source's accessKey)
    trace_topic: str | None = None  # enableMsgTrace: where the SubBefore/SubAfter records of its batches go

    @property
    def mq(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)

    def describe(self) -> str:
        return f"topic {self.topic} broker {self.broker_name} queue {self.queue_id}"


class _Puller:
    """PULL_MESSAGE of one queue from the copy of its broker the driver planned with (its master, else a slave:
    connector/replicas.py). When that address does not answer, the NameServer is asked for the broker's copies
    now, and the best one other than the failed address is read instead: a moved master, a slave when the master
    is gone, the master when it is back."""

    def __init__(self, part: QueueRange) -> None:
        self.part = part
        self.subscription = protocol.SubscriptionData(part.topic)
        if part.sub_expression is not None:
            if part.expression_type == protocol.EXPRESSION_TAG:
                self.subscription = build_subscription_data(part.topic, part.sub_expression)
            else:
                self.subscription = protocol.SubscriptionData(part.topic, part.sub_expression,
                                                              expression_type=part.expression_type)
        self.addr = part.broker_addr
        self.remote = BlockingRemotingClient(self.addr, credentials=part.credentials)

    def close(self) -> None:
        self.remote.close()

    def send(self, offset: int, max_nums: int) -> RemotingCommand:
        """Send the pull of ``max_nums`` messages from ``offset``; ``result`` waits for its answer."""
        request = protocol.pull_message_request(self.part.group, self.part.mq, offset, max_nums,
                                                subscription=self.subscription)
        try:
            self.remote.send(request, self.part.pull_timeout_ms)
        except RemotingError as err:
            if not self.relocate(err):
                raise
            self.remote.send(request, self.part.pull_timeout_ms)
        return request

    def result(self, request: RemotingCommand) -> PullResult:
        try:
            response = self.remote.receive(request, self.part.pull_timeout_ms)
        except RemotingError as err:
            if not self.relocate(err):
                raise
            response = self.remote.invoke(request, self.part.pull_timeout_ms)
        try:
            return protocol.parse_pull_response(response, self.addr)
        except MQBrokerError as err:
            if is_refusal(err):
                need = read_need((self.part.topic,), None, self.part.group)
                raise access_denied(need, err, self.part.credentials) from err
            offset = request.ext_fields.get("queueOffset")
            raise ConnectorError(f"pulling {self.part.describe()} at offset {offset} from {self.addr} failed: "
                                 f"{err}") from err

    def relocate(self, err: Exception | None) -> bool:
        """Switch to the best copy of the broker in a fresh route other than the current address (which failed,
        ``err``, or holds less than the batch needs, None); True when there is one."""
        try:
            route = get_route(self.part.namesrv_addr, self.part.topic, self.part.pull_timeout_ms)
        except (MQClientError, RemotingError):
            return False
        copies = broker_addrs(route, self.part.broker_name)
        others = [addr for addr in read_addresses(copies) if addr != self.addr]
        if not others:
            return False
        role = "master" if is_master(copies, others[0]) else "slave"
        log.warning("broker %s: reading from its %s %s instead of %s (%s)", self.part.broker_name, role, others[0],
                    self.addr, err or "behind the batch's end")
        self.remote.close()
        self.addr = others[0]
        self.remote = BlockingRemotingClient(self.addr, credentials=self.part.credentials)
        return True


def read_partition(part: QueueRange) -> Iterator[pa.RecordBatch]:
    """Every message of ``[part.start, part.end)`` that passes the filter, as RecordBatches of about BATCH_BYTES;
    with enableMsgTrace, each batch traced as a consumer's (connector/tracing.py, loaded only then)."""
    batches = _read_batches(part)
    if part.trace_topic is None:
        return batches
    from connector.tracing import traced_batches

    return traced_batches(part, batches)


def _read_batches(part: QueueRange) -> Iterator[pa.RecordBatch]:
    # imported where the rows are read, not by the driver's process, which Spark starts afresh for every streaming
    # query and which only plans (the decoder brings pyarrow.compute and numpy's kernels: a tenth of that start)
    from connector.records import decode_records

    puller = _Puller(part)
    tags_filter = tuple(puller.subscription.tags_set)
    pending: list[Buffer] = []
    size = 0
    try:
        for body in _pull_bodies(puller, part):
            pending.append(body)
            size += len(body)
            if size >= BATCH_BYTES:
                yield decode_records(_joined(pending), part.topic, part.broker_name, part.end, tags_filter)
                pending, size = [], 0
        if pending:
            yield decode_records(_joined(pending), part.topic, part.broker_name, part.end, tags_filter)
    finally:
        puller.close()


def _joined(bodies: list[Buffer]) -> Buffer:
    """One buffer of the pull bodies: a big pull's body as it came (a view of the buffer it was read into: joining
    a single view would copy it), small ones joined."""
    return bodies[0] if len(bodies) == 1 else b"".join(bodies)


def _pull_bodies(puller: _Puller, part: QueueRange) -> Iterator[Buffer]:
    """The bodies of the pulls covering ``[part.start, part.end)``. The next pull is sent before a body is handed
    out, so the broker reads while this process decodes (one connection, no thread: a prefetching thread cost more
    CPU in GIL hand-offs than it saved). ``nextBeginOffset`` drives the loop: with a filter a pull may return fewer
    messages than offsets (or none, NO_MATCHED_MSG) and still move on. A requested offset below the queue's min
    offset is data loss (retention removed it): DataLossError, or a logged skip with failOnDataLoss=false. A copy
    that keeps answering "nothing" below the batch's end (a slave behind its master) is left, once, for another."""

    def send(offset: int) -> RemotingCommand | None:
        return puller.send(offset, min(part.pull_batch_size, part.end - offset)) if offset < part.end else None

    offset, idle, moved = part.start, 0, False
    request = send(offset)
    while request is not None:
        result = puller.result(request)
        if offset < result.min_offset:
            offset = _lost(part, offset, result.min_offset)
            request = send(offset)
        elif result.status is PullStatus.FOUND:
            offset = max(result.next_begin_offset, offset)
            request = send(offset)
            idle = 0
            yield result.body
        elif result.status is PullStatus.NO_NEW_MSG or result.next_begin_offset <= offset:
            idle += 1
            if idle > NO_NEW_MSG_RETRIES and not moved and puller.relocate(None):
                idle, moved = 0, True  # a slave behind its master (gone when planned, back now): the other copy
            elif idle > NO_NEW_MSG_RETRIES:
                raise ConnectorError(f"{part.describe()} has no message at offset {offset} although the end of "
                                     f"this batch is {part.end} (broker {puller.addr}: {result.status.value}, "
                                     f"max offset {result.max_offset})")
            time.sleep(0.05)
            request = send(offset)
        else:
            offset = result.next_begin_offset
            request = send(offset)


def _lost(part: QueueRange, offset: int, min_offset: int) -> int:
    message = (f"data loss in topic {part.topic} broker {part.broker_name} queue {part.queue_id}: offsets {offset} to "
               f"{min(min_offset, part.end) - 1} are gone (the queue's min offset is {min_offset})")
    if part.fail_on_data_loss:
        raise DataLossError(message + "; set failOnDataLoss=false to skip them")
    log.warning("%s; skipping them (failOnDataLoss=false)", message)
    return min_offset


# -- planning (driver) ------------------------------------------------------------------------------------------------


def plan_partitions(oracle: OffsetOracle, opts: SourceOptions, start: Offsets, end: Offsets) -> list[QueueRange]:
    """One QueueRange per queue with ``start < end`` (a queue missing from ``start`` appeared since: it starts at
    its earliest offset), checked for data loss, then split so that there are about ``minPartitions``. The min
    offsets of all those queues are asked at once (one round trip per broker)."""
    ranges: list[tuple[MessageQueue, int, int]] = []
    queues = [mq for mq in sorted(end) if mq not in start or start[mq] < end[mq]]
    lows = oracle.min_offsets(queues)
    for mq in queues:
        begin = start.get(mq, lows[mq])
        if end[mq] <= begin:
            continue
        begin = oracle.check_data_loss(mq, begin, lows[mq], fail=opts.fail_on_data_loss)
        if begin < end[mq]:
            ranges.append((mq, begin, end[mq]))
    ranges = _split(ranges, opts.min_partitions)
    group = opts.consumer_group or DEFAULT_CONSUMER_GROUP
    return [QueueRange(mq.topic, mq.broker_name, mq.queue_id, lo, hi, oracle.broker_addr(mq), opts.namesrv_addr,
                       group, opts.filter, opts.filter_type, opts.pull_batch_size, opts.pull_timeout_ms,
                       opts.fail_on_data_loss, opts.credentials, opts.trace_topic)
            for mq, lo, hi in ranges]


def _split(ranges: list[tuple[MessageQueue, int, int]], min_partitions: int | None,
           ) -> list[tuple[MessageQueue, int, int]]:
    """As the Kafka connector's KafkaOffsetRangeCalculator: with fewer ranges than ``min_partitions``, each range
    is cut into parts in proportion to its size."""
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(hi - lo for _, lo, hi in ranges)
    result = []
    for mq, lo, hi in ranges:
        parts = max(1, min(hi - lo, round((hi - lo) * min_partitions / total)))
        step, extra = divmod(hi - lo, parts)
        cursor = lo
        for i in range(parts):
            size = step + (1 if i < extra else 0)
            result.append((mq, cursor, cursor + size))
            cursor += size
    return result


def _involves_latest(opts: SourceOptions) -> bool:
    starting = opts.starting
    return starting.kind == "latest" or (starting.kind == "offsets" and LATEST in starting.table.values())


class RmqStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming source. Lives in one Python process on the driver for the whole run of a query; ``read``
    runs on executors and uses nothing of it but the partition."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self._oracle: OffsetOracle | None = None
        self._initial: dict | None = None
        self._fresh_start = True  # no latestOffset answered yet in this run
        self._target: Offsets | None = None  # Trigger.AvailableNow: the offsets seen when it began
        self._last_batch_at = time.monotonic()
        self._committed: Offsets = {}
        self._planned: tuple[Offsets, Offsets] | None = None  # (latest, end) of the last latestOffset: its report

    @property
    def oracle(self) -> OffsetOracle:
        if self._oracle is None:
            self._oracle = OffsetOracle(self.opts)
        return self._oracle

    def initialOffset(self) -> dict:
        if self._initial is None:
            # Trigger.AvailableNow asked for its target just before (prepareForTriggerAvailableNow): its queues come
            # from a route fetched moments ago, which a second lookup would only repeat
            queues = sorted(self._target) if self._target is not None else self.oracle.queues()
            self._initial = to_json(self.oracle.resolve(self.opts.starting, queues))
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)  # a minimum, if set, is applied in latestOffset
        if self.opts.min_offsets_per_trigger is not None:
            return ReadMinRows(self.opts.min_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest({})

    def _latest(self, start: Offsets) -> Offsets:
        """Every subscribed queue's max offset (from the master, else a slave); queues of ``start`` no longer
        routed keep their start (a broker that is away comes back); queues that went backwards are data loss,
        unless the answer came from a slave (it may lag behind what was read from its master)."""
        queues = self.oracle.queues()
        latest = self.oracle.max_offsets(queues)
        for mq, offset in start.items():
            if mq not in latest:
                latest[mq] = offset
            elif latest[mq] < offset:
                message = (f"topic {mq.topic} broker {mq.broker_name} queue {mq.queue_id}: max offset "
                           f"{latest[mq]} is below the offset already read, {offset} (was the topic recreated?)")
                if mq.broker_name in self.oracle.on_slave:
                    # a slave that had not copied all its master had stored before it went away: not a loss, the
                    # master has the rest; the queue waits for the slave (or the master) to pass the offset
                    log.warning("topic %s broker %s queue %d: its slave is at %d, behind the offset already read "
                                "(%d); waiting", mq.topic, mq.broker_name, mq.queue_id, latest[mq], offset)
                elif self.opts.fail_on_data_loss:
                    raise DataLossError(message)
                else:
                    log.warning("%s; waiting for it to pass %s (failOnDataLoss=false)", message, offset)
                latest[mq] = offset
        return latest

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        fresh, self._fresh_start = self._fresh_start, False
        begin = from_json(start)
        self._commit_group(begin)  # Spark asks for the next batch once the previous one (ending at start) is done
        if self._target is not None:
            latest = dict(self._target)
            for mq, offset in begin.items():
                latest.setdefault(mq, offset)
        else:
            latest = self._latest(begin)
        if fresh and self._target is None and start == self._initial and _involves_latest(self.opts):
            self._planned = (latest, begin)
            return start  # an empty first batch puts the resolved start into the offset log (module docstring)
        begin_all = dict(begin)
        begin_all.update(self.oracle.min_offsets(sorted(latest.keys() - begin.keys())))  # new queues: the earliest
        latest = {mq: max(offset, begin_all[mq]) for mq, offset in latest.items()}
        end = self._admit(begin_all, latest, limit)
        if end != begin_all:
            self._last_batch_at = time.monotonic()
        self._planned = (latest, end)
        return to_json(end)

    def _admit(self, start: Offsets, latest: Offsets, limit: ReadLimit) -> Offsets:
        """The end of the next batch under ``limit``: Spark's ReadAllAvailable wins over every option; ReadMaxRows
        splits the limit across queues; a minimum (ReadMinRows, or minOffsetsPerTrigger beside a maximum) holds the
        batch back until enough has arrived or maxTriggerDelay passed, except under Trigger.AvailableNow, which
        must end."""
        if isinstance(limit, ReadAllAvailable):
            return latest
        min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else self.opts.min_offsets_per_trigger
        if min_rows is not None and self._target is None:
            waited_ms = (time.monotonic() - self._last_batch_at) * 1000
            if total_backlog(start, latest) < min_rows and waited_ms < self.opts.max_trigger_delay_ms:
                return dict(start)
        if isinstance(limit, ReadMaxRows):
            return rate_limit(start, latest, limit.max_rows)
        return latest

    def reportLatestOffset(self) -> dict | None:
        """The latest offsets the last ``latestOffset`` saw (no second question to the brokers, as Kafka's source),
        with Kafka's offsets-behind-latest figures of the batch it planned beside them (connector/source_metrics.py:
        why there and not in ``SourceProgress.metrics``)."""
        if self._planned is None:
            return None
        latest, end = self._planned
        return {**to_json(latest), METRICS_KEY: offsets_behind_latest(end, latest)}

    def partitions(self, start: dict, end: dict) -> list[QueueRange]:
        return plan_partitions(self.oracle, self.opts, from_json(start), from_json(end))

    def read(self, partition: QueueRange) -> Iterator[pa.RecordBatch]:
        return read_partition(partition)

    def commit(self, end: dict) -> None:
        self._commit_group(from_json(end))

    def _commit_group(self, offsets: Offsets) -> None:
        """consumerGroup: processed offsets to the brokers. Spark calls ``commit(end)`` only when it plans the
        batch after next, so ``latestOffset(start)`` commits too: the last batch of a run shows up at once."""
        if self.opts.consumer_group and offsets and offsets != self._committed:
            self.oracle.commit_group_offsets(self.opts.consumer_group, offsets)
            self._committed = dict(offsets)

    def stop(self) -> None:
        if self._oracle is not None:
            self._oracle.close()
            self._oracle = None


class RmqBatchReader(DataSourceReader):
    """The batch source: ``[startingOffsets, endingOffsets)`` of every subscribed queue, resolved when planned."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[QueueRange]:
        oracle = OffsetOracle(self.opts)
        try:
            queues = oracle.queues()
            start = oracle.resolve(self.opts.starting, queues)
            ending = self.opts.ending
            end = oracle.max_offsets(queues) if ending is None else oracle.resolve(ending, queues, default=LATEST)
            return plan_partitions(oracle, self.opts, start, end)
        finally:
            oracle.close()

    def read(self, partition: QueueRange) -> Iterator[pa.RecordBatch]:
        return read_partition(partition)
