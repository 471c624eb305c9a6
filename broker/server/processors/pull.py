"""PULL_MESSAGE and LITE_PULL_MESSAGE: Java's PullMessageProcessor with its DefaultPullMessageResultHandler, as a
5.x master runs them.

A pull is checked (broker readable, group known and allowed to consume, topic readable, queue id), its subscription
taken from the request (SUBSCRIPTION flag) or from the group's heartbeat, and served from the store through a tag
filter in one ``get_message``: the response body is the raw CommitLog records, joined once. A pull that finds nothing
(PULL_NOT_FOUND) with the SUSPEND flag is held by the PullRequestHoldService (long polling) and answered later,
through ``RemotingConnection.send_response``, when a message arrives or its suspend time passes.

GetMessageStatus -> response code (composeResponseHeader; the remark is the status name):

    FOUND                                       SUCCESS, body = the records
    NO_MATCHED_MESSAGE, MESSAGE_WAS_REMOVING    PULL_RETRY_IMMEDIATELY
    NO_MATCHED_LOGIC_QUEUE, NO_MESSAGE_IN_QUEUE PULL_OFFSET_MOVED if the request offset is not 0, else PULL_NOT_FOUND
    OFFSET_FOUND_NULL, OFFSET_OVERFLOW_ONE      PULL_NOT_FOUND (held when SUSPEND is set)
    OFFSET_OVERFLOW_BADLY, OFFSET_TOO_SMALL     PULL_OFFSET_MOVED (nextBeginOffset is the corrected offset)
    an admin's server-side offset reset         PULL_OFFSET_MOVED, remark OFFSET_RESET, nextBeginOffset = the reset

SQL92 subscriptions (``_message_filter``) are filtered on each record's properties when enablePropertyFilter is on,
and refused as Java refuses them when it is off.

Which broker the consumer should pull from next (suggestWhichBrokerId, ``suggest_which_broker_id``) follows 5.3.3's
composeResponseHeader: the master unless slaveReadEnable; then the group's whichBrokerWhenConsumeSlowly when the
store says the reader is behind by more than accessMessageInMemoryMaxRatio of memory, else the group's brokerId. A
slave that is not so behind sends the reader back to the master, and answers what it did not find with
PULL_RETRY_IMMEDIATELY (so the reader asks the master at once instead of waiting on a slave). A slave without
slaveReadEnable rejects every pull ([REJECTREQUEST] SYSTEM_BUSY, ``reject_request``).

Not modelled yet: broadcast offsets kept by the broker (enableBroadcastOffsetStore), cold-data flow control, static
topics and consume hooks.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.common.errors import ConnectionClosed, FilterExpressionError, LocalProtocolError
from broker.common.message import PullSysFlag
from broker.common.topic import TopicConfig, is_readable
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_response
from broker.remoting.connection import RemotingConnection, eager, exception_simple_desc
from broker.remoting.frame import Buffer
from broker.remoting.headers import (
    HeaderError,
    PullForbiddenResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
)
from broker.remoting.heartbeat import is_tag_type, parse_subscription
from broker.remoting.route import MASTER_ID
from broker.remoting.subscription import SubscriptionGroupConfig
from broker.server.consumer_manager import CLUSTERING, CONSUME_PASSIVELY, SubscriptionData
from broker.server.filter.message_filter import SqlMessageFilter, TagMessageFilter, compile_expression
from broker.server.long_polling import PullRequest, PullRequestHoldService
from broker.server.processors.common import (
    INDEX_PERM_READ,
    Handler,
    bad_header_response,
    is_slave,
    suggest_todo,
)
from broker.server.processors.request_headers import request_header
from broker.store.results import GetMessageResult, GetMessageStatus

if TYPE_CHECKING:
    from broker.server.broker_metrics import BrokerMetricsManager
    from broker.server.config import BrokerConfig
    from broker.server.consumer_manager import ConsumerManager
    from broker.server.filter.message_filter import ConsumerFilterManager
    from broker.server.metadata.groups import SubscriptionGroupManager
    from broker.server.metadata.offsets import ConsumerOffsetManager
    from broker.server.metadata.topics import TopicConfigManager
    from broker.server.stats import BrokerStats, BrokerStatsManager
    from broker.store.message_store import MessageStore

log = logging.getLogger(__name__)

PULL_CODES = (RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE)
HOLD_CHECK_INTERVAL_S = 5.0  # PullRequestHoldService's period with long polling on
# ForbiddenType: why a pull got NO_PERMISSION
BROKER_FORBIDDEN = 1
GROUP_FORBIDDEN = 2
TOPIC_FORBIDDEN = 3
BROADCASTING_DISABLE_FORBIDDEN = 4
SUBSCRIPTION_FORBIDDEN = 5

# PullSysFlag bits as plain ints: IntFlag arithmetic costs about a microsecond per operation on the pull path.
_COMMIT_OFFSET = int(PullSysFlag.COMMIT_OFFSET)
_SUSPEND = int(PullSysFlag.SUSPEND)
_SUBSCRIPTION = int(PullSysFlag.SUBSCRIPTION)

# BrokerController.every: run an action every so many seconds until the broker shuts down.
Every = Callable[[float, Callable[[], object]], None]

_CODES = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


def pull_response_code(status: GetMessageStatus, request_offset: int) -> ResponseCode:
    """PullMessageProcessor.composeResponseHeader's mapping (see the module docstring)."""
    if status in (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE):
        return ResponseCode.PULL_OFFSET_MOVED if request_offset != 0 else ResponseCode.PULL_NOT_FOUND
    return _CODES[status]


