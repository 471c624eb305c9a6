"""The lite pull consumer (client/consumer/DefaultLitePullConsumer + impl/consumer/DefaultLitePullConsumerImpl), and
what it shares with the push consumer: ProcessQueue, the offset stores, and where a queue starts.

The caller assigns queues and polls. Behind ``poll`` one task per assigned queue long-polls its broker (PULL_MESSAGE
with SUSPEND, held up to ``broker_suspend_max_time_millis``) and queues what arrives; ``poll`` hands over one
batch of one queue at a time. ``seek`` stops that queue's task, drops what it had fetched, and restarts it at the new
offset. Offsets the caller has received are committed to the broker every ``auto_commit_interval_millis`` when
``auto_commit`` is on, or by ``commit()``.

``pull`` is the low-level call under all this (no suspend, no state): one PULL_MESSAGE, the raw body and, on request,
the decoded messages. The Spark connector's blocking twin is ``_blocking.BlockingClient.pull``.

Examples:
    >>> async with LitePullConsumer("my_group", namesrv_addr="127.0.0.1:9876") as consumer:  # doctest: +SKIP
    ...     queues = await consumer.fetch_message_queues("TopicTest")
    ...     consumer.assign(queues, sub_expression="TagA || TagB")
    ...     await consumer.seek_to_begin(queues[0])
    ...     messages = await consumer.poll(timeout_ms=1000)
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path

from broker.client import protocol
from broker.client.instance import ClientConfig, MQClientInstance
from broker.client.message import MessageExt, MessageQueue, PullResult, PullStatus
from broker.client.route import subscribe_queues
from broker.errors import MQBrokerError, MQClientError, OffsetNotFound
from broker.metadata.persist import write_atomic
from broker.metadata.validation import RETRY_GROUP_TOPIC_PREFIX
from broker.remoting.codes import ResponseCode

log = logging.getLogger(__name__)

PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL = 50
PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL = 20
PULL_TIME_DELAY_MILLS_WHEN_PAUSE = 1000


class MessageModel(Enum):
    CLUSTERING = "CLUSTERING"  # each message to one client of the group; offsets kept by the broker
    BROADCASTING = "BROADCASTING"  # each message to every client; offsets kept in a local file


class ConsumeFromWhere(Enum):
    """Where a group starts on a queue it has no committed offset for."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


class ReadOffsetType(Enum):
    READ_FROM_MEMORY = "READ_FROM_MEMORY"
    READ_FROM_STORE = "READ_FROM_STORE"
    MEMORY_FIRST_THEN_STORE = "MEMORY_FIRST_THEN_STORE"


OFFSET_NOT_FOUND = -1  # readOffset: the store has none
OFFSET_STORE_ERROR = -2  # readOffset: the store could not be asked


# -- ProcessQueue ------------------------------------------------------------------------------------------------------


class ProcessQueue:
    """The messages of one queue fetched but not yet acknowledged (impl/consumer/ProcessQueue). The offset to commit
    is the lowest one still here, or one past the highest ever put once all are acknowledged."""

    def __init__(self) -> None:
        self._msgs: dict[int, MessageExt] = {}  # by queue offset, kept in offset order
        self.msg_size = 0
        self.queue_offset_max = 0
        self.dropped = False
        self.last_pull_timestamp = 0
        self.last_consume_timestamp = 0

    @property
    def msg_count(self) -> int:
        return len(self._msgs)

    def put_messages(self, msgs: Iterable[MessageExt]) -> None:
        resort = False
        for msg in msgs:
            if msg.queue_offset not in self._msgs:
                resort |= bool(self._msgs) and msg.queue_offset < self.queue_offset_max
                self._msgs[msg.queue_offset] = msg
                self.msg_size += len(msg.body)
            self.queue_offset_max = max(self.queue_offset_max, msg.queue_offset)
        if resort:  # pulls come in offset order; this only happens after a reset to an earlier offset
            self._msgs = dict(sorted(self._msgs.items()))

    def remove_messages(self, msgs: Iterable[MessageExt]) -> int:
        """Acknowledge ``msgs``; returns the offset now safe to commit, -1 when nothing was held."""
        if not self._msgs:
            return -1
        for msg in msgs:
            if self._msgs.pop(msg.queue_offset, None) is not None:
                self.msg_size -= len(msg.body)
        return next(iter(self._msgs)) if self._msgs else self.queue_offset_max + 1

    def contains(self, msg: MessageExt) -> bool:
        return msg.queue_offset in self._msgs

    def max_span(self) -> int:
        if not self._msgs:
            return 0
        return self.queue_offset_max - next(iter(self._msgs))

    def clear(self) -> None:
        self._msgs.clear()
        self.msg_size = 0
        self.queue_offset_max = 0


