"""The push consumer (client/consumer/DefaultMQPushConsumer and its impl, RebalanceImpl): subscribe to topics,
register a listener, and the consumer calls it with messages.

Three kinds of task do the work:

* **Rebalance** (every 20 s, and at once when a broker sends NOTIFY_CONSUMER_IDS_CHANGED): ask a broker for the
  group's client ids, sort queues and ids, and take this client's share with the allocation strategy (CLUSTERING), or
  every queue (BROADCASTING). A queue given up is dropped and its offset committed; a new one starts at the committed
  offset, else at ``consume_from_where``.
* **Pull**, one per assigned queue: long-poll PULL_MESSAGE (held by the broker up to 15 s), then hand the messages
  to the consume service. A queue holding 1000 messages or 100 MiB unacknowledged, or spanning 2000 offsets, waits.
* **Consume** (ConsumeMessageConcurrentlyService, ``concurrently.py``): up to ``consume_thread_max`` listener calls
  at once. A listener may be a coroutine function or a plain function (run in a worker thread). RECONSUME_LATER (or
  an exception) sends the messages back to the broker (CONSUMER_SEND_MSG_BACK, into the group's retry topic); if that
  fails, they are re-sent as ordinary messages to the retry topic, and if that fails too, consumed again locally
  after 5 s. In CLUSTERING the consumer subscribes to
  its group's retry topic %RETRY%group itself (as Java's copySubscription), so retries come back through the same
  listener with their original topic and ``reconsume_times`` counted up; a new group's retry topic, which the broker
  creates on the first heartbeat, is looked up at once rather than at the next route poll. The committed offset of a
  queue is its lowest unacknowledged one, written to the broker every ``persist_consumer_offset_interval``
  (CLUSTERING) or to a local file (BROADCASTING).

``register_message_listener_orderly`` makes it an orderly consumer instead (MessageListenerOrderly, orderly.py: queues
locked at the broker, one consume task per queue); ``subscribe_sql`` selects by SQL92 over message properties
(MessageSelector.bySql; start() fails when a broker cannot compile the expression).

Examples:
    >>> consumer = PushConsumer("my_group", namesrv_addr="127.0.0.1:9876")  # doctest: +SKIP
    >>> consumer.subscribe("TopicTest", "TagA || TagB")  # doctest: +SKIP
    >>> async def listener(msgs, context):
    ...     for msg in msgs:
    ...         print(msg.msg_id, msg.body)
    ...     return ConsumeConcurrentlyStatus.CONSUME_SUCCESS
    >>> consumer.register_message_listener(listener)  # doctest: +SKIP
    >>> await consumer.start()  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from broker.client import protocol
from broker.client.concurrently import (
    ConcurrentlyConsumeService,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    MessageListener,
)
from broker.client.consumer import (
    PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL,
    PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL,
)
from broker.client.instance import ClientConfig, MQClientInstance
from broker.client.message import MessageExt, MessageQueue, PullStatus
from broker.client.offsets import (
    ConsumeFromWhere,
    MessageModel,
    OrderlyProcessQueue,
    ProcessQueue,
    ReadOffsetType,
    compute_pull_from_where,
    consumer_setup,
    default_consume_timestamp,
)
from broker.client.orderly import MessageListenerOrderly, OrderlyConsumeService
from broker.client.producer import Producer
from broker.client.pull_api import PullAPIWrapper
from broker.client.route import MASTER_ID
from broker.client.running_info import (
    PROP_CONSUME_ORDERLY,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_THREADPOOL_CORE_SIZE,
    consumer_properties,
    consumer_running_info,
    process_queue_info,
)
from broker.client.selector import AllocateMessageQueueAveragely, AllocateMessageQueueStrategy, java_string_key
from broker.client.trace_batch import TraceDispatcherType
from broker.client.trace_dispatcher import AsyncTraceDispatcher, start_trace_dispatcher
from broker.common.errors import MQBrokerError, MQClientError
from broker.common.message import PROPERTY_RETRY_TOPIC
from broker.common.validation import CLIENT_INNER_PRODUCER_GROUP, RETRY_GROUP_TOPIC_PREFIX, retry_topic
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from broker.remoting.heartbeat import EXPRESSION_SQL92, build_subscription_data
from broker.remoting.signing import SessionCredentials

__all__ = [  # the listener's vocabulary is concurrently.py's; the consumer's users find it here too
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "MessageListener",
    "PushConsumer",
    "PushConsumerConfig",
    "check_client_in_broker",
]

log = logging.getLogger(__name__)


RETRY_ROUTE_WAIT_S, RETRY_ROUTE_ATTEMPTS = 0.5, 20  # a new group's retry topic: route looked up for up to 10 s
DEFAULT_MAX_RECONSUME_TIMES = 16


@dataclass(frozen=True, slots=True)
class PushConsumerConfig:
    """DefaultMQPushConsumer's settings (times in milliseconds)."""

    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    consume_timestamp: str = ""  # yyyyMMddHHmmss for CONSUME_FROM_TIMESTAMP; empty: half an hour before start
    allocate_strategy: AllocateMessageQueueStrategy = field(default_factory=AllocateMessageQueueAveragely)
    consume_thread_max: int = 20
    consume_concurrently_max_span: int = 2000
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue: int = 100  # MiB
    pull_interval: int = 0
    consume_message_batch_max_size: int = 1
    pull_batch_size: int = 32
    max_reconsume_times: int = -1  # -1: 16
    broker_suspend_max_time_millis: int = 15000
    consumer_timeout_millis_when_suspend: int = 30000
    enable_msg_trace: bool = False  # SubBefore/SubAfter trace records of every consumed batch (trace_dispatcher)
    trace_topic: str | None = None  # where they go; blank: RMQ_SYS_TRACE_TOPIC


