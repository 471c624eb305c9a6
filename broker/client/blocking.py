"""The blocking client for Spark executors, jobs and scripts: RocketMQ without an event loop.

This is the public face of the blocking side (the asyncio client is ``Producer``, ``LitePullConsumer`` and
``PushConsumer``). Its pieces, each in a module of its own and importable from here:

* ``BlockingClient`` (defined here): NameServer addresses, a route cache (30 s), one connection per broker, and the
  calls by message queue: offsets, pulls, sends with the producer's queue choice and retries. Thread-safe.
* ``BlockingRemotingClient`` (``blocking_remoting``): one connection to one address; ``invoke`` with a timeout,
  ``send`` and ``receive`` to overlap a call with work, reconnecting when the peer closed it since the last call.
* One function per call (``blocking_api``): ``get_route``, ``get_min_offset``, ``get_max_offset``,
  ``search_offset``, ``pull``, ``send_one``, ``send_batch``, ``create_topic``, given a client for the right address.
* ``RequestTemplate`` and ``Pipeline`` (``pipeline``): many requests in flight on one connection (the sink's).

All of them frame requests and match responses with the sans-IO ``RemotingExchange``, as the asyncio side does.

Examples:
    >>> with BlockingClient("127.0.0.1:9876") as client:  # doctest: +SKIP
    ...     queues = client.fetch_message_queues("TopicTest")
    ...     end = client.get_max_offset(queues[0])
    ...     result = client.pull(queues[0], 0, 32)  # result.body: the stored records, undecoded
    ...     client.send_batch([Message("TopicTest", b"a"), Message("TopicTest", b"b")], queues[0])
    >>> with BlockingRemotingClient("127.0.0.1:10911") as broker:  # doctest: +SKIP
    ...     create_topic(broker, "TopicTest", queue_nums=8)
    ...     request = protocol.pull_message_request("my_group", queues[0], 0, 32)
    ...     broker.send(request, 3000)  # ... work while the broker answers ...
    ...     response = broker.receive(request, 3000)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from broker.client.blocking_api import (
    create_topic,
    get_max_offset,
    get_min_offset,
    get_route,
    pull,
    search_offset,
    send_batch,
    send_one,
)
from broker.client.blocking_remoting import BlockingRemotingClient
from broker.client.fault import MQFaultStrategy
from broker.client.message import Message, MessageBatch, MessageQueue, PullResult, SendResult
from broker.client.pipeline import Pipeline, RequestTemplate
from broker.client.route import (
    MASTER_ID,
    FindBrokerResult,
    PullFromWhichNode,
    TopicPublishInfo,
    TopicRouteData,
    find_broker_address_in_subscribe,
    no_route_info,
    subscribe_queues,
)
from broker.common.errors import ClientErrorCode, MQBrokerError, MQClientError, RemotingError
from broker.common.validation import AUTO_CREATE_TOPIC_KEY_TOPIC, DEFAULT_CONSUMER_GROUP, DEFAULT_PRODUCER_GROUP
from broker.remoting.codes import ResponseCode
from broker.remoting.exchange import DEFAULT_TIMEOUT_MS
from broker.remoting.signing import SessionCredentials

__all__ = [
    "BlockingClient",
    "BlockingRemotingClient",
    "Pipeline",
    "RequestTemplate",
    "create_topic",
    "get_max_offset",
    "get_min_offset",
    "get_route",
    "pull",
    "search_offset",
    "send_batch",
    "send_one",
]

ROUTE_TTL_S = 30.0  # pollNameServerInterval


class BlockingClient:
    """NameServers, a route cache and one connection per broker, for synchronous callers. Thread-safe.

    Arguments:
        namesrv_addr: "host:port;host:port".
        timeout_ms: the default timeout of every call.
        producer_group / consumer_group: the groups named in send and pull requests.
        credentials: sign every request (to NameServers and brokers) with these keys, as Java's AclClientRPCHook.
    """

    def __init__(self, namesrv_addr: str, *, timeout_ms: float = DEFAULT_TIMEOUT_MS,
                 producer_group: str = DEFAULT_PRODUCER_GROUP, consumer_group: str = DEFAULT_CONSUMER_GROUP,
                 retry_times_when_send_failed: int = 2, default_topic_queue_nums: int = 4,
                 route_ttl_s: float = ROUTE_TTL_S, credentials: SessionCredentials | None = None) -> None:
        self.credentials = credentials
        self.namesrv_addrs = [a.strip() for a in namesrv_addr.split(";") if a.strip()]
        self.timeout_ms = timeout_ms
        self.producer_group = producer_group
        self.consumer_group = consumer_group
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.default_topic_queue_nums = default_topic_queue_nums
        self.route_ttl_s = route_ttl_s
        self.fault_strategy = MQFaultStrategy()
        self._routes: dict[str, tuple[float, TopicRouteData]] = {}
        self._publish: dict[str, TopicPublishInfo] = {}
        self._default_publish: dict[str, tuple[float, TopicPublishInfo]] = {}
        self._broker_addrs: dict[str, dict[int, str]] = {}
        self._pull_nodes: dict[str, PullFromWhichNode] = {}  # by consumer group: PullAPIWrapper's table
        self._clients: dict[str, BlockingRemotingClient] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def client(self, address: str) -> BlockingRemotingClient:
        with self._lock:
            client = self._clients.get(address)
            if client is None:
                client = self._clients[address] = BlockingRemotingClient(address, credentials=self.credentials)
            return client

    # -- routes -------------------------------------------------------------------------------------------------

    def get_route(self, topic: str, *, refresh: bool = False) -> TopicRouteData:
        """The topic's route, from the cache while younger than ``route_ttl_s``."""
        cached = self._routes.get(topic)
        if cached is not None and not refresh and time.monotonic() - cached[0] < self.route_ttl_s:
            return cached[1]
        route = get_route([self.client(a) for a in self.namesrv_addrs], topic, self.timeout_ms)
        self._cache_route(topic, route)
        return route

    def _publish_info(self, topic: str) -> TopicPublishInfo:
        """The queues to send to. For a topic the NameServer does not know: TBW102's brokers with
        ``default_topic_queue_nums`` queues each, so the broker creates the topic (as the producer does); that
        stand-in is kept for ``route_ttl_s`` and never shown as the topic's route."""
        stand_in = self._default_publish.get(topic)
        if stand_in is not None and time.monotonic() - stand_in[0] < self.route_ttl_s:
            return stand_in[1]
        try:
            self.get_route(topic)
            return self._publish[topic]
        except MQClientError as err:
            if err.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
        default = self.get_route(AUTO_CREATE_TOPIC_KEY_TOPIC).with_queue_nums(self.default_topic_queue_nums)
        info = TopicPublishInfo.from_route(topic, default)
        self._default_publish[topic] = (time.monotonic(), info)
        return info

    def _cache_route(self, topic: str, route: TopicRouteData) -> None:
        with self._lock:
            self._routes[topic] = (time.monotonic(), route)
            self._publish[topic] = TopicPublishInfo.from_route(topic, route)
            for broker in route.broker_datas:
                self._broker_addrs[broker.broker_name] = dict(broker.broker_addrs)

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic``, sorted."""
        return subscribe_queues(topic, self.get_route(topic))

    def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        return list(self._publish_info(topic).message_queues)

    def broker_addr(self, mq: MessageQueue) -> str:
        """The master address of ``mq``'s broker, refreshing the route once if it has none."""
        for refresh in (False, True):
            if refresh or mq.broker_name not in self._broker_addrs:
                self.get_route(mq.topic, refresh=refresh)
            addr = self._broker_addrs.get(mq.broker_name, {}).get(MASTER_ID)
            if addr is not None:
                return addr
        raise MQClientError(ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION, f"The broker[{mq.broker_name}] not exist")

    def subscribe_addr(self, mq: MessageQueue, broker_id: int = MASTER_ID) -> FindBrokerResult:
        """Where to read ``mq`` (findBrokerAddressInSubscribe): replica ``broker_id``, else another replica of the
        broker (a slave while the master is gone), refreshing the route once if it has none."""
        for refresh in (False, True):
            if refresh or mq.broker_name not in self._broker_addrs:
                self.get_route(mq.topic, refresh=refresh)
            found = find_broker_address_in_subscribe(self._broker_addrs.get(mq.broker_name), broker_id)
            if found is not None:
                return found
        raise MQClientError(ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION, f"The broker[{mq.broker_name}] not exist")

    def _broker(self, mq: MessageQueue) -> BlockingRemotingClient:
        return self.client(self.broker_addr(mq))

    # -- reads --------------------------------------------------------------------------------------------------

    def get_min_offset(self, mq: MessageQueue) -> int:
        return get_min_offset(self._broker(mq), mq, self.timeout_ms)

    def get_max_offset(self, mq: MessageQueue) -> int:
        return get_max_offset(self._broker(mq), mq, self.timeout_ms)

    def search_offset(self, mq: MessageQueue, timestamp_ms: int, boundary_type: str = "LOWER") -> int:
        return search_offset(self._broker(mq), mq, timestamp_ms, boundary_type, self.timeout_ms)

    def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, *, sub_expression: str = "*",
             group: str | None = None, decode: bool = False, timeout_ms: float | None = None) -> PullResult:
        """One PULL_MESSAGE, to the replica the group's last pull of ``mq`` was told to use (suggestWhichBrokerId,
        as PullAPIWrapper): the master at first, a slave when the broker suggests one or the master is gone."""
        group = group or self.consumer_group
        nodes = self._pull_nodes.get(group) or self._pull_nodes.setdefault(group, PullFromWhichNode())
        found = self.subscribe_addr(mq, nodes.recalculate(mq))
        result = pull(self.client(found.broker_addr), group, mq, offset, max_nums, sub_expression=sub_expression,
                      timeout_ms=timeout_ms or self.timeout_ms, decode=decode)
        nodes.update(mq, result.suggest_which_broker_id)
        return result

    # -- writes -------------------------------------------------------------------------------------------------

    def send(self, msg: Message, mq: MessageQueue | None = None) -> SendResult:
        """One message, to ``mq`` or (without it) to a queue chosen as the producer does, with its retries."""
        return self._send(msg, mq, lambda client, queue: send_one(client, self.producer_group, msg, queue,
                                                                   timeout_ms=self.timeout_ms))

    def send_batch(self, msgs: Sequence[Message], mq: MessageQueue | None = None) -> SendResult:
        batch = MessageBatch(msgs)
        return self._send(batch, mq, lambda client, queue: send_batch(client, self.producer_group, batch, queue,
                                                                       timeout_ms=self.timeout_ms))

    def _send(self, msg: Message, mq: MessageQueue | None,
              call: Callable[[BlockingRemotingClient, MessageQueue], SendResult]) -> SendResult:
        if mq is not None:
            return call(self._broker(mq), mq)
        info = self._publish_info(msg.topic)
        if not info.ok():
            raise no_route_info(msg.topic)
        last: MessageQueue | None = None
        error: Exception | None = None
        for attempt in range(1 + self.retry_times_when_send_failed):
            queue = self.fault_strategy.select_one_message_queue(info, last.broker_name if last else None,
                                                                 attempt > 0)
            if queue is None:
                break
            last, begin = queue, time.monotonic()
            try:
                result = call(self._broker(queue), queue)
            except (RemotingError, MQClientError, MQBrokerError) as err:
                failed_broker = isinstance(err, (RemotingError, MQBrokerError))
                self.fault_strategy.update_fault_item(queue.broker_name, int((time.monotonic() - begin) * 1000),
                                                      isolation=failed_broker,
                                                      reachable=not isinstance(err, MQBrokerError))
                if isinstance(err, MQBrokerError) and not err.retriable:
                    raise
                error = err
                continue
            self.fault_strategy.update_fault_item(queue.broker_name, int((time.monotonic() - begin) * 1000),
                                                  isolation=False, reachable=True)
            return result
        raise MQClientError(ClientErrorCode.CONNECT_BROKER_EXCEPTION,
                            f"Send failed, Topic: {msg.topic}, last error: {error}") from error