# -- offset stores -----------------------------------------------------------------------------------------------------


class RemoteBrokerOffsetStore:
    """CLUSTERING offsets (consumer/store/RemoteBrokerOffsetStore): kept in memory, committed to each queue's broker
    with UPDATE_CONSUMER_OFFSET, read back with QUERY_CONSUMER_OFFSET."""

    def __init__(self, instance: MQClientInstance, group: str) -> None:
        self.instance = instance
        self.group = group
        self.offset_table: dict[MessageQueue, int] = {}

    async def load(self) -> None:
        pass

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        if increase_only and self.offset_table.get(mq, -1) >= offset:
            return
        self.offset_table[mq] = offset

    async def read_offset(self, mq: MessageQueue, kind: ReadOffsetType) -> int:
        if kind is not ReadOffsetType.READ_FROM_STORE:
            offset = self.offset_table.get(mq)
            if offset is not None:
                return offset
            if kind is ReadOffsetType.READ_FROM_MEMORY:
                return OFFSET_NOT_FOUND
        try:
            offset = await self.instance.query_consumer_offset(self.group, mq)
        except OffsetNotFound:
            return OFFSET_NOT_FOUND
        except Exception as err:
            log.warning("fetching the consume offset of %s for %s failed: %s", mq, self.group, err)
            return OFFSET_STORE_ERROR
        self.offset_table[mq] = offset
        return offset

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in mqs:
            offset = self.offset_table.get(mq)
            if offset is not None:
                await self.persist(mq, offset)

    async def persist(self, mq: MessageQueue, offset: int | None = None, *, oneway: bool = True) -> None:
        offset = self.offset_table.get(mq) if offset is None else offset
        if offset is None:
            return
        try:
            await self.instance.update_consumer_offset(self.group, mq, offset, oneway=oneway)
        except Exception as err:
            log.warning("committing offset %s of %s for %s failed: %s", offset, mq, self.group, err)

    def remove_offset(self, mq: MessageQueue) -> None:
        self.offset_table.pop(mq, None)


def local_offset_store_dir() -> Path:
    """rocketmq.client.localOffsetStoreDir: ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR, else ~/.rocketmq_offsets."""
    return Path(os.environ.get("ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR") or Path.home() / ".rocketmq_offsets")


