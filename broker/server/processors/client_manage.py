"""Clients coming and going: HEART_BEAT, UNREGISTER_CLIENT and CHECK_CLIENT_CONFIG (Java's ClientManageProcessor),
the notice to consumers that their group changed (DefaultConsumerIdsChangeListener with realTimeNotifyConsumerChange,
Broker2Client.notifyConsumerIdsChanged), the connection lists the admin tools read (GET_CONSUMER_CONNECTION_LIST,
GET_PRODUCER_CONNECTION_LIST, GET_ALL_PRODUCER_INFO), and the admin requests the broker passes on to one client
(GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY, INVOKE_BROKER_TO_GET_CONSUMER_STATUS).

A heartbeat registers each consumer group it names (after finding or auto-creating the group's subscription config,
and creating its retry topic ``%RETRY%group``) and each producer group. Heartbeat V2 (useHeartbeatV2 clients) sends
the subscriptions only when their fingerprint changed; ``IS_SUB_CHANGE`` tells the client when the broker saw a
different fingerprint, so that it sends them again.

When a connection closes, its clients leave their groups at once (the server's connection-closed listener), and the
remaining consumers of each clustering group get NOTIFY_CONSUMER_IDS_CHANGED (oneway) so that they rebalance.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from broker.common import validation
from broker.common.errors import ConnectionClosed, FilterExpressionError, RemoteProtocolError, RequestTimeout
from broker.common.message import MessageQueue, decode_offset_msg_id
from broker.common.topic import PERM_READ, PERM_WRITE
from broker.remoting.admin_bodies import Connection, ConsumerConnection, mq_key
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_request, create_response
from broker.remoting.connection import RemotingConnection, exception_simple_desc
from broker.remoting.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    ConsumerGroupHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    GetProducerConnectionListRequestHeader,
    HeartbeatResponseHeader,
    UnregisterClientRequestHeader,
)
from broker.remoting.heartbeat import ConsumerData, HeartbeatData, is_tag_type
from broker.server.consumer_manager import ClientChannelInfo
from broker.server.filter.message_filter import compile_expression
from broker.server.processors.common import (
    TOPIC_SYS_FLAG_UNIT_SUB,
    V3_0_7_SNAPSHOT,
    V3_1_8_SNAPSHOT,
    Handler,
    decode_body,
    guarded,
    json_body,
    success,
)
from broker.server.processors.request_headers import request_header

if TYPE_CHECKING:
    from broker.remoting.server import RemotingServer
    from broker.server.config import BrokerConfig
    from broker.server.consumer_manager import ConsumerManager
    from broker.server.filter.message_filter import ConsumerFilterManager
    from broker.server.metadata.groups import SubscriptionGroupManager
    from broker.server.metadata.topics import TopicConfigManager
    from broker.server.producer_manager import ProducerManager
    from broker.store.message_store import MessageStore

log = logging.getLogger(__name__)

CALL_CLIENT_TIMEOUT_MS = 10_000  # Broker2Client.callClient
CONSUMER_STATUS_TIMEOUT_MS = 5000


def connection_of(channel: ClientChannelInfo) -> Connection:
    """remoting.protocol.body.Connection of one client."""
    return Connection(channel.client_id, channel.address, channel.language.name, channel.version)


# -- telling consumers that their group changed -----------------------------------------------------------------------


class ConsumerIdsChangeNotifier:
    """Sends NOTIFY_CONSUMER_IDS_CHANGED to every remaining client of a group whose clients changed. A newer change
    of the same group replaces a notice still being sent (Java's NotifyTaskControl interrupt)."""

    def __init__(self, broker_config: BrokerConfig) -> None:
        self.broker_config = broker_config
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def __call__(self, group: str, connections: list[RemotingConnection]) -> None:
        if not self.broker_config.notify_consumer_ids_changed_enable or not connections:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a change outside the broker's loop (a synchronous test): nobody to tell
            return
        previous = self._tasks.pop(group, None)
        if previous is not None:
            previous.cancel()
        task = loop.create_task(self._notify(group, connections), name=f"notify-consumer-ids-{group}")
        self._tasks[group] = task
        task.add_done_callback(functools.partial(self._done, group))

    def _done(self, group: str, task: asyncio.Task[None]) -> None:
        if self._tasks.get(group) is task:
            del self._tasks[group]

    async def _notify(self, group: str, connections: list[RemotingConnection]) -> None:
        header = ConsumerGroupHeader(group).to_ext()
        for conn in connections:
            if conn.closed:
                continue
            try:
                await conn.invoke_oneway(create_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, header))
            except ConnectionClosed as err:
                log.info("notifyConsumerIdsChanged to %s failed: %s", conn.remote_address, err)

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


