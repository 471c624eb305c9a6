"""MQClientInstance: what producers and consumers of one client share (client/impl/factory/MQClientInstance.java).

It owns the remoting client, the route cache and the periodic duties, each an asyncio task started by ``start()``
and cancelled by ``shutdown()``:

    duty                          every                        first after
    refresh routes of all topics  pollNameServerInterval 30 s  10 ms
    HEART_BEAT to every broker    heartbeatBrokerInterval 30 s 1 s
    persist consumer offsets      persistConsumerOffsetInterval 5 s   10 s
    rebalance consumers           20 s, or at once on NOTIFY_CONSUMER_IDS_CHANGED

It also answers what brokers ask the client (NOTIFY_CONSUMER_IDS_CHANGED; CHECK_TRANSACTION_STATE, handed to the
producer of the group; GET_CONSUMER_RUNNING_INFO, answered by the consumer of the group) and wraps the broker calls
that need an address looked up from the route first. The client id is Java's ``ip@instanceName``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from broker.client import protocol
from broker.client.message import MessageExt, MessageQueue, PullResult
from broker.client.route import (
    MASTER_ID,
    FindBrokerResult,
    RouteTable,
    TopicPublishInfo,
    TopicRouteData,
    subscribe_queues,
)
from broker.common.errors import ClientErrorCode, MQClientError, RemotingError
from broker.common.validation import AUTO_CREATE_TOPIC_KEY_TOPIC
from broker.remoting.client import RemotingClient
from broker.remoting.codes import RequestCode
from broker.remoting.command import RemotingCommand
from broker.remoting.connection import RemotingConnection
from broker.remoting.exchange import not_supported_response
from broker.remoting.signing import SessionCredentials

log = logging.getLogger(__name__)

REBALANCE_INTERVAL_S = 20.0  # RebalanceService: -Drocketmq.client.rebalance.waitInterval
UNREGISTER_TIMEOUT_MS = 3000
OFFSET_TIMEOUT_MS = 5000  # RemoteBrokerOffsetStore: 1000 * 5 for queries and commits


def _local_address() -> str:
    from broker.common.message import local_address  # late: broker.server.config pulls in the metadata tree

    return local_address()


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """client/ClientConfig: what every producer and consumer shares. Intervals are in milliseconds."""

    namesrv_addr: str = field(default_factory=lambda: os.environ.get("NAMESRV_ADDR", ""))
    client_ip: str = field(default_factory=_local_address)
    instance_name: str = field(default_factory=lambda: os.environ.get("ROCKETMQ_CLIENT_NAME", "DEFAULT"))
    unit_name: str | None = None
    poll_name_server_interval: int = 30_000
    heartbeat_broker_interval: int = 30_000
    persist_consumer_offset_interval: int = 5_000
    pull_time_delay_mills_when_exception: int = 1_000
    mq_client_api_timeout: int = 3_000

    def namesrv_list(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    def build_mq_client_id(self) -> str:
        """ClientConfig.buildMQClientId: ``ip@instanceName[@unitName]``."""
        client_id = f"{self.client_ip}@{self.instance_name}"
        return f"{client_id}@{self.unit_name}" if self.unit_name else client_id

    def with_pid_instance_name(self) -> ClientConfig:
        """changeInstanceNameToPID: the "DEFAULT" instance becomes ``pid#nanotime``, so every producer and consumer
        object gets its own client id (and its own connections), as Java 5 does."""
        if self.instance_name != "DEFAULT":
            return self
        return replace(self, instance_name=f"{os.getpid()}#{time.monotonic_ns()}")


def client_instance(client_config: ClientConfig | None, namesrv_addr: str | None, instance: MQClientInstance | None,
                    credentials: SessionCredentials | None, *, pid_instance_name: bool = True) -> MQClientInstance:
    """The instance a producer or consumer uses: the one given (whose credentials are the ones it signs with: others
    given beside it are refused, not ignored), or a new one from ``client_config`` and ``namesrv_addr``."""
    if instance is not None:
        if credentials is not None and credentials != instance.remoting.credentials:
            raise MQClientError(-1, "credentials belong to the shared MQClientInstance: pass them when creating it")
        return instance
    client_config = client_config or ClientConfig()
    if namesrv_addr is not None:
        client_config = replace(client_config, namesrv_addr=namesrv_addr)
    if pid_instance_name:
        client_config = client_config.with_pid_instance_name()
    return MQClientInstance(client_config, credentials=credentials)


class ProducerInner(Protocol):
    """What the instance needs of a producer (MQProducerInner)."""

    group: str

    def publish_topics(self) -> Iterable[str]: ...

    def need_publish_info(self, topic: str) -> bool: ...

    def update_topic_publish_info(self, topic: str, info: TopicPublishInfo) -> None: ...


class ConsumerInner(Protocol):
    """What the instance needs of a consumer (MQConsumerInner)."""

    group: str
    consume_type: str  # CONSUME_ACTIVELY (pull) or CONSUME_PASSIVELY (push)

    def consumer_data(self) -> protocol.ConsumerData: ...

    async def consumer_running_info(self) -> dict[str, Any]:
        """The ConsumerRunningInfo body (running_info.consumer_running_info) without the client-wide properties."""

    def subscribed_topics(self) -> Iterable[str]: ...

    def update_topic_subscribe_info(self, topic: str, mqs: list[MessageQueue]) -> None: ...

    async def do_rebalance(self) -> None: ...

    async def persist_consumer_offset(self) -> None: ...


class MQClientInstance:
    """The shared client core. Producers and consumers create one each by default; pass one to several of them to
    share connections and heartbeats.

    Examples:
        >>> instance = MQClientInstance(ClientConfig(namesrv_addr="127.0.0.1:9876"))
        >>> await instance.start()  # doctest: +SKIP
        >>> route = await instance.get_topic_route("TopicTest")  # doctest: +SKIP
        >>> await instance.shutdown()  # doctest: +SKIP
    """

    def __init__(self, config: ClientConfig, *, credentials: SessionCredentials | None = None) -> None:
        """``credentials``: every request of every producer and consumer sharing this instance is signed with them
        (Java hands its RPCHook to MQClientInstance the same way)."""
        self.config = config
        self.client_id = config.build_mq_client_id()
        self.route_table = RouteTable()
        self.remoting = RemotingClient(self._serve_request, default_timeout_ms=config.mq_client_api_timeout,
                                       credentials=credentials)
        self.producers: dict[str, ProducerInner] = {}
        self.consumers: dict[str, ConsumerInner] = {}
        self._namesrv_index = random.randrange(1 << 16)
        self._route_lock = asyncio.Lock()
        self._rebalance_wakeup = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._background: set[asyncio.Task[None]] = set()
        self._users = 0

    # -- lifecycle ----------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the periodic duties; counted, so every user calls start() and shutdown() once."""
        self._users += 1
        if self._users > 1:
            return
        if not self.config.namesrv_list():
            log.warning("no NameServer address set for client %s (namesrv_addr or NAMESRV_ADDR)", self.client_id)
        config = self.config
        self._every(config.poll_name_server_interval, 0.01, self.update_all_topic_routes, "route refresh")
        self._every(config.heartbeat_broker_interval, 1.0, self.send_heartbeat_to_all_brokers, "heartbeat")
        self._every(config.persist_consumer_offset_interval, 10.0, self.persist_all_consumer_offsets,
                    "offset persist")
        self._tasks.append(asyncio.get_running_loop().create_task(self._rebalance_loop(), name="rebalance"))

    async def shutdown(self) -> None:
        self._users -= 1
        if self._users > 0:
            return
        tasks = [*self._tasks, *self._background]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.clear()
        await self.remoting.close()

    def _every(self, interval_ms: int, first_s: float, action: Callable[[], Awaitable[object]], name: str) -> None:
        async def loop() -> None:
            await asyncio.sleep(first_s)
            while True:
                try:
                    await action()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("%s failed for client %s", name, self.client_id)
                await asyncio.sleep(interval_ms / 1000)

        self._tasks.append(asyncio.get_running_loop().create_task(loop(), name=name))

    # -- producers and consumers --------------------------------------------------------------------------------

    def register_producer(self, producer: ProducerInner) -> None:
        if producer.group in self.producers:
            raise MQClientError(-1, f"The producer group[{producer.group}] has been created before, specify "
                                    "another name please.")
        self.producers[producer.group] = producer

    def register_consumer(self, consumer: ConsumerInner) -> None:
        if consumer.group in self.consumers:
            raise MQClientError(-1, f"The consumer group[{consumer.group}] has been created before, specify "
                                    "another name please.")
        self.consumers[consumer.group] = consumer

    async def unregister_producer(self, group: str) -> None:
        if self.producers.pop(group, None) is not None:
            await self._unregister_client(producer_group=group)

    async def unregister_consumer(self, group: str) -> None:
        if self.consumers.pop(group, None) is not None:
            await self._unregister_client(consumer_group=group)

    async def _unregister_client(self, producer_group: str | None = None, consumer_group: str | None = None) -> None:
        async def one(addr: str) -> None:
            request = protocol.unregister_client_request(self.client_id, producer_group, consumer_group)
            try:
                protocol.expect_success(await self.remoting.invoke(addr, request, UNREGISTER_TIMEOUT_MS), addr)
            except Exception as err:  # one broker gone must not stop the others
                log.warning("unregister client %s from %s failed: %s", self.client_id, addr, err)

        await asyncio.gather(*(one(addr) for _, _, addr in self.route_table.all_addresses()))

    # -- routes -------------------------------------------------------------------------------------------------

    async def get_topic_route(self, topic: str, timeout_ms: int | None = None) -> TopicRouteData:
        """GET_ROUTEINFO_BY_TOPIC from the NameServers, starting with the last one that answered and moving on while
        they fail. MQClientError with the NameServer's code (TOPIC_NOT_EXIST...) when one answers without a route."""
        addresses = self.config.namesrv_list()
        if not addresses:
            raise MQClientError(ClientErrorCode.NO_NAME_SERVER_EXCEPTION, "No name server address, please set it.")
        timeout_ms = self.config.mq_client_api_timeout if timeout_ms is None else timeout_ms
        error: Exception | None = None
        for i in range(len(addresses)):
            index = (self._namesrv_index + i) % len(addresses)
            try:
                response = await self.remoting.invoke(addresses[index], protocol.get_route_request(topic), timeout_ms)
            except RemotingError as err:
                error = err
                continue
            self._namesrv_index = index
            return protocol.parse_route_response(response)
        raise MQClientError(ClientErrorCode.NO_NAME_SERVER_EXCEPTION,
                            f"no NameServer of {addresses} answered: {error}") from error

    async def update_topic_route(self, topic: str, default_queue_nums: int | None = None) -> bool:
        """updateTopicRouteInfoFromNameServer. With ``default_queue_nums`` the route of TBW102 stands in for a
        topic the NameServer does not know yet (the broker creates it on the first send). True if it changed."""
        async with self._route_lock:
            try:
                if default_queue_nums is None:
                    route = await self.get_topic_route(topic)
                else:
                    route = (await self.get_topic_route(AUTO_CREATE_TOPIC_KEY_TOPIC)).with_queue_nums(
                        default_queue_nums)
            except MQClientError as err:
                log.debug("no route for topic %s: %s", topic, err)
                return False
            if route.static_topic:
                log.warning("topic %s is a static topic; its logical queues are used as physical ones", topic)
            known = set(self.route_table.broker_addrs)
            self._heartbeat_new_brokers(route, known)
            if default_queue_nums is not None:
                # A stand-in for producers only: consumers must not pull from queues the topic may never have
                # (Java hands it to both and the next refresh repairs the consumers).
                self.route_table.update_brokers(route)
                info = TopicPublishInfo.from_route(topic, route)
                for producer in self.producers.values():
                    if producer.need_publish_info(topic):
                        producer.update_topic_publish_info(topic, info)
                return True
            changed = self.route_table.update(topic, route)
            if changed or any(p.need_publish_info(topic) for p in self.producers.values()):
                info = TopicPublishInfo.from_route(topic, route)
                for producer in self.producers.values():
                    producer.update_topic_publish_info(topic, info)
            mqs = subscribe_queues(topic, route)
            for consumer in self.consumers.values():
                consumer.update_topic_subscribe_info(topic, mqs)
            return changed

    def _heartbeat_new_brokers(self, route: TopicRouteData, known: set[str]) -> None:
        """A broker seen for the first time hears from us at once, not at the next heartbeat round: it then knows
        our groups before our first send or pull (Java waits for the round)."""
        if self._users and any(b.broker_name not in known for b in route.broker_datas):
            task = asyncio.get_running_loop().create_task(self.send_heartbeat_to_all_brokers())
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def update_all_topic_routes(self) -> None:
        topics = {t for p in self.producers.values() for t in p.publish_topics()}
        topics |= {t for c in self.consumers.values() for t in c.subscribed_topics()}
        for topic in topics:
            await self.update_topic_route(topic)

    async def broker_address_for(self, mq: MessageQueue) -> str:
        """findBrokerAddressInPublish: the master of ``mq``'s broker (it alone takes writes, and answers offset
        queries), refreshing the topic's route once when there is none."""
        for attempt in range(2):
            addr = self.route_table.find_broker_address_in_publish(mq.broker_name)
            if addr is not None:
                return addr
            if attempt == 0:
                await self.update_topic_route(mq.topic)
        raise MQClientError(ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION, f"The broker[{mq.broker_name}] not exist")

    async def subscribe_address_for(self, mq: MessageQueue, broker_id: int = MASTER_ID, *,
                                    only_this_broker: bool = False) -> FindBrokerResult:
        """findBrokerAddressInSubscribe for a read: replica ``broker_id`` of ``mq``'s broker, else (unless
        ``only_this_broker``) another replica, so reads and offset commits go to a slave while the master is gone;
        the topic's route is refreshed once when nothing is found (then any replica will do, as Java's callers)."""
        table = self.route_table
        found = table.find_broker_address_in_subscribe(mq.broker_name, broker_id, only_this_broker=only_this_broker)
        if found is None:
            await self.update_topic_route(mq.topic)
            found = table.find_broker_address_in_subscribe(mq.broker_name, broker_id)
        if found is None:
            raise MQClientError(ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION, f"The broker[{mq.broker_name}] not exist")
        return found

    # -- heartbeats ---------------------------------------------------------------------------------------------

    async def send_heartbeat_to_all_brokers(self) -> None:
        """HEART_BEAT with every producer group and consumer (with subscriptions) of this client: to masters, and
        to replicas as well when there are consumers (they may pull from replicas)."""
        if not self.producers and not self.consumers:
            return
        consumers = [c.consumer_data() for c in self.consumers.values()]

        async def one(addr: str) -> None:
            request = protocol.heartbeat_request(self.client_id, list(self.producers), consumers)
            try:
                protocol.expect_success(await self.remoting.invoke(addr, request), addr)
            except Exception as err:
                log.warning("heartbeat of %s to %s failed: %s", self.client_id, addr, err)

        targets = [addr for _, broker_id, addr in self.route_table.all_addresses()
                   if broker_id == MASTER_ID or consumers]
        await asyncio.gather(*(one(addr) for addr in targets))

    async def persist_all_consumer_offsets(self) -> None:
        for consumer in list(self.consumers.values()):
            await consumer.persist_consumer_offset()

    # -- rebalance ----------------------------------------------------------------------------------------------

    def rebalance_immediately(self) -> None:
        self._rebalance_wakeup.set()

    async def _rebalance_loop(self) -> None:
        while True:
            try:
                async with asyncio.timeout(REBALANCE_INTERVAL_S):
                    await self._rebalance_wakeup.wait()
            except TimeoutError:
                pass
            self._rebalance_wakeup.clear()
            for consumer in list(self.consumers.values()):
                try:
                    await consumer.do_rebalance()
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("rebalance of group %s failed", consumer.group)

    async def _serve_request(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        """ClientRemotingProcessor: requests brokers send to clients."""
        if request.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            log.info("broker %s: consumer ids of group %s changed, rebalancing", conn.remote_address,
                     request.ext_fields.get("consumerGroup"))
            self.rebalance_immediately()
            return None
        if request.code == RequestCode.CHECK_TRANSACTION_STATE:  # transactions: broker/client/transaction.py
            from broker.client.transaction import serve_check_transaction_state  # late: it imports the producer

            serve_check_transaction_state(self.producers, conn, request)
            return None
        if request.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
            from broker.client.running_info import serve_get_consumer_running_info  # late: it imports offsets.py

            return await serve_get_consumer_running_info(self.consumers, self.config.namesrv_list(), request)
        return not_supported_response(request)

    # -- broker calls -------------------------------------------------------------------------------------------

    async def invoke(self, addr: str, request: RemotingCommand, timeout_ms: float | None = None) -> RemotingCommand:
        return await self.remoting.invoke(addr, request, timeout_ms)

    async def get_max_offset(self, mq: MessageQueue) -> int:
        addr = await self.broker_address_for(mq)
        return protocol.parse_offset_response(await self.invoke(addr, protocol.max_offset_request(mq)), addr)

    async def get_min_offset(self, mq: MessageQueue) -> int:
        addr = await self.broker_address_for(mq)
        return protocol.parse_offset_response(await self.invoke(addr, protocol.min_offset_request(mq)), addr)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int, boundary_type: str = "LOWER") -> int:
        addr = await self.broker_address_for(mq)
        request = protocol.search_offset_request(mq, timestamp_ms, boundary_type)
        return protocol.parse_offset_response(await self.invoke(addr, request), addr)

    async def query_consumer_offset(self, group: str, mq: MessageQueue) -> int:
        """The group's committed offset (RemoteBrokerOffsetStore.fetchConsumeOffsetFromBroker): the master's; a
        slave's only when the refreshed route has no master. Raises OffsetNotFound when it has none."""
        found = await self.subscribe_address_for(mq, MASTER_ID, only_this_broker=True)
        request = protocol.query_consumer_offset_request(group, mq)
        response = await self.invoke(found.broker_addr, request, OFFSET_TIMEOUT_MS)
        return protocol.parse_offset_response(response, found.broker_addr)

    async def update_consumer_offset(self, group: str, mq: MessageQueue, offset: int, *, oneway: bool = True) -> None:
        """UPDATE_CONSUMER_OFFSET (updateConsumeOffsetToBroker) to the master, else to a slave of the broker: the
        slave keeps it until its master is back (the consumer commits again there, from its memory)."""
        addr = (await self.subscribe_address_for(mq, MASTER_ID)).broker_addr
        request = protocol.update_consumer_offset_request(group, mq, offset)
        if oneway:
            await self.remoting.invoke_oneway(addr, request, OFFSET_TIMEOUT_MS)
        else:
            protocol.expect_success(await self.invoke(addr, request, OFFSET_TIMEOUT_MS), addr)

    async def get_consumer_id_list(self, topic: str, group: str) -> list[str]:
        """findConsumerIdList: ask any broker of the topic which clients the group has."""
        addr = self.route_table.any_broker_address(topic)
        if addr is None:
            await self.update_topic_route(topic)
            addr = self.route_table.any_broker_address(topic)
        if addr is None:
            raise MQClientError(ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION, f"no broker found for topic {topic}")
        request = protocol.consumer_list_request(group)
        return protocol.parse_consumer_list_response(await self.invoke(addr, request), addr)

    async def pull_message(self, group: str, mq: MessageQueue, offset: int, max_nums: int, *,
                           subscription: protocol.SubscriptionData | None, broker_id: int = MASTER_ID,
                           commit_offset: int | None = None, suspend_timeout_ms: int = 0, timeout_ms: int,
                           max_msg_bytes: int | None = None) -> PullResult:
        """PULL_MESSAGE (PullAPIWrapper.pullKernelImpl) to replica ``broker_id`` of ``mq``'s broker, or the one
        findBrokerAddressInSubscribe falls back to; the body stays undecoded. A slave gets no commit offset.
        ``timeout_ms`` must exceed the suspend time. Consumers call it through PullAPIWrapper (pull_api.py), which
        picks ``broker_id``."""
        found = await self.subscribe_address_for(mq, broker_id)
        if found.slave:
            commit_offset = None  # PullSysFlag.clearCommitOffsetFlag
        request = protocol.pull_message_request(group, mq, offset, max_nums, subscription=subscription,
                                                commit_offset=commit_offset, suspend_timeout_ms=suspend_timeout_ms,
                                                max_msg_bytes=max_msg_bytes)
        return protocol.parse_pull_response(await self.invoke(found.broker_addr, request, timeout_ms),
                                            found.broker_addr)

    async def consumer_send_msg_back(self, msg: MessageExt, group: str, delay_level: int,
                                     max_reconsume_times: int, timeout_ms: int = 5000) -> None:
        mq = MessageQueue(msg.topic, msg.broker_name, msg.queue_id)
        addr = await self.broker_address_for(mq)
        request = protocol.consumer_send_msg_back_request(msg, group, delay_level, max_reconsume_times)
        protocol.expect_success(await self.invoke(addr, request, timeout_ms), addr)
