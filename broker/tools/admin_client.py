"""AdminClient: the transport of the admin tools and their calls about the cluster (the admin half of
client/impl/MQClientAPIImpl.java and tools/admin/DefaultMQAdminExtImpl.java): routes, cluster info, KV config,
topics, brokers, subscription groups, consume stats and connections. ``broker.tools.admin.MQAdminExt`` builds the
offset and message calls on it.

A NameServer call goes to the NameServers in turn until one answers, as NettyRemotingClient does with a null
address. A response code that is not success raises MQClientError or MQBrokerError (Java's MQClientException or
MQBrokerException for the same call), carrying Java's code and remark: ``check_answer`` decides which, and
``answer_json`` reads a body. Requests come from ``broker.client.protocol`` where the client sends them too; the
bodies are ``broker.remoting``'s.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterable
from typing import Any, Self

from broker.client import protocol
from broker.client.route import MASTER_ID, TopicRouteData
from broker.common.errors import ClientErrorCode, MQBrokerError, MQClientError, RemotingError, broker_error
from broker.common.fastjson import decode_json, encode_json
from broker.common.hash_order import hash_map_order
from broker.common.topic import TopicConfig, is_valid_perm
from broker.common.validation import LMQ_PREFIX, RETRY_GROUP_TOPIC_PREFIX, TIMER_TOPIC
from broker.remoting.admin_bodies import (
    Connection,
    ConsumerConnection,
    ConsumeStats,
    TopicStatsTable,
)
from broker.remoting.client import RemotingClient
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.headers import (
    ConsumerGroupHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumeStatsRequestHeader,
    GetKVConfigResponseHeader,
    GetProducerConnectionListRequestHeader,
    KVConfigKeyHeader,
    PutKVConfigRequestHeader,
    TopicHeader,
)
from broker.remoting.route import ClusterInfo
from broker.remoting.signing import SessionCredentials
from broker.remoting.subscription import SubscriptionGroupConfig

DEFAULT_TIMEOUT_MS = 5000  # DefaultMQAdminExt.timeoutMillis
NAMESRV_ADDR_ENV = "NAMESRV_ADDR"  # MixAll.NAMESRV_ADDR_ENV
NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # NamesrvUtil
CLUSTER_NOT_FOUND = "Make sure the specified clusterName exists or the name server connected to is correct."


def answer_json(response: RemotingCommand, what: str) -> Any:
    """The answer's JSON body; MQClientError when it has none or it is not JSON."""
    if not response.body:
        raise MQClientError(response.code, f"{what}: the answer has no body")
    try:
        return decode_json(response.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise MQClientError(ResponseCode.SYSTEM_ERROR, f"{what}: the body is not JSON: {err}") from err


def check_answer(response: RemotingCommand, address: str | None = None, *, broker: bool = True) -> RemotingCommand:
    """Success, or the exception Java's call throws: MQBrokerException (with the address) or MQClientException."""
    if response.code != ResponseCode.SUCCESS:
        if broker:
            raise broker_error(response.code, response.remark, address)
        raise MQClientError(response.code, response.remark or "")
    return response


class AdminClient:
    """The admin calls about the cluster, over one RemotingClient: NameServer routes, cluster info and KV config,
    topics, brokers, subscription groups, consume stats and connections. MQAdminExt adds the offset and message
    calls built on them.

    ``namesrv_addr`` is "host:port;host:port"; without it the NAMESRV_ADDR environment variable is used, as Java.

    Examples:
        >>> async with AdminClient("127.0.0.1:9876") as admin:  # doctest: +SKIP
        ...     masters = await admin.master_addrs_by_cluster("DefaultCluster")
    """

    def __init__(self, namesrv_addr: str | None = None, *, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                 credentials: SessionCredentials | None = None) -> None:
        """``credentials`` sign every request (Java's ``new DefaultMQAdminExt(rpcHook)``)."""
        self.namesrv_addr = namesrv_addr if namesrv_addr else os.environ.get(NAMESRV_ADDR_ENV, "")
        self.timeout_ms = timeout_ms
        self.remoting = RemotingClient(default_timeout_ms=timeout_ms, credentials=credentials)
        self._namesrv_index = random.randrange(1 << 16)

    def namesrv_list(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    async def close(self) -> None:
        await self.remoting.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- transport ----------------------------------------------------------------------------------------------

    async def invoke_namesrv(self, request: RemotingCommand) -> RemotingCommand:
        """The first NameServer that answers, starting after the last one used; raises the last transport error."""
        addresses = self.namesrv_list()
        if not addresses:
            raise MQClientError(ClientErrorCode.NO_NAME_SERVER_EXCEPTION,
                                f"No name server address, please set it (-n or the {NAMESRV_ADDR_ENV} variable)")
        error: RemotingError | None = None
        for i in range(len(addresses)):
            index = (self._namesrv_index + i) % len(addresses)
            try:
                response = await self.remoting.invoke(addresses[index], request, self.timeout_ms)
            except RemotingError as err:
                error = err
                continue
            self._namesrv_index = index
            return response
        assert error is not None
        raise error

    async def invoke(self, addr: str, request: RemotingCommand, timeout_ms: float | None = None) -> RemotingCommand:
        return await self.remoting.invoke(addr, request, self.timeout_ms if timeout_ms is None else timeout_ms)

    # -- NameServer ---------------------------------------------------------------------------------------------

    async def examine_topic_route_info(self, topic: str) -> TopicRouteData:
        return protocol.parse_route_response(await self.invoke_namesrv(protocol.get_route_request(topic)))

    async def examine_broker_cluster_info(self) -> ClusterInfo:
        response = check_answer(await self.invoke_namesrv(protocol.cluster_info_request()))
        return ClusterInfo.from_json(answer_json(response, "cluster info"))

    async def fetch_all_topic_list(self) -> list[str]:
        response = await self.invoke_namesrv(protocol.topic_list_request())
        check_answer(response, broker=False)
        return [str(t) for t in answer_json(response, "topic list").get("topicList") or ()]

    async def delete_topic_in_name_server(self, addrs: Iterable[str], topic: str, cluster: str | None = None) -> None:
        for addr in addrs:
            header = DeleteTopicFromNamesrvRequestHeader(topic, cluster)
            response = await self.invoke(addr, create_request(RequestCode.DELETE_TOPIC_IN_NAMESRV, header.to_ext()))
            check_answer(response, broker=False)

    async def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        """PUT_KV_CONFIG to every NameServer; the last refusal is raised after all were asked."""
        refusal = None
        for addr in self.namesrv_list():
            header = PutKVConfigRequestHeader(namespace, key, value)
            request = create_request(RequestCode.PUT_KV_CONFIG, header.to_ext())
            response = await self.invoke(addr, request)
            if response.code != ResponseCode.SUCCESS:
                refusal = response
        if refusal is not None:
            raise MQClientError(refusal.code, refusal.remark or "")

    async def get_kv_config(self, namespace: str, key: str) -> str | None:
        request = create_request(RequestCode.GET_KV_CONFIG, KVConfigKeyHeader(namespace, key).to_ext())
        response = check_answer(await self.invoke_namesrv(request), broker=False)
        return GetKVConfigResponseHeader.from_ext(dict(response.ext_fields)).value

    async def create_or_update_order_conf(self, key: str, value: str, is_cluster: bool) -> None:
        """The orderTopicConf of a topic: a cluster's replaces it, a broker's ("name:n") is merged into it."""
        if not is_cluster:
            try:
                old = await self.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, key)
            except (MQClientError, RemotingError):
                old = None
            confs = {conf.split(":")[0]: conf for conf in (old or "").split(";") if conf.strip()}
            confs[value.split(":")[0]] = value
            value = ";".join(confs.values())
        await self.put_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, key, value)

    # -- CommandUtil: addresses from the cluster table ----------------------------------------------------------

    async def master_addrs_by_cluster(self, cluster: str) -> list[str]:
        """CommandUtil.fetchMasterAddrByClusterName; MQClientError when the cluster is unknown."""
        info = await self.examine_broker_cluster_info()
        names = self._cluster_brokers(info, cluster)
        addrs = [info.broker_addr_table[n].broker_addrs.get(MASTER_ID) for n in names if n in info.broker_addr_table]
        return [a for a in addrs if a is not None]

    async def master_and_slave_addrs_by_cluster(self, cluster: str) -> list[str]:
        info = await self.examine_broker_cluster_info()
        names = self._cluster_brokers(info, cluster)
        return [addr for n in names if n in info.broker_addr_table
                for addr in info.broker_addr_table[n].broker_addrs.values()]

    async def broker_names_by_cluster(self, cluster: str) -> list[str]:
        return self._cluster_brokers(await self.examine_broker_cluster_info(), cluster)

    async def broker_name_by_addr(self, addr: str) -> str:
        for name, broker in (await self.examine_broker_cluster_info()).broker_addr_table.items():
            if addr in broker.broker_addrs.values():
                return name
        raise MQClientError(-1, CLUSTER_NOT_FOUND)

    @staticmethod
    def _cluster_brokers(info: ClusterInfo, cluster: str) -> list[str]:
        names = info.cluster_addr_table.get(cluster)
        if not names:
            raise MQClientError(-1, f"cluster [{cluster}] not found. {CLUSTER_NOT_FOUND}")
        return sorted(names)

    # -- topics -------------------------------------------------------------------------------------------------

    async def create_and_update_topic_config(self, addr: str, config: TopicConfig) -> None:
        """UPDATE_AND_CREATE_TOPIC with TBW102 as the key topic (DefaultMQAdminExt.createTopicKey)."""
        if not is_valid_perm(config.perm):
            raise MQClientError(ResponseCode.NO_PERMISSION, f"topicPermission value: {config.perm} is invalid.")
        check_answer(await self.invoke(addr, protocol.create_topic_request(config)), broker=False)

    async def delete_topic_in_broker(self, addrs: Iterable[str], topic: str) -> None:
        for addr in addrs:
            request = create_request(RequestCode.DELETE_TOPIC_IN_BROKER, TopicHeader(topic).to_ext())
            check_answer(await self.invoke(addr, request), broker=False)

    async def delete_topic(self, topic: str, cluster: str) -> None:
        """deleteTopic: from every broker of the cluster, every NameServer, and the topic's order config."""
        await self.delete_topic_in_broker(await self.master_and_slave_addrs_by_cluster(cluster), topic)
        await self.delete_topic_in_name_server(self.namesrv_list(), topic)
        for addr in self.namesrv_list():
            request = create_request(RequestCode.DELETE_KV_CONFIG,
                                     KVConfigKeyHeader(NAMESPACE_ORDER_TOPIC_CONFIG, topic).to_ext())
            check_answer(await self.invoke(addr, request), broker=False)

    async def topic_cluster_list(self, topic: str) -> list[str]:
        """getTopicClusterList: the clusters of the first broker of the topic's route."""
        info = await self.examine_broker_cluster_info()
        route = await self.examine_topic_route_info(topic)
        if not route.broker_datas:
            return []
        name = route.broker_datas[0].broker_name
        return [cluster for cluster, names in info.cluster_addr_table.items() if name in names]

    async def examine_topic_stats(self, topic: str, broker_addr: str | None = None) -> TopicStatsTable:
        """One broker's stats, or every broker's of the topic's route (MQClientError when none has any)."""
        if broker_addr is not None:
            return await self._topic_stats(broker_addr, topic)
        route = await self.examine_topic_route_info(topic)
        result = TopicStatsTable()
        for broker in route.broker_datas:
            addr = broker.select_broker_addr()
            if addr is not None:
                result.offset_table.update((await self._topic_stats(addr, topic)).offset_table)
        if not result.offset_table:
            raise MQClientError(-1, "Not found the topic stats info")
        return result

    async def _topic_stats(self, addr: str, topic: str) -> TopicStatsTable:
        request = create_request(RequestCode.GET_TOPIC_STATS_INFO, TopicHeader(topic).to_ext())
        response = check_answer(await self.invoke(addr, request), addr)
        return TopicStatsTable.from_json(answer_json(response, "topic stats"))

    async def query_topic_consume_by_who(self, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO to the first broker of the topic's route."""
        for broker in (await self.examine_topic_route_info(topic)).broker_datas:
            addr = broker.select_broker_addr()
            if addr is not None:
                request = create_request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, TopicHeader(topic).to_ext())
                response = check_answer(await self.invoke(addr, request), addr)
                return [str(g) for g in answer_json(response, "group list").get("groupList") or ()]
        return []

    # -- brokers ------------------------------------------------------------------------------------------------

    async def fetch_broker_runtime_stats(self, addr: str) -> dict[str, str]:
        response = check_answer(await self.invoke(addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO)), addr)
        return {str(k): str(v) for k, v in (answer_json(response, "runtime info").get("table") or {}).items()}

    async def delete_expired_commit_log_by_addr(self, addr: str) -> bool:
        """DELETE_EXPIRED_COMMITLOG: the broker's retention deletes expired CommitLog files on its next rounds, even
        outside deleteWhen. True once the broker accepted; MQClientError with its code when it refused."""
        check_answer(await self.invoke(addr, create_request(RequestCode.DELETE_EXPIRED_COMMITLOG)), broker=False)
        return True

    async def delete_expired_commit_log(self, cluster: str | None = None) -> bool:
        """DELETE_EXPIRED_COMMITLOG to every broker, masters and replicas, of ``cluster`` (of every cluster when
        None). As in Java the answer is the last cluster's: False when it has no broker, an unknown cluster too."""
        info = await self.examine_broker_cluster_info()
        clusters = [cluster] if cluster else hash_map_order(list(info.cluster_addr_table))
        result = False
        for name in clusters:
            addrs = [addr for broker in info.cluster_addr_table.get(name, ()) if broker in info.broker_addr_table
                     for addr in info.broker_addr_table[broker].broker_addrs.values()]
            for addr in addrs:
                await self.delete_expired_commit_log_by_addr(addr)
            result = bool(addrs)
        return result

    # -- groups -------------------------------------------------------------------------------------------------

    async def create_and_update_subscription_group_config(self, addr: str, config: SubscriptionGroupConfig) -> None:
        request = create_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                                 body=encode_json(config.to_json()).encode())
        check_answer(await self.invoke(addr, request), broker=False)

    async def delete_subscription_group(self, addr: str, group: str, clean_offset: bool = False) -> None:
        header = DeleteSubscriptionGroupRequestHeader(group, clean_offset)
        response = await self.invoke(addr, create_request(RequestCode.DELETE_SUBSCRIPTIONGROUP, header.to_ext()))
        check_answer(response, broker=False)

    async def examine_consume_stats(self, group: str, topic: str | None = None,
                                    cluster: str | None = None) -> ConsumeStats:
        """GET_CONSUME_STATS from every broker of the route of the group's retry topic, else of ``topic``. An empty
        answer means the group is not online or is broadcasting (MQClientError with that code)."""
        topics = [RETRY_GROUP_TOPIC_PREFIX + group] + ([topic] if topic else [])
        if topic and route_topic(topic, cluster) != topic:
            topics.append(route_topic(topic, cluster))
        route = await self._first_route(topics)
        result = ConsumeStats()
        for broker in route.broker_datas:
            addr = broker.select_broker_addr()
            if addr is not None:
                stats = await self.consume_stats_of_broker(addr, group, topic)
                result.offset_table.update(stats.offset_table)
                result.consume_tps += stats.consume_tps
        if not result.offset_table:
            try:
                connection = await self.examine_consumer_connection_info(group)
            except (MQClientError, MQBrokerError, RemotingError) as err:
                raise MQClientError(ResponseCode.CONSUMER_NOT_ONLINE, "Not found the consumer group consume stats, "
                                    "because return offset table is empty, maybe the consumer not online") from err
            if connection.message_model == "BROADCASTING":
                raise MQClientError(ResponseCode.BROADCAST_CONSUMPTION, "Not found the consumer group consume stats, "
                                    "because return offset table is empty, the consumer is under the broadcast mode")
        return result

    async def consume_stats_of_broker(self, addr: str, group: str, topic: str | None = None) -> ConsumeStats:
        request = create_request(RequestCode.GET_CONSUME_STATS, GetConsumeStatsRequestHeader(group, topic).to_ext())
        response = check_answer(await self.invoke(addr, request, self.timeout_ms * 3), addr)
        return ConsumeStats.from_json(answer_json(response, "consume stats"))

    async def _first_route(self, topics: list[str]) -> TopicRouteData:
        """The route of the first topic that has one; the last topic's error otherwise."""
        for i, topic in enumerate(topics):
            try:
                return await self.examine_topic_route_info(topic)
            except (MQClientError, RemotingError):
                if i == len(topics) - 1:
                    raise
        raise AssertionError("no topics")

    async def examine_consumer_connection_info(self, group: str, broker_addr: str | None = None) -> ConsumerConnection:
        """The group's clients as one broker sees them (a random broker of its retry topic unless given);
        MQClientError(CONSUMER_NOT_ONLINE) when it has none."""
        addr = broker_addr
        if addr is None:
            brokers = (await self.examine_topic_route_info(RETRY_GROUP_TOPIC_PREFIX + group)).broker_datas
            addr = random.choice(brokers).select_broker_addr() if brokers else None
        result = ConsumerConnection([], {}, None, None, None)
        if addr:
            request = create_request(RequestCode.GET_CONSUMER_CONNECTION_LIST, ConsumerGroupHeader(group).to_ext())
            response = check_answer(await self.invoke(addr, request), addr)
            result = ConsumerConnection.from_json(answer_json(response, "consumer connection"))
        if not result.connection_set:
            raise MQClientError(ResponseCode.CONSUMER_NOT_ONLINE, "Not found the consumer group connection")
        return result

    async def examine_producer_connection_info(self, group: str, topic: str) -> list[Connection]:
        """Every producer connection of the group over the brokers of ``topic``'s route."""
        connections: dict[str, Connection] = {}
        for broker in (await self.examine_topic_route_info(topic)).broker_datas:
            addr = broker.select_broker_addr()
            if addr is not None:
                header = GetProducerConnectionListRequestHeader(group)
                request = create_request(RequestCode.GET_PRODUCER_CONNECTION_LIST, header.to_ext())
                response = check_answer(await self.invoke(addr, request), addr)
                for c in answer_json(response, "producer connection").get("connectionSet") or ():
                    conn = Connection.from_json(c)
                    connections[conn.client_id + conn.client_addr] = conn
        if not connections:
            raise MQClientError(-1, "Not found the producer group connection")
        return list(connections.values())

    async def get_consumer_running_info(self, group: str, client_id: str, *, jstack: bool = False) -> dict[str, Any]:
        """ConsumerRunningInfo of one client, through a broker of the group's retry topic (``mqTable`` keys are
        MessageQueue texts); with ``jstack`` the client adds its stacks."""
        for broker in (await self.examine_topic_route_info(RETRY_GROUP_TOPIC_PREFIX + group)).broker_datas:
            addr = broker.select_broker_addr()
            if addr is not None:
                header = GetConsumerRunningInfoRequestHeader(group, client_id, jstack)
                response = await self.invoke(addr, create_request(RequestCode.GET_CONSUMER_RUNNING_INFO,
                                                                  header.to_ext()))
                return dict(answer_json(check_answer(response, addr), "consumer running info"))
        raise MQClientError(-1, f"no broker serves the consumer group {group}")


def route_topic(topic: str, cluster: str | None) -> str:
    """The topic whose route serves ``topic``: an LMQ queue or the timer topic has none of its own, so the route of
    the cluster (or LMQ parent topic) given with -c stands in, as Java's admin calls do."""
    if cluster and (topic.startswith(LMQ_PREFIX) or topic == TIMER_TOPIC):
        return cluster
    return topic
