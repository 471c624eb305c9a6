"""The topic requests of Java's AdminBrokerProcessor: create, update and delete topics (one or a list), read their
configs and queue offsets, list the system topics. What ``mqadmin updateTopic``, ``deleteTopic``, ``topicList`` and
``topicStatus`` ask.

Topic names are checked with TopicValidator's rules and refused with Java's INVALID_PARAMETER remarks; attribute
edits ("+key"/"-key") apply as ``broker.server.metadata.attributes`` says. Changes persist (off the event loop)
before the answer, and a changed topic is registered with the NameServers at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from broker.common import validation
from broker.common.attributes import parse_attributes
from broker.common.errors import RemoteProtocolError
from broker.common.fastjson import DataVersion
from broker.common.message import MessageQueue
from broker.common.topic import TopicConfig, TopicFilterType
from broker.remoting.admin_bodies import TopicOffset, TopicStatsTable
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_response
from broker.remoting.connection import RemotingConnection
from broker.remoting.headers import CreateTopicRequestHeader, GetAllTopicConfigResponseHeader, TopicHeader
from broker.server.metadata.attributes import TOPIC_ATTRIBUTES, alter_attributes
from broker.server.processors.common import Handler, decode_body, guarded, json_body, success, wait_dispatched
from broker.server.processors.request_headers import request_header

if TYPE_CHECKING:
    from broker.server.config import BrokerConfig
    from broker.server.metadata.offsets import ConsumerOffsetManager
    from broker.server.metadata.topics import TopicConfigManager
    from broker.store.message_store import MessageStore

log = logging.getLogger(__name__)


class TopicAdminProcessor:
    """The topics of one broker. ``register_broker`` registers it with the NameServers now (a changed topic is routed
    at once); a deleted topic loses its ConsumeQueues in ``store`` and its consumer offsets."""

    def __init__(self, *, broker_config: BrokerConfig, store: MessageStore, topic_config_manager: TopicConfigManager,
                 consumer_offset_manager: ConsumerOffsetManager,
                 register_broker: Callable[[], Awaitable[None]]) -> None:
        self.broker_config = broker_config
        self.store = store
        self.topic_config_manager = topic_config_manager
        self.consumer_offset_manager = consumer_offset_manager
        self.register_broker = register_broker
        self._topic_lock = asyncio.Lock()  # Java's synchronized topic changes: one at a time, in order

    def handlers(self) -> dict[int, Handler]:
        handlers: dict[int, Handler] = {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.update_and_create_topic,
            RequestCode.UPDATE_AND_CREATE_TOPIC_LIST: self.update_and_create_topic_list,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER_LIST: self.delete_topic_list,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.get_all_topic_config,
            RequestCode.GET_TOPIC_CONFIG: self.get_topic_config,
            RequestCode.GET_TOPIC_STATS_INFO: self.get_topic_stats_info,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self.get_system_topic_list,
        }
        return {code: guarded(handler) for code, handler in handlers.items()}

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
        h = request_header(request, CreateTopicRequestHeader)
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
        topic = request_header(request, TopicHeader).topic
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
        topic = request_header(request, TopicHeader).topic
        config = self.topic_config_manager.select_topic_config(topic)
        if config is None:
            return create_response(request, ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
        return success(request, json_body(config.to_json()))  # TopicConfigAndQueueMapping without a mapping

    async def get_topic_stats_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """TopicStatsTable: MessageQueue -> TopicOffset over max(read, write) queues (topicPutTps: rmq keeps no
        per-topic put statistics)."""
        topic = request_header(request, TopicHeader).topic
        config = self.topic_config_manager.select_topic_config(topic)
        if config is None:
            return create_response(request, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        await wait_dispatched(self.store)
        broker_name = self.broker_config.broker_name
        stats = TopicStatsTable()
        for queue_id in range(max(config.read_queue_nums, config.write_queue_nums)):
            low = max(0, self.store.min_offset_in_queue(topic, queue_id))
            high = max(0, self.store.max_offset_in_queue(topic, queue_id))
            last = self.store.message_store_timestamp(topic, queue_id, high - 1) if high > 0 else 0
            stats.offset_table[MessageQueue(topic, broker_name, queue_id)] = TopicOffset(low, high, last)
        return success(request, json_body(stats.to_json()))

    async def get_system_topic_list(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        manager = self.topic_config_manager
        topics = set(validation.SYSTEM_TOPICS) | {t for t in manager.topic_config_table if manager.is_system_topic(t)}
        return success(request, json_body({"topicList": sorted(topics)}))


def _filter_type(name: str) -> TopicFilterType:
    try:
        return TopicFilterType(name)
    except ValueError:
        raise ValueError(f"No enum constant org.apache.rocketmq.common.TopicFilterType.{name}") from None