class LocalFileOffsetStore:
    """BROADCASTING offsets (consumer/store/LocalFileOffsetStore): every client keeps its own, in
    ``<dir>/<clientId>/<group>/offsets.json``, replaced atomically. The file is our own JSON
    (``{"offsetTable": [{"brokerName", "queueId", "topic", "offset"}]}``), not Java's (fastjson object keys)."""

    def __init__(self, client_id: str, group: str, directory: Path | None = None) -> None:
        self.path = (directory or local_offset_store_dir()) / client_id / group / "offsets.json"
        self.offset_table: dict[MessageQueue, int] = {}

    async def load(self) -> None:
        try:
            data = json.loads(self.path.read_text("utf-8"))
        except FileNotFoundError:
            return
        for item in data.get("offsetTable", ()):
            self.offset_table[MessageQueue.from_json(item)] = int(item["offset"])

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        if increase_only and self.offset_table.get(mq, -1) >= offset:
            return
        self.offset_table[mq] = offset

    async def read_offset(self, mq: MessageQueue, kind: ReadOffsetType) -> int:
        if kind is not ReadOffsetType.READ_FROM_STORE and mq in self.offset_table:
            return self.offset_table[mq]
        if kind is ReadOffsetType.READ_FROM_MEMORY:
            return OFFSET_NOT_FOUND
        await self.load()
        return self.offset_table.get(mq, OFFSET_NOT_FOUND)

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        wanted = set(mqs)
        table = [{**mq.to_json(), "offset": offset} for mq, offset in sorted(self.offset_table.items())
                 if mq in wanted]
        text = json.dumps({"offsetTable": table}, indent=1)
        await asyncio.get_running_loop().run_in_executor(None, _write_file, str(self.path), text)

    async def persist(self, mq: MessageQueue, offset: int | None = None, *, oneway: bool = True) -> None:
        await self.persist_all(self.offset_table)

    def remove_offset(self, mq: MessageQueue) -> None:
        self.offset_table.pop(mq, None)


