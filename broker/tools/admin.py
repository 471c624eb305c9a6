"""MQAdminExt: the admin calls behind ``mqadmin``, async, answering with dataclasses.

Rule 1: what each admin call sends and how it reads the answer (tools/admin/DefaultMQAdminExtImpl.java, the admin
half of client/impl/MQClientAPIImpl.java and client/impl/MQAdminImpl.java) is written here once; the bodies'
JSON shapes are those of remoting/protocol/body/*.java and remoting/protocol/admin/*.java. Routes, offsets, pulls
and message decoding reuse ``broker.client`` (``protocol``, ``route``, ``message``).

A NameServer call goes to the NameServers in turn until one answers, as NettyRemotingClient does with a null
address. A response code that is not success raises MQClientError or MQBrokerError (Java's MQClientException or
MQBrokerException for the same call), carrying Java's code and remark.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections.abc import Iterable
from typing import Any

from broker.client import protocol
from broker.client.message import MessageExt, MessageQueue, PullResult, decode_messages
from broker.client.route import MASTER_ID, QueueData, TopicRouteData
from broker.common.errors import ClientErrorCode, MQBrokerError, MQClientError, RemotingError, broker_error
from broker.common.fastjson import decode_json, encode_json
from broker.common.hash_order import hash_map_order
from broker.common.message import KEY_SEPARATOR, decode_message_id
from broker.common.topic import TopicConfig, is_valid_perm
from broker.common.validation import (
    LMQ_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    TIMER_TOPIC,
    TOOLS_CONSUMER_GROUP,
)
from broker.remoting.admin_bodies import (
    Connection,
    ConsumerConnection,
    ConsumeStats,
    OffsetWrapper,
    TopicStatsTable,
    mq_key,
)
from broker.remoting.client import RemotingClient
from broker.remoting.codes import LanguageCode, RequestCode, ResponseCode
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
    QueryMessageIndexHeader,
    QueryMessageRequestHeader,
    ResetOffsetRequestHeader,
    TopicHeader,
    UniqueKeyQueryHeader,
    ViewMessageRequestHeader,
)
from broker.remoting.route import ClusterInfo
from broker.remoting.subscription import SubscriptionGroupConfig
from broker.tools.results import MessageTrack, QueryResult, RollbackStats, TrackType

DEFAULT_TIMEOUT_MS = 5000  # DefaultMQAdminExt.timeoutMillis
NAMESRV_ADDR_ENV = "NAMESRV_ADDR"  # MixAll.NAMESRV_ADDR_ENV
NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # NamesrvUtil
UNIQ_KEY_LOOKBACK_MS = 3 * 24 * 3600 * 1000  # MQAdminImpl.queryMessageByUniqKey: the last three days
QUERY_MAX_NUM_BY_UNIQ_KEY = 32
CLUSTER_NOT_FOUND = "Make sure the specified clusterName exists or the name server connected to is correct."
JAVA_LONG_MAX = 2**63 - 1
INDEX_KEY_TYPE, INDEX_UNIQUE_TYPE, INDEX_TAG_TYPE = "K", "U", "T"  # MessageConst: the indexes QUERY_MESSAGE reads


def _body(response: RemotingCommand, what: str) -> Any:
    if not response.body:
        raise MQClientError(response.code, f"{what}: the answer has no body")
    try:
        return decode_json(response.body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise MQClientError(ResponseCode.SYSTEM_ERROR, f"{what}: the body is not JSON: {err}") from err


# -- the admin API -----------------------------------------------------------------------------------------------------


def _check(response: RemotingCommand, address: str | None = None, *, broker: bool = True) -> RemotingCommand:
    """Success, or the exception Java's call throws: MQBrokerException (with the address) or MQClientException."""
    if response.code != ResponseCode.SUCCESS:
        if broker:
            raise broker_error(response.code, response.remark, address)
        raise MQClientError(response.code, response.remark or "")
    return response


