"""Producer: sends messages to the brokers of a topic (client/producer/DefaultMQProducer + DefaultMQProducerImpl).

A send finds the topic's route (the NameServer's, or the TBW102 template's for a topic that does not exist yet:
the broker creates it), picks a queue round robin while avoiding brokers that failed or answered slowly (fault.py),
and sends SEND_MESSAGE_V2. A sync send that fails is tried again on another broker, up to
``retry_times_when_send_failed`` more times, within one overall ``send_msg_timeout``.

Examples:
    >>> async with Producer("my_group", namesrv_addr="127.0.0.1:9876") as producer:  # doctest: +SKIP
    ...     result = await producer.send(Message("TopicTest", b"hello", tags="TagA"))
    ...     result.send_status, result.msg_id
    ...     await producer.send_batch([Message("TopicTest", b"a"), Message("TopicTest", b"b")])
    ...     await producer.send(Message("Orders", b"paid"), selector=SelectMessageQueueByHash(), arg="order-17")
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from broker.client import protocol
from broker.client.fault import MQFaultStrategy
from broker.client.instance import ClientConfig, MQClientInstance, client_instance
from broker.client.message import (
    MAX_MESSAGE_SIZE,
    Message,
    MessageBatch,
    MessageQueue,
    SendResult,
    SendStatus,
    check_message,
    compress_body,
    set_uniq_id,
)
from broker.client.route import TopicPublishInfo, no_route_info
from broker.client.selector import MessageQueueSelector
from broker.client.trace_batch import TraceDispatcherType
from broker.client.trace_dispatcher import AsyncTraceDispatcher, start_trace_dispatcher
from broker.common.clock import now_ms
from broker.common.errors import ClientErrorCode, MQBrokerError, MQClientError, RemotingConnectError, RemotingError
from broker.common.message import PROPERTY_TRANSACTION_PREPARED, SysFlag
from broker.common.validation import AUTO_CREATE_TOPIC_KEY_TOPIC, DEFAULT_PRODUCER_GROUP
from broker.remoting.signing import SessionCredentials

log = logging.getLogger(__name__)


class CommunicationMode(Enum):
    SYNC = "SYNC"
    ASYNC = "ASYNC"
    ONEWAY = "ONEWAY"


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """DefaultMQProducer's settings (times in milliseconds)."""

    send_msg_timeout: int = 3000
    retry_times_when_send_failed: int = 2
    retry_times_when_send_async_failed: int = 2
    retry_another_broker_when_not_store_ok: bool = False
    max_message_size: int = MAX_MESSAGE_SIZE
    compress_msg_body_over_howmuch: int = 4096
    compress_level: int = 5
    default_topic_queue_nums: int = 4
    create_topic_key: str = AUTO_CREATE_TOPIC_KEY_TOPIC
    send_latency_fault_enable: bool = True
    send_message_v2: bool = True  # Java's sendSmartMsg
    enable_msg_trace: bool = False  # trace records of every send (trace_dispatcher)
    trace_topic: str | None = None  # where they go; blank: RMQ_SYS_TRACE_TOPIC


