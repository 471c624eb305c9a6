"""Consumer offsets and what the admin tools ask about consumer groups.

Java's ConsumerManageProcessor (GET_CONSUMER_LIST_BY_GROUP, QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET), the
consumer parts of AdminBrokerProcessor (GET_CONSUME_STATS, GET_ALL_CONSUMER_OFFSET, QUERY_TOPIC_CONSUME_BY_WHO,
QUERY_TOPICS_BY_CONSUMER, QUERY_SUBSCRIPTION_BY_CONSUMER, QUERY_CONSUME_TIME_SPAN, INVOKE_BROKER_TO_RESET_OFFSET,
CLONE_GROUP_OFFSET, QUERY_CORRECTION_OFFSET, GET_BROKER_CONSUME_STATS, LOCK_BATCH_MQ, UNLOCK_BATCH_MQ) and
Broker2Client.resetOffset. (MessageQueue, a JSON map key in many bodies, is ``broker.common.message``'s.)

A reset of offsets (mqadmin resetOffsetByTime) is Java 5's server-side reset when useServerSideResetOffset (the
default): the new offsets are committed and also held as pending resets, which the pull processor serves (as
OFFSET_RESET) to the next pull of each queue. With it off, the broker sends RESET_CONSUMER_CLIENT_OFFSET to every
online client of the group instead, as RocketMQ 4 did.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from broker.common.errors import ConnectionClosed, RemoteProtocolError
from broker.common.message import MessageQueue
from broker.remoting.admin_bodies import ConsumeStats, OffsetWrapper
from broker.remoting.codes import LanguageCode, RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_request, create_response
from broker.remoting.connection import RemotingConnection
from broker.remoting.headers import (
    CloneGroupOffsetRequestHeader,
    ConsumerGroupHeader,
    ConsumeStatsTopicListHeader,
    GetConsumeStatsInBrokerHeader,
    GetConsumeStatsRequestHeader,
    GroupHeader,
    OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    QueryCorrectionOffsetHeader,
    QuerySubscriptionByConsumerRequestHeader,
    ResetOffsetRequestHeader,
    TopicHeader,
    UpdateConsumerOffsetRequestHeader,
)
from broker.server.consumer_manager import ClientChannelInfo
from broker.server.processors.common import (
    V3_0_7_SNAPSHOT,
    Handler,
    decode_body,
    guarded,
    json_body,
    queue_value,
    success,
)
from broker.server.processors.request_headers import request_header
from broker.store.config import BrokerRole

if TYPE_CHECKING:
    from broker.server.config import BrokerConfig
    from broker.server.consumer_manager import ConsumerManager
    from broker.server.metadata.groups import SubscriptionGroupManager
    from broker.server.metadata.offsets import ConsumerOffsetManager
    from broker.server.metadata.topics import TopicConfigManager
    from broker.server.stats import BrokerStatsManager
    from broker.store.message_store import MessageStore

log = logging.getLogger(__name__)

REBALANCE_LOCK_MAX_LIVE_TIME_MS = 60_000  # rocketmq.broker.rebalance.lockMaxLiveTime


# -- rebalance locks (Java's RebalanceLockManager) ---------------------------------------------------------------------


class RebalanceLockManager:
    """Which client of a group holds each queue, for orderly consumers; a lock not renewed for 60 s lapses."""

    def __init__(self, max_live_time_ms: int = REBALANCE_LOCK_MAX_LIVE_TIME_MS) -> None:
        self.max_live_time_ms = max_live_time_ms
        self._locks: dict[str, dict[MessageQueue, tuple[str, float]]] = {}  # group -> mq -> (clientId, since)

    def _held(self, group: str, mq: MessageQueue, now: float) -> str | None:
        entry = self._locks.get(group, {}).get(mq)
        if entry is None or (now - entry[1]) * 1000 > self.max_live_time_ms:
            return None
        return entry[0]

    def try_lock_batch(self, group: str, mqs: list[MessageQueue], client_id: str) -> list[MessageQueue]:
        now = time.monotonic()
        locked = []
        table = self._locks.setdefault(group, {})
        for mq in mqs:
            holder = self._held(group, mq, now)
            if holder is None or holder == client_id:
                if holder is None:
                    log.info("rebalance lock of %s %s taken by %s", group, mq, client_id)
                table[mq] = (client_id, now)
                locked.append(mq)
        return locked

    def unlock_batch(self, group: str, mqs: list[MessageQueue], client_id: str) -> None:
        table = self._locks.get(group, {})
        for mq in mqs:
            entry = table.get(mq)
            if entry is not None and entry[0] == client_id:
                del table[mq]


# -- the processor -----------------------------------------------------------------------------------------------------


class ConsumerManageProcessor:
    """Consumer offsets, consume statistics, offset resets and rebalance locks of one broker (``broker_addr`` is
    its address as the admin tools see it)."""

    def __init__(self, *, broker_config: BrokerConfig, broker_addr: str, store: MessageStore,
                 topic_config_manager: TopicConfigManager, subscription_group_manager: SubscriptionGroupManager,
                 consumer_offset_manager: ConsumerOffsetManager, consumer_manager: ConsumerManager,
                 stats_manager: BrokerStatsManager) -> None:
        self.broker_config = broker_config
        self.stats_manager = stats_manager
        self.broker_addr = broker_addr
        self.store = store
        self.topic_config_manager = topic_config_manager
        self.subscription_group_manager = subscription_group_manager
        self.consumer_offset_manager = consumer_offset_manager
        self.consumer_manager = consumer_manager
        self.locks = RebalanceLockManager()

    def handlers(self) -> dict[int, Handler]:
        handlers: dict[int, Handler] = {
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.get_consumer_list_by_group,
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_consumer_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_consumer_offset,
            RequestCode.GET_CONSUME_STATS: self.get_consume_stats,
            RequestCode.GET_ALL_CONSUMER_OFFSET: self.get_all_consumer_offset,
            RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.query_topic_consume_by_who,
            RequestCode.QUERY_TOPICS_BY_CONSUMER: self.query_topics_by_consumer,
            RequestCode.QUERY_SUBSCRIPTION_BY_CONSUMER: self.query_subscription_by_consumer,
            RequestCode.QUERY_CONSUME_TIME_SPAN: self.query_consume_time_span,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
            RequestCode.CLONE_GROUP_OFFSET: self.clone_group_offset,
            RequestCode.QUERY_CORRECTION_OFFSET: self.query_correction_offset,
            RequestCode.GET_BROKER_CONSUME_STATS: self.get_broker_consume_stats,
            RequestCode.LOCK_BATCH_MQ: self.lock_batch_mq,
            RequestCode.UNLOCK_BATCH_MQ: self.unlock_batch_mq,
        }
        return {code: guarded(handler) for code, handler in handlers.items()}

    @property
    def broker_name(self) -> str:
        return self.broker_config.broker_name

    # -- ConsumerManageProcessor -----------------------------------------------------------------------------------

    async def get_consumer_list_by_group(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        group = request_header(request, ConsumerGroupHeader).consumer_group
        info = self.consumer_manager.get(group)
        if info is not None and info.channels:
            return success(request, json_body({"consumerIdList": info.client_ids()}))
        log.warning("no consumer of group %s online, asked by %s", group, conn.remote_address)
        return create_response(request, ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")

    async def update_consumer_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = request_header(request, UpdateConsumerOffsetRequestHeader)
        group, topic = header.consumer_group, header.topic
        if not self.subscription_group_manager.contains_subscription_group(group):
            return create_response(request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {group} not exist!")
        if not self.topic_config_manager.contains_topic(topic):
            return create_response(request, ResponseCode.TOPIC_NOT_EXIST, f"Topic {topic} not exist!")
        offsets = self.consumer_offset_manager
        if self.broker_config.use_server_side_reset_offset and \
                offsets.has_offset_reset(topic, group, header.queue_id):
            log.info("offset commit of %s %s-%d ignored: it was reset", group, topic, header.queue_id)
            return create_response(request, ResponseCode.SUCCESS, "Offset has been previously reset")
        offsets.commit_offset(group, topic, header.queue_id, header.commit_offset, conn.remote_address)
        return success(request)

    async def query_consumer_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = request_header(request, QueryConsumerOffsetRequestHeader)
        topic, queue_id = header.topic, header.queue_id
        offset = self.consumer_offset_manager.query_offset(header.consumer_group, topic, queue_id)
        if offset >= 0:
            return success(request, ext_fields=OffsetResponseHeader(offset).to_ext())
        if header.set_zero_if_not_found is False:
            return create_response(request, ResponseCode.QUERY_NOT_FOUND,
                                   "Not found, do not set to zero, maybe this group boot first")
        store = self.store
        if queue_value(lambda: store.min_offset_in_queue(topic, queue_id), 0) <= 0 and \
                queue_value(lambda: store.message_store_timestamp(topic, queue_id, 0), -1) != -1:
            # Java's checkInMemByConsumeOffset(topic, queueId, 0, 1): the queue's first message is still stored
            return success(request, ext_fields=OffsetResponseHeader(0).to_ext())
        return create_response(request, ResponseCode.QUERY_NOT_FOUND,
                               "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")

    # -- consume statistics ----------------------------------------------------------------------------------------

    async def get_consume_stats(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = request_header(request, GetConsumeStatsRequestHeader)
        topic_list = request_header(request, ConsumeStatsTopicListHeader).topic_list
        group = header.consumer_group
        table: dict[MessageQueue, OffsetWrapper] = {}
        consume_tps = 0.0
        for topic in sorted(self._topics_for_consume_stats(group, header.topic, topic_list)):
            config = self.topic_config_manager.select_topic_config(topic)
            if config is None:
                log.warning("consume stats of %s: topic %s does not exist", group, topic)
                continue
            for queue_id in range(config.read_queue_nums):
                table[MessageQueue(topic, self.broker_name, queue_id)] = self._offset_wrapper(group, topic, queue_id)
            consume_tps += self.stats_manager.group_get_tps(group, topic)
        return success(request, json_body(ConsumeStats(table, consume_tps).to_json()))

    def _topics_for_consume_stats(self, group: str, topic: str | None, topic_list: str | None) -> set[str]:
        listed = [t for t in (topic_list or "").split(";") if t]
        if listed:
            return set(listed)  # a listed topic skips the subscription check, as in Java
        topics = self.consumer_offset_manager.which_topic_by_consumer(group) if not topic else {topic}
        manager = self.consumer_manager
        if manager.find_subscription_data_count(group) > 0:
            topics = {t for t in topics if manager.find_subscription_data(group, t) is not None}
        return topics

    def _offset_wrapper(self, group: str, topic: str, queue_id: int) -> OffsetWrapper:
        store = self.store
        broker_offset = max(0, store.max_offset_in_queue(topic, queue_id))
        consumer_offset = max(0, self.consumer_offset_manager.query_offset(group, topic, queue_id))
        last = self._store_time(topic, queue_id, consumer_offset - 1)
        return OffsetWrapper(broker_offset, consumer_offset, consumer_offset, max(last, 0))

    async def get_broker_consume_stats(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """GET_BROKER_CONSUME_STATS (mqadmin brokerConsumeStats): ConsumeStatsList over every group."""
        only_order = request_header(request, GetConsumeStatsInBrokerHeader).is_order
        groups, total_diff = [], 0
        for group in self.subscription_group_manager.subscription_group_table:
            stats_list = []
            for topic in sorted(self.consumer_offset_manager.which_topic_by_consumer(group)):
                config = self.topic_config_manager.select_topic_config(topic)
                if config is None or (only_order and not config.order) or \
                        not self._topics_for_consume_stats(group, topic, None):
                    continue
                table = {MessageQueue(topic, self.broker_name, q): self._offset_wrapper(group, topic, q)
                         for q in range(config.write_queue_nums)}
                stats = ConsumeStats(table, 0.0)
                total_diff += stats.compute_total_diff()
                stats_list.append(stats.to_json())
            groups.append({group: stats_list})
        body = {"brokerAddr": self.broker_addr, "consumeStatsList": groups, "totalDiff": total_diff,
                "totalInflightDiff": 0}
        return success(request, json_body(body))

    async def get_all_consumer_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return success(request, json_body(self.consumer_offset_manager.to_json()))

    async def query_consume_time_span(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = request_header(request, QueryConsumeTimeSpanRequestHeader)
        config = self.topic_config_manager.select_topic_config(header.topic)
        if config is None:
            return create_response(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist")
        spans = [self._time_span(header.group, header.topic, q) for q in range(config.write_queue_nums)]
        return success(request, json_body({"consumeTimeSpanSet": spans}))

    def _store_time(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """getMessageStoreTimeStamp: -1 when there is no such message (a negative offset included)."""
        if queue_offset < 0:
            return -1
        return self.store.message_store_timestamp(topic, queue_id, queue_offset)

    def _time_span(self, group: str, topic: str, queue_id: int) -> dict[str, Any]:
        store = self.store
        min_time = store.earliest_message_time(topic, queue_id)
        max_offset = store.max_offset_in_queue(topic, queue_id)
        max_time = self._store_time(topic, queue_id, max_offset - 1)
        consumer_offset = self.consumer_offset_manager.query_offset(group, topic, queue_id)
        consume_time = self._store_time(topic, queue_id, consumer_offset - 1) if consumer_offset > 0 else min_time
        delay = 0
        if consumer_offset < max_offset:
            delay = int(time.time() * 1000) - self._store_time(topic, queue_id, consumer_offset)
        return {"consumeTimeStamp": consume_time, "consumeTimeStampStr": _human_time(consume_time),
                "delayTime": delay, "maxTimeStamp": max_time, "maxTimeStampStr": _human_time(max_time),
                "messageQueue": MessageQueue(topic, self.broker_name, queue_id).to_json(),
                "minTimeStamp": min_time, "minTimeStampStr": _human_time(min_time)}

    # -- who consumes what -----------------------------------------------------------------------------------------

    async def query_topic_consume_by_who(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        topic = request_header(request, TopicHeader).topic
        groups = self.consumer_manager.query_topic_consume_by_who(topic)
        groups |= self.consumer_offset_manager.which_group_by_topic(topic)
        return success(request, json_body({"groupList": sorted(groups)}))

    async def query_topics_by_consumer(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        group = request_header(request, GroupHeader).group
        topics = self.consumer_offset_manager.which_topic_by_consumer(group)
        return success(request, json_body({"brokerAddr": self.broker_addr, "topicList": sorted(topics)}))

    async def query_subscription_by_consumer(self, conn: RemotingConnection,
                                             request: RemotingCommand) -> RemotingCommand:
        header = request_header(request, QuerySubscriptionByConsumerRequestHeader)
        sub = (self.consumer_manager.find_subscription_data(header.group, header.topic)
               if header.topic is not None else None)
        body = {"group": header.group, "subscriptionData": sub.to_json() if sub else None, "topic": header.topic}
        return success(request, json_body(body))

    # -- offsets changed by an administrator -----------------------------------------------------------------------

    async def reset_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = request_header(request, ResetOffsetRequestHeader)
        log.info("[reset-offset] reset offset started by %s: topic=%s group=%s timestamp=%d force=%s",
                 conn.remote_address, header.topic, header.group, header.timestamp, header.is_force)
        if self.broker_config.use_server_side_reset_offset:
            return self._reset_offset_in_broker(request, header)
        return await self._reset_offset_in_clients(request, header)

    def _search_offset(self, topic: str, queue_id: int, timestamp: int) -> int:
        store = self.store
        if timestamp < 0:
            return store.max_offset_in_queue(topic, queue_id)
        return store.offset_in_queue_by_time(topic, queue_id, timestamp)

    def _reset_offset_in_broker(self, request: RemotingCommand, header: ResetOffsetRequestHeader) -> RemotingCommand:
        """AdminBrokerProcessor.resetOffsetInner: commit the new offsets and hold them for the next pulls."""
        topic, group, queue_id, offset = header.topic, header.group, header.queue_id, header.offset
        if self.broker_config.broker_role is BrokerRole.SLAVE:
            return create_response(request, ResponseCode.SYSTEM_ERROR, "Can not reset offset in slave broker")
        config = self.topic_config_manager.select_topic_config(topic)
        if config is None:
            return create_response(request, ResponseCode.TOPIC_NOT_EXIST, f"Topic {topic} does not exist")
        if not self.subscription_group_manager.contains_subscription_group(group):
            return create_response(request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {group} does not exist")
        store = self.store
        if queue_id >= 0:
            if offset is not None and offset != -1:
                low, high = store.min_offset_in_queue(topic, queue_id), store.max_offset_in_queue(topic, queue_id)
                if (low >= 0 and offset < low) or offset > high + 1:
                    return create_response(request, ResponseCode.SYSTEM_ERROR,
                                           f"Target offset {offset} not in consume queue range [{low}-{high}]")
            else:
                offset = self._search_offset(topic, queue_id, header.timestamp)
            new_offsets = {queue_id: offset}
        else:
            new_offsets = {q: self._search_offset(topic, q, header.timestamp) for q in range(config.read_queue_nums)}
        if not new_offsets:
            return create_response(request, ResponseCode.SYSTEM_ERROR, "No queues to reset.")
        for q, value in new_offsets.items():
            self.consumer_offset_manager.assign_reset_offset(topic, group, q, value)
        table = {MessageQueue(topic, self.broker_name, q): value for q, value in new_offsets.items()}
        log.info("reset offset, topic=%s group=%s queues=%s", topic, group, new_offsets)
        return success(request, json_body({"offsetTable": table}))

    async def _reset_offset_in_clients(self, request: RemotingCommand,
                                       header: ResetOffsetRequestHeader) -> RemotingCommand:
        """Broker2Client.resetOffset: work the offsets out here, let every online client of the group apply them."""
        topic, group = header.topic, header.group
        config = self.topic_config_manager.select_topic_config(topic)
        if config is None:
            return create_response(request, ResponseCode.TOPIC_NOT_EXIST,
                                   f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}")
        table: dict[MessageQueue, int] = {}
        for queue_id in range(config.write_queue_nums):
            consumer_offset = self.consumer_offset_manager.query_offset(group, topic, queue_id)
            if consumer_offset == -1:
                return create_response(request, ResponseCode.SYSTEM_ERROR, f"THe consumer group <{group}> not exist")
            target = max(0, self._search_offset(topic, queue_id, header.timestamp))
            use_target = header.is_force or target < consumer_offset
            table[MessageQueue(topic, self.broker_name, queue_id)] = target if use_target else consumer_offset
        info = self.consumer_manager.get(group)
        if info is None or not info.channels:
            return create_response(request, ResponseCode.CONSUMER_NOT_ONLINE,
                                   f"Consumer not online, so can not reset offset, Group: {group} Topic: {topic} "
                                   f"Timestamp: {header.timestamp}")
        refusal = await self._notify_reset(request, header, table, list(info.channels.values()))
        return refusal or success(request, json_body({"offsetTable": table}))

    async def _notify_reset(self, request: RemotingCommand, header: ResetOffsetRequestHeader,
                            table: dict[MessageQueue, int],
                            channels: list[ClientChannelInfo]) -> RemotingCommand | None:
        if request.language is LanguageCode.CPP:  # ResetOffsetBodyForC: a list of MessageQueueForC, not a map
            entries = [dict(sorted({**mq.to_json(), "offset": value}.items())) for mq, value in table.items()]
            body = json_body({"offsetTable": entries})
        else:
            body = json_body({"offsetTable": table})
        notice_header = ResetOffsetRequestHeader(group=header.group, topic=header.topic, timestamp=header.timestamp,
                                                 is_force=False)
        for channel in channels:
            if channel.version < V3_0_7_SNAPSHOT:
                return create_response(request, ResponseCode.SYSTEM_ERROR,
                                       f"the client does not support this feature. version={channel.version}")
            notice = create_request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, notice_header.to_ext(), body)
            try:
                await channel.connection.invoke_oneway(notice)
            except ConnectionClosed as err:
                log.error("[reset-offset] cannot tell %s: %s", channel.client_id, err)
        return None

    async def clone_group_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = request_header(request, CloneGroupOffsetRequestHeader)
        offsets = self.consumer_offset_manager
        topics = {header.topic} if header.topic and header.topic.strip() else \
            offsets.which_topic_by_consumer(header.src_group)
        manager = self.consumer_manager
        for topic in topics:
            if self.topic_config_manager.select_topic_config(topic) is None:
                log.warning("[cloneGroupOffset] topic %s does not exist", topic)
                continue
            if not header.offline and manager.find_subscription_data_count(header.src_group) > 0 and \
                    manager.find_subscription_data(header.src_group, topic) is None:
                continue
            offsets.clone_offset(header.src_group, header.dest_group, topic)
        return success(request)

    async def query_correction_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """The lowest committed offset per queue over all groups but ``filterGroups``; MAX when the compare group
        is behind it (ConsumerOffsetManager.queryMinOffsetInAllGroup)."""
        header = request_header(request, QueryCorrectionOffsetHeader)
        filtered = {g.strip() for g in (header.filter_groups or "").split(",") if g.strip()}
        correction: dict[int, int] = {}
        for key, queues in self.consumer_offset_manager.offset_table.items():
            topic, _, group = key.partition("@")
            if topic != header.topic or group in filtered:
                continue
            for queue_id, offset in queues.items():
                correction[queue_id] = min(offset, correction.get(queue_id, offset))
        compare = self.consumer_offset_manager.query_offsets(header.compare_group, header.topic) or {}
        for queue_id, offset in compare.items():
            if queue_id in correction and correction[queue_id] > offset:
                correction[queue_id] = 2**63 - 1
        return success(request, json_body({"correctionOffsets": correction}))

    # -- orderly consumers ----------------------------------------------------------------------------------------

    async def lock_batch_mq(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        group, client_id, mqs = _lock_body(request)
        locked = self.locks.try_lock_batch(group, mqs, client_id)
        return success(request, json_body({"lockOKMQSet": [mq.to_json() for mq in locked]}))

    async def unlock_batch_mq(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        group, client_id, mqs = _lock_body(request)
        self.locks.unlock_batch(group, mqs, client_id)
        return success(request)


def _lock_body(request: RemotingCommand) -> tuple[str, str, list[MessageQueue]]:
    """LockBatchRequestBody / UnlockBatchRequestBody: consumerGroup, clientId, mqSet."""
    body = decode_body(request)
    try:
        return (str(body["consumerGroup"]), str(body["clientId"]),
                [MessageQueue.from_json(item) for item in body.get("mqSet") or ()])
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise RemoteProtocolError(f"malformed lock request body: {err!r}") from err


def _human_time(timestamp_ms: int) -> str:
    """UtilAll.timeMillisToHumanString3-like "yyyy-MM-dd#HH:mm:ss:SSS" in local time (QueueTimeSpan's getters)."""
    seconds, millis = divmod(timestamp_ms, 1000)
    return time.strftime("%Y-%m-%d#%H:%M:%S", time.localtime(seconds)) + f":{millis:03d}"

