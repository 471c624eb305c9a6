"""CONSUMER_SEND_MSG_BACK: a consumer hands back a message it failed to consume (Java's
AbstractSendMessageProcessor.consumerSendMsgBack, as a 5.x master runs it).

The original is looked up by its commit log offset. While its reconsume times are below the group's limit (the
request's maxReconsumeTimes, else the subscription group's retryMaxTimes, 16 by default) a copy goes to the group's
retry topic %RETRY%{group} (created here with the group's retryQueueNums) with delay level 3 + reconsumeTimes, unless
the consumer asked for a level: the schedule service's put hook parks it in SCHEDULE_TOPIC_XXXX until then. Past the
limit, or when the consumer asked for a negative level, the copy goes to %DLQ%{group} (one queue, read-write, as 5.x
creates it) with DELAY=0. Either way the copy keeps the original's properties and adds RETRY_TOPIC (the original
topic, if not already set), ORIGIN_MESSAGE_ID (the original's offsetMsgId, if not already set) and WAIT=false, and its
reconsume times is the original's + 1. Only PUT_OK is success: any other put status is SYSTEM_ERROR with the status
name, as in Java (the client then sends the message to the retry topic itself).

Examples:
    >>> processor = SendMessageBackProcessor(broker_config=bc, store=store, ...)  # doctest: +SKIP
    >>> server.register_processor(RequestCode.CONSUMER_SEND_MSG_BACK, processor.process)  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import logging
import random
from typing import TYPE_CHECKING

from broker.common import validation as v
from broker.common.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
)
from broker.common.record import MessageRecord
from broker.common.topic import PERM_READ, PERM_WRITE, TopicConfig, is_writeable
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_response
from broker.remoting.connection import RemotingConnection
from broker.remoting.headers import ConsumerSendMsgBackRequestHeader, HeaderError
from broker.server.message_properties import java_ordered
from broker.server.metadata.groups import SubscriptionGroupConfig
from broker.server.processors.common import (
    TOPIC_SYS_FLAG_UNIT_SUB,
    V3_4_9,
    Handler,
    bad_header_response,
    sends_rejected,
    suggest_todo,
)
from broker.server.processors.request_headers import request_header
from broker.store.commit_log import StoreMessage
from broker.store.results import PutMessageStatus

if TYPE_CHECKING:
    from broker.server.broker_metrics import BrokerMetricsManager
    from broker.server.config import BrokerConfig
    from broker.server.metadata.groups import SubscriptionGroupManager
    from broker.server.metadata.topics import TopicConfigManager
    from broker.server.schedule import PutMessages, ScheduleMessageService
    from broker.store.message_store import MessageStore

log = logging.getLogger(__name__)

RETRY_DELAY_LEVEL_BASE = 3  # delay level 3 + reconsumeTimes when the consumer leaves the level to the broker
DLQ_NUMS_PER_GROUP = 1


class SendMessageBackProcessor:
    """The CONSUMER_SEND_MSG_BACK handler of one broker (``process``). ``put_messages`` stores
    (BrokerController.put_messages), after the schedule service's put hook."""

    def __init__(self, *, broker_config: BrokerConfig, store: MessageStore, topic_config_manager: TopicConfigManager,
                 subscription_group_manager: SubscriptionGroupManager,
                 schedule_message_service: ScheduleMessageService, put_messages: PutMessages,
                 metrics: BrokerMetricsManager | None = None) -> None:
        self.broker_config = broker_config
        self.store = store
        self.topic_config_manager = topic_config_manager
        self.subscription_group_manager = subscription_group_manager
        self.schedule_message_service = schedule_message_service
        self.put_messages = put_messages
        self.metrics = metrics  # rocketmq_send_to_dlq_messages_total, when metricsExporterType=PROM

    def handlers(self) -> dict[int, Handler]:
        return {RequestCode.CONSUMER_SEND_MSG_BACK: self.process}

    def reject_request(self) -> bool:
        """Java registers CONSUMER_SEND_MSG_BACK with the SendMessageProcessor: a slave rejects it as it rejects
        sends."""
        return sends_rejected(self.broker_config)

    async def process(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        try:
            header = request_header(request, ConsumerSendMsgBackRequestHeader)
        except HeaderError as err:
            return bad_header_response(request, err)
        bc = self.broker_config
        group_config = await asyncio.to_thread(
            self.subscription_group_manager.find_subscription_group_config, header.group)
        if group_config is None:
            return create_response(request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                   f"subscription group not exist, {header.group} {suggest_todo()}")
        if not is_writeable(bc.broker_permission):
            return create_response(request, ResponseCode.NO_PERMISSION,
                                   f"the broker[{bc.broker_ip1}] sending message is forbidden")
        if group_config.retry_queue_nums <= 0:
            return create_response(request, ResponseCode.SUCCESS)
        sys_flag = TOPIC_SYS_FLAG_UNIT_SUB if header.unit_mode else 0
        retry = await self._send_back_topic(v.retry_topic(header.group), group_config.retry_queue_nums, sys_flag)
        if not is_writeable(retry.perm):
            return create_response(request, ResponseCode.NO_PERMISSION,
                                   f"the topic[{retry.topic_name}] sending message is forbidden")
        record = self.store.lookup_message(header.offset)
        if record is None:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"look message by offset failed, {header.offset}")
        msg = await self._copy(request, header, group_config, record, retry)
        return await self._put(request, header, msg)

    async def _send_back_topic(self, topic: str, queue_nums: int, sys_flag: int) -> TopicConfig:
        """createTopicInSendMessageBackMethod: the existing (non-orderly) topic without a thread hop."""
        existing = self.topic_config_manager.select_topic_config(topic)
        if existing is not None and not existing.order:
            return existing
        return await asyncio.to_thread(self.topic_config_manager.create_topic_in_send_message_back_method,
                                       topic, queue_nums, PERM_WRITE | PERM_READ, sys_flag)

    async def _copy(self, request: RemotingCommand, header: ConsumerSendMsgBackRequestHeader,
                    group_config: SubscriptionGroupConfig, record: MessageRecord, retry: TopicConfig) -> StoreMessage:
        """The message to store: a retry copy, or a DLQ copy once the reconsume times are used up."""
        max_reconsume_times = group_config.retry_max_times
        if request.version >= V3_4_9 and header.max_reconsume_times is not None:
            max_reconsume_times = header.max_reconsume_times
        props = dict(record.properties)  # the stored (Java HashMap) order; new keys are appended, as Java inserts
        props.setdefault(PROPERTY_RETRY_TOPIC, record.topic)
        props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
        delay_level = header.delay_level
        if record.reconsume_times >= max_reconsume_times or delay_level < 0:
            dlq = await self._send_back_topic(v.dlq_topic(header.group), DLQ_NUMS_PER_GROUP, 0)
            topic, queue_id = dlq.topic_name, random.randrange(DLQ_NUMS_PER_GROUP)
            props[PROPERTY_DELAY_TIME_LEVEL] = "0"
            if self.metrics is not None:
                self.metrics.record_dlq(header.group, header.origin_topic or record.topic)
            log.info("send message %s of group %s to the DLQ %s: reconsumeTimes %d, maxReconsumeTimes %d",
                     props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), header.group, topic, record.reconsume_times,
                     max_reconsume_times)
        else:
            topic, queue_id = retry.topic_name, random.randrange(group_config.retry_queue_nums)
            if delay_level == 0:
                delay_level = RETRY_DELAY_LEVEL_BASE + record.reconsume_times
            props[PROPERTY_DELAY_TIME_LEVEL] = str(delay_level)
        if not props.get(PROPERTY_ORIGIN_MESSAGE_ID, "").strip():
            props[PROPERTY_ORIGIN_MESSAGE_ID] = record.msg_id
        return StoreMessage(topic, queue_id, record.body or b"", java_ordered(props), record.flag, record.sys_flag,
                            record.born_timestamp, record.born_host, record.reconsume_times + 1)

    async def _put(self, request: RemotingCommand, header: ConsumerSendMsgBackRequestHeader,
                   msg: StoreMessage) -> RemotingCommand:
        msg = self.schedule_message_service.handle_schedule_message(msg)
        result = await self.put_messages([msg])
        if result.status is PutMessageStatus.PUT_OK:
            return create_response(request, ResponseCode.SUCCESS)
        log.warning("send back of offset %d for group %s failed: %s %s", header.offset, header.group,
                    result.status.value, result.reason)
        return create_response(request, ResponseCode.SYSTEM_ERROR, result.status.value)