class Producer:
    """An asyncio RocketMQ producer; see the module docstring. One producer group per producer object.

    Arguments:
        group: the producer group (DEFAULT_PRODUCER by default).
        namesrv_addr: "host:port;host:port"; or pass ``client_config`` / a shared ``instance``.
        config: ProducerConfig overrides (timeouts, retries, compression, fault avoidance).
        credentials: sign every request with these keys (Java's ``new DefaultMQProducer(group, rpcHook)``); a
            shared ``instance`` carries its own.
    """

    def __init__(self, group: str = DEFAULT_PRODUCER_GROUP, namesrv_addr: str | None = None, *,
                 config: ProducerConfig | None = None, client_config: ClientConfig | None = None,
                 instance: MQClientInstance | None = None, credentials: SessionCredentials | None = None) -> None:
        self.group = group
        self.config = config or ProducerConfig()
        self.instance = client_instance(client_config, namesrv_addr, instance, credentials)
        self.fault_strategy = MQFaultStrategy(self.config.send_latency_fault_enable)
        self.topic_publish_info: dict[str, TopicPublishInfo] = {}
        self._started = False
        self._async_sends: set[asyncio.Task[SendResult]] = set()
        self.trace_dispatcher: AsyncTraceDispatcher | None = None

    # -- lifecycle ----------------------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._started:
            return
        self.instance.register_producer(self)
        await self.instance.start()
        self._started = True
        await self.instance.send_heartbeat_to_all_brokers()
        if self.config.enable_msg_trace and self.trace_dispatcher is None:
            self.trace_dispatcher = await start_trace_dispatcher(
                self.group, TraceDispatcherType.PRODUCE, self.config.trace_topic, self.instance.config.namesrv_addr,
                self.instance.remoting.credentials)

    async def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        if self._async_sends:
            await asyncio.gather(*self._async_sends, return_exceptions=True)
        await self.instance.unregister_producer(self.group)
        await self.instance.shutdown()
        if self.trace_dispatcher is not None:
            await self.trace_dispatcher.shutdown()
            self.trace_dispatcher = None

    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.shutdown()

    # ProducerInner, for the instance
    def publish_topics(self) -> Iterable[str]:
        return list(self.topic_publish_info)

    def need_publish_info(self, topic: str) -> bool:
        info = self.topic_publish_info.get(topic)
        return info is None or not info.ok()

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None:
        self.topic_publish_info[topic] = info

    # -- sending ------------------------------------------------------------------------------------------------

    async def send(self, msg: Message, mq: MessageQueue | None = None, *, selector: MessageQueueSelector | None = None,
                   arg: Any = None, timeout_ms: int | None = None) -> SendResult:
        """Send and wait for the broker's answer. ``mq`` pins the queue, ``selector`` + ``arg`` choose one (ordered
        sends); both send once without retries, as in Java. Raises MQClientError or MQBrokerError."""
        timeout_ms = self.config.send_msg_timeout if timeout_ms is None else timeout_ms
        if mq is not None or selector is not None:
            result = await self._send_to_selected(msg, mq, selector, arg, timeout_ms)
        else:
            result = await self._send_default(msg, CommunicationMode.SYNC, timeout_ms)
        assert result is not None  # only oneway sends have none
        return result

    def send_async(self, msg: Message, timeout_ms: int | None = None) -> asyncio.Task[SendResult]:
        """Start a send and return its task at once (Java's async send with retryTimesWhenSendAsyncFailed)."""
        self._make_sure_started()
        timeout_ms = self.config.send_msg_timeout if timeout_ms is None else timeout_ms

        async def send() -> SendResult:
            result = await self._send_default(msg, CommunicationMode.ASYNC, timeout_ms)
            assert result is not None
            return result

        task = asyncio.get_running_loop().create_task(send())
        self._async_sends.add(task)
        task.add_done_callback(self._async_sends.discard)
        return task

    async def send_oneway(self, msg: Message, mq: MessageQueue | None = None) -> None:
        """Send without waiting for any answer: no result, no retry, and no way to know it was stored."""
        if mq is not None:
            await self._send_to_selected(msg, mq, None, None, self.config.send_msg_timeout, CommunicationMode.ONEWAY)
        else:
            await self._send_default(msg, CommunicationMode.ONEWAY, self.config.send_msg_timeout)

    async def send_batch(self, msgs: Sequence[Message], mq: MessageQueue | None = None, *,
                         timeout_ms: int | None = None) -> SendResult:
        """Send messages of one topic in one request; all land in one queue, with consecutive offsets."""
        return await self.send(MessageBatch(msgs, self.config.max_message_size), mq, timeout_ms=timeout_ms)

    async def fetch_publish_message_queues(self, topic: str) -> list[MessageQueue]:
        info = await self._find_topic_publish_info(topic)
        return list(info.message_queues)

    # -- internals ----------------------------------------------------------------------------------------------

    def _make_sure_started(self) -> None:
        if not self._started:
            raise MQClientError(-1, "The producer service state not OK, maybe started once, CREATE_JUST")

    async def _find_topic_publish_info(self, topic: str) -> TopicPublishInfo:
        """tryToFindTopicPublishInfo: the cached route, else the NameServer's, else TBW102's."""
        info = self.topic_publish_info.get(topic)
        if info is None or not info.ok():
            self.topic_publish_info.setdefault(topic, TopicPublishInfo())
            await self.instance.update_topic_route(topic)
            info = self.topic_publish_info[topic]
        if info.have_topic_router_info or info.ok():
            return info
        await self.instance.update_topic_route(topic, default_queue_nums=self.config.default_topic_queue_nums)
        return self.topic_publish_info[topic]

    async def _no_route(self, topic: str) -> MQClientError:
        if not self.instance.config.namesrv_list():
            return MQClientError(ClientErrorCode.NO_NAME_SERVER_EXCEPTION, "No name server address, please set it.")
        return no_route_info(topic)

    async def _send_default(self, msg: Message, mode: CommunicationMode, timeout_ms: int) -> SendResult | None:
        """sendDefaultImpl: choose a queue, send, on failure choose again avoiding the last broker."""
        self._make_sure_started()
        check_message(msg, self.config.max_message_size)
        begin_first = now_ms()
        info = await self._find_topic_publish_info(msg.topic)
        if not info.ok():
            raise await self._no_route(msg.topic)
        times_total = 1 + (self.config.retry_times_when_send_failed if mode is CommunicationMode.SYNC
                           else self.config.retry_times_when_send_async_failed if mode is CommunicationMode.ASYNC
                           else 0)
        mq: MessageQueue | None = None
        error: Exception | None = None
        result: SendResult | None = None
        brokers_sent: list[str] = []
        for times in range(times_total):
            last_broker = mq.broker_name if mq else None
            selected = self.fault_strategy.select_one_message_queue(info, last_broker, reset_index=times > 0)
            if selected is None:
                break
            mq = selected
            brokers_sent.append(mq.broker_name)
            begin = now_ms()
            if timeout_ms < begin - begin_first:
                raise MQClientError(ClientErrorCode.REQUEST_TIMEOUT_EXCEPTION, "sendDefaultImpl call timeout")
            try:
                result = await self._send_kernel(msg, mq, mode, timeout_ms - (begin - begin_first))
            except (MQClientError, RemotingError) as err:
                isolation = isinstance(err, RemotingError)
                self.fault_strategy.update_fault_item(mq.broker_name, now_ms() - begin, isolation=isolation,
                                                      reachable=True)
                log.warning("send to %s failed (%s), trying again at once", mq, err)
                error = err
                continue
            except MQBrokerError as err:
                self.fault_strategy.update_fault_item(mq.broker_name, now_ms() - begin, isolation=True,
                                                      reachable=False)
                log.warning("send to %s answered %s", mq, err)
                error = err
                if err.retriable:
                    continue
                if result is not None:
                    return result
                raise
            self.fault_strategy.update_fault_item(mq.broker_name, now_ms() - begin, isolation=False, reachable=True)
            if mode is CommunicationMode.ONEWAY or result is None:
                return None
            if result.send_status is not SendStatus.SEND_OK and self.config.retry_another_broker_when_not_store_ok:
                continue
            return result
        if result is not None:
            return result
        raise _send_failed(len(brokers_sent), now_ms() - begin_first, msg.topic, brokers_sent, error)

    async def _send_to_selected(self, msg: Message, mq: MessageQueue | None, selector: MessageQueueSelector | None,
                                arg: Any, timeout_ms: int,
                                mode: CommunicationMode = CommunicationMode.SYNC) -> SendResult | None:
        """sendSelectImpl / send to a given queue: one attempt, no fault avoidance."""
        self._make_sure_started()
        check_message(msg, self.config.max_message_size)
        begin = now_ms()
        if mq is None:
            info = await self._find_topic_publish_info(msg.topic)
            if not info.ok():
                raise await self._no_route(msg.topic)
            assert selector is not None
            mq = selector.select(list(info.message_queues), msg, arg)
            if mq is None:
                raise MQClientError(-1, "select message queue return null.")
        elif mq.topic != msg.topic:
            raise MQClientError(-1, f"message's topic not equal mq's topic: {msg.topic} != {mq.topic}")
        remaining = timeout_ms - (now_ms() - begin)
        if remaining <= 0:
            raise MQClientError(ClientErrorCode.REQUEST_TIMEOUT_EXCEPTION, "call timeout")
        return await self._send_kernel(msg, mq, mode, remaining)

    async def _send_kernel(self, msg: Message, mq: MessageQueue, mode: CommunicationMode,
                           timeout_ms: int) -> SendResult | None:
        """sendKernelImpl: stamp the message id, compress, build the header, and call the broker's master."""
        begin = now_ms()
        addr = await self.instance.broker_address_for(mq)
        batch = isinstance(msg, MessageBatch)
        if not batch:
            set_uniq_id(msg)
        body, sys_flag = msg.body, 0
        if not batch and len(body) >= self.config.compress_msg_body_over_howmuch:
            body, sys_flag = compress_body(body, self.config.compress_level)
        if msg.properties.get(PROPERTY_TRANSACTION_PREPARED) == "true":
            sys_flag |= SysFlag.TRANSACTION_PREPARED
        header = protocol.send_message_header(self.group, msg, mq, sys_flag, batch=batch,
                                              create_topic_key=self.config.create_topic_key,
                                              default_topic_queue_nums=self.config.default_topic_queue_nums)
        request = protocol.send_message_request(header, body, batch=batch, v2=self.config.send_message_v2)
        trace = self.trace_dispatcher.send_before(self.group, msg, addr, len(body)) if self.trace_dispatcher else None
        remaining = timeout_ms - (now_ms() - begin)
        if remaining <= 0:
            raise MQClientError(ClientErrorCode.REQUEST_TIMEOUT_EXCEPTION, "sendKernelImpl call timeout")
        if mode is CommunicationMode.ONEWAY:
            await self.instance.remoting.invoke_oneway(addr, request, remaining)
            return None
        response = await self.instance.invoke(addr, request, remaining)
        members = msg.messages if isinstance(msg, MessageBatch) else (msg,)
        result = protocol.parse_send_response(response, msg.topic, mq.broker_name, addr,
                                              protocol.uniq_ids_of(members))
        if self.trace_dispatcher is not None:
            self.trace_dispatcher.send_after(trace, result)
        return result


def _send_failed(times: int, cost_ms: int, topic: str, brokers: list[str], error: Exception | None) -> MQClientError:
    """The error after the last attempt, with the code Java gives it."""
    info = f"Send [{times}] times, still failed, cost [{cost_ms}]ms, Topic: {topic}, BrokersSent: {brokers}"
    if isinstance(error, MQBrokerError):
        code = error.code
    elif isinstance(error, RemotingConnectError):
        code = ClientErrorCode.CONNECT_BROKER_EXCEPTION
    elif isinstance(error, TimeoutError):
        code = ClientErrorCode.ACCESS_BROKER_TIMEOUT
    elif isinstance(error, MQClientError):
        code = ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION
    else:
        code = -1
    failure = MQClientError(code, f"{info}: {error}" if error else info)
    failure.__cause__ = error
    return failure
