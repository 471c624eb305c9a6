"""Administration and queries: what ``mqadmin`` and the clients' admin APIs ask a broker about topics, subscription
groups, queue offsets, messages and the broker itself.

Java's AdminBrokerProcessor (topics, groups, queue offsets, broker config and runtime info, system topics, cleanup)
and QueryMessageProcessor (QUERY_MESSAGE by key, VIEW_MESSAGE_BY_ID by physical offset). Topic and group names are
checked with TopicValidator's rules and refused with Java's INVALID_PARAMETER remarks; changes persist (off the event
loop) before the answer, and a changed topic is registered with the NameServers at once.

GET_BROKER_RUNTIME_INFO reports what rmq measures (``BrokerStats``): puts counted from the ConsumeQueues, gets as
the pull processor reports them (``BrokerStats.record_get``), the store's offsets and disk use. Java's
thread-pool and latency metrics have no rmq counterpart and are left out rather than invented.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import shutil
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from broker.common import validation
from broker.common.attributes import parse_attributes
from broker.common.errors import ConfigError, CorruptRecord, IllegalName, RemoteProtocolError
from broker.common.fastjson import DataVersion, JavaDouble, encode_json
from broker.common.message import PROPERTY_REAL_TOPIC
from broker.common.properties import parse_properties
from broker.common.topic import TopicConfig, TopicFilterType
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_response
from broker.remoting.connection import RemotingConnection
from broker.remoting.headers import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetAllSubscriptionGroupResponseHeader,
    GetAllTopicConfigResponseHeader,
    GetBrokerConfigResponseHeader,
    GroupHeader,
    OffsetResponseHeader,
    QueryConsumeQueueRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    SearchOffsetRequestHeader,
    TimestampResponseHeader,
    TopicHeader,
    TopicQueueHeader,
    UniqueKeyQueryHeader,
    UpdateGroupForbiddenRequestHeader,
    ViewBrokerStatsDataRequestHeader,
    ViewMessageRequestHeader,
)
from broker.server.config import format_config
from broker.server.metadata.groups import SubscriptionGroupConfig
from broker.server.processors.common import (
    INDEX_PERM_READ,
    Handler,
    decode_body,
    guarded,
    json_body,
    queue_value,
    success,
)
from broker.server.processors.consumer_manage import MessageQueue

if TYPE_CHECKING:
    from broker.server.config import BrokerConfig
    from broker.server.consumer_manager import ConsumerManager
    from broker.server.metadata.groups import SubscriptionGroupManager
    from broker.server.metadata.offsets import ConsumerOffsetManager
    from broker.server.metadata.topics import TopicConfigManager
    from broker.server.schedule import ScheduleMessageService
    from broker.server.stats import BrokerStats
    from broker.store.config import MessageStoreConfig
    from broker.store.message_store import MessageStore

log = logging.getLogger(__name__)

BROKER_VERSION_DESC = "V5_5_1"  # MQVersion.getVersionDesc(CURRENT_VERSION): the release rmq speaks (REMOTING_VERSION)
DEFAULT_QUERY_MAX_NUM = 32  # MessageStoreConfig.defaultQueryMaxNum: a query by unique key returns at most this many
DISPATCH_WAIT_POLLS = 200  # of 1 ms: how long a max-offset query waits for dispatch to catch up
# BrokerConfig's request queue capacities (Java's defaults), reported in the runtime info: clusterList prints the send
# and pull queues' sizes and head waits as #InTPS(LOAD) and #OutTPS(LOAD). rmq serves requests on the event loop as they
# arrive, so its queues are always empty and nothing waits at their head.
REQUEST_QUEUE_CAPACITIES = {"send": 10000, "pull": 100000, "litePull": 100000, "query": 20000, "ack": 100000}
END_TRANSACTION_QUEUE_CAPACITY = 100000
INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"  # MessageConst.PROPERTY_INNER_MULTI_DISPATCH, "," separated LMQs
# Topics whose messages carry their logical topic in REAL_TOPIC (QueryMessageProcessor.REAL_TOPIC_STORAGE_TOPICS)
REAL_TOPIC_STORAGE_TOPICS = frozenset({validation.RMQ_SYS_SCHEDULE_TOPIC, validation.TIMER_TOPIC,
                                       validation.RMQ_SYS_TRANS_HALF_TOPIC,
                                       validation.RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC})
CONFIG_BLACK_LIST = frozenset({"brokerConfigPath", "rocketmqHome", "configBlackList"})


# -- attributes (AttributeParser, AttributeUtil, TopicAttributes, SubscriptionGroupAttributes) -------------------------


def _enum(*values: str) -> Callable[[str], None]:
    def verify(value: str) -> None:
        if value not in values:
            raise ValueError(f"value is not in set: [{', '.join(values)}]")
    return verify


def _long_range(low: int, high: int) -> Callable[[str], None]:
    def verify(value: str) -> None:
        try:
            number = int(value)
        except ValueError as err:
            raise ValueError(f'For input string: "{value}"') from err
        if not low <= number <= high:
            raise ValueError(f"value is not in range({low}, {high})")
    return verify


def _boolean(value: str) -> None:
    if value.lower() not in ("true", "false"):
        raise ValueError("boolean attribute format is wrong.")


def _any(value: str) -> None:
    return None


# name -> (changeable, verify)
TOPIC_ATTRIBUTES: Mapping[str, tuple[bool, Callable[[str], None]]] = {
    "queue.type": (False, _enum("BatchCQ", "SimpleCQ")),
    "cleanup.policy": (False, _enum("DELETE", "COMPACTION")),
    "message.type": (True, _enum("UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "PRIORITY", "LITE",
                                 "MIXED")),
    "reserve.time": (True, _long_range(-1, 2**63 - 1)),
    "lite.topic.expiration": (True, _long_range(-1, 30 * 24 * 60)),
}
GROUP_ATTRIBUTES: Mapping[str, tuple[bool, Callable[[str], None]]] = {
    "priority.factor": (True, _long_range(0, 100)),
    "lite.bind.topic": (True, _any),
    "lite.sub.model": (True, _enum("Shared", "Exclusive")),
    "lite.sub.reset.offset.exclusive": (True, _boolean),
    "lite.sub.reset.offset.unsubscribe": (True, _boolean),
    "lite.sub.client.quota": (True, _long_range(-1, 2**63 - 1)),
    "lite.sub.client.max.event.cnt": (True, _long_range(10, 2**63 - 1)),
    "lite.sub.wildcard": (True, _any),
}


def alter_attributes(create: bool, known: Mapping[str, tuple[bool, Callable[[str], None]]],
                     current: Mapping[str, str], edits: Mapping[str, str]) -> dict[str, str]:
    """AttributeUtil.alterCurrentAttributes: apply "+key"/"-key" edits to ``current``; ValueError names the fault."""
    final, seen = dict(current), set()
    for key, value in edits.items():
        name = key[1:]
        if not name or "+" in name or "-" in name:
            raise ValueError("kv string format wrong.")
        if name in seen:
            raise ValueError(f"alter duplication key. key: {name}")
        seen.add(name)
        if create and not key.startswith("+"):
            raise ValueError(f"only add attribute is supported while creating topic. key: {name}")
        if not create and key.startswith("-") and name not in current:
            raise ValueError(f"attempt to delete a nonexistent key: {name}")
        if not create and not key.startswith(("+", "-")):
            raise ValueError(f"wrong format key: {name}")
        attribute = known.get(name)
        if attribute is None:
            raise ValueError(f"unsupported key: {name}")
        changeable, verify = attribute
        if not create and not changeable:
            raise ValueError(f"attempt to update an unchangeable attribute. key: {name}")
        if key.startswith("-"):
            final.pop(name, None)
        else:
            verify(value)
            final[name] = value
    return final


def human_bytes(count: int) -> str:
    """MixAll.humanReadableByteCount(bytes, false): "512 B", "1.5 KiB", "97.9 GiB"."""
    if count < 1024:
        return f"{count} B"
    exp = min(6, int(math.log(count) / math.log(1024)))
    return f"{count / 1024 ** exp:.1f} {'KMGTPE'[exp - 1]}iB"


# -- the processor -----------------------------------------------------------------------------------------------------


class AdminBrokerProcessor:
    """The admin requests of one broker. ``register_broker`` registers it with the NameServers now (a changed topic
    is routed at once); ``broker_active`` says whether it is running (runtime info's brokerActive)."""

    def __init__(self, *, broker_config: BrokerConfig, store_config: MessageStoreConfig, store: MessageStore,
                 stats: BrokerStats, topic_config_manager: TopicConfigManager,
                 subscription_group_manager: SubscriptionGroupManager, consumer_offset_manager: ConsumerOffsetManager,
                 consumer_manager: ConsumerManager, schedule_message_service: ScheduleMessageService,
                 register_broker: Callable[[], Awaitable[None]], broker_active: Callable[[], bool]) -> None:
        self.broker_config = broker_config
        self.store_config = store_config
        self.store = store
        self.stats = stats
        self.topic_config_manager = topic_config_manager
        self.subscription_group_manager = subscription_group_manager
        self.consumer_offset_manager = consumer_offset_manager
        self.consumer_manager = consumer_manager
        self.schedule_message_service = schedule_message_service
        self.register_broker = register_broker
        self.broker_active = broker_active
        self.config_version = DataVersion.new()  # Configuration.dataVersion (rmq never changes its config live)
        self._topic_lock = asyncio.Lock()  # Java's synchronized topic changes: one at a time, in order

    def handlers(self) -> dict[int, Handler]:
        handlers: dict[int, Handler] = {
            RequestCode.GET_MAX_OFFSET: self.get_max_offset,
            RequestCode.GET_MIN_OFFSET: self.get_min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset_by_timestamp,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.get_earliest_msg_storetime,
            RequestCode.QUERY_MESSAGE: self.query_message,
            RequestCode.VIEW_MESSAGE_BY_ID: self.view_message_by_id,
            RequestCode.QUERY_CONSUME_QUEUE: self.query_consume_queue,
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.UPDATE_AND_CREATE_TOPIC_LIST: self.update_and_create_topic_list,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER_LIST: self.delete_topic_list,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.get_all_topic_config,
            RequestCode.GET_TOPIC_CONFIG: self.get_topic_config,
            RequestCode.GET_TOPIC_STATS_INFO: self.get_topic_stats_info,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.get_system_topic_list,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_and_create_subscription_group,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST: self.update_and_create_subscription_group_list,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.get_all_subscription_group,
            RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG: self.get_subscription_group,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_subscription_group,
            RequestCode.DELETE_SUBSCRIPTION_GROUP_LIST: self.delete_subscription_group_list,
            RequestCode.UPDATE_AND_GET_GROUP_FORBIDDEN: self.update_and_get_group_forbidden,
            RequestCode.GET_BROKER_CONFIG: self.get_broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.get_broker_runtime_info,
            RequestCode.VIEW_BROKER_STATS_DATA: self.view_broker_stats_data,
            RequestCode.GET_ALL_DELAY_OFFSET: self.get_all_delay_offset,
            RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: self.clean_expired_consume_queue,
            RequestCode.CLEAN_UNUSED_TOPIC: self.clean_unused_topic,
            RequestCode.DELETE_EXPIRED_COMMITLOG: self.delete_expired_commit_log,
        }
        return {code: guarded(handler) for code, handler in handlers.items()}


    # -- queue offsets and times -----------------------------------------------------------------------------------

    async def _dispatched(self) -> None:
        """Wait (briefly) until what the CommitLog held when the request came is in the ConsumeQueues: a client
        that asks right after SEND_OK then sees its messages, as with Java's dispatch (a thread that wakes every
        millisecond). Java's committed=true max offset counts dispatched messages only; so does this."""
        target = self.store.max_phy_offset
        for _ in range(DISPATCH_WAIT_POLLS):
            if self.store.is_dispatched(target):
                return
            await asyncio.sleep(0.001)

    async def get_max_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = TopicQueueHeader.from_ext(request.ext_fields)
        await self._dispatched()
        offset = queue_value(lambda: self.store.max_offset_in_queue(h.topic, h.queue_id), 0)
        return success(request, ext_fields=OffsetResponseHeader(offset).to_ext())

    async def get_min_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = TopicQueueHeader.from_ext(request.ext_fields)
        offset = queue_value(lambda: self.store.min_offset_in_queue(h.topic, h.queue_id), 0)
        return success(request, ext_fields=OffsetResponseHeader(offset).to_ext())

    async def search_offset_by_timestamp(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """The first offset stored at or after ``timestamp`` (BoundaryType.LOWER; UPPER is answered the same)."""
        h = SearchOffsetRequestHeader.from_ext(request.ext_fields)
        offset = queue_value(lambda: self.store.offset_in_queue_by_time(h.topic, h.queue_id, h.timestamp), 0)
        return success(request, ext_fields=OffsetResponseHeader(offset).to_ext())

    async def get_earliest_msg_storetime(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = TopicQueueHeader.from_ext(request.ext_fields)
        timestamp = queue_value(lambda: self.store.earliest_message_time(h.topic, h.queue_id), -1)
        return success(request, ext_fields=TimestampResponseHeader(timestamp).to_ext())

    # -- messages (QueryMessageProcessor) ----------------------------------------------------------------------

    async def query_message(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = QueryMessageRequestHeader.from_ext(request.ext_fields)
        unique = UniqueKeyQueryHeader.from_ext(request.ext_fields).unique_key_query
        max_num = DEFAULT_QUERY_MAX_NUM if unique else h.max_num
        result = await asyncio.to_thread(self.store.query_message, h.topic, h.key, max_num, h.begin_timestamp,
                                         h.end_timestamp)
        ext = QueryMessageResponseHeader(result.index_last_update_timestamp,
                                         result.index_last_update_phyoffset).to_ext()
        if result.buffers:
            return success(request, result.body(), ext)
        return create_response(request, ResponseCode.QUERY_NOT_FOUND,
                               "can not find message, maybe time range not correct", ext_fields=ext)

    async def view_message_by_id(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """The record at a physical offset (the offsetMsgId's); with ``topic``, only a message of that topic."""
        h = ViewMessageRequestHeader.from_ext(request.ext_fields)
        try:
            record = self.store.lookup_message(h.offset) if h.offset >= 0 else None
        except CorruptRecord:
            record = None
        data = self.store.select_one_message(h.offset, record.store_size) if record is not None else None
        if record is None or data is None:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"can not find message by the offset, {h.offset}")
        if h.topic and h.topic.strip() and not _matches_request_topic(h.topic, record.topic, record.properties):
            return create_response(request, ResponseCode.NO_PERMISSION, "The topic does not match the message")
        return success(request, data)

    async def query_consume_queue(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """mqadmin queryCq: ConsumeQueue units from ``index`` (QueryConsumeQueueResponseBody)."""
        h = QueryConsumeQueueRequestHeader.from_ext(request.ext_fields)
        try:
            cq = self.store.get_consume_queue(h.topic, h.queue_id)
        except IllegalName:
            cq = None
        if cq is None:
            return create_response(request, ResponseCode.SYSTEM_ERROR, f"{h.queue_id}@{h.topic} is not exist!")
        body: dict[str, Any] = {"maxQueueIndex": cq.max_offset, "minQueueIndex": cq.min_offset}
        if h.consumer_group is not None:
            sub = self.consumer_manager.find_subscription_data(h.consumer_group, h.topic)
            body["subscriptionData"] = sub.to_json() if sub else None
            if sub is None:
                body["filterData"] = f"{h.consumer_group}@{h.topic} is not online!"
        if not cq.min_offset <= h.index < cq.max_offset:
            return create_response(request, ResponseCode.SUCCESS,
                                   f"Index {h.index} of {h.queue_id}@{h.topic} is not exist!", body=json_body(body))
        units = cq.iter_units(h.index, max(0, h.count))
        body["queueData"] = [{"eval": False, "physicOffset": u.commit_log_offset, "physicSize": u.size,
                              "tagsCode": u.tags_code} for u in units]
        return success(request, json_body(body))

    # -- topics ------------------------------------------------------------------------------------------------

    def _refuse_topic_name(self, request: RemotingCommand, topic: str) -> RemotingCommand | None:
        result = validation.validate_topic(topic)
        if not result.valid:
            return create_response(request, ResponseCode.INVALID_PARAMETER, result.remark)
        if self.topic_config_manager.is_system_topic(topic):  # validateSystemTopicWhenUpdateTopic
            return create_response(request, ResponseCode.INVALID_PARAMETER,
                                   f"The topic[{topic}] is conflict with system topic.")
        return None

    def _resolved(self, config: TopicConfig) -> TopicConfig:
        """The config with its attribute edits applied to the existing topic's (TopicConfigManager's update)."""
        existing = self.topic_config_manager.select_topic_config(config.topic_name)
        if "+reserve.time" in config.attributes:
            raise ValueError("Update topic reserveTime not supported")
        attributes = alter_attributes(existing is None, TOPIC_ATTRIBUTES,
                                      existing.attributes if existing else {}, config.attributes)
        return dataclasses.replace(config, attributes=attributes)

    async def update_and_create_topic(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = CreateTopicRequestHeader.from_ext(request.ext_fields)
        log.info("update or create topic %s, requested by %s", h.topic, conn.remote_address)
        refusal = self._refuse_topic_name(request, h.topic)
        if refusal is not None:
            return refusal
        try:
            config = TopicConfig(h.topic, h.read_queue_nums, h.write_queue_nums, h.perm,
                                 _filter_type(h.topic_filter_type), h.topic_sys_flag or 0, h.order,
                                 parse_attributes(h.attributes))
        except ValueError as err:
            return create_response(request, ResponseCode.SYSTEM_ERROR, str(err))
        return await self._update_topics(request, [config])

    async def update_and_create_topic_list(self, conn: RemotingConnection,
                                           request: RemotingCommand) -> RemotingCommand:
        """CreateTopicListRequestBody: {"topicConfigList": [TopicConfig...]}."""
        body = decode_body(request)
        try:
            configs = [TopicConfig.from_json(item) for item in body.get("topicConfigList") or ()]
        except (AttributeError, TypeError, ValueError) as err:
            raise RemoteProtocolError(f"malformed CreateTopicListRequestBody: {err!r}") from err
        for config in configs:
            refusal = self._refuse_topic_name(request, config.topic_name)
            if refusal is not None:
                return refusal
        return await self._update_topics(request, configs)

    async def _update_topics(self, request: RemotingCommand, configs: list[TopicConfig]) -> RemotingCommand:
        manager = self.topic_config_manager
        for config in configs:
            if config.attributes.get("+message.type") == "MIXED":  # enableMixedMessageType is off
                return create_response(request, ResponseCode.INVALID_PARAMETER, "MIXED message type is not supported.")
            if config == manager.select_topic_config(config.topic_name):
                return success(request)  # "no changes, so idempotent" (for a list: Java stops at the first such)
        async with self._topic_lock:
            try:
                resolved = [self._resolved(config) for config in configs]
            except ValueError as err:
                return create_response(request, ResponseCode.SYSTEM_ERROR, str(err))
            await asyncio.to_thread(manager.update_topic_config_list, resolved)
        await self.register_broker()  # registerIncrementBrokerData: routes show the topic now
        return success(request)

    async def delete_topic(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        topic = TopicHeader.from_ext(request.ext_fields).topic
        log.info("delete topic %s, requested by %s", topic, conn.remote_address)
        return await self._delete_topics(request, [topic])

    async def delete_topic_list(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        body = decode_body(request)
        topics = body.get("topicList") if isinstance(body, dict) else None
        if not topics:
            return create_response(request, ResponseCode.INVALID_PARAMETER, "The specified topic list is blank.")
        return await self._delete_topics(request, [str(t) for t in topics])

    async def _delete_topics(self, request: RemotingCommand, topics: list[str]) -> RemotingCommand:
        manager = self.topic_config_manager
        for topic in topics:
            if not topic.strip():
                return create_response(request, ResponseCode.INVALID_PARAMETER, "The specified topic is blank.")
            if manager.is_system_topic(topic):
                return create_response(request, ResponseCode.INVALID_PARAMETER,
                                       f"The topic[{topic}] is conflict with system topic.")
        doomed = list(dict.fromkeys(topics))
        for topic in list(doomed):  # clearRetryTopicWhenDeleteTopic: the POP retry topics of its groups
            for group in self.consumer_offset_manager.which_group_by_topic(topic):
                for retry in (f"%RETRY%{group}+{topic}", f"%RETRY%{group}_{topic}"):
                    if manager.contains_topic(retry) and retry not in doomed:
                        doomed.append(retry)
        async with self._topic_lock:
            for topic in doomed:
                await asyncio.to_thread(manager.delete_topic_config, topic)
                self.consumer_offset_manager.clean_offset_by_topic(topic)
            valid = {t for t in doomed if validation.validate_topic(t).valid}
            self.store.delete_topics(valid)  # on the loop: puts assign queue offsets there
        return success(request)

    async def get_all_topic_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """TopicConfigAndMappingSerializeWrapper with every topic (rmq has no static topics, no split metadata)."""
        manager = self.topic_config_manager
        wrapper = manager.build_serialize_wrapper()
        body = {**wrapper, "mappingDataVersion": DataVersion.new().to_json(), "topicQueueMappingDetailMap": {},
                "topicQueueMappingInfoMap": {}}
        header = GetAllTopicConfigResponseHeader(len(wrapper["topicConfigTable"]))
        return success(request, json_body(dict(sorted(body.items()))), header.to_ext())

    async def get_topic_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        topic = TopicHeader.from_ext(request.ext_fields).topic
        config = self.topic_config_manager.select_topic_config(topic)
        if config is None:
            return create_response(request, ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
        return success(request, json_body(config.to_json()))  # TopicConfigAndQueueMapping without a mapping

    async def get_topic_stats_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """TopicStatsTable: MessageQueue -> TopicOffset over max(read, write) queues (topicPutTps: rmq keeps no
        per-topic put statistics)."""
        topic = TopicHeader.from_ext(request.ext_fields).topic
        config = self.topic_config_manager.select_topic_config(topic)
        if config is None:
            return create_response(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        await self._dispatched()
        broker_name = self.broker_config.broker_name
        table = {}
        for queue_id in range(max(config.read_queue_nums, config.write_queue_nums)):
            low = max(0, self.store.min_offset_in_queue(topic, queue_id))
            high = max(0, self.store.max_offset_in_queue(topic, queue_id))
            last = self.store.message_store_timestamp(topic, queue_id, high - 1) if high > 0 else 0
            table[MessageQueue(topic, broker_name, queue_id)] = {"lastUpdateTimestamp": last, "maxOffset": high,
                                                                 "minOffset": low}
        return success(request, json_body({"offsetTable": table, "topicPutTps": JavaDouble(0.0)}))

    async def get_system_topic_list(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        manager = self.topic_config_manager
        topics = set(validation.SYSTEM_TOPICS) | {t for t in manager.topic_config_table if manager.is_system_topic(t)}
        return success(request, json_body({"topicList": sorted(topics)}))

    # -- subscription groups -------------------------------------------------------------------------------------

    def _group_config(self, data: Any) -> SubscriptionGroupConfig:
        try:
            return SubscriptionGroupConfig.from_json(data)
        except (AttributeError, TypeError, ValueError) as err:
            raise RemoteProtocolError(f"malformed SubscriptionGroupConfig: {err!r}") from err

    async def update_and_create_subscription_group(self, conn: RemotingConnection,
                                                   request: RemotingCommand) -> RemotingCommand:
        if not request.body:
            return success(request)  # Java decodes a missing body as null and changes nothing
        return await self._update_groups(request, [self._group_config(decode_body(request))])

    async def update_and_create_subscription_group_list(self, conn: RemotingConnection,
                                                        request: RemotingCommand) -> RemotingCommand:
        body = decode_body(request)
        items = body.get("groupConfigList") if isinstance(body, dict) else None
        return await self._update_groups(request, [self._group_config(item) for item in items or ()])

    async def _update_groups(self, request: RemotingCommand, configs: list[SubscriptionGroupConfig]) -> RemotingCommand:
        manager = self.subscription_group_manager
        for config in configs:
            result = validation.validate_group(config.group_name)
            if not result.valid:
                return create_response(request, ResponseCode.INVALID_PARAMETER, result.remark)
        try:
            resolved = []
            for config in configs:
                existing = manager.select_subscription_group_config(config.group_name)
                attributes = alter_attributes(existing is None, GROUP_ATTRIBUTES,
                                              existing.attributes if existing else {}, config.attributes)
                resolved.append(dataclasses.replace(config, attributes=attributes))
        except ValueError as err:
            return create_response(request, ResponseCode.SYSTEM_ERROR, str(err))
        await asyncio.to_thread(manager.update_subscription_group_config_list, resolved)
        return success(request)

    async def get_all_subscription_group(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """SubscriptionGroupWrapper: subscriptionGroupTable, forbiddenTable, dataVersion."""
        wrapper = self.subscription_group_manager.to_json()
        header = GetAllSubscriptionGroupResponseHeader(len(wrapper["subscriptionGroupTable"]))
        return success(request, json_body(wrapper), header.to_ext())

    async def get_subscription_group(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        group = GroupHeader.from_ext(request.ext_fields).group
        manager = self.subscription_group_manager
        config = manager.select_subscription_group_config(group) or \
            await asyncio.to_thread(manager.find_subscription_group_config, group)
        if config is None:
            return create_response(request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "No group in this broker")
        return success(request, json_body(config.to_json()))

    async def delete_subscription_group(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = DeleteSubscriptionGroupRequestHeader.from_ext(request.ext_fields)
        log.info("delete subscription group %s, requested by %s", h.group_name, conn.remote_address)
        await self._delete_groups([h.group_name], h.clean_offset)
        return success(request)

    async def delete_subscription_group_list(self, conn: RemotingConnection,
                                             request: RemotingCommand) -> RemotingCommand:
        body = decode_body(request)
        names = body.get("groupNameList") if isinstance(body, dict) else None
        if not names:
            return create_response(request, ResponseCode.INVALID_PARAMETER, "The specified group name list is blank.")
        if any(not str(name).strip() for name in names):
            return create_response(request, ResponseCode.INVALID_PARAMETER, "The specified group name is blank.")
        await self._delete_groups(list(dict.fromkeys(str(n) for n in names)), bool(body.get("cleanOffset")))
        return success(request)

    async def _delete_groups(self, groups: list[str], clean_offset: bool) -> None:
        for group in groups:
            await asyncio.to_thread(self.subscription_group_manager.delete_subscription_group_config, group)
            if clean_offset:
                self.consumer_offset_manager.remove_offset(group)

    async def update_and_get_group_forbidden(self, conn: RemotingConnection,
                                             request: RemotingCommand) -> RemotingCommand:
        h = UpdateGroupForbiddenRequestHeader.from_ext(request.ext_fields)
        manager = self.subscription_group_manager
        if h.readable is not None:
            change = manager.clear_forbidden if h.readable else manager.set_forbidden
            await asyncio.to_thread(change, h.group, h.topic, INDEX_PERM_READ)
        readable = not manager.is_forbidden(h.group, h.topic, INDEX_PERM_READ)
        body = json_body({"group": h.group, "readable": readable, "topic": h.topic})
        return create_response(request, ResponseCode.SUCCESS, "", body=body)

    # -- the broker itself -----------------------------------------------------------------------------------------

    async def get_broker_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Every setting as "key=value" lines (Configuration.getAllConfigsFormatString)."""
        text = format_config(self.broker_config, self.store_config)
        header = GetBrokerConfigResponseHeader(encode_json(self.config_version.to_json()))
        return success(request, text.encode(), header.to_ext())

    async def update_broker_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """rmq's configuration is fixed for the process's life: refused, naming the keys (black-listed ones as Java
        refuses them)."""
        if not request.body:
            return success(request)
        try:
            keys = sorted(parse_properties(request.body.decode("utf-8", errors="replace")))
        except ConfigError:
            return create_response(request, ResponseCode.SYSTEM_ERROR, "string2Properties error")
        if CONFIG_BLACK_LIST.intersection(keys):
            return create_response(request, ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        log.warning("refused to change broker config %s at runtime, requested by %s", keys, conn.remote_address)
        return create_response(request, ResponseCode.NO_PERMISSION,
                               f"rmq does not change broker config at runtime: {', '.join(keys)}; "
                               "edit the broker's config file and restart it")

    async def get_broker_runtime_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        table = await asyncio.to_thread(self._runtime_info)
        return success(request, json_body({"table": table}))

    def _runtime_info(self) -> dict[str, str]:
        stats, store = self.stats, self.store
        puts = stats.put_total
        info = {
            "bootTimestamp": str(stats.boot_timestamp),
            "runtime": stats.runtime(),
            "brokerVersionDesc": BROKER_VERSION_DESC,
            "brokerActive": str(self.broker_active()).lower(),
            "putMessageTimesTotal": str(puts),
            "putMessageSizeTotal": str(stats.put_size_total()),
            "putMessageAverageSize": repr(stats.put_size_total() / max(1, puts)),
            "putTps": stats.tps(1),
            "getTransferredTps": stats.tps(2),
            "msgPutTotalTodayNow": str(puts),
            "msgPutTotalTodayMorning": str(stats.morning[0]),
            "msgPutTotalYesterdayMorning": str(stats.yesterday_morning[0]),
            "msgGetTotalTodayNow": str(stats.get_total),
            "msgGetTotalTodayMorning": str(stats.morning[1]),
            "msgGetTotalYesterdayMorning": str(stats.yesterday_morning[1]),
            "commitLogMinOffset": str(store.min_phy_offset),
            "commitLogMaxOffset": str(store.max_phy_offset),
            "dispatchBehindBytes": str(store.dispatch_behind_bytes),
            "earliestMessageTimeStamp": str(store.earliest_commit_log_time()),
            "startAcceptSendRequestTimeStamp": "0",
            "remainHowManyDataToFlush": human_bytes(store.flush_behind_bytes),
            "remainTransientStoreBufferNumbs": str(2**31 - 1),  # no transient store pool (Integer.MAX_VALUE)
            "pageCacheLockTimeMills": "0",  # appends hold the put lock only for a memory copy
            # the timer wheel is not enabled: Java's constants for that case
            "timerReadBehind": "0", "timerOffsetBehind": "0", "timerCongestNum": "0",
            "timerEnqueueTps": "0.0", "timerDequeueTps": "0.0",
            "dispatchMaxBuffer": "0",  # StoreStatsService never sets it: always 0 in Java too
            "EndTransactionQueueSize": "0",
            "EndTransactionThreadPoolQueueCapacity": str(END_TRANSACTION_QUEUE_CAPACITY),
        }
        for pool, capacity in REQUEST_QUEUE_CAPACITIES.items():
            info[f"{pool}ThreadPoolQueueSize"] = "0"
            info[f"{pool}ThreadPoolQueueCapacity"] = str(capacity)
            info[f"{pool}ThreadPoolQueueHeadWaitTimeMills"] = "0"
        info.update(self._disk_info())
        info.update(self.schedule_message_service.running_stats())
        return info

    def _disk_info(self) -> dict[str, str]:
        """Used fractions of the CommitLog's and ConsumeQueues' partitions (-1.0 while a directory does not exist
        yet, as in Java) and the store root's capacity."""
        config = self.store_config
        ratios = {key: _used_ratio(path) for key, path in (("commitLogDiskRatio", config.commit_log_dir),
                                                           ("consumeQueueDiskRatio", config.consume_queue_dir))}
        info = {key: repr(ratio) for key, ratio in ratios.items()}
        info[f"commitLogDiskRatio_{config.commit_log_dir}"] = info["commitLogDiskRatio"]
        try:
            usage = shutil.disk_usage(config.store_path_root_dir)
            info["commitLogDirCapacity"] = f"Total : {human_bytes(usage.total)}, Free : {human_bytes(usage.free)}."
        except OSError:
            pass
        return info

    async def get_all_delay_offset(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """The schedule service's delivery progress per delay level, as delayOffset.json holds it."""
        return create_response(request, ResponseCode.SUCCESS,
                               body=json_body(self.schedule_message_service.to_json()))

    async def view_broker_stats_data(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """rmq keeps no BrokerStatsManager items: every stats name is unknown."""
        h = ViewBrokerStatsDataRequestHeader.from_ext(request.ext_fields)
        return create_response(request, ResponseCode.SYSTEM_ERROR,
                               f"The stats <{h.stats_name}> <{h.stats_key}> not exist")

    async def clean_expired_consume_queue(self, conn: RemotingConnection,
                                          request: RemotingCommand) -> RemotingCommand:
        """Drop the ConsumeQueues of non-system topics whose every unit points below the CommitLog's start
        (whole topics only: Java may also drop single queues of a topic)."""
        min_offset = self.store.min_phy_offset
        manager = self.topic_config_manager
        expired = {topic for topic in self.store.consume_queue_topics_below(min_offset)
                   if not manager.is_system_topic(topic)}
        if expired:
            log.info("cleanExpiredConsumerQueue: %s destroyed, minCommitLogOffset %d", sorted(expired), min_offset)
            self.store.delete_topics(expired)
        return success(request)

    async def clean_unused_topic(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Drop the ConsumeQueues of topics no longer configured (system and LMQ topics stay)."""
        manager = self.topic_config_manager
        unused = {t for t in self.store.consume_queue_topics() if not manager.contains_topic(t)
                  and not manager.is_system_topic(t) and not t.startswith(validation.LMQ_PREFIX)}
        if unused:
            log.warning("cleanUnusedTopic: %s", sorted(unused))
            self.store.delete_topics(unused)
        return success(request)

    async def delete_expired_commit_log(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Ask retention to delete expired CommitLog files on its next rounds even outside the deleteWhen hours; the
        answer comes at once, before anything is deleted (as Java's)."""
        log.warning("invoke deleteExpiredCommitLog from %s", conn.remote_address)
        self.store.execute_delete_files_manually()
        return success(request)


def _used_ratio(path: str) -> float:
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return -1.0
    return usage.used / usage.total if usage.total else 0.0


def _filter_type(name: str) -> TopicFilterType:
    try:
        return TopicFilterType(name)
    except ValueError:
        raise ValueError(f"No enum constant org.apache.rocketmq.common.TopicFilterType.{name}") from None


def _matches_request_topic(requested: str, topic: str, properties: Mapping[str, str]) -> bool:
    """QueryMessageProcessor.matchesRequestTopic: the message's logical topic, or an LMQ it was dispatched to."""
    logical = properties.get(PROPERTY_REAL_TOPIC) if topic in REAL_TOPIC_STORAGE_TOPICS else topic
    if logical == requested:
        return True
    allows_lmq = bool(logical) and not (validation.is_retry_topic(logical) or validation.is_dlq_topic(logical)
                                         or logical.startswith(validation.SYSTEM_TOPIC_PREFIX)
                                         or logical == validation.RMQ_SYS_SCHEDULE_TOPIC)
    if requested.startswith(validation.LMQ_PREFIX) and allows_lmq:
        return requested in properties.get(INNER_MULTI_DISPATCH, "").split(",")
    return False
