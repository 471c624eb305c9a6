"""The source's offsets: ``{topic: {brokerName: {queueId: nextOffset}}}`` in Spark's offset log, and the driver-side
questions about them (which queues exist, where they start and end, how much of the backlog a trigger may take).

An offset is the queue offset of the next message to read, as RocketMQ's ``nextBeginOffset`` and ``maxOffset``
(one past the last message); a micro-batch reads ``[start, end)`` of each queue. Queue ids are JSON object keys,
so strings in the log and ints here.
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from broker.client import protocol
from broker.client.blocking import (
    BlockingClient,
    BlockingRemotingClient,
)
from broker.client.message import MessageQueue
from broker.common.errors import ConnectorError, DataLossError, MQBrokerError, MQClientError, RemotingError
from broker.common.fastjson import decode_json
from broker.common.message import local_address
from broker.common.validation import (
    DLQ_GROUP_TOPIC_PREFIX,
    LMQ_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SPARK_SOURCE_INSTANCE_PREFIX,
    is_system_topic,
)
from broker.remoting.codes import ResponseCode
from broker.remoting.command import RemotingCommand
from broker.remoting.heartbeat import build_subscription_data
from connector.access import access_denied, is_refusal, read_need
from connector.options import EARLIEST, LATEST, OffsetSpec, SourceOptions
from connector.replicas import DownList, broker_addrs, is_master, read_addresses

log = logging.getLogger(__name__)

Offsets = dict[MessageQueue, int]
T = TypeVar("T")
# The Java client's heartbeatBrokerInterval: a committing query's group is announced again this often, well inside
# the broker's channelExpiredTimeout (120 s), so it stays an online group.
HEARTBEAT_INTERVAL_S = 30.0


def to_json(offsets: Mapping[MessageQueue, int]) -> dict[str, dict[str, dict[str, int]]]:
    """The offset-log form, sorted so that equal offsets serialize equally."""
    result: dict[str, dict[str, dict[str, int]]] = {}
    for mq in sorted(offsets):
        result.setdefault(mq.topic, {}).setdefault(mq.broker_name, {})[str(mq.queue_id)] = int(offsets[mq])
    return result


def from_json(data: Mapping[str, Mapping[str, Mapping[str, int]]] | None) -> Offsets:
    return {MessageQueue(topic, broker, int(qid)): int(offset)
            for topic, brokers in (data or {}).items()
            for broker, queues in brokers.items()
            for qid, offset in queues.items()}


def rate_limit(start: Mapping[MessageQueue, int], end: Mapping[MessageQueue, int], max_rows: int) -> Offsets:
    """``end`` cut down to at most ``max_rows`` offsets in total, split across queues in proportion to their backlog.

    Unlike the Kafka connector (which rounds each share below one up to one, and may go over the limit), the
    total never exceeds ``max_rows``: every queue with a backlog first gets one offset (so small queues are never
    starved behind a big one), the rest is shared in proportion to what is left, by largest remainder. When there
    are more queues with a backlog than ``max_rows``, the queues served rotate with the start offsets, so each gets
    its turn."""
    backlog = {mq: end[mq] - start.get(mq, end[mq]) for mq in end}
    waiting = sorted(mq for mq, size in backlog.items() if size > 0)
    total = sum(backlog[mq] for mq in waiting)
    result = dict(end)
    if total <= max_rows:
        return result
    take = dict.fromkeys(waiting, 0)
    if max_rows < len(waiting):
        first = sum(start.get(mq, 0) for mq in waiting) % len(waiting)
        for mq in (waiting[first:] + waiting[:first])[:max_rows]:
            take[mq] = 1
    else:
        rest, rest_total = max_rows - len(waiting), total - len(waiting)
        shares = {mq: rest * (backlog[mq] - 1) / rest_total for mq in waiting}
        for mq in waiting:
            take[mq] = 1 + math.floor(shares[mq])
        left = max_rows - sum(take.values())
        by_remainder = sorted(waiting, key=lambda mq: (-(shares[mq] - math.floor(shares[mq])), mq))
        for mq in by_remainder[:left]:
            take[mq] += 1
    for mq in waiting:
        result[mq] = start[mq] + min(take[mq], backlog[mq])
    return result


def total_backlog(start: Mapping[MessageQueue, int], end: Mapping[MessageQueue, int]) -> int:
    return sum(max(end[mq] - start.get(mq, end[mq]), 0) for mq in end)


def readable_by_pattern(topic: str) -> bool:
    """Topics a ``topicPattern`` may match: ordinary user topics, never system, retry, DLQ or LMQ topics."""
    return not (is_system_topic(topic) or topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX,
                                                            LMQ_PREFIX)))


class OffsetOracle:
    """The driver's view of the subscribed queues through a BlockingClient: routes, min/max offsets, timestamps.

    Each question goes to the copy of the queue's broker that answers (connector/replicas.py): the master, else a
    slave, and the master again once the route has it back. Broker and NameServer failures become ConnectorError
    naming what was asked, so a query fails with a message a user can act on."""

    def __init__(self, opts: SourceOptions) -> None:
        self.opts = opts
        self.client = BlockingClient(opts.namesrv_addr, timeout_ms=opts.pull_timeout_ms, credentials=opts.credentials)
        self._pattern = re.compile(opts.topic_pattern) if opts.topic_pattern else None
        self._announced: dict[str, float] = {}  # broker address -> when the group was last announced
        self.client_id = f"{local_address()}@{SPARK_SOURCE_INSTANCE_PREFIX}{os.getpid()}"
        self.timeout_ms = opts.pull_timeout_ms
        self.on_slave: set[str] = set()  # brokerNames whose last answer came from a slave (the master is away)
        self._down = DownList()

    def close(self) -> None:
        self.client.close()

    # -- which queues --------------------------------------------------------------------------------------------

    def topics(self) -> list[str]:
        if self._pattern is None:
            return list(self.opts.topics)
        return sorted(t for t in self._all_topics() if readable_by_pattern(t) and self._pattern.fullmatch(t))

    def _all_topics(self) -> list[str]:
        request = protocol.topic_list_request()
        error: Exception | None = None
        for addr in self.client.namesrv_addrs:
            try:
                response = self.client.client(addr).invoke(request, self.client.timeout_ms)
            except RemotingError as err:
                error = err
                continue
            if response.code != ResponseCode.SUCCESS or not response.body:
                raise ConnectorError(f"NameServer {addr} did not list its topics: code {response.code} "
                                     f"{response.remark or ''}")
            return [str(t) for t in decode_json(response.body.decode("utf-8")).get("topicList") or ()]
        raise ConnectorError(f"no NameServer of {self.opts.namesrv_addr} answered: {error}")

    def queues(self, *, refresh: bool = True) -> list[MessageQueue]:
        """The readable queues of every subscribed topic, from a fresh route (queues and brokers come and go).
        An explicitly named topic that does not exist fails; a pattern simply matches what exists."""
        result: list[MessageQueue] = []
        for topic in self.topics():
            try:
                self.client.get_route(topic, refresh=refresh)
                result.extend(self.client.fetch_message_queues(topic))
            except MQClientError as err:
                if err.code == ResponseCode.TOPIC_NOT_EXIST and self._pattern is not None:
                    continue  # deleted since the listing
                if err.code == ResponseCode.TOPIC_NOT_EXIST:
                    raise ConnectorError(f"topic {topic} does not exist (NameServer {self.opts.namesrv_addr} has "
                                         "no route for it)") from err
                raise ConnectorError(f"cannot get the route of topic {topic} from {self.opts.namesrv_addr}: "
                                     f"{err}") from err
        if self.opts.assigned:
            return self._assigned(result)
        return sorted(result)

    def _assigned(self, routed: list[MessageQueue]) -> list[MessageQueue]:
        """The ``assign`` option's queues; one the route does not have fails the query (as Kafka's assign of a
        partition that does not exist)."""
        by_key = {(mq.topic, mq.broker_name, mq.queue_id): mq for mq in routed}
        missing = [f"{t}/{b}/{q}" for t, b, q in self.opts.assigned if (t, b, q) not in by_key]
        if missing:
            raise ConnectorError(f"option assign names queue(s) {', '.join(missing)}, which the route of "
                                 f"{self.opts.namesrv_addr} does not have (readable queues: "
                                 f"{', '.join(sorted(f'{k[0]}/{k[1]}/{k[2]}' for k in by_key))})")
        return sorted(by_key[key] for key in self.opts.assigned)

    # -- offsets of queues ---------------------------------------------------------------------------------------

    def _copies(self, mq: MessageQueue, *, refresh: bool = False) -> dict[int, str]:
        return broker_addrs(self.client.get_route(mq.topic, refresh=refresh), mq.broker_name)

    def read_addrs(self, mq: MessageQueue, *, refresh: bool = False) -> list[str]:
        """The addresses to read ``mq``'s broker from, best first (connector/replicas.py: the master, then its
        slaves), those that failed lately last."""
        return self._down.order(read_addresses(self._copies(mq, refresh=refresh)))

    def broker_addr(self, mq: MessageQueue) -> str:
        """Where to read ``mq`` now: its master, else a slave (the executor's pulls start there)."""
        try:
            addrs = self.read_addrs(mq) or self.read_addrs(mq, refresh=True)
        except (MQClientError, RemotingError) as err:
            raise ConnectorError(f"no address for broker {mq.broker_name} of {mq.topic}: {err}") from err
        if not addrs:
            raise ConnectorError(f"broker {mq.broker_name} of {mq.topic} has neither a master nor a slave in the "
                                 f"route of {self.opts.namesrv_addr}")
        return addrs[0]

    def _ask(self, what: str, mq: MessageQueue, call: Callable[[BlockingRemotingClient, MessageQueue], T]) -> T:
        """``call`` on the copy of ``mq``'s broker to read from; when it does not answer, a fresh route's copies in
        turn (a master gone: its slave; a master back: the master). Which copy answered is remembered in
        ``on_slave``."""
        error: Exception | None = None
        tried: set[str] = set()
        for refresh in (False, True):
            try:
                copies = self._copies(mq, refresh=refresh)
            except (MQClientError, RemotingError) as err:
                error = err
                continue
            for addr in self._down.order(read_addresses(copies)):
                if addr in tried:
                    continue
                tried.add(addr)
                try:
                    answer = call(self.client.client(addr), mq)
                except RemotingError as err:
                    log.warning("broker %s at %s does not answer (%s); asking another copy", mq.broker_name, addr,
                                err)
                    self._down.mark(addr)
                    error = err
                    continue
                except (MQBrokerError, MQClientError) as err:
                    raise self._failed(what, mq, addr, err) from err
                self._down.clear(addr)
                self._answered(mq.broker_name, is_master(copies, addr), addr)
                return answer
        raise ConnectorError(f"cannot get the {what} of {mq.topic} broker {mq.broker_name} queue {mq.queue_id}: "
                             f"no copy of the broker answered ({', '.join(sorted(tried)) or 'none routed'}): "
                             f"{error}") from error

    def _failed(self, what: str, mq: MessageQueue, addr: str, err: MQBrokerError | MQClientError) -> ConnectorError:
        """A broker's error answer as the query's error: a refusal of its access control names what reading needs
        (connector/access.py), anything else what was asked."""
        if is_refusal(err):
            assert isinstance(err, MQBrokerError)
            need = read_need(self.opts.topics, self.opts.topic_pattern, self.opts.consumer_group)
            return access_denied(need, err, self.opts.credentials)
        return ConnectorError(f"cannot get the {what} of {mq.topic} broker {mq.broker_name} queue {mq.queue_id} "
                              f"from {addr}: {err}")

    def _answered(self, broker_name: str, master: bool, addr: str) -> None:
        was = broker_name in self.on_slave
        if master:
            self.on_slave.discard(broker_name)
            if was:
                log.warning("broker %s: reading from its master %s again", broker_name, addr)
        else:
            self.on_slave.add(broker_name)
            if not was:
                log.warning("broker %s: its master does not answer; reading from slave %s", broker_name, addr)

    def _ask_all(self, what: str, queues: Iterable[MessageQueue],
                 request: Callable[[MessageQueue], RemotingCommand]) -> Offsets:
        """An offset question per queue (``request(mq)``), all of them in flight at once on each broker's connection:
        one round trip per broker rather than one per queue (a query's start asks three such questions of every
        queue). A queue whose copy did not answer is asked again through ``_ask``, which tries the other copies."""
        queues = list(queues)
        sent: list[tuple[MessageQueue, str, bool, RemotingCommand]] = []
        again: list[MessageQueue] = []
        for mq in queues:
            try:
                copies = self._copies(mq)
            except (MQClientError, RemotingError):  # no route: _ask tries a fresh one (and says why)
                again.append(mq)
                continue
            addr = next(iter(self._down.order(read_addresses(copies))), None)
            if addr is None:
                again.append(mq)
                continue
            command = request(mq)
            try:
                self.client.client(addr).send(command, self.timeout_ms)
            except RemotingError as err:
                log.warning("broker %s at %s does not answer (%s); asking another copy", mq.broker_name, addr, err)
                self._down.mark(addr)  # the next queues of this broker go to another copy at once
                again.append(mq)
                continue
            sent.append((mq, addr, is_master(copies, addr), command))
        answers: Offsets = {}
        failed: set[str] = set()
        for mq, addr, master, command in sent:
            if addr in failed:  # its connection is closed: the other copies, through _ask
                again.append(mq)
                continue
            try:
                answers[mq] = protocol.parse_offset_response(self.client.client(addr).receive(command, self.timeout_ms),
                                                             addr)
            except RemotingError as err:
                log.warning("broker %s at %s does not answer (%s); asking another copy", mq.broker_name, addr, err)
                self._down.mark(addr)  # one timeout per address, not one per queue
                self.client.client(addr).close()  # what else is in flight there is abandoned with the connection
                failed.add(addr)
                again.append(mq)
                continue
            except (MQBrokerError, MQClientError) as err:
                raise self._failed(what, mq, addr, err) from err
            self._down.clear(addr)
            self._answered(mq.broker_name, master, addr)
        for mq in again:
            answers[mq] = self._ask(what, mq, lambda c, q: protocol.parse_offset_response(
                c.invoke(request(q), self.timeout_ms), c.address))
        return {mq: answers[mq] for mq in queues}

    def max_offsets(self, queues: Iterable[MessageQueue]) -> Offsets:
        return self._ask_all("max offset", queues, protocol.max_offset_request)

    def min_offsets(self, queues: Iterable[MessageQueue]) -> Offsets:
        return self._ask_all("min offset", queues, protocol.min_offset_request)

    def offsets_for_timestamp(self, queues: Iterable[MessageQueue], timestamp_ms: int) -> Offsets:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first message stored at or after ``timestamp_ms`` (the queue's max
        offset when there is none)."""
        return self._ask_all(f"offset at {timestamp_ms}", queues,
                             lambda mq: protocol.search_offset_request(mq, timestamp_ms, "LOWER"))

    # -- starting and ending offsets -----------------------------------------------------------------------------

    def resolve(self, spec: OffsetSpec, queues: list[MessageQueue], *, default: int = EARLIEST) -> Offsets:
        """``spec`` as concrete offsets of ``queues``. JSON entries name queues by (topic, brokerName, queueId);
        queues the JSON leaves out get ``default``; an entry for a topic that is not subscribed is an error (a typo
        would otherwise silently read from the default)."""
        if spec.kind == "earliest":
            return self.min_offsets(queues)
        if spec.kind == "latest":
            return self.max_offsets(queues)
        if spec.kind == "timestamp":
            return self.offsets_for_timestamp(queues, int(spec.timestamp or 0))
        table = spec.table
        subscribed = {mq.topic for mq in queues} | set(self.topics())
        unknown = sorted({topic for topic, _, _ in table if topic not in subscribed})
        if unknown:
            raise ConnectorError(f"offsets name topic(s) {', '.join(unknown)} that the query does not subscribe to "
                                 f"(subscribed: {', '.join(sorted(subscribed)) or 'none'})")
        result: Offsets = {}
        for mq in queues:
            value = table.get((mq.topic, mq.broker_name, mq.queue_id), default)
            if spec.kind == "timestamps" and (mq.topic, mq.broker_name, mq.queue_id) in table:
                result[mq] = self.offsets_for_timestamp([mq], value)[mq]
            elif value == EARLIEST:
                result[mq] = self.min_offsets([mq])[mq]
            elif value == LATEST:
                result[mq] = self.max_offsets([mq])[mq]
            else:
                result[mq] = value
        return result

    def check_data_loss(self, mq: MessageQueue, offset: int, low: int, *, fail: bool) -> int:
        """The offset to read ``mq`` from: ``offset``, or ``low`` (the queue's min offset, asked by the caller for
        all its queues at once) when retention removed the messages before it (then DataLossError when ``fail``)."""
        if offset >= low:
            return offset
        message = (f"data loss in topic {mq.topic} broker {mq.broker_name} queue {mq.queue_id}: offsets "
                   f"{offset} to {low - 1} are gone (the queue's min offset is {low})")
        if fail:
            raise DataLossError(message + "; set failOnDataLoss=false to skip them")
        log.warning("%s; skipping them (failOnDataLoss=false)", message)
        return low

    # -- consumer group progress -----------------------------------------------------------------------------------

    def commit_group_offsets(self, group: str, offsets: Mapping[MessageQueue, int]) -> None:
        """UPDATE_CONSUMER_OFFSET of every queue to its broker, so ``mqadmin consumerProgress`` shows the query's
        lag. The first time per broker, and again once HEARTBEAT_INTERVAL_S has passed, a HEART_BEAT names
        ``group`` as a pull consumer of the topics: the broker then knows the group (and creates its %RETRY% topic,
        through which ``consumerProgress -g`` finds the brokers), and keeps it online while the query commits, so
        its lag gauges (rocketmq_consumer_lag_messages) and the console follow it. The offset goes where reads go
        (the master, else a slave), as Java's consumer sends it; a slave's copy is overwritten by its master's when
        the master is back. Failures are logged, not raised: the checkpoint, not the broker, is the source of
        truth."""
        for mq, offset in sorted(offsets.items()):
            try:
                self._ask("committed offset", mq, lambda remote, q, o=offset: self._commit_offset(group, remote, q, o))
            except ConnectorError as err:
                log.warning("consumerGroup %s: could not commit offset %s of %s: %s", group, offset, mq, err)

    def _commit_offset(self, group: str, remote: BlockingRemotingClient, mq: MessageQueue, offset: int) -> None:
        now = time.monotonic()
        if now - self._announced.get(remote.address, -HEARTBEAT_INTERVAL_S) >= HEARTBEAT_INTERVAL_S:
            remote.invoke(self._heartbeat(group), self.timeout_ms)
            self._announced[remote.address] = now
        response = remote.invoke(protocol.update_consumer_offset_request(group, mq, offset), self.timeout_ms)
        protocol.expect_success(response, remote.address)

    def _heartbeat(self, group: str) -> RemotingCommand:
        subscriptions = [build_subscription_data(topic, "*") for topic in self.topics()]
        consumer = protocol.ConsumerData(group, "CONSUME_ACTIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET",
                                         subscriptions)
        return protocol.heartbeat_request(self.client_id, (), [consumer])