def suggest_which_broker_id(broker_config: BrokerConfig, group_config: SubscriptionGroupConfig, *, found: bool,
                            suggest_pulling_from_slave: bool,
                            min_broker_id_in_group: int | None = None) -> tuple[int, bool]:
    """composeResponseHeader: the broker id the reader should pull from next, and whether the answer's code
    becomes PULL_RETRY_IMMEDIATELY (a slave sending the reader back to the master with nothing found).
    ``min_broker_id_in_group`` is, as Java 5.5's getMinBrokerIdInGroup, this broker's own id unless a slave acts as
    master (which rmq never does): so a plain slave never sends its readers back (observed on Apache 5.5.0).

    Examples:
        >>> from broker.server.config import BrokerConfig, BrokerRole
        >>> slave = BrokerConfig(broker_id=1, broker_role=BrokerRole.SLAVE, slave_read_enable=True)
        >>> suggest_which_broker_id(slave, SubscriptionGroupConfig("g"), found=False, suggest_pulling_from_slave=False)
        (0, False)
    """
    if min_broker_id_in_group is None:
        min_broker_id_in_group = broker_config.broker_id
    if broker_config.slave_read_enable:
        suggested = (group_config.which_broker_when_consume_slowly if suggest_pulling_from_slave
                     else group_config.broker_id)
    else:
        suggested = MASTER_ID
    if broker_config.broker_id != MASTER_ID and not suggest_pulling_from_slave \
            and min_broker_id_in_group == MASTER_ID:
        return MASTER_ID, not found
    return suggested, False


# Statuses whose nextBeginOffset the store corrects (DefaultMessageStore.nextOffsetCorrection): a slave does not
# (offsetCheckInSlave is false, and rmq refuses true), so a reader sent back to the master keeps its offset.
_CORRECTED_ON_MASTER_ONLY = frozenset({
    GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.OFFSET_TOO_SMALL,
    GetMessageStatus.OFFSET_OVERFLOW_ONE, GetMessageStatus.OFFSET_OVERFLOW_BADLY, GetMessageStatus.OFFSET_FOUND_NULL})


def uncorrect_on_slave(result: GetMessageResult, request_offset: int) -> None:
    """nextOffsetCorrection on a slave: the request's offset stands (the store, which does not know the broker's
    role, corrected it as a master's does)."""
    if result.status in _CORRECTED_ON_MASTER_ONLY:
        result.next_begin_offset = request_offset