class MQAdminExt:
    """The admin calls of DefaultMQAdminExt over one RemotingClient.

    ``namesrv_addr`` is "host:port;host:port"; without it the NAMESRV_ADDR environment variable is used, as Java.

    Examples:
        >>> async with MQAdminExt("127.0.0.1:9876") as admin:  # doctest: +SKIP
        ...     route = await admin.examine_topic_route_info("TopicTest")
        ...     stats = await admin.examine_topic_stats("TopicTest")
    """

    def __init__(self, namesrv_addr: str | None = None, *, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        self.namesrv_addr = namesrv_addr if namesrv_addr else os.environ.get(NAMESRV_ADDR_ENV, "")
        self.timeout_ms = timeout_ms
        self.remoting = RemotingClient(default_timeout_ms=timeout_ms)
        self._namesrv_index = random.randrange(1 << 16)

    def namesrv_list(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    async def close(self) -> None:
        await self.remoting.close()

    async def __aenter__(self) -> MQAdminExt:
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
        response = _check(await self.invoke_namesrv(protocol.cluster_info_request()))
        return ClusterInfo.from_json(_body(response, "cluster info"))

    async def fetch_all_topic_list(self) -> list[str]:
        response = await self.invoke_namesrv(protocol.topic_list_request())
        _check(response, broker=False)
        return [str(t) for t in _body(response, "topic list").get("topicList") or ()]

    async def delete_topic_in_name_server(self, addrs: Iterable[str], topic: str, cluster: str | None = None) -> None:
        for addr in addrs:
            header = DeleteTopicFromNamesrvRequestHeader(topic, cluster)
            response = await self.invoke(addr, create_request(RequestCode.DELETE_TOPIC_IN_NAMESRV, header.to_ext()))
            _check(response, broker=False)

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
        response = _check(await self.invoke_namesrv(request), broker=False)
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
        _check(await self.invoke(addr, protocol.create_topic_request(config)), broker=False)

    async def delete_topic_in_broker(self, addrs: Iterable[str], topic: str) -> None:
        for addr in addrs:
            request = create_request(RequestCode.DELETE_TOPIC_IN_BROKER, TopicHeader(topic).to_ext())
            _check(await self.invoke(addr, request), broker=False)

    async def delete_topic(self, topic: str, cluster: str) -> None:
        """deleteTopic: from every broker of the cluster, every NameServer, and the topic's order config."""
        await self.delete_topic_in_broker(await self.master_and_slave_addrs_by_cluster(cluster), topic)
        await self.delete_topic_in_name_server(self.namesrv_list(), topic)
        for addr in self.namesrv_list():
            request = create_request(RequestCode.DELETE_KV_CONFIG,
                                     KVConfigKeyHeader(NAMESPACE_ORDER_TOPIC_CONFIG, topic).to_ext())
            _check(await self.invoke(addr, request), broker=False)

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
        response = _check(await self.invoke(addr, request), addr)
        return TopicStatsTable.from_json(_body(response, "topic stats"))

    async def query_topic_consume_by_who(self, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO to the first broker of the topic's route."""
        for broker in (await self.examine_topic_route_info(topic)).broker_datas:
            addr = broker.select_broker_addr()
            if addr is not None:
                request = create_request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, TopicHeader(topic).to_ext())
                response = _check(await self.invoke(addr, request), addr)
                return [str(g) for g in _body(response, "group list").get("groupList") or ()]
        return []

    # -- brokers ------------------------------------------------------------------------------------------------

    async def fetch_broker_runtime_stats(self, addr: str) -> dict[str, str]:
        response = _check(await self.invoke(addr, create_request(RequestCode.GET_BROKER_RUNTIME_INFO)), addr)
        return {str(k): str(v) for k, v in (_body(response, "runtime info").get("table") or {}).items()}

    async def delete_expired_commit_log_by_addr(self, addr: str) -> bool:
        """DELETE_EXPIRED_COMMITLOG: the broker's retention deletes expired CommitLog files on its next rounds, even
        outside deleteWhen. True once the broker accepted; MQClientError with its code when it refused."""
        _check(await self.invoke(addr, create_request(RequestCode.DELETE_EXPIRED_COMMITLOG)), broker=False)
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
        _check(await self.invoke(addr, request), broker=False)

    async def delete_subscription_group(self, addr: str, group: str, clean_offset: bool = False) -> None:
        header = DeleteSubscriptionGroupRequestHeader(group, clean_offset)
        response = await self.invoke(addr, create_request(RequestCode.DELETE_SUBSCRIPTIONGROUP, header.to_ext()))
        _check(response, broker=False)

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
        response = _check(await self.invoke(addr, request, self.timeout_ms * 3), addr)
        return ConsumeStats.from_json(_body(response, "consume stats"))

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
            response = _check(await self.invoke(addr, request), addr)
            result = ConsumerConnection.from_json(_body(response, "consumer connection"))
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
                response = _check(await self.invoke(addr, request), addr)
                for c in _body(response, "producer connection").get("connectionSet") or ():
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
                return dict(_body(_check(response, addr), "consumer running info"))
        raise MQClientError(-1, f"no broker serves the consumer group {group}")

    # -- offsets ------------------------------------------------------------------------------------------------

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP; a queue without a broker name is asked as the deprecated call does (no
        ``bname``, no ``boundaryType``)."""
        request = protocol.search_offset_request(mq, timestamp_ms, "LOWER" if mq.broker_name else None)
        return protocol.parse_offset_response(await self.invoke(addr, request), addr)

    async def update_consumer_offset(self, addr: str, group: str, mq: MessageQueue, offset: int) -> None:
        _check(await self.invoke(addr, protocol.update_consumer_offset_request(group, mq, offset)), addr)

    async def reset_offset_by_timestamp(self, topic: str, group: str, timestamp_ms: int, force: bool, *,
                                        cluster: str | None = None, cpp: bool = False) -> dict[MessageQueue, int]:
        """INVOKE_BROKER_TO_RESET_OFFSET to each broker of the topic: the broker works the offsets out (and commits
        them, or has the group's online clients apply them); raises MQClientError with the broker's code."""
        result: dict[MessageQueue, int] = {}
        for broker in (await self.examine_topic_route_info(route_topic(topic, cluster))).broker_datas:
            addr = broker.select_broker_addr()
            if addr is not None:
                header = ResetOffsetRequestHeader(group, topic, timestamp_ms, force, offset=-1)
                result.update(await self._invoke_reset(addr, header, cpp=cpp))
        return result

    async def _invoke_reset(self, addr: str, header: ResetOffsetRequestHeader, *,
                            cpp: bool = False) -> dict[MessageQueue, int]:
        request = create_request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header.to_ext(),
                                 language=LanguageCode.CPP if cpp else LanguageCode.PYTHON)
        response = await self.invoke(addr, request)
        if response.code != ResponseCode.SUCCESS or not response.body:
            raise MQClientError(response.code, response.remark or "")
        table = _body(response, "reset offset").get("offsetTable") or {}
        if isinstance(table, list):  # the C++ form: a list of MessageQueueForC
            return {MessageQueue.from_json(e): int(e["offset"]) for e in table}
        return {mq_key(k): int(v) for k, v in table.items()}

    async def reset_offset_by_queue_id(self, addr: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Commit ``offset`` for one queue, then have the broker apply it (resetOffsetByQueueId)."""
        commit = protocol.update_consumer_offset_request(group, MessageQueue(topic, "", queue_id), offset)
        _check(await self.invoke(addr, commit), addr)
        header = ResetOffsetRequestHeader(group, topic, 0, False, queue_id, offset)
        try:
            await self._invoke_reset(addr, header)
        except MQClientError as err:
            raise broker_error(err.code, err.remark, addr) from err

    async def reset_offset_by_timestamp_old(self, group: str, topic: str, timestamp_ms: int, force: bool, *,
                                            cluster: str | None = None) -> list[RollbackStats]:
        """The pre-4.x way (ResetOffsetByTimeOldCommand): search each queue's offset at the time and commit it."""
        route = await self.examine_topic_route_info(route_topic(topic, cluster))
        queues = {q.broker_name: q for q in route.queue_datas}
        stats: list[RollbackStats] = []
        for broker in route.broker_datas:
            addr = broker.select_broker_addr()
            if addr is not None and broker.broker_name in queues:
                stats += await self._rollback_broker(addr, queues[broker.broker_name], group, topic, timestamp_ms,
                                                     force)
        return stats

    async def _rollback_broker(self, addr: str, queue_data: QueueData, group: str, topic: str, timestamp_ms: int,
                               force: bool) -> list[RollbackStats]:
        consume = await self.consume_stats_of_broker(addr, group)
        wrappers = {mq: w for mq, w in consume.offset_table.items() if mq.topic == topic}
        if not wrappers:
            offsets = (await self._topic_stats(addr, topic)).offset_table
            for queue_id in range(queue_data.read_queue_nums):
                mq = MessageQueue(topic, queue_data.broker_name, queue_id)
                offset = offsets[mq]
                wrappers[mq] = OffsetWrapper(offset.max_offset, offset.min_offset, 0, 0)
        stats = []
        for mq, wrapper in wrappers.items():
            if timestamp_ms == -1:
                target = protocol.parse_offset_response(await self.invoke(addr, protocol.max_offset_request(mq)), addr)
            else:
                target = await self.search_offset(addr, mq, timestamp_ms)
            rollback = wrapper.consumer_offset
            if force or target <= wrapper.consumer_offset:
                rollback = target
                await self.update_consumer_offset(addr, group, mq, target)
            stats.append(RollbackStats(mq.broker_name, mq.queue_id, wrapper.broker_offset, wrapper.consumer_offset,
                                       target, rollback))
        return stats

    # -- messages -----------------------------------------------------------------------------------------------

    async def view_message(self, addr: str, topic: str | None, commit_log_offset: int) -> MessageExt:
        """VIEW_MESSAGE_BY_ID: the record at a commit log offset of the broker at ``addr``."""
        header = ViewMessageRequestHeader(commit_log_offset, topic)
        response = _check(await self.invoke(addr, create_request(RequestCode.VIEW_MESSAGE_BY_ID, header.to_ext())),
                          addr)
        messages = decode_messages(response.body)
        if not messages:
            raise broker_error(ResponseCode.SYSTEM_ERROR, "the answer holds no message", addr)
        return messages[0]

    async def query_message_by_id(self, topic: str, msg_id: str, cluster: str | None = None) -> MessageExt | None:
        """DefaultMQAdminExtImpl.queryMessage: an offsetMsgId names its broker and commit log offset, so ask that
        broker; when that fails (a client id, UNIQ_KEY, decodes to no reachable broker) query by UNIQ_KEY."""
        try:
            addr, offset = decode_message_id(msg_id)
            return await self.view_message(addr, topic, offset)
        except (ValueError, MQBrokerError, RemotingError):
            pass
        now = time.time_ns() // 1_000_000
        result = await self.query_message(topic, msg_id, QUERY_MAX_NUM_BY_UNIQ_KEY, now - UNIQ_KEY_LOOKBACK_MS,
                                          JAVA_LONG_MAX, cluster=cluster, index_type=INDEX_UNIQUE_TYPE)
        return result.messages[0] if result.messages else None

    async def query_message(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int, *,
                            cluster: str | None = None, index_type: str = INDEX_KEY_TYPE,
                            last_key: str | None = None) -> QueryResult:
        """QUERY_MESSAGE to every broker of the topic (of ``cluster`` only, when given). ``index_type`` is "K" (a
        key among KEYS), "U" (a UNIQ_KEY) or "T" (the tags); what the index returns for another key of the same hash
        is dropped. MQClientError(NO_MESSAGE) when nothing matches."""
        lmq = topic.startswith(LMQ_PREFIX)
        route = await self.examine_topic_route_info(route_topic(topic, cluster))
        addrs = [b.select_broker_addr() for b in route.broker_datas if lmq or not cluster or b.cluster == cluster]
        asked = cluster if lmq and cluster else topic  # an LMQ is queried through its parent topic
        ext = (QueryMessageRequestHeader(asked, key, max_num, begin_ms, end_ms).to_ext()
               | QueryMessageIndexHeader(index_type, last_key).to_ext()
               | UniqueKeyQueryHeader(index_type == INDEX_UNIQUE_TYPE).to_ext())

        async def one(addr: str) -> tuple[int, list[MessageExt]]:
            try:
                response = await self.invoke(addr, create_request(RequestCode.QUERY_MESSAGE, ext), self.timeout_ms * 3)
            except RemotingError:
                return 0, []
            if response.code != ResponseCode.SUCCESS:
                return 0, []
            last = int(response.ext_fields.get("indexLastUpdateTimestamp", "0"))
            return last, decode_messages(response.body)

        answers = await asyncio.gather(*(one(a) for a in addrs if a))
        messages = [m for _, found in answers for m in found if _key_matches(m, None if lmq else topic, key,
                                                                             index_type)]
        if not messages:
            raise MQClientError(ResponseCode.NO_MESSAGE, "query message by key finished, but no message.")
        return QueryResult(max((last for last, _ in answers), default=0), messages)

    async def pull_one(self, mq: MessageQueue, offset: int, route_topic: str | None = None) -> PullResult:
        """One message at ``offset`` of ``mq``, pulled as the TOOLS_CONSUMER group (queryMsgByOffset); the broker
        is looked up in the route of ``route_topic`` when given (an LMQ queue has no route of its own)."""
        route = await self.examine_topic_route_info(route_topic or mq.topic)
        broker = route.broker(mq.broker_name)
        addr = broker.select_broker_addr() if broker is not None else None
        if addr is None:
            raise MQClientError(ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION, f"The broker[{mq.broker_name}] not exist")
        subscription = protocol.build_subscription_data(mq.topic, "*")
        request = protocol.pull_message_request(TOOLS_CONSUMER_GROUP, mq, offset, 1, subscription=subscription)
        result = protocol.parse_pull_response(await self.invoke(addr, request), addr)
        protocol.decode_pull_result(result, mq, subscription)
        return result

    async def message_track_detail(self, msg: MessageExt) -> list[MessageTrack]:
        """For each group that consumes the message's topic: consumed, not yet, pulled by a pull consumer, offline."""
        tracks = []
        for group in await self.query_topic_consume_by_who(msg.topic):
            track = MessageTrack(group)
            tracks.append(track)
            try:
                connection = await self.examine_consumer_connection_info(group)
            except (MQClientError, MQBrokerError) as err:
                if err.code == ResponseCode.CONSUMER_NOT_ONLINE:
                    track.track_type = TrackType.NOT_ONLINE
                track.exception_desc = f"CODE:{err.code} DESC:{err.remark}"
                continue
            if connection.consume_type == "CONSUME_ACTIVELY":
                track.track_type = TrackType.PULL
            elif connection.consume_type == "CONSUME_PASSIVELY":
                await self._track_push_group(track, msg, connection)
        return tracks

    async def _track_push_group(self, track: MessageTrack, msg: MessageExt, connection: ConsumerConnection) -> None:
        try:
            consumed = await self._consumed(msg, track.consumer_group)
        except (MQClientError, MQBrokerError) as err:
            if err.code == ResponseCode.CONSUMER_NOT_ONLINE:
                track.track_type = TrackType.NOT_ONLINE
                track.exception_desc = f"CODE:{err.code} DESC:{err.remark}"
            elif err.code == ResponseCode.BROADCAST_CONSUMPTION:
                track.track_type = TrackType.CONSUME_BROADCASTING
            return
        if not consumed:
            track.track_type = TrackType.NOT_CONSUME_YET
            return
        track.track_type = TrackType.CONSUMED
        sub = connection.subscription_table.get(msg.topic)
        if sub is not None and sub.tags_set and "*" not in sub.tags_set and msg.tags not in sub.tags_set:
            track.track_type = TrackType.CONSUMED_BUT_FILTERED

    async def _consumed(self, msg: MessageExt, group: str) -> bool:
        """The group's committed offset of the message's queue, on the broker that stored it, is past it."""
        stats = await self.examine_consume_stats(group)
        info = await self.examine_broker_cluster_info()
        for mq, wrapper in stats.offset_table.items():
            if mq.topic == msg.topic and mq.queue_id == msg.queue_id:
                broker = info.broker_addr_table.get(mq.broker_name)
                if broker is not None and broker.broker_addrs.get(MASTER_ID) == msg.store_host:
                    return wrapper.consumer_offset > msg.queue_offset
        return False


def route_topic(topic: str, cluster: str | None) -> str:
    """The topic whose route serves ``topic``: an LMQ queue or the timer topic has none of its own, so the route of
    the cluster (or LMQ parent topic) given with -c stands in, as Java's admin calls do."""
    if cluster and (topic.startswith(LMQ_PREFIX) or topic == TIMER_TOPIC):
        return cluster
    return topic


def _key_matches(msg: MessageExt, topic: str | None, key: str, index_type: str) -> bool:
    """The index answers by hash: keep what really carries ``key`` (of ``topic``, unless None for an LMQ)."""
    if index_type == INDEX_UNIQUE_TYPE:
        return msg.msg_id == key
    if topic is not None and msg.topic != topic:
        return False
    if index_type == INDEX_TAG_TYPE:
        return msg.tags == key
    return msg.keys is not None and key in msg.keys.split(KEY_SEPARATOR)