# -- the processor -----------------------------------------------------------------------------------------------------


class ClientManageProcessor:
    """Heartbeats and the client lists of one broker. ``attach`` makes it the consumer manager's change listener and
    the server's connection-closed listener, and gives both managers the broker's channel expiry."""

    def __init__(self, *, broker_config: BrokerConfig, store: MessageStore, topic_config_manager: TopicConfigManager,
                 subscription_group_manager: SubscriptionGroupManager, consumer_manager: ConsumerManager,
                 producer_manager: ProducerManager, consumer_filter_manager: ConsumerFilterManager) -> None:
        self.broker_config = broker_config
        self.store = store
        self.topic_config_manager = topic_config_manager
        self.subscription_group_manager = subscription_group_manager
        self.consumer_manager = consumer_manager
        self.producer_manager = producer_manager
        self.consumer_filter_manager = consumer_filter_manager
        self.notifier = ConsumerIdsChangeNotifier(broker_config)
        self._fingerprints: dict[str, int] = {}  # consumer group -> fingerprint of its last heartbeat V2

    def handlers(self) -> dict[int, Handler]:
        handlers: dict[int, Handler] = {
            RequestCode.HEART_BEAT: self.heart_beat,
            RequestCode.UNREGISTER_CLIENT: self.unregister_client,
            RequestCode.CHECK_CLIENT_CONFIG: self.check_client_config,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.get_consumer_connection_list,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.get_producer_connection_list,
            RequestCode.GET_ALL_PRODUCER_INFO: self.get_all_producer_info,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self.get_consumer_running_info,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self.consume_message_directly,
            RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: self.get_consumer_status,
        }
        return {code: guarded(handler) for code, handler in handlers.items()}

    def attach(self, server: RemotingServer) -> None:
        """Hear of group changes (to notify consumers) and of closed connections (ClientHousekeepingService)."""
        self.consumer_manager.on_change = self.notifier
        self.consumer_manager.channel_expired_timeout_ms = self.broker_config.channel_expired_timeout
        self.producer_manager.channel_expired_timeout_ms = self.broker_config.channel_expired_timeout
        server.set_connection_closed_listener(self.connection_closed)

    def connection_closed(self, conn: RemotingConnection) -> None:
        """ClientHousekeepingService.onChannelClose: the connection's clients leave every group now."""
        self.producer_manager.connection_closed(conn)
        self.consumer_manager.connection_closed(conn)

    # -- HEART_BEAT --------------------------------------------------------------------------------------------

    async def heart_beat(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        data = HeartbeatData.from_json(decode_body(request))
        sub_change = data.heartbeat_fingerprint == 0  # a V1 heartbeat always carries the subscriptions
        for consumer in data.consumers:
            if data.heartbeat_fingerprint != 0:
                known = self._fingerprints.get(consumer.group_name)
                sub_change |= known is not None and known != data.heartbeat_fingerprint
            self._fingerprints[consumer.group_name] = data.heartbeat_fingerprint
            await self._register_consumer(conn, request, data, consumer)
        for group in data.producer_groups:
            self.producer_manager.register_producer(group, self._channel(conn, request, data))
        header = HeartbeatResponseHeader(is_support_heart_beat_v2=True, is_sub_change=sub_change)
        return success(request, ext_fields=header.to_ext())

    def _channel(self, conn: RemotingConnection, request: RemotingCommand, data: HeartbeatData) -> ClientChannelInfo:
        return ClientChannelInfo(conn, data.client_id, request.language, request.version)

    async def _register_consumer(self, conn: RemotingConnection, request: RemotingCommand, data: HeartbeatData,
                                 consumer: ConsumerData) -> None:
        """One ConsumerData of a heartbeat (rejectPullConsumerEnable is off in rmq: pull consumers register too)."""
        group = consumer.group_name
        groups = self.subscription_group_manager
        config = groups.select_subscription_group_config(group)
        if config is None:  # creating it persists subscriptionGroup.json: off the event loop
            config = await asyncio.to_thread(groups.find_subscription_group_config, group)
        if config is None:
            log.warning("heartbeat of %s names consumer group %s, which does not exist and is not auto-created",
                        conn.remote_address, group)
            return
        await self._create_retry_topic(consumer, config.retry_queue_nums)
        channel = self._channel(conn, request, data)
        manager = self.consumer_manager
        notify = config.notify_consumer_ids_changed_enable
        if data.without_sub:
            changed = manager.register_consumer_without_sub(group, channel, consumer.consume_type,
                                                            consumer.message_model, consumer.consume_from_where,
                                                            notify=notify)
        else:
            changed = manager.register_consumer(group, channel, consumer.consume_type, consumer.message_model,
                                                consumer.consume_from_where, list(consumer.subscriptions),
                                                notify=notify)
            self._register_filters(group, consumer)
        if changed:
            log.info("registerConsumer info changed, SDK address=%s, group=%s, type=%s", conn.remote_address, group,
                     consumer.consume_type)

    def _register_filters(self, group: str, consumer: ConsumerData) -> None:
        """ConsumerGroupEvent.REGISTER: every full heartbeat (re)registers the group's SQL92 filter data, which its
        pulls then evaluate (issue 4; ConsumerFilterManager.register)."""
        self.consumer_filter_manager.register(group, consumer.subscriptions)

    async def _create_retry_topic(self, consumer: ConsumerData, retry_queue_nums: int) -> None:
        """%RETRY%group, orderly when the group subscribes an orderly topic (createTopicInSendMessageBackMethod)."""
        topics = self.topic_config_manager
        order = any(topics.is_order_topic(sub.topic) for sub in consumer.subscriptions)
        retry = validation.retry_topic(consumer.group_name)
        existing = topics.select_topic_config(retry)
        if existing is not None and existing.order == order:
            return
        sys_flag = TOPIC_SYS_FLAG_UNIT_SUB if consumer.unit_mode else 0
        await asyncio.to_thread(topics.create_topic_in_send_message_back_method, retry, retry_queue_nums,
                                PERM_READ | PERM_WRITE, sys_flag, order=order)
        # The controller registers the created topic with the NameServers (TopicConfigManager.on_topic_created).

    # -- UNREGISTER_CLIENT and CHECK_CLIENT_CONFIG --------------------------------------------------------------

    async def unregister_client(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = request_header(request, UnregisterClientRequestHeader)
        if header.producer_group is not None:
            self.producer_manager.unregister_producer(header.producer_group, conn)
        if header.consumer_group is not None:
            config = self.subscription_group_manager.select_subscription_group_config(header.consumer_group)
            notify = config.notify_consumer_ids_changed_enable if config is not None else True
            self.consumer_manager.unregister_consumer(header.consumer_group, conn, notify=notify)
        return success(request)

    async def check_client_config(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """CheckClientRequestBody: a TAG subscription is always fine; another needs enablePropertyFilter and an
        expression that compiles, else SUBSCRIPTION_PARSE_FAILED with the compiler's reason (a Java push consumer
        with a bad MessageSelector.bySql fails to start with it)."""
        body = decode_body(request) if request.body else {}
        sub = body.get("subscriptionData") if isinstance(body, dict) else None
        if not isinstance(sub, dict):
            return success(request)
        expression_type = sub.get("expressionType")
        if is_tag_type(expression_type):
            return success(request)
        if not self.broker_config.enable_property_filter:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"The broker does not support consumer to filter message by {expression_type}")
        try:
            compile_expression(str(expression_type), str(sub.get("subString") or ""))
        except FilterExpressionError as err:
            log.warning("client %s@%s filter message, but failed to compile expression! sub=%s, error=%s",
                        body.get("clientId"), body.get("group"), sub, err)
            return create_response(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(err))
        return success(request)

    # -- connection lists ---------------------------------------------------------------------------------------

    async def get_consumer_connection_list(self, conn: RemotingConnection,
                                           request: RemotingCommand) -> RemotingCommand:
        group = request_header(request, ConsumerGroupHeader).consumer_group
        info = self.consumer_manager.get(group)
        if info is None:
            return create_response(request, ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
        body = ConsumerConnection([connection_of(c) for c in info.channels.values()], info.subscriptions,
                                  info.consume_type, info.message_model, info.consume_from_where)
        return success(request, json_body(body.to_json()))

    async def get_producer_connection_list(self, conn: RemotingConnection,
                                           request: RemotingCommand) -> RemotingCommand:
        group = request_header(request, GetProducerConnectionListRequestHeader).producer_group
        channels = self.producer_manager.groups.get(group)
        if channels is None:
            return create_response(request, ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        return success(request, json_body({"connectionSet": [connection_of(c).to_json() for c in channels.values()]}))

    async def get_all_producer_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """ProducerTableInfo: group -> ProducerInfo list."""
        table = {
            group: [{"clientId": c.client_id, "language": c.language.name, "lastUpdateTimestamp":
                     c.last_update_timestamp, "remoteIP": c.address, "version": c.version} for c in channels]
            for group, channels in self.producer_manager.producer_table().items()
        }
        return success(request, json_body({"data": table}))

    # -- requests passed on to a client --------------------------------------------------------------------------

    async def get_consumer_running_info(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        header = request_header(request, GetConsumerRunningInfoRequestHeader)
        return await self._call_consumer(request, header.consumer_group, header.client_id, request.ext_fields,
                                         request.body)

    async def consume_message_directly(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """The message (by its offsetMsgId) goes to the client with the request, as Java sends it."""
        header = request_header(request, ConsumeMessageDirectlyResultRequestHeader)
        header.broker_name = self.broker_config.broker_name
        topic_config = self.topic_config_manager.select_topic_config(header.topic or "")
        if topic_config is not None:
            header.topic_sys_flag = topic_config.topic_sys_flag
        group_config = self.subscription_group_manager.select_subscription_group_config(
            header.consumer_group)
        if group_config is not None:
            header.group_sys_flag = group_config.group_sys_flag
        ext = dict(request.ext_fields) | header.to_ext()
        body = self._message_by_id(header.msg_id) or b""
        return await self._call_consumer(request, header.consumer_group, header.client_id or "", ext, body)

    def _message_by_id(self, msg_id: str | None) -> bytes | None:
        try:
            _, offset = decode_offset_msg_id(msg_id or "")
        except ValueError:
            return None
        return self.store.select_one_message(offset)

    async def _call_consumer(self, original: RemotingCommand, group: str, client_id: str,
                             ext_fields: Mapping[str, str], body: bytes) -> RemotingCommand:
        """AdminBrokerProcessor.callConsumer: the same request goes to the client, whose own response goes back
        to the caller."""
        channel = self.consumer_manager.find_channel(group, client_id)
        if channel is None:
            return create_response(original, ResponseCode.SYSTEM_ERROR,
                                   f"The Consumer <{group}> <{client_id}> not online")
        if channel.version < V3_1_8_SNAPSHOT:
            return create_response(original, ResponseCode.SYSTEM_ERROR,
                                   f"The Consumer <{client_id}> Version <{channel.version}> too low to finish, "
                                   "please upgrade it to V3_1_8_SNAPSHOT")
        forwarded = create_request(original.code, ext_fields, body)
        try:
            answer = await channel.connection.invoke(forwarded, CALL_CLIENT_TIMEOUT_MS)
        except RequestTimeout as err:
            return create_response(original, ResponseCode.CONSUME_MSG_TIMEOUT,
                                   f"consumer <{group}> <{client_id}> Timeout: {exception_simple_desc(err)}")
        except ConnectionClosed as err:
            return create_response(original, ResponseCode.SYSTEM_ERROR,
                                   f"invoke consumer <{group}> <{client_id}> Exception: {exception_simple_desc(err)}")
        return create_response(original, answer.code, answer.remark, ext_fields=answer.ext_fields, body=answer.body)

    async def get_consumer_status(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        """Broker2Client.getConsumeStatus: ask each client (or the one at ``clientAddr``) for its queue offsets."""
        header = request_header(request, GetConsumerStatusRequestHeader)
        info = self.consumer_manager.get(header.group)
        if info is None or not info.channels:
            return create_response(request, ResponseCode.SYSTEM_ERROR,
                                   f"No Any Consumer online in the consumer group: [{header.group}]")
        table: dict[str, Any] = {}
        for channel in list(info.channels.values()):
            if channel.version < V3_0_7_SNAPSHOT:
                return create_response(request, ResponseCode.SYSTEM_ERROR,
                                       f"the client does not support this feature. version={channel.version}")
            if header.client_addr and header.client_addr != channel.client_id:
                continue
            statuses = await self._client_status(channel, header)
            if statuses is not None:
                table[channel.client_id] = statuses
            if header.client_addr:
                break
        return success(request, json_body({"consumerTable": table, "messageQueueTable": {}}))

    async def _client_status(self, channel: ClientChannelInfo,
                             header: GetConsumerStatusRequestHeader) -> dict[MessageQueue, int] | None:
        ask = GetConsumerStatusRequestHeader(topic=header.topic, group=header.group)
        try:
            answer = await channel.connection.invoke(
                create_request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, ask.to_ext()), CONSUMER_STATUS_TIMEOUT_MS)
            if answer.code != ResponseCode.SUCCESS or not answer.body:
                return None
            return {mq_key(key): int(offset)
                    for key, offset in decode_body(answer).get("messageQueueTable", {}).items()}
        except (RequestTimeout, ConnectionClosed, RemoteProtocolError, KeyError, TypeError, ValueError) as err:
            log.error("[get-consumer-status] %s of group %s: %s", channel.client_id, header.group, err)
            return None