class PullMessageProcessor:
    """The pull processor of one broker, and its PullRequestHoldService. Create it on the broker's event loop.

    Examples:
        >>> processor = PullMessageProcessor(broker_config=bc, store=store, ...)  # doctest: +SKIP
        >>> processor.start(controller.every)  # arrival listener and periodic check  # doctest: +SKIP
        >>> server.register_processor(RequestCode.PULL_MESSAGE, processor.process)  # doctest: +SKIP
    """

    def __init__(self, *, broker_config: BrokerConfig, store: MessageStore, topic_config_manager: TopicConfigManager,
                 subscription_group_manager: SubscriptionGroupManager, consumer_offset_manager: ConsumerOffsetManager,
                 consumer_manager: ConsumerManager, consumer_filter_manager: ConsumerFilterManager,
                 stats: BrokerStats, stats_manager: BrokerStatsManager | None = None,
                 metrics: BrokerMetricsManager | None = None) -> None:
        self.broker_config = broker_config
        self.store = store
        self.topic_config_manager = topic_config_manager
        self.subscription_group_manager = subscription_group_manager
        self.consumer_offset_manager = consumer_offset_manager
        self.consumer_manager = consumer_manager
        self.consumer_filter_manager = consumer_filter_manager
        self.stats = stats
        self.stats_manager = stats_manager
        self.metrics = metrics  # rocketmq_messages_out_total and its kin, when metricsExporterType=PROM
        self._slave = is_slave(broker_config)
        self._loop = asyncio.get_running_loop()
        self.hold_service = PullRequestHoldService(store, self.execute_request_when_wakeup, self._loop)
        self._replies: set[asyncio.Task[None]] = set()

    def start(self, every: Every) -> None:
        """Hear of arriving messages (long polling only: Java notifies nothing otherwise) and run the periodic
        check through ``every`` (BrokerController.every), every 5 s or every shortPollingTimeMills."""
        bc = self.broker_config
        if bc.long_polling_enable:
            self.store.add_arrival_listener(self.hold_service.on_message_arriving)
            interval = HOLD_CHECK_INTERVAL_S
        else:
            interval = bc.short_polling_time_mills / 1000
        every(interval, self.hold_service.check_hold_requests)

    def handlers(self) -> dict[int, Handler]:
        return {code: self.process for code in PULL_CODES}

    def reject_request(self) -> bool:
        """PullMessageProcessor.rejectRequest: a slave serves pulls only with slaveReadEnable."""
        return is_slave(self.broker_config) and not self.broker_config.slave_read_enable

    @eager
    async def process(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        return self.process_request(conn, request, suspendable=True)

    def process_request(self, conn: RemotingConnection, request: RemotingCommand, *,
                        suspendable: bool) -> RemotingCommand | None:
        """The response, or None when the request is held (``suspendable``: the first run, not a wake-up)."""
        try:
            header = request_header(request, PullMessageRequestHeader)
        except HeaderError as err:
            return bad_header_response(request, err)
        refusal, group_config, topic_config = self._check(conn, request, header)
        if refusal is not None:
            return refusal
        assert group_config is not None and topic_config is not None
        subscription = self._subscription(request, header, group_config)
        if isinstance(subscription, RemotingCommand):
            return subscription
        message_filter = self._message_filter(request, header, subscription)
        if isinstance(message_filter, RemotingCommand):
            return message_filter
        reset = self._reset_offset(header)
        if reset is not None:
            self._try_commit_offset(conn, header, suspendable)
            return self._offset_reset_response(request, header, reset, topic_config, group_config)
        result = self.store.get_message(header.consumer_group, header.topic, header.queue_id,
                                                   header.queue_offset, header.max_msg_nums,
                                                   message_filter=message_filter)
        if self._slave:
            uncorrect_on_slave(result, header.queue_offset)
        code = self._result_code(header, result)
        suggested, retry = suggest_which_broker_id(self.broker_config, group_config,
                                                   found=result.status is GetMessageStatus.FOUND,
                                                   suggest_pulling_from_slave=result.suggest_pulling_from_slave)
        if retry or (self._slave and code == ResponseCode.PULL_OFFSET_MOVED):
            # DefaultPullMessageResultHandler: a slave (offsetCheckInSlave=false) never moves a reader's offset
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
        self._try_commit_offset(conn, header, suspendable)
        if code == ResponseCode.PULL_NOT_FOUND and suspendable and header.sys_flag & _SUSPEND:
            self._suspend(conn, request, header, subscription, message_filter)
            return None
        header_ext = self._response_header(result, topic_config, group_config, suggested).to_ext()
        body: bytes | tuple[Buffer, ...] = b""
        if code == ResponseCode.SUCCESS:
            body = tuple(result.buffers)  # views of the CommitLog, framed and written without a copy
            self.stats.record_get(result.message_count)
            if self.stats_manager is not None or self.metrics is not None:
                size = sum(map(len, result.buffers))
                if self.stats_manager is not None:  # statsAll's GROUP_GET_NUMS
                    self.stats_manager.record_get(header.consumer_group, header.topic, result.message_count, size)
                if self.metrics is not None:
                    self.metrics.record_out(header.topic, header.consumer_group, result.message_count, size)
        return create_response(request, code, result.status.name, ext_fields=header_ext, body=body)

    # -- checks -------------------------------------------------------------------------------------------------------

    def _check(self, conn: RemotingConnection, request: RemotingCommand, header: PullMessageRequestHeader
               ) -> tuple[RemotingCommand | None, SubscriptionGroupConfig | None, TopicConfig | None]:
        """(refusal, None, None), or (None, group config, topic config) once the pull may go ahead."""
        bc = self.broker_config
        if not is_readable(bc.broker_permission):
            return self._forbidden(request, BROKER_FORBIDDEN,
                                   f"the broker[{bc.broker_ip1}] pulling message is forbidden"), None, None
        group, topic = header.consumer_group, header.topic
        group_config = self.subscription_group_manager.find_subscription_group_config(group)
        if group_config is None:
            remark = f"subscription group [{group}] does not exist, {suggest_todo()}"
            return create_response(request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, remark), None, None
        if not group_config.consume_enable:
            return self._forbidden(request, GROUP_FORBIDDEN, f"subscription group no permission, {group}"), None, None
        topic_config = self.topic_config_manager.select_topic_config(topic)
        if topic_config is None:
            log.error("the topic %s not exist, consumer: %s", topic, conn.remote_address)
            remark = f"topic[{topic}] not exist, apply first please! {suggest_todo()}"
            return create_response(request, ResponseCode.TOPIC_NOT_EXIST, remark), None, None
        if not is_readable(topic_config.perm):
            remark = f"the topic[{topic}] pulling message is forbidden"
            return self._forbidden(request, TOPIC_FORBIDDEN, remark), None, None
        if not 0 <= header.queue_id < topic_config.read_queue_nums:
            remark = (f"queueId[{header.queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:"
                      f"[{topic_config.read_queue_nums}] consumer:[/{conn.remote_address}]")
            log.warning("%s", remark)
            return create_response(request, ResponseCode.INVALID_PARAMETER, remark), None, None
        return None, group_config, topic_config

    @staticmethod
    def _forbidden(request: RemotingCommand, forbidden_type: int, remark: str) -> RemotingCommand:
        ext = PullForbiddenResponseHeader(forbidden_type).to_ext()
        return create_response(request, ResponseCode.NO_PERMISSION, remark, ext_fields=ext)

    def _subscription(self, request: RemotingCommand, header: PullMessageRequestHeader,
                      group_config: SubscriptionGroupConfig) -> SubscriptionData | RemotingCommand:
        """The request's own subscription (SUBSCRIPTION flag) or the one the group's heartbeat registered."""
        group, topic = header.consumer_group, header.topic
        consumers = self.consumer_manager
        consumers.compensate_basic_consumer_info(group, CONSUME_PASSIVELY, CLUSTERING)
        if header.sys_flag & _SUBSCRIPTION:
            subscription = parse_subscription(topic, header.subscription, header.expression_type)
            if subscription is None:
                log.warning("parse the consumer's subscription[%s] failed, group: %s", header.subscription, group)
                return create_response(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                       "parse the consumer's subscription failed")
            consumers.compensate_subscribe_data(group, topic, subscription)
        else:
            registered = self._registered_subscription(request, header, group_config)
            if isinstance(registered, RemotingCommand):
                return registered
            subscription = registered
        return subscription

    # -- SQL92 filters (issue 4) ----------------------------------------------------------------------------------

    def _message_filter(self, request: RemotingCommand, header: PullMessageRequestHeader,
                        subscription: SubscriptionData) -> TagMessageFilter | SqlMessageFilter | RemotingCommand:
        """The store's filter for this pull, or Java's refusal. A SQL92 expression comes compiled from the filter
        data its heartbeat registered, or, for a pull that carries its subscription, is compiled here (cached);
        one that does not compile is SUBSCRIPTION_PARSE_FAILED with the reason as remark (Java's broker would
        serve such a pull unfiltered: its ConsumerFilterManager.build returns null)."""
        if is_tag_type(subscription.expression_type):
            return TagMessageFilter(subscription)
        carried = bool(header.sys_flag & _SUBSCRIPTION)
        data = None
        if not carried:
            data = self.consumer_filter_manager.get(header.topic, header.consumer_group)
            if data is None:
                return create_response(request, ResponseCode.FILTER_DATA_NOT_EXIST,
                                       "The broker's consumer filter data is not exist!Your expression may be wrong!")
            if data.client_version < header.sub_version:
                log.warning("the broker's consumer filter data is not latest, group: %s, topic: %s, serverV: %s, "
                            "clientV: %s", header.consumer_group, header.topic, data.client_version, header.sub_version)
                return create_response(request, ResponseCode.FILTER_DATA_NOT_LATEST,
                                       "the consumer's consumer filter data not latest")
        if not self.broker_config.enable_property_filter:
            return create_response(request, ResponseCode.SYSTEM_ERROR, "The broker does not support consumer to "
                                   f"filter message by {subscription.expression_type}")
        if data is not None:
            return SqlMessageFilter(data.selector)
        try:
            return SqlMessageFilter(compile_expression(subscription.expression_type, subscription.sub_string))
        except FilterExpressionError as err:
            log.warning("parse the consumer's subscription[%s] failed, group: %s: %s", subscription.sub_string,
                        header.consumer_group, err)
            return create_response(request, ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(err))

    def _registered_subscription(self, request: RemotingCommand, header: PullMessageRequestHeader,
                                 group_config: SubscriptionGroupConfig) -> SubscriptionData | RemotingCommand:
        group, topic = header.consumer_group, header.topic
        info = self.consumer_manager.get(group)
        if info is None:
            log.warning("the consumer's group info not exist, group: %s", group)
            return create_response(request, ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                   f"the consumer's group info not exist{suggest_todo()}")
        if not group_config.consume_broadcast_enable and info.is_broadcasting:
            return self._forbidden(request, BROADCASTING_DISABLE_FORBIDDEN,
                                   f"the consumer group[{group}] can not consume by broadcast way")
        if self.subscription_group_manager.is_forbidden(group, topic, INDEX_PERM_READ):
            return self._forbidden(request, SUBSCRIPTION_FORBIDDEN,
                                   f"the consumer group[{group}] is forbidden for topic[{topic}]")
        subscription = info.subscriptions.get(topic)
        if subscription is None:
            log.warning("the consumer's subscription not exist, group: %s, topic: %s", group, topic)
            return create_response(request, ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                   f"the consumer's subscription not exist{suggest_todo()}")
        if subscription.sub_version < header.sub_version:
            log.warning("the broker's subscription is not latest, group: %s %s", group, subscription.sub_string)
            return create_response(request, ResponseCode.SUBSCRIPTION_NOT_LATEST,
                                   "the consumer's subscription not latest")
        return subscription

    # -- the result ---------------------------------------------------------------------------------------------------

    def _reset_offset(self, header: PullMessageRequestHeader) -> int | None:
        """An offset an admin reset on the server side (useServerSideResetOffset), served once."""
        if not self.broker_config.use_server_side_reset_offset:
            return None
        return self.consumer_offset_manager.query_then_erase_reset_offset(
            header.topic, header.consumer_group, header.queue_id)

    def _offset_reset_response(self, request: RemotingCommand, header: PullMessageRequestHeader, reset: int,
                               topic_config: TopicConfig, group_config: SubscriptionGroupConfig) -> RemotingCommand:
        store = self.store
        log.info("the queue under pulling was previously reset to start from %d", reset)
        suggested, retry = suggest_which_broker_id(self.broker_config, group_config, found=False,
                                                   suggest_pulling_from_slave=False)
        response_header = PullMessageResponseHeader(
            suggest_which_broker_id=suggested, next_begin_offset=reset,
            min_offset=store.min_offset_in_queue(header.topic, header.queue_id),
            max_offset=store.max_offset_in_queue(header.topic, header.queue_id),
            topic_sys_flag=topic_config.topic_sys_flag, group_sys_flag=group_config.group_sys_flag)
        code = ResponseCode.PULL_RETRY_IMMEDIATELY if retry else ResponseCode.PULL_OFFSET_MOVED
        return create_response(request, code, "OFFSET_RESET", ext_fields=response_header.to_ext())

    def _result_code(self, header: PullMessageRequestHeader, result: GetMessageResult) -> ResponseCode:
        code = pull_response_code(result.status, header.queue_offset)
        if code == ResponseCode.PULL_OFFSET_MOVED:
            log.warning("PULL_OFFSET_MOVED:correction offset. topic=%s, groupId=%s, requestOffset=%d, newOffset=%d "
                        "(%s)", header.topic, header.consumer_group, header.queue_offset, result.next_begin_offset,
                        result.status.name)
        return code

    @staticmethod
    def _response_header(result: GetMessageResult, topic_config: TopicConfig, group_config: SubscriptionGroupConfig,
                         suggested: int) -> PullMessageResponseHeader:
        return PullMessageResponseHeader(
            suggest_which_broker_id=suggested, next_begin_offset=result.next_begin_offset,
            min_offset=result.min_offset, max_offset=result.max_offset,
            topic_sys_flag=topic_config.topic_sys_flag, group_sys_flag=group_config.group_sys_flag)

    def _try_commit_offset(self, conn: RemotingConnection, header: PullMessageRequestHeader,
                           suspendable: bool) -> None:
        """The consumer's offset piggybacked on the pull (COMMIT_OFFSET flag), stored on the first run only."""
        if suspendable and header.sys_flag & _COMMIT_OFFSET and header.commit_offset >= 0:
            self.consumer_offset_manager.commit_offset(
                header.consumer_group, header.topic, header.queue_id, header.commit_offset, conn.remote_address)

    # -- long polling -------------------------------------------------------------------------------------------------

    def _suspend(self, conn: RemotingConnection, request: RemotingCommand, header: PullMessageRequestHeader,
                 subscription: SubscriptionData, message_filter: TagMessageFilter | SqlMessageFilter) -> None:
        bc = self.broker_config
        polling_ms = header.suspend_timeout_millis if bc.long_polling_enable else bc.short_polling_time_mills
        pull_request = PullRequest(request, conn, polling_ms, time.monotonic(), header.queue_offset, subscription,
                                   message_filter)
        self.hold_service.suspend_pull_request(header.topic, header.queue_id, pull_request)

    def execute_request_when_wakeup(self, pull_request: PullRequest) -> None:
        """Run a held request again, this time without holding it, and send its answer."""
        conn, request = pull_request.connection, pull_request.request
        if conn.closed:
            return
        try:
            response = self.process_request(conn, request, suspendable=False)
        except Exception as err:
            log.exception("pull of %s from %s failed on wake-up", request.ext_fields, conn.remote_address)
            response = create_response(request, ResponseCode.SYSTEM_ERROR, exception_simple_desc(err))
        if response is None or request.is_oneway:
            return
        rpc_latency = self.metrics.rpc_latency if self.metrics is not None else None
        if rpc_latency is not None:  # from when it was held (the same clock): Apache's from its arrival, just before
            rpc_latency.record(request, response, int(pull_request.suspend_timestamp * 1e9), long_polling=True)
        task = self._loop.create_task(self._reply(conn, response))
        self._replies.add(task)
        task.add_done_callback(self._replies.discard)

    @staticmethod
    async def _reply(conn: RemotingConnection, response: RemotingCommand) -> None:
        try:
            await conn.send_response(response)
        except (ConnectionClosed, LocalProtocolError) as err:
            log.debug("held pull answer to %s dropped: %s", conn.remote_address, err)
