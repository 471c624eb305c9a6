"""MQAdminExt: the admin calls behind ``mqadmin``, async, answering with dataclasses.

Rule 1: what each admin call sends and how it reads the answer (tools/admin/DefaultMQAdminExtImpl.java, the admin
half of client/impl/MQClientAPIImpl.java and client/impl/MQAdminImpl.java) is written once, in this module (offsets
and messages) or in ``admin_client`` (the transport and the calls about the cluster, which MQAdminExt inherits);
the bodies' JSON shapes are ``broker.remoting``'s. Routes, offsets, pulls and message decoding reuse
``broker.client`` (``protocol``, ``route``, ``message``).
"""

from __future__ import annotations

import asyncio
import time

from broker.client import protocol
from broker.client.message import MessageExt, MessageQueue, PullResult, decode_messages
from broker.client.route import MASTER_ID, QueueData, subscribe_queues
from broker.common.errors import ClientErrorCode, MQBrokerError, MQClientError, RemotingError, broker_error
from broker.common.message import KEY_SEPARATOR, decode_message_id
from broker.common.validation import LMQ_PREFIX, TOOLS_CONSUMER_GROUP
from broker.remoting.admin_bodies import ConsumerConnection, OffsetWrapper, mq_key
from broker.remoting.codes import LanguageCode, RequestCode, ResponseCode
from broker.remoting.command import create_request
from broker.remoting.ha_bodies import HARuntimeInfo
from broker.remoting.headers import (
    QueryMessageIndexHeader,
    QueryMessageRequestHeader,
    ResetOffsetRequestHeader,
    UniqueKeyQueryHeader,
    ViewMessageRequestHeader,
)
from broker.remoting.heartbeat import build_subscription_data
from broker.tools.admin_client import answer_json, check_answer, route_topic
from broker.tools.admin_config import ConfigAdminClient
from broker.tools.results import MessageTrack, QueryResult, RollbackStats, TrackType

UNIQ_KEY_LOOKBACK_MS = 3 * 24 * 3600 * 1000  # MQAdminImpl.queryMessageByUniqKey: the last three days
QUERY_MAX_NUM_BY_UNIQ_KEY = 32
JAVA_LONG_MAX = 2**63 - 1
INDEX_KEY_TYPE, INDEX_UNIQUE_TYPE, INDEX_TAG_TYPE = "K", "U", "T"  # MessageConst: the indexes QUERY_MESSAGE reads