def _write_file(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_atomic(path, text)


OffsetStore = RemoteBrokerOffsetStore | LocalFileOffsetStore


def parse_consume_timestamp(text: str) -> int:
    """UtilAll.parseDate(consumeTimestamp, "yyyyMMddHHmmss") in local time, as milliseconds."""
    return int(time.mktime(time.strptime(text, "%Y%m%d%H%M%S")) * 1000)


def default_consume_timestamp() -> str:
    """Java's default consumeTimestamp: half an hour ago."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(time.time() - 1800))


async def compute_pull_from_where(instance: MQClientInstance, store: OffsetStore, mq: MessageQueue,
                                  where: ConsumeFromWhere, consume_timestamp: str) -> int:
    """RebalancePushImpl.computePullFromWhereWithException: the committed offset, else where the group starts."""
    last = await store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
    if last >= 0:
        return last
    if last != OFFSET_NOT_FOUND:
        raise MQClientError(ResponseCode.QUERY_NOT_FOUND, "Failed to query consume offset from offset store")
    retry = mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
    if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
        return 0
    if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP and not retry:
        return await instance.search_offset(mq, parse_consume_timestamp(consume_timestamp))
    if where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET and retry:
        return 0
    return await instance.get_max_offset(mq)


# -- the lite pull consumer --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LitePullConfig:
    """DefaultLitePullConsumer's settings (times in milliseconds)."""

    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp: str = ""  # yyyyMMddHHmmss; empty: half an hour before start
    pull_batch_size: int = 10
    pull_threshold_for_all: int = 10000
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue: int = 100  # MiB
    consume_max_span: int = 2000
    broker_suspend_max_time_millis: int = 20000
    consumer_timeout_millis_when_suspend: int = 30000
    consumer_pull_timeout_millis: int = 10000
    auto_commit: bool = True
    auto_commit_interval_millis: int = 5000
    poll_timeout_millis: int = 5000


@dataclass(slots=True)
class _Assigned:
    """One assigned queue: its ProcessQueue, where the next pull starts, and a seek waiting to apply."""

    process_queue: ProcessQueue
    pull_offset: int = -1
    seek_offset: int = -1
    paused: bool = False
    task: asyncio.Task[None] | None = None


@dataclass(slots=True)
class _ConsumeRequest:
    messages: list[MessageExt]
    mq: MessageQueue
    process_queue: ProcessQueue


class LitePullConsumer:
    """An asyncio lite pull consumer with assigned queues (``assign``); see the module docstring."""

    consume_type = "CONSUME_ACTIVELY"

    def __init__(self, group: str, namesrv_addr: str | None = None, *, config: LitePullConfig | None = None,
                 client_config: ClientConfig | None = None, instance: MQClientInstance | None = None) -> None:
        self.group = group
        self.config = config or LitePullConfig()
        if instance is None:
            client_config = client_config or ClientConfig()
            if namesrv_addr is not None:
                client_config = replace(client_config, namesrv_addr=namesrv_addr)
            if self.config.message_model is MessageModel.CLUSTERING:
                client_config = client_config.with_pid_instance_name()
            instance = MQClientInstance(client_config)
        self.instance = instance
        self.offset_store: OffsetStore = (
            RemoteBrokerOffsetStore(instance, group) if self.config.message_model is MessageModel.CLUSTERING
            else LocalFileOffsetStore(instance.client_id, group))
        self._assigned: dict[MessageQueue, _Assigned] = {}
        self._sub_expressions: dict[str, protocol.SubscriptionData] = {}
        self._subscribe_info: dict[str, list[MessageQueue]] = {}
        self._requests: asyncio.Queue[_ConsumeRequest] = asyncio.Queue()
        self._consume_timestamp = self.config.consume_timestamp or default_consume_timestamp()
        self._next_auto_commit = 0.0
        self._started = False

    # -- lifecycle ----------------------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        self.instance.register_consumer(self)
        await self.offset_store.load()
        await self.instance.start()
        self._started = True
        self._next_auto_commit = time.monotonic() + self.config.auto_commit_interval_millis / 1000
        for mq in self._assigned:
            self._start_pull_task(mq)

    async def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        await self._stop_pull_tasks(list(self._assigned))
        if self.config.auto_commit:
            await self.commit()
        await self.instance.unregister_consumer(self.group)
        await self.instance.shutdown()

    async def __aenter__(self) -> LitePullConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    # ConsumerInner, for the instance
    def consumer_data(self) -> protocol.ConsumerData:
        subs = [self._subscription(topic) for topic in sorted({mq.topic for mq in self._assigned})]
        return protocol.ConsumerData(self.group, self.consume_type, self.config.message_model.value,
                                     self.config.consume_from_where.value, subs)

    def subscribed_topics(self) -> Iterable[str]:
        return {mq.topic for mq in self._assigned} | set(self._subscribe_info)

    def update_topic_subscribe_info(self, topic: str, mqs: list[MessageQueue]) -> None:
        if topic in self._subscribe_info or any(mq.topic == topic for mq in self._assigned):
            self._subscribe_info[topic] = mqs

    async def do_rebalance(self) -> None:
        pass  # assigned queues: nothing to balance

    async def persist_consumer_offset(self) -> None:
        await self.offset_store.persist_all(list(self._assigned))

    # -- queues and offsets -------------------------------------------------------------------------------------

    async def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues, from the route (MessageQueue(topic, brokerName, queueId))."""
        self._subscribe_info.setdefault(topic, [])
        await self.instance.update_topic_route(topic)
        route = self.instance.route_table.routes.get(topic)
        if route is None:
            raise MQClientError(-1, f"Can not find Message Queue for this topic, {topic}")
        return subscribe_queues(topic, route)

    def assign(self, mqs: Iterable[MessageQueue], sub_expression: str | None = None) -> None:
        """Consume exactly ``mqs`` (replacing the previous assignment). ``sub_expression`` ("TagA || TagB", default
        everything) applies to their topics."""
        mqs = list(mqs)
        if not mqs:
            raise MQClientError(-1, "Message queues can not be null or empty.")
        if sub_expression is not None:
            for topic in {mq.topic for mq in mqs}:
                self._sub_expressions[topic] = protocol.build_subscription_data(topic, sub_expression)
        removed = [mq for mq in self._assigned if mq not in mqs]
        for mq in removed:
            state = self._assigned.pop(mq)
            state.process_queue.dropped = True
            if state.task is not None:
                state.task.cancel()
        for mq in mqs:
            if mq not in self._assigned:
                self._assigned[mq] = _Assigned(ProcessQueue())
                if self._started:
                    self._start_pull_task(mq)

    def assignment(self) -> list[MessageQueue]:
        return sorted(self._assigned)

    def pause(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in mqs:
            if mq in self._assigned:
                self._assigned[mq].paused = True

    def resume(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in mqs:
            if mq in self._assigned:
                self._assigned[mq].paused = False

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Make the next messages of ``mq`` start at ``offset`` (within [min offset, max offset])."""
        state = self._assigned.get(mq)
        if state is None:
            raise MQClientError(-1, f"The message queue is not in assigned list, message queue: {mq}")
        min_offset, max_offset = await self.min_offset(mq), await self.max_offset(mq)
        if not min_offset <= offset <= max_offset:
            raise MQClientError(-1, f"Seek offset illegal, seek offset = {offset}, min offset = {min_offset}, "
                                    f"max offset = {max_offset}")
        await self._stop_pull_tasks([mq])
        state = self._assigned[mq]
        state.process_queue.dropped = True  # fetched requests still queued for the old position are skipped
        state.process_queue = ProcessQueue()
        state.seek_offset = offset
        if self._started:
            self._start_pull_task(mq)

    async def seek_to_begin(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self.min_offset(mq))

    async def seek_to_end(self, mq: MessageQueue) -> None:
        await self.seek(mq, await self.max_offset(mq))

    async def min_offset(self, mq: MessageQueue) -> int:
        return await self.instance.get_min_offset(mq)

    async def max_offset(self, mq: MessageQueue) -> int:
        return await self.instance.get_max_offset(mq)

    async def offset_for_timestamp(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first message stored at or after ``timestamp_ms``."""
        return await self.instance.search_offset(mq, timestamp_ms)

    async def committed(self, mq: MessageQueue) -> int:
        """The group's committed offset of ``mq`` (this client's if it has one, else the broker's); -1 if none."""
        offset = await self.offset_store.read_offset(mq, ReadOffsetType.MEMORY_FIRST_THEN_STORE)
        if offset == OFFSET_STORE_ERROR:
            raise MQClientError(-1, "Fetch consume offset from broker exception")
        return offset

    async def commit(self, offsets: dict[MessageQueue, int] | None = None) -> None:
        """Commit ``offsets`` (default: the position after what ``poll`` returned, for every assigned queue)."""
        if offsets is not None:
            for mq, offset in offsets.items():
                self.offset_store.update_offset(mq, offset)
        await self.offset_store.persist_all(offsets or list(self._assigned))

    # -- polling ------------------------------------------------------------------------------------------------

    async def poll(self, timeout_ms: int | None = None) -> list[MessageExt]:
        """The next batch fetched from one assigned queue, or [] when nothing arrived within the timeout."""
        if not self._started:
            raise MQClientError(-1, "The consumer service state not OK, CREATE_JUST")
        timeout_ms = self.config.poll_timeout_millis if timeout_ms is None else timeout_ms
        if timeout_ms < 0:
            raise ValueError("Timeout must not be negative")
        if self.config.auto_commit and time.monotonic() >= self._next_auto_commit:
            self._next_auto_commit = time.monotonic() + self.config.auto_commit_interval_millis / 1000
            await self.commit()
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            try:
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    request = await self._requests.get()
            except TimeoutError:
                return []
            if not request.process_queue.dropped:
                break
        offset = request.process_queue.remove_messages(request.messages)
        if offset >= 0:
            self.offset_store.update_offset(request.mq, offset)
        request.process_queue.last_consume_timestamp = int(time.time() * 1000)
        return request.messages

    async def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, *, sub_expression: str = "*",
                   timeout_ms: int | None = None, decode: bool = True) -> PullResult:
        """One PULL_MESSAGE without suspending (DefaultMQPullConsumer.pull): FOUND with ``body`` (and ``messages``
        when ``decode``), NO_NEW_MSG, NO_MATCHED_MSG or OFFSET_ILLEGAL, with the queue's min/max offsets."""
        if offset < 0:
            raise MQClientError(-1, "offset < 0")
        if max_nums <= 0:
            raise MQClientError(-1, "maxNums <= 0")
        subscription = protocol.build_subscription_data(mq.topic, sub_expression)
        timeout_ms = self.config.consumer_pull_timeout_millis if timeout_ms is None else timeout_ms
        return await self.instance.pull_message(self.group, mq, offset, max_nums, subscription=subscription,
                                                timeout_ms=timeout_ms, decode=decode)

    # -- pull tasks ---------------------------------------------------------------------------------------------

    def _subscription(self, topic: str) -> protocol.SubscriptionData:
        sub = self._sub_expressions.get(topic)
        if sub is None:
            sub = self._sub_expressions[topic] = protocol.build_subscription_data(topic, "*")
        return sub

    def _start_pull_task(self, mq: MessageQueue) -> None:
        state = self._assigned[mq]
        state.task = asyncio.get_running_loop().create_task(self._pull_loop(mq, state), name=f"pull-{mq}")

    async def _stop_pull_tasks(self, mqs: Sequence[MessageQueue]) -> None:
        tasks = [t for mq in mqs if (t := self._assigned[mq].task) is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _flow_controlled(self, pq: ProcessQueue) -> bool:
        config = self.config
        return (self._requests.qsize() * config.pull_batch_size > config.pull_threshold_for_all
                or pq.msg_count > config.pull_threshold_for_queue
                or pq.msg_size // (1024 * 1024) > config.pull_threshold_size_for_queue
                or pq.max_span() > config.consume_max_span)

    async def _next_pull_offset(self, mq: MessageQueue, state: _Assigned) -> int:
        if state.seek_offset != -1:
            offset, state.seek_offset = state.seek_offset, -1
            self.offset_store.update_offset(mq, offset)
            return offset
        if state.pull_offset == -1:
            state.pull_offset = await compute_pull_from_where(
                self.instance, self.offset_store, mq, self.config.consume_from_where, self._consume_timestamp)
        return state.pull_offset

    async def _pull_loop(self, mq: MessageQueue, state: _Assigned) -> None:
        """PullTaskImpl: long-poll one queue until cancelled, feeding ``poll``."""
        config = self.config
        while True:
            pq = state.process_queue
            if state.paused:
                await asyncio.sleep(PULL_TIME_DELAY_MILLS_WHEN_PAUSE / 1000)
                continue
            if self._flow_controlled(pq):
                await asyncio.sleep(PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL / 1000)
                continue
            delay_ms = 0
            try:
                offset = await self._next_pull_offset(mq, state)
                pq.last_pull_timestamp = int(time.time() * 1000)
                result = await self.instance.pull_message(
                    self.group, mq, offset, config.pull_batch_size, subscription=self._subscription(mq.topic),
                    suspend_timeout_ms=config.broker_suspend_max_time_millis,
                    timeout_ms=config.consumer_timeout_millis_when_suspend)
                if result.status is PullStatus.FOUND and result.messages:
                    pq.put_messages(result.messages)
                    self._requests.put_nowait(_ConsumeRequest(result.messages, mq, pq))
                elif result.status is PullStatus.OFFSET_ILLEGAL:
                    log.warning("pull offset %s of %s is illegal; moving to %s", offset, mq, result.next_begin_offset)
                state.pull_offset = result.next_begin_offset
            except asyncio.CancelledError:
                raise
            except MQBrokerError as err:
                flow = err.code == ResponseCode.FLOW_CONTROL
                delay_ms = PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL if flow else \
                    self.instance.config.pull_time_delay_mills_when_exception
                log.warning("pull of %s failed: %s", mq, err)
            except Exception as err:
                delay_ms = self.instance.config.pull_time_delay_mills_when_exception
                log.warning("pull of %s failed: %s", mq, err)
            if delay_ms:
                await asyncio.sleep(delay_ms / 1000)
