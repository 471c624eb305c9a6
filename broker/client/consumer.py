"""The lite pull consumer (client/consumer/DefaultLitePullConsumer + impl/consumer/DefaultLitePullConsumerImpl). What it
shares with the push consumer (ProcessQueue, offset stores, where a queue starts) is in ``offsets.py``.

The caller assigns queues and polls. Behind ``poll`` one task per assigned queue long-polls its broker (PULL_MESSAGE
with SUSPEND, held up to ``broker_suspend_max_time_millis``) and queues what arrives; ``poll`` hands over one
batch of one queue at a time. ``seek`` stops that queue's task, drops what it had fetched, and restarts it at the new
offset. Offsets the caller has received are committed to the broker every ``auto_commit_interval_millis`` when
``auto_commit`` is on, or by ``commit()``.

``pull`` is the low-level call under all this (no suspend, no state): one PULL_MESSAGE, the raw body and, on request,
the decoded messages. The Spark connector's blocking twin is ``blocking.BlockingClient.pull``.

Examples:
    >>> async with LitePullConsumer("my_group", namesrv_addr="127.0.0.1:9876") as consumer:  # doctest: +SKIP
    ...     queues = await consumer.fetch_message_queues("TopicTest")
    ...     consumer.assign(queues, sub_expression="TagA || TagB")
    ...     await consumer.seek_to_begin(queues[0])
    ...     messages = await consumer.poll(timeout_ms=1000)
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from broker.client import protocol
from broker.client.instance import ClientConfig, MQClientInstance
from broker.client.message import MessageExt, MessageQueue, PullResult, PullStatus
from broker.client.offsets import (
    OFFSET_STORE_ERROR,
    ConsumeFromWhere,
    MessageModel,
    ProcessQueue,
    ReadOffsetType,
    compute_pull_from_where,
    consumer_setup,
    default_consume_timestamp,
)
from broker.client.pull_api import PullAPIWrapper
from broker.client.route import subscribe_queues
from broker.client.running_info import (
    PROP_CONSUMER_START_TIMESTAMP,
    consumer_properties,
    consumer_running_info,
    process_queue_info,
)
from broker.client.trace_batch import TraceDispatcherType
from broker.client.trace_dispatcher import AsyncTraceDispatcher, start_trace_dispatcher
from broker.common.errors import MQBrokerError, MQClientError
from broker.remoting.codes import ResponseCode
from broker.remoting.heartbeat import build_subscription_data
from broker.remoting.signing import SessionCredentials

log = logging.getLogger(__name__)

PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL = 50
PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL = 20
PULL_TIME_DELAY_MILLS_WHEN_PAUSE = 1000


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
    enable_msg_trace: bool = False  # SubBefore/SubAfter trace records of every polled batch (trace_dispatcher)
    trace_topic: str | None = None  # where they go; blank: RMQ_SYS_TRACE_TOPIC


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
                 client_config: ClientConfig | None = None, instance: MQClientInstance | None = None,
                 credentials: SessionCredentials | None = None) -> None:
        """``credentials``: sign every request with these keys (Java's consumer constructors with an RPCHook); a
        shared ``instance`` carries its own."""
        self.group = group
        self.config = config or LitePullConfig()
        self.instance, self.offset_store = consumer_setup(group, self.config.message_model, namesrv_addr,
                                                         client_config, instance, credentials)
        self.pull_api = PullAPIWrapper(self.instance, group)
        self._assigned: dict[MessageQueue, _Assigned] = {}
        self._sub_expressions: dict[str, protocol.SubscriptionData] = {}
        self._subscribe_info: dict[str, list[MessageQueue]] = {}
        self._requests: asyncio.Queue[_ConsumeRequest] = asyncio.Queue()
        self._consume_timestamp = self.config.consume_timestamp or default_consume_timestamp()
        self._next_auto_commit = 0.0
        self.trace_dispatcher: AsyncTraceDispatcher | None = None
        self._started = False
        self.consumer_start_timestamp = int(time.time() * 1000)  # Java's: when the consumer object was made

    # -- lifecycle ----------------------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        self.instance.register_consumer(self)
        await self.offset_store.load()
        await self.instance.start()
        if self.config.enable_msg_trace and self.trace_dispatcher is None:
            self.trace_dispatcher = await start_trace_dispatcher(
                self.group, TraceDispatcherType.CONSUME, self.config.trace_topic, self.instance.config.namesrv_addr,
                self.instance.remoting.credentials)
        self._started = True
        self._next_auto_commit = time.monotonic() + self.config.auto_commit_interval_millis / 1000
        for mq in self._assigned:
            self._start_pull_task(mq)

    async def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        await self._stop_pull_tasks(list(self._assigned))
        if self.config.auto_commit:  # best effort, as the periodic commit: a broker gone must not fail shutdown
            await self.offset_store.persist_all(list(self._assigned))
        await self.instance.unregister_consumer(self.group)
        await self.instance.shutdown()
        if self.trace_dispatcher is not None:
            await self.trace_dispatcher.shutdown()
            self.trace_dispatcher = None

    async def __aenter__(self) -> LitePullConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    # ConsumerInner, for the instance
    def consumer_data(self) -> protocol.ConsumerData:
        # Assigned queues are no subscription: like Java's assign mode, the heartbeat names the group only (each
        # pull carries its own expression).
        return protocol.ConsumerData(self.group, self.consume_type, self.config.message_model.value,
                                     self.config.consume_from_where.value, [])

    def subscribed_topics(self) -> Iterable[str]:
        return {mq.topic for mq in self._assigned} | set(self._subscribe_info)

    def update_topic_subscribe_info(self, topic: str, mqs: list[MessageQueue]) -> None:
        if topic in self._subscribe_info or any(mq.topic == topic for mq in self._assigned):
            self._subscribe_info[topic] = mqs

    async def do_rebalance(self) -> None:
        pass  # assigned queues: nothing to balance

    async def persist_consumer_offset(self) -> None:
        await self.offset_store.persist_all(list(self._assigned))

    async def consumer_running_info(self) -> dict[str, Any]:
        """DefaultLitePullConsumerImpl.consumerRunningInfo: settings, and each assigned queue with its committed
        offset and what is fetched of it. Assigned queues are no subscription (as in the heartbeat)."""
        properties = consumer_properties(self.group, self.config, self.instance.config)
        properties["consumeTimestamp"] = self._consume_timestamp  # the one in use: the default is a time too
        properties[PROP_CONSUMER_START_TIMESTAMP] = str(self.consumer_start_timestamp)
        mq_table = {}
        for mq, state in list(self._assigned.items()):
            offset = await self.offset_store.read_offset(mq, ReadOffsetType.MEMORY_FIRST_THEN_STORE)
            mq_table[mq] = process_queue_info(state.process_queue, offset)
        return consumer_running_info(properties, [], mq_table)

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
                self._sub_expressions[topic] = build_subscription_data(topic, sub_expression)
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
        """Commit ``offsets`` (default: the position after what ``poll`` returned, for every assigned queue) and
        wait until the brokers have them (auto-commit sends them oneway, as Java does)."""
        if offsets is not None:
            for mq, offset in offsets.items():
                self.offset_store.update_offset(mq, offset)
        await self.offset_store.persist_all(offsets or list(self._assigned), oneway=False)

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
            await self.offset_store.persist_all(list(self._assigned))
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
        if self.trace_dispatcher is not None:  # as Java's poll: handed over counts as consumed, successfully
            before = self.trace_dispatcher.consume_before(self.group, request.messages)
            self.trace_dispatcher.consume_after(before, len(request.messages), True, None)
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
        subscription = build_subscription_data(mq.topic, sub_expression)
        timeout_ms = self.config.consumer_pull_timeout_millis if timeout_ms is None else timeout_ms
        return await self.pull_api.pull_kernel(mq, offset, max_nums, subscription=subscription, timeout_ms=timeout_ms,
                                               decode=decode)

    # -- pull tasks ---------------------------------------------------------------------------------------------

    def _subscription(self, topic: str) -> protocol.SubscriptionData:
        sub = self._sub_expressions.get(topic)
        if sub is None:
            sub = self._sub_expressions[topic] = build_subscription_data(topic, "*")
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
                result = await self.pull_api.pull_kernel(
                    mq, offset, config.pull_batch_size, subscription=self._subscription(mq.topic),
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