class MQAdminExt(ConfigAdminClient):
    """The admin calls of DefaultMQAdminExt over one RemotingClient: AdminClient's calls about the cluster, plus
    searching, committing and resetting consumer offsets, viewing, querying, pulling and tracking messages, and a
    broker's replication status.

    ``namesrv_addr`` is "host:port;host:port"; without it the NAMESRV_ADDR environment variable is used, as Java.

    Examples:
        >>> async with MQAdminExt("127.0.0.1:9876") as admin:  # doctest: +SKIP
        ...     route = await admin.examine_topic_route_info("TopicTest")
        ...     stats = await admin.examine_topic_stats("TopicTest")
    """

    # -- offsets ------------------------------------------------------------------------------------------------

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP; a queue without a broker name is asked as the deprecated call does (no
        ``bname``, no ``boundaryType``)."""
        request = protocol.search_offset_request(mq, timestamp_ms, "LOWER" if mq.broker_name else None)
        return protocol.parse_offset_response(await self.invoke(addr, request), addr)

    async def update_consumer_offset(self, addr: str, group: str, mq: MessageQueue, offset: int) -> None:
        check_answer(await self.invoke(addr, protocol.update_consumer_offset_request(group, mq, offset)), addr)

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
        table = answer_json(response, "reset offset").get("offsetTable") or {}
        if isinstance(table, list):  # the C++ form: a list of MessageQueueForC
            return {MessageQueue.from_json(e): int(e["offset"]) for e in table}
        return {mq_key(k): int(v) for k, v in table.items()}

    async def reset_offset_by_queue_id(self, addr: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Commit ``offset`` for one queue, then have the broker apply it (resetOffsetByQueueId)."""
        commit = protocol.update_consumer_offset_request(group, MessageQueue(topic, "", queue_id), offset)
        check_answer(await self.invoke(addr, commit), addr)
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

    # -- replication --------------------------------------------------------------------------------------------

    async def get_broker_ha_status(self, addr: str) -> HARuntimeInfo:
        """GET_BROKER_HA_STATUS: a master's slaves, or a slave's view of its master (MQBrokerError on a refusal)."""
        response = check_answer(await self.invoke(addr, create_request(RequestCode.GET_BROKER_HA_STATUS)), addr)
        return HARuntimeInfo.from_json(answer_json(response, "HA runtime info"))

    # -- messages -----------------------------------------------------------------------------------------------

    async def view_message(self, addr: str, topic: str | None, commit_log_offset: int) -> MessageExt:
        """VIEW_MESSAGE_BY_ID: the record at a commit log offset of the broker at ``addr``."""
        header = ViewMessageRequestHeader(commit_log_offset, topic)
        request = create_request(RequestCode.VIEW_MESSAGE_BY_ID, header.to_ext())
        response = check_answer(await self.invoke(addr, request), addr)
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
        return await self.pull(mq, offset, 1, route_topic=route_topic)

    async def pull(self, mq: MessageQueue, offset: int, max_nums: int, *, group: str = TOOLS_CONSUMER_GROUP,
                   route_topic: str | None = None) -> PullResult:
        """Up to ``max_nums`` messages of ``mq`` from ``offset`` (every tag), as DefaultMQPullConsumer.pull: no
        suspending, no offset commit; the broker caps one answer (32 messages by default)."""
        addr = await self.queue_broker_addr(mq, route_topic)
        subscription = build_subscription_data(mq.topic, "*")
        request = protocol.pull_message_request(group, mq, offset, max_nums, subscription=subscription)
        result = protocol.parse_pull_response(await self.invoke(addr, request), addr)
        protocol.decode_pull_result(result, mq, subscription)
        return result

    async def queue_broker_addr(self, mq: MessageQueue, route_topic: str | None = None) -> str:
        """The address of the broker (its master, else a replica) that serves ``mq``."""
        route = await self.examine_topic_route_info(route_topic or mq.topic)
        broker = route.broker(mq.broker_name)
        addr = broker.select_broker_addr() if broker is not None else None
        if addr is None:
            raise MQClientError(ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION, f"The broker[{mq.broker_name}] not exist")
        return addr

    async def subscribe_queues(self, topic: str) -> list[MessageQueue]:
        """fetchSubscribeMessageQueues: the readable queues of the topic's route."""
        return subscribe_queues(topic, await self.examine_topic_route_info(topic))

    async def min_offset(self, mq: MessageQueue) -> int:
        addr = await self.queue_broker_addr(mq)
        return protocol.parse_offset_response(await self.invoke(addr, protocol.min_offset_request(mq)), addr)

    async def max_offset(self, mq: MessageQueue) -> int:
        addr = await self.queue_broker_addr(mq)
        return protocol.parse_offset_response(await self.invoke(addr, protocol.max_offset_request(mq)), addr)

    async def search_queue_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP to the broker that serves ``mq``."""
        return await self.search_offset(await self.queue_broker_addr(mq), mq, timestamp_ms)

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


def _key_matches(msg: MessageExt, topic: str | None, key: str, index_type: str) -> bool:
    """The index answers by hash: keep what really carries ``key`` (of ``topic``, unless None for an LMQ)."""
    if index_type == INDEX_UNIQUE_TYPE:
        return msg.msg_id == key
    if topic is not None and msg.topic != topic:
        return False
    if index_type == INDEX_TAG_TYPE:
        return msg.tags == key
    return msg.keys is not None and key in msg.keys.split(KEY_SEPARATOR)