@dataclass(slots=True)
class _QueueState:
    process_queue: ProcessQueue
    task: asyncio.Task[None] | None = None


async def check_client_in_broker(instance: MQClientInstance, group: str,
                                 subscriptions: Iterable[protocol.SubscriptionData]) -> None:
    """MQClientInstance.checkClientInBroker: every master compiles each non-TAG subscription (CHECK_CLIENT_CONFIG);
    MQClientError with the broker's code and reason when one refuses."""
    for sub in subscriptions:
        if sub.expression_type == protocol.EXPRESSION_TAG:
            continue
        body = json.dumps({"clientId": instance.client_id, "group": group, "subscriptionData": sub.to_json()})
        for _, broker_id, addr in instance.route_table.all_addresses():
            if broker_id != MASTER_ID:
                continue
            response = await instance.invoke(addr, create_request(RequestCode.CHECK_CLIENT_CONFIG, body=body.encode()))
            if response.code != ResponseCode.SUCCESS:
                raise MQClientError(response.code, response.remark or "")


class PushConsumer:
    """An asyncio push consumer; see the module docstring."""

    consume_type = "CONSUME_PASSIVELY"

    def __init__(self, group: str, namesrv_addr: str | None = None, *, config: PushConsumerConfig | None = None,
                 client_config: ClientConfig | None = None, instance: MQClientInstance | None = None,
                 credentials: SessionCredentials | None = None) -> None:
        """``credentials``: sign every request with these keys (Java's consumer constructors with an RPCHook); a
        shared ``instance`` carries its own."""
        self.group = group
        self.config = config or PushConsumerConfig()
        self.instance, self.offset_store = consumer_setup(group, self.config.message_model, namesrv_addr,
                                                         client_config, instance, credentials)
        self.pull_api = PullAPIWrapper(self.instance, group)
        self.subscriptions: dict[str, protocol.SubscriptionData] = {}
        self.listener: MessageListener | None = None
        self.paused = False
        self._subscribe_info: dict[str, list[MessageQueue]] = {}
        self._queues: dict[MessageQueue, _QueueState] = {}
        self._concurrently = ConcurrentlyConsumeService(self)  # MessageListenerConcurrently
        self._consume_timestamp = self.config.consume_timestamp or default_consume_timestamp()
        self._inner_producer: Producer | None = None
        self._rebalance_lock = asyncio.Lock()
        self._retry_route_task: asyncio.Task[None] | None = None
        self._orderly: OrderlyConsumeService | None = None  # MessageListenerOrderly (issue 4)
        self._started = False
        self.consumer_start_timestamp = int(time.time() * 1000)  # Java's: when the consumer object was made
        self.trace_dispatcher: AsyncTraceDispatcher | None = None

    # -- setup --------------------------------------------------------------------------------------------------

    def subscribe(self, topic: str, sub_expression: str = "*") -> None:
        self.subscriptions[topic] = build_subscription_data(topic, sub_expression)

    def subscribe_sql(self, topic: str, expression: str) -> None:
        """MessageSelector.bySql: the broker (with enablePropertyFilter) delivers the messages whose properties
        satisfy ``expression`` (broker/server/filter/sql92.py); start() fails when a broker cannot compile it."""
        self.subscriptions[topic] = protocol.SubscriptionData(topic, expression, expression_type=EXPRESSION_SQL92)

    def unsubscribe(self, topic: str) -> None:
        self.subscriptions.pop(topic, None)

    def register_message_listener(self, listener: MessageListener) -> None:
        self.listener = listener
        self._orderly = None

    def register_message_listener_orderly(self, listener: MessageListenerOrderly) -> None:
        """MessageListenerOrderly: each queue's messages one after another, in order (broker/client/orderly.py)."""
        self.listener = listener  # type: ignore[assignment]
        self._orderly = OrderlyConsumeService(self, listener)

    async def start(self) -> None:
        if self._started:
            return
        if self.listener is None:
            raise MQClientError(-1, "messageListener is null")
        if self.config.enable_msg_trace and self.trace_dispatcher is None:  # before the first batch is consumed
            self.trace_dispatcher = await start_trace_dispatcher(
                self.group, TraceDispatcherType.CONSUME, self.config.trace_topic, self.instance.config.namesrv_addr,
                self.instance.remoting.credentials)
        if self.config.message_model is MessageModel.CLUSTERING:  # copySubscription: retries come back this way
            topic = retry_topic(self.group)
            self.subscriptions.setdefault(topic, build_subscription_data(topic, "*"))
        self.instance.register_consumer(self)
        await self.offset_store.load()
        await self.instance.start()
        if CLIENT_INNER_PRODUCER_GROUP not in self.instance.producers:
            self._inner_producer = Producer(CLIENT_INNER_PRODUCER_GROUP, instance=self.instance)
            await self._inner_producer.start()
        self._started = True
        if self._orderly is not None:
            self._orderly.start()
        for topic in self.subscriptions:
            await self.instance.update_topic_route(topic)
        try:
            await check_client_in_broker(self.instance, self.group, self.subscriptions.values())
        except MQClientError:
            await self.shutdown()
            raise
        await self.instance.send_heartbeat_to_all_brokers()
        self.instance.rebalance_immediately()
        retry = retry_topic(self.group)
        if self.config.message_model is MessageModel.CLUSTERING and not self._subscribe_info.get(retry):
            self._retry_route_task = asyncio.get_running_loop().create_task(self._fetch_retry_route(retry))

    async def _fetch_retry_route(self, topic: str) -> None:
        """A new group's retry topic is created by the broker on the heartbeat above, after the route lookups of
        start(): fetch its route as soon as the NameServer has it, instead of at the next poll (Java waits up to
        pollNameServerInterval, 30 s, before it pulls the group's retries)."""
        for _ in range(RETRY_ROUTE_ATTEMPTS):
            await asyncio.sleep(RETRY_ROUTE_WAIT_S)
            # Found by the periodic route poll meanwhile, or now: either way the queues are assigned by a rebalance,
            # which the poll does not start (returning without one left them to the next, up to 20 s later).
            if self._subscribe_info.get(topic) or await self.instance.update_topic_route(topic):
                self.instance.rebalance_immediately()
                return

    async def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        for state in self._queues.values():
            state.process_queue.dropped = True
        await self._cancel([s.task for s in self._queues.values() if s.task is not None])
        await self._cancel([self._retry_route_task])
        await self._concurrently.stop()
        if self._orderly is not None:
            await self._orderly.stop()
        await self.persist_consumer_offset()
        if self._orderly is not None:  # after the offsets: the next owner starts where this one stopped
            await self._orderly.unlock_all()
        self._queues.clear()
        await self.instance.unregister_consumer(self.group)
        if self._inner_producer is not None:
            await self._inner_producer.shutdown()
        await self.instance.shutdown()
        if self.trace_dispatcher is not None:  # last: the batches consumed until now are traced
            await self.trace_dispatcher.shutdown()
            self.trace_dispatcher = None

    async def __aenter__(self) -> PushConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    def assigned_queues(self) -> list[MessageQueue]:
        return sorted(self._queues)

    # ConsumerInner, for the instance
    def consumer_data(self) -> protocol.ConsumerData:
        return protocol.ConsumerData(self.group, self.consume_type, self.config.message_model.value,
                                     self.config.consume_from_where.value, list(self.subscriptions.values()))

    def subscribed_topics(self) -> Iterable[str]:
        return list(self.subscriptions)

    def update_topic_subscribe_info(self, topic: str, mqs: list[MessageQueue]) -> None:
        if topic in self.subscriptions:
            self._subscribe_info[topic] = mqs

    async def persist_consumer_offset(self) -> None:
        await self.offset_store.persist_all(list(self._queues))

    async def consumer_running_info(self) -> dict[str, Any]:
        """DefaultMQPushConsumerImpl.consumerRunningInfo: settings, subscriptions (the retry topic's too), and each
        queue held with its committed offset and what is cached of it."""
        properties = consumer_properties(self.group, self.config, self.instance.config)
        properties["consumeTimestamp"] = self._consume_timestamp  # the one in use: the default is a time too
        properties[PROP_CONSUME_ORDERLY] = "true" if self._orderly is not None else "false"
        properties[PROP_THREADPOOL_CORE_SIZE] = str(self.config.consume_thread_max)
        properties[PROP_CONSUMER_START_TIMESTAMP] = str(self.consumer_start_timestamp)
        mq_table = {}
        for mq, state in list(self._queues.items()):
            offset = await self.offset_store.read_offset(mq, ReadOffsetType.MEMORY_FIRST_THEN_STORE)
            mq_table[mq] = process_queue_info(state.process_queue, offset)
        return consumer_running_info(properties, list(self.subscriptions.values()), mq_table)

    # what the orderly service (broker/client/orderly.py) shares of the consumer
    def process_queue_table(self) -> dict[MessageQueue, ProcessQueue]:
        return {mq: state.process_queue for mq, state in self._queues.items()}

    @property
    def consume_timestamp(self) -> str:
        return self._consume_timestamp

    def reset_retry_topic(self, msgs: list[MessageExt]) -> None:
        self._reset_retry_topic(msgs)

    def send_back_producer(self) -> Producer:
        if self._inner_producer is None:
            raise MQClientError(-1, "no inner producer to send the message back with")
        return self._inner_producer

    # -- rebalance ----------------------------------------------------------------------------------------------

    async def do_rebalance(self) -> None:
        if not self._started:
            return
        async with self._rebalance_lock:
            for topic in list(self.subscriptions):
                try:
                    await self._rebalance_topic(topic)
                except (MQClientError, MQBrokerError, OSError) as err:
                    log.warning("rebalance of %s for group %s failed: %s", topic, self.group, err)

    async def _rebalance_topic(self, topic: str) -> None:
        """RebalanceImpl.rebalanceByTopic."""
        mqs = self._subscribe_info.get(topic)
        if not mqs:
            log.debug("doRebalance, %s, but the topic[%s] has no queues yet", self.group, topic)
            return
        if self.config.message_model is MessageModel.BROADCASTING:
            await self._update_process_queues(topic, set(mqs))
            return
        cids = await self.instance.get_consumer_id_list(topic, self.group)
        if not cids:
            log.warning("doRebalance, %s %s, get consumer id list failed", self.group, topic)
            return
        mq_all = sorted(mqs)
        cid_all = sorted(cids, key=java_string_key)
        allocated = self.config.allocate_strategy.allocate(self.group, self.instance.client_id, mq_all, cid_all)
        await self._update_process_queues(topic, set(allocated))

    async def _update_process_queues(self, topic: str, assigned: set[MessageQueue]) -> None:
        """updateProcessQueueTableInRebalance: drop what is no longer ours (committing its offset first), start
        pulling what is new from where the group left it."""
        for mq in [mq for mq in self._queues if mq.topic == topic and mq not in assigned]:
            state = self._queues.pop(mq)
            state.process_queue.dropped = True
            await self._cancel([state.task])
            if isinstance(state.process_queue, OrderlyProcessQueue) and self._orderly is not None:
                await self._orderly.remove_queue(mq, state.process_queue)  # commit, then unlock at the broker
            else:
                await self.offset_store.persist(mq)
                self.offset_store.remove_offset(mq)
            log.info("doRebalance, %s, remove unnecessary mq, %s", self.group, mq)
        for mq in sorted(assigned - set(self._queues)):
            if self._orderly is not None and not await self._orderly.lock_new_queue(mq):
                continue
            self.offset_store.remove_offset(mq)  # removeDirtyOffset
            try:
                next_offset = await compute_pull_from_where(self.instance, self.offset_store, mq,
                                                            self.config.consume_from_where, self._consume_timestamp)
            except (MQClientError, MQBrokerError, OSError) as err:
                log.warning("doRebalance, %s, compute offset of %s failed (next rebalance retries): %s",
                            self.group, mq, err)
                continue
            pq = self._orderly.new_process_queue() if self._orderly is not None else ProcessQueue()
            state = self._queues[mq] = _QueueState(pq)
            state.task = asyncio.get_running_loop().create_task(self._pull_loop(mq, state.process_queue, next_offset),
                                                                 name=f"pull-{mq}")
            log.info("doRebalance, %s, add a new mq, %s, next offset %s", self.group, mq, next_offset)

    # -- pulling ------------------------------------------------------------------------------------------------

    def _flow_controlled(self, pq: ProcessQueue) -> bool:
        config = self.config
        return (pq.msg_count > config.pull_threshold_for_queue
                or pq.msg_size // (1024 * 1024) > config.pull_threshold_size_for_queue
                or pq.max_span() > config.consume_concurrently_max_span)

    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        """DefaultMQPushConsumerImpl.pullMessage and its callback, as one loop per queue."""
        config, client_config = self.config, self.instance.config
        while not pq.dropped:
            if self.paused:
                await asyncio.sleep(1.0)
                continue
            if self._flow_controlled(pq):
                await asyncio.sleep(PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL / 1000)
                continue
            if isinstance(pq, OrderlyProcessQueue) and self._orderly is not None:
                offset = await self._orderly_offset_to_pull(mq, pq, next_offset)
                if offset is None:  # not locked at the broker (yet, or any more): pull later
                    await asyncio.sleep(client_config.pull_time_delay_mills_when_exception / 1000)
                    continue
                next_offset = offset
            commit_offset = None
            if config.message_model is MessageModel.CLUSTERING:
                commit_offset = await self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
            pq.last_pull_timestamp = int(time.time() * 1000)
            try:
                result = await self.pull_api.pull_kernel(
                    mq, next_offset, config.pull_batch_size, subscription=self.subscriptions[mq.topic],
                    commit_offset=commit_offset, suspend_timeout_ms=config.broker_suspend_max_time_millis,
                    timeout_ms=config.consumer_timeout_millis_when_suspend)
            except asyncio.CancelledError:
                raise
            except Exception as err:
                flow = isinstance(err, MQBrokerError) and err.code == ResponseCode.FLOW_CONTROL
                if not mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                    log.warning("pull of %s failed: %s", mq, err)
                delay = PULL_TIME_DELAY_MILLS_WHEN_BROKER_FLOW_CONTROL if flow else \
                    client_config.pull_time_delay_mills_when_exception
                await asyncio.sleep(delay / 1000)
                continue
            if pq.dropped:
                return
            next_offset = result.next_begin_offset
            if result.status is PullStatus.FOUND:
                if result.messages:
                    pq.put_messages(result.messages)
                    self._submit(result.messages, pq, mq)
                    if config.pull_interval > 0:
                        await asyncio.sleep(config.pull_interval / 1000)
            elif result.status is PullStatus.OFFSET_ILLEGAL:
                await self._offset_illegal(mq, pq, next_offset)
                return
            elif pq.msg_count == 0:  # correctTagsOffset: nothing held, so everything up to here is consumed
                self.offset_store.update_offset(mq, next_offset, increase_only=True)

    async def _orderly_offset_to_pull(self, mq: MessageQueue, pq: OrderlyProcessQueue, next_offset: int) -> int | None:
        assert self._orderly is not None
        try:
            return await self._orderly.offset_to_pull(mq, pq, next_offset)
        except (MQClientError, MQBrokerError, OSError) as err:
            log.error("failed to compute the pull offset of %s: %s", mq, err)
            return None

    async def _offset_illegal(self, mq: MessageQueue, pq: ProcessQueue, next_offset: int) -> None:
        """The broker moved the queue's offset: commit where it says, drop the queue, and let the rebalance pick it
        up again from there."""
        log.warning("the pull request offset of %s is illegal; the broker suggests %s", mq, next_offset)
        pq.dropped = True
        self.offset_store.update_offset(mq, next_offset)
        await self.offset_store.persist(mq)
        self._queues.pop(mq, None)
        self.instance.rebalance_immediately()

    # -- consuming ----------------------------------------------------------------------------------------------

    def _submit(self, msgs: list[MessageExt], pq: ProcessQueue, mq: MessageQueue) -> None:
        if isinstance(pq, OrderlyProcessQueue) and self._orderly is not None:
            self._orderly.submit(pq, mq)  # the queue's own consume task takes the messages from pq, in order
            return
        self._concurrently.submit(msgs, pq, mq)

    def _reset_retry_topic(self, msgs: list[MessageExt]) -> None:
        """resetRetryAndNamespace: a retried message shows its original topic."""
        group_retry = retry_topic(self.group)
        for msg in msgs:
            original = msg.properties.get(PROPERTY_RETRY_TOPIC)
            if original is not None and msg.topic == group_retry:
                msg.topic = original

    @property
    def max_reconsume_times(self) -> int:
        return DEFAULT_MAX_RECONSUME_TIMES if self.config.max_reconsume_times == -1 else self.config.max_reconsume_times

    @staticmethod
    async def _cancel(tasks: list[asyncio.Task[None] | None]) -> None:
        live = [t for t in tasks if t is not None]
        for task in live:
            task.cancel()
        await asyncio.gather(*live, return_exceptions=True)
