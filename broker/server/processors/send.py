"""SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE: Java's SendMessageProcessor (with the msgCheck of
AbstractSendMessageProcessor), as a 5.x master runs it.

A send is checked (topic name, reserved topics, the topic exists or is created from the default topic, queue id),
turned into StoreMessages exactly as Java builds its MessageExtBrokerInner (properties MSG_REGION, TRACE_ON, UNIQ_KEY
and CLUSTER added and written in Java's HashMap order, so the records are byte-for-byte Apache's), and put through
``put_messages`` (BrokerController.put_messages). The PutMessageStatus becomes Java's response code and remark
(``put_response``).

A message with a delay level is parked in SCHEDULE_TOPIC_XXXX by the schedule service's put hook
(broker/server/schedule.py, ``handle_schedule_message``), as Java's HookUtils.handleScheduleMessage does in the store.

A prepared send (TRAN_MSG=true) is stored as a half message in RMQ_SYS_TRANS_HALF_TOPIC queue 0 and registered with
the TransactionalMessageService (broker/transaction), which END_TRANSACTION and the check service end. rmq's
extension: with rmqTransactionBatchEnable, a batch with the TRANSACTION_PREPARED sysFlag is stored as one half
message per item in one put (``broker/server/transaction/batch.py``); Apache's broker refuses such a batch.

Left for later issues: send hooks and static topics.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

from broker.common import validation as v
from broker.common.errors import CorruptRecord
from broker.common.message import (
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_MSG_REGION,
    PROPERTY_POP_CK,
    PROPERTY_TRACE_SWITCH,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    SysFlag,
    create_uniq_id,
    decode_properties,
    transaction_type,
)
from broker.common.message_batch import BatchMessage, decode_batch_body, decode_batch_items
from broker.common.topic import PERM_READ, PERM_WRITE, TopicConfig, TopicFilterType, is_writeable, perm_to_string
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_response
from broker.remoting.connection import OVERLOAD_REMARK, RemotingConnection, eager
from broker.remoting.headers import HeaderError, SendMessageRequestHeader, SendMessageResponseHeader
from broker.server.message_properties import java_ordered
from broker.server.processors.common import (
    TOPIC_SYS_FLAG_UNIT,
    TOPIC_SYS_FLAG_UNIT_SUB,
    V3_4_9,
    Handler,
    bad_header_response,
    sends_rejected,
    suggest_todo,
)
from broker.server.processors.put_status import illegal_send_remark, send_put_status
from broker.server.processors.request_headers import request_header
from broker.server.processors.send_record import SingleSends, born_host
from broker.server.transaction.batch import (  # transactional batches
    HalfBatchOrigin,
    half_batch_messages,
    half_batch_refusal,
)
from broker.server.transaction.bridge import HALF_TOPIC, half_message  # transactions
from broker.store.commit_log import RECORD_HEADROOM, EncodedRecord, StoreMessage, encode_batch_ahead
from broker.store.results import PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from broker.server.broker_metrics import BrokerMetricsManager
    from broker.server.config import BrokerConfig
    from broker.server.metadata.groups import SubscriptionGroupManager
    from broker.server.metadata.topics import TopicConfigManager
    from broker.server.schedule import PutMessages, ScheduleMessageService
    from broker.server.stats import BrokerStatsManager
    from broker.server.transaction.service import TransactionalMessageService
    from broker.store.config import MessageStoreConfig

log = logging.getLogger(__name__)

Item = TypeVar("Item")
SEND_CODES = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)
# Back-pressure (Java: sendThreadPoolQueueCapacity and BrokerFastFailure): puts waiting for the store beyond these
# are refused with SYSTEM_BUSY instead of queueing without bound; the producer retries another broker.
MAX_PUTS_IN_FLIGHT = 10_000
MAX_BYTES_IN_FLIGHT = 512 * 1024 * 1024
_PREPARED = {PROPERTY_TRANSACTION_PREPARED: "true"}  # what a prepared batch's put counts as (a transaction's)
SENDABLE_NAMES_MAX = 65_536  # topic names remembered as valid (forgotten all at once when full)
_MULTI_TAGS = int(SysFlag.MULTI_TAGS)
# batch rules (issue 4): a batch body over maxMessageSize makes Java's MessageExtEncoder throw, and the remoting layer
# answers SYSTEM_ERROR with the exception (line 290 of MessageExtEncoder.java in 5.5.0, as Apache's broker sends it)
BATCH_TOO_BIG_REMARK = ("java.lang.RuntimeException: message body size exceeded, "
                        "org.apache.rocketmq.store.MessageExtEncoder.encode(MessageExtEncoder.java:290)")


def parse_send_header(request: RemotingCommand) -> SendMessageRequestHeader:
    """SendMessageRequestHeader.parseRequestHeader: SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE use one-letter names."""
    return request_header(request, SendMessageRequestHeader)


def random_queue_id(write_queue_nums: int) -> int:
    return random.randrange(99_999_999) % write_queue_nums


def java_topic_config_string(config: TopicConfig) -> str:
    """TopicConfig.toString(), as Java's remarks print it."""
    attributes = ", ".join(f"{k}={val}" for k, val in config.attributes.items())
    return (f"TopicConfig [topicName={config.topic_name}, readQueueNums={config.read_queue_nums}, "
            f"writeQueueNums={config.write_queue_nums}, perm={perm_to_string(config.perm)}, "
            f"topicFilterType={config.topic_filter_type}, topicSysFlag={config.topic_sys_flag}, "
            f"order={'true' if config.order else 'false'}, attributes={{{attributes}}}]")


class SendMessageProcessor:
    """The send processor of one broker. ``process`` is the remoting handler for SEND_CODES.

    ``put_messages`` stores (BrokerController.put_messages); the schedule service parks delayed messages, the
    transactional message service opens half messages.

    Examples:
        >>> processor = SendMessageProcessor(broker_config=bc, store_config=sc, topic_config_manager=topics,
        ...     subscription_group_manager=groups, schedule_message_service=schedule,
        ...     transactional_message_service=transactions, put_messages=put, store_host=store.store_host,
        ...     max_puts_in_flight=1000)  # doctest: +SKIP
        >>> server.register_processor(RequestCode.SEND_MESSAGE_V2, processor.process)  # doctest: +SKIP
    """

    def __init__(self, *, broker_config: BrokerConfig, store_config: MessageStoreConfig,
                 topic_config_manager: TopicConfigManager, subscription_group_manager: SubscriptionGroupManager,
                 schedule_message_service: ScheduleMessageService,
                 transactional_message_service: TransactionalMessageService, put_messages: PutMessages,
                 store_host: bytes, stats_manager: BrokerStatsManager | None = None,
                 metrics: BrokerMetricsManager | None = None, max_puts_in_flight: int | None = None,
                 max_bytes_in_flight: int | None = None) -> None:
        self.broker_config = broker_config
        self.store_config = store_config
        self.topic_config_manager = topic_config_manager
        self.subscription_group_manager = subscription_group_manager
        self.schedule_message_service = schedule_message_service
        self.transactional_message_service = transactional_message_service
        self.put_messages = put_messages
        self.store_host = store_host  # the CommitLog's: what a batch's records are encoded ahead for
        self.stats_manager = stats_manager
        self.metrics = metrics  # rocketmq_messages_in_total and its kin, when metricsExporterType=PROM
        self.region_id = broker_config.region_id
        self.trace_on = "true" if broker_config.trace_on else "false"
        self.max_puts_in_flight = MAX_PUTS_IN_FLIGHT if max_puts_in_flight is None else max_puts_in_flight
        self.max_bytes_in_flight = MAX_BYTES_IN_FLIGHT if max_bytes_in_flight is None else max_bytes_in_flight
        self.puts_in_flight = 0
        self.bytes_in_flight = 0
        self._sendable_names: set[str] = set()  # topic names that passed msgCheck's name checks
        self.single_sends = SingleSends(broker_config, store_config, topic_config_manager, store_host, self.region_id,
                                        self.trace_on)

    def handlers(self) -> dict[int, Handler]:
        return {code: self.process for code in SEND_CODES}

    def reject_request(self) -> bool:
        """A slave turns every send away before it is parsed ([REJECTREQUEST] SYSTEM_BUSY): nothing is stored and no
        topic is created."""
        return sends_rejected(self.broker_config)

    @eager
    async def process(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        ready = self.single_sends.record_of(conn.remote_address, request)
        if ready is not None:  # a single send of the common shape, its record made in one call (send_record.py)
            topic, record, queue_id, uniq_key = ready
            result = await self._put([record], len(request.body), topic, self._metric_properties(request))
            if result is None:
                return self._answer(request, ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)
            if result.status is PutMessageStatus.PUT_OK:
                return self.single_sends.answer(request, result.append, queue_id, uniq_key)
            return self.put_response(request, result, queue_id, uniq_key)
        try:
            header = parse_send_header(request)
        except HeaderError as err:
            return bad_header_response(request, err)
        refusal, topic_config = self.msg_check(conn, header)
        if refusal is not None:
            return self._answer(request, *refusal)
        assert topic_config is not None
        if header.batch:
            return await self._send_batch(conn, request, header, topic_config)
        return await self._send_message(conn, request, header, topic_config)

    def _answer(self, request: RemotingCommand, code: int, remark: str | None,
                header: SendMessageResponseHeader | None = None) -> RemotingCommand:
        """Every answer after the header parsed carries MSG_REGION and TRACE_ON (Java's preSend adds them)."""
        ext = {PROPERTY_MSG_REGION: self.region_id, PROPERTY_TRACE_SWITCH: self.trace_on}
        if header is not None:
            ext.update(header.to_ext())
        return create_response(request, code, remark, ext_fields=ext)

    # -- checks (AbstractSendMessageProcessor.msgCheck) ---------------------------------------------------------------

    def msg_check(self, conn: RemotingConnection,
                  header: SendMessageRequestHeader) -> tuple[tuple[int, str] | None, TopicConfig | None]:
        """(refusal code and remark, None) or (None, the topic's config), creating the topic when Java would."""
        bc = self.broker_config
        topics = self.topic_config_manager
        topic = header.topic
        if not is_writeable(bc.broker_permission) and topics.is_order_topic(topic):
            return (ResponseCode.NO_PERMISSION, f"the broker[{bc.broker_ip1}] sending message is forbidden"), None
        if topic not in self._sendable_names:  # the name's checks depend on the name alone: once per topic
            result = v.validate_topic(topic)
            if not result.valid:
                return (ResponseCode.INVALID_PARAMETER, result.remark), None
            if v.is_not_allowed_send_topic(topic):
                return (ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden."), None
            if len(self._sendable_names) >= SENDABLE_NAMES_MAX:
                self._sendable_names.clear()
            self._sendable_names.add(topic)
        config = topics.select_topic_config(topic) or self._create_topic(conn, header)
        if config is None:
            return (ResponseCode.TOPIC_NOT_EXIST,
                    f"topic[{topic}] not exist, apply first please!{suggest_todo()}"), None
        if header.queue_id >= max(config.write_queue_nums, config.read_queue_nums):
            remark = (f"request queueId[{header.queue_id}] is illegal, {java_topic_config_string(config)} "
                      f"Producer: {conn.remote_address}")
            log.warning("%s", remark)
            return (ResponseCode.INVALID_PARAMETER, remark), None
        return None, config

    def _create_topic(self, conn: RemotingConnection, header: SendMessageRequestHeader) -> TopicConfig | None:
        topics = self.topic_config_manager
        topic = header.topic
        retry = v.is_retry_topic(topic)
        sys_flag = 0
        if header.unit_mode:
            sys_flag = TOPIC_SYS_FLAG_UNIT_SUB if retry else TOPIC_SYS_FLAG_UNIT
        log.warning("the topic %s not exist, producer: %s", topic, conn.remote_address)
        config = topics.create_topic_in_send_message_method(topic, header.default_topic, conn.remote_address,
                                                             header.default_topic_queue_nums, sys_flag)
        if config is None and retry:
            config = topics.create_topic_in_send_message_back_method(topic, 1, PERM_WRITE | PERM_READ, sys_flag)
        return config

    # -- one message --------------------------------------------------------------------------------------------------

    async def _send_message(self, conn: RemotingConnection, request: RemotingCommand,
                            header: SendMessageRequestHeader, config: TopicConfig) -> RemotingCommand:
        queue_id = header.queue_id if header.queue_id >= 0 else random_queue_id(config.write_queue_nums)
        props = self._sent_properties(header.properties)
        target = self._retry_or_dlq(request, header, props, queue_id, config)
        if isinstance(target, RemotingCommand):
            return target
        topic, store_queue_id, target_config = target
        if not props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX):
            props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = create_uniq_id()
        if config.compacted and not props.get(PROPERTY_KEYS, "").strip():
            return self._answer(request, ResponseCode.MESSAGE_ILLEGAL, "Required message key is missing")
        props[PROPERTY_CLUSTER] = self.broker_config.broker_cluster_name
        prepared = self._is_prepared(header, props)  # transactions (broker/transaction): a half message
        if prepared and self.broker_config.reject_transaction_message:
            return self._answer(request, ResponseCode.NO_PERMISSION, self._transactions_forbidden())
        msg = StoreMessage(topic, store_queue_id, request.body, java_ordered(props), header.flag,
                           self._sys_flag(header, target_config), header.born_timestamp,
                           born_host(conn.remote_address), header.reconsume_times or 0)
        if prepared:  # transactions: parked in RMQ_SYS_TRANS_HALF_TOPIC queue 0 (parseHalfMessageInner)
            msg = half_message(msg)
        msg = self.schedule_message_service.handle_schedule_message(msg)  # delayed delivery (schedule.py)
        result = await self._put([msg], len(request.body), msg.topic, props)
        if result is None:
            return self._answer(request, ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)
        if prepared:  # transactions: open until END_TRANSACTION or the check service ends it
            self.transactional_message_service.half_stored(msg, result)
        return self.put_response(request, result, queue_id, props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX])

    def _transactions_forbidden(self) -> str:
        return f"the broker[{self.broker_config.broker_ip1}] sending transaction message is forbidden"

    def _sent_properties(self, text: str | None) -> dict[str, str]:
        """The producer's properties plus what Java's buildMsgContext adds, minus the reserved POP_CK."""
        return self._with_broker_properties(decode_properties(text or ""))

    def _with_broker_properties(self, props: dict[str, str]) -> dict[str, str]:
        props[PROPERTY_MSG_REGION] = self.region_id
        props[PROPERTY_TRACE_SWITCH] = self.trace_on
        props.pop(PROPERTY_POP_CK, None)
        return props

    @staticmethod
    def _sys_flag(header: SendMessageRequestHeader, config: TopicConfig) -> int:
        if config.topic_filter_type is TopicFilterType.MULTI_TAG:
            return header.sys_flag | _MULTI_TAGS
        return header.sys_flag

    @staticmethod
    def _is_prepared(header: SendMessageRequestHeader, props: dict[str, str]) -> bool:
        """A transaction half message (TRAN_MSG=true), unless it is an old client's retry of one."""
        if props.get(PROPERTY_TRANSACTION_PREPARED, "").lower() != "true":
            return False
        delay = props.get(PROPERTY_DELAY_TIME_LEVEL, "0")
        return not ((header.reconsume_times or 0) > 0 and delay.lstrip("-").isdigit() and int(delay) > 0)

    def _retry_or_dlq(self, request: RemotingCommand, header: SendMessageRequestHeader, props: dict[str, str],
                      queue_id: int, config: TopicConfig) -> tuple[str, int, TopicConfig] | RemotingCommand:
        """Where a message goes: its own topic, or for a %RETRY% topic retried more than the group allows, the
        group's %DLQ% topic (SendMessageProcessor.handleRetryAndDLQ; the orderly-lock shortcut is not modelled)."""
        topic = header.topic
        if not v.is_retry_topic(topic):
            return topic, queue_id, config
        group = v.parse_group(topic)
        group_config = self.subscription_group_manager.find_subscription_group_config(group)
        if group_config is None:
            return self._answer(request, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                f"subscription group not exist, {group} {suggest_todo()}")
        max_times = group_config.retry_max_times
        if request.version >= V3_4_9 and header.max_reconsume_times is not None:
            max_times = header.max_reconsume_times
        if (header.reconsume_times or 0) <= max_times:
            return topic, queue_id, config
        props[PROPERTY_DELAY_TIME_LEVEL] = "-1"
        dlq_config = self.topic_config_manager.create_dlq_topic(group)
        log.info("send %s to the DLQ %s: reconsumeTimes %s > %s", topic, dlq_config.topic_name,
                 header.reconsume_times, max_times)
        return dlq_config.topic_name, random_queue_id(1), dlq_config

    # -- batches ------------------------------------------------------------------------------------------------------

    async def _send_batch(self, conn: RemotingConnection, request: RemotingCommand,
                          header: SendMessageRequestHeader, config: TopicConfig) -> RemotingCommand:
        queue_id = header.queue_id if header.queue_id >= 0 else random_queue_id(config.write_queue_nums)
        if len(header.topic) > v.TOPIC_MAX_LENGTH:
            return self._answer(request, ResponseCode.MESSAGE_ILLEGAL,
                                f"message topic length too long {len(header.topic)}")
        if v.is_retry_topic(header.topic):
            return self._answer(request, ResponseCode.MESSAGE_ILLEGAL,
                                f"batch request does not support retry group {header.topic}")
        batch_props = decode_properties(header.properties or "")
        prepared = (transaction_type(header.sys_flag) == TRANSACTION_PREPARED_TYPE
                    and self.broker_config.rmq_transaction_batch_enable)  # rmq's transactional batches
        refusal = self._batch_refusal(header, batch_props, prepared)
        if refusal is not None:
            return self._answer(request, ResponseCode.MESSAGE_ILLEGAL, refusal)
        if len(request.body) > self.store_config.max_message_size:  # batch rules (issue 4)
            return self._answer(request, ResponseCode.SYSTEM_ERROR, BATCH_TOO_BIG_REMARK)
        if prepared and not self.broker_config.reject_transaction_message:
            encoded = await self._send_encoded_half_batch(conn, request, header, config, queue_id, batch_props)
            if encoded is not None:
                return encoded
        if prepared:  # not of the common shape, or refused: the general path, which names what is wrong
            items = self._batch_items(request, decode_batch_body)
            if isinstance(items, RemotingCommand):
                return items
            return await self._send_half_batch(conn, request, header, config, queue_id, items,
                                               batch_props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX))
        batch = StoreMessage(header.topic, queue_id, request.body, {}, 0, self._sys_flag(header, config),
                             header.born_timestamp, born_host(conn.remote_address), header.reconsume_times or 0)
        msgs = self._batch_messages(request, batch)
        if isinstance(msgs, RemotingCommand):
            return msgs
        result = await self._put(msgs, len(request.body), batch.topic, batch_props)
        if result is None:
            return self._answer(request, ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)
        return self.put_response(request, result, queue_id, batch_props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX))

    def _batch_messages(self, request: RemotingCommand,
                        batch: StoreMessage) -> list[StoreMessage | EncodedRecord] | RemotingCommand:
        """What a plain batch (``batch``: the request's fields, the batch body as its body) puts: its records encoded
        ahead in one call; where that cannot be (a malformed body, no C extension), a StoreMessage per item, or the
        answer that names what is wrong with the body."""
        limit = self.store_config.max_message_size
        records = encode_batch_ahead(batch, self.store_host, limit, limit + RECORD_HEADROOM)
        if records is not None:
            return records
        items = self._batch_items(request, decode_batch_items)
        if isinstance(items, RemotingCommand):
            return items
        return [StoreMessage(batch.topic, batch.queue_id, body, props, flag, batch.sys_flag, batch.born_timestamp,
                             batch.born_host, batch.reconsume_times, encoded_properties=encoded)
                for body, props, flag, encoded in items]

    def _batch_items(self, request: RemotingCommand,
                     decode: Callable[[bytes], list[Item]]) -> list[Item] | RemotingCommand:
        """The items of a batch body, or MESSAGE_ILLEGAL naming what is wrong with it."""
        try:
            items = decode(request.body)
        except CorruptRecord as err:
            return self._answer(request, ResponseCode.MESSAGE_ILLEGAL, f"the batch body is malformed: {err}")
        if not items:
            return self._answer(request, ResponseCode.MESSAGE_ILLEGAL, "the batch body holds no message")
        return items

    def _batch_refusal(self, header: SendMessageRequestHeader, batch_props: dict[str, str],
                       prepared: bool) -> str | None:
        """The store's refusals of a batch (CommitLog.asyncPutMessages): no transactions, no delay. A body over
        maxMessageSize is refused after these, by MessageExtEncoder's exception (BATCH_TOO_BIG_REMARK). A
        ``prepared`` batch (rmq's transactional batch) is a transaction, but still never delayed."""
        delay = batch_props.get(PROPERTY_DELAY_TIME_LEVEL, "0")
        delayed = delay.lstrip("-").isdigit() and int(delay) > 0
        if prepared and delayed:
            return f"a prepared batch cannot be delayed (DELAY={delay}): transactional messages are never delayed"
        if (transaction_type(header.sys_flag) != TRANSACTION_NOT_TYPE and not prepared) or delayed:
            return illegal_send_remark(self.store_config)
        return None

    async def _send_encoded_half_batch(self, conn: RemotingConnection, request: RemotingCommand,
                                       header: SendMessageRequestHeader, config: TopicConfig, queue_id: int,
                                       batch_props: dict[str, str]) -> RemotingCommand | None:
        """A prepared batch of the common shape (the sink's), its records encoded in one call (batch.HalfBatch) and
        stored as they are; None for any other batch, which takes ``_send_half_batch``."""
        origin = self._half_batch_origin(conn, header, config, queue_id)
        service = self.transactional_message_service
        batch = service.half_batch_records(request.body, origin, header.producer_group, self._added_properties())
        if batch is None:
            return None
        result = await self._put(batch.halves, len(request.body), HALF_TOPIC, _PREPARED)
        if result is None:
            return self._answer(request, ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)
        service.half_batch_records_stored(batch, header.producer_group, origin, result)
        return self.put_response(request, result, queue_id, batch_props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX))

    def _half_batch_origin(self, conn: RemotingConnection, header: SendMessageRequestHeader, config: TopicConfig,
                           queue_id: int) -> HalfBatchOrigin:
        return HalfBatchOrigin(header.topic, queue_id, self._sys_flag(header, config), header.born_timestamp,
                               born_host(conn.remote_address), header.reconsume_times or 0)

    def _added_properties(self) -> dict[str, str]:
        """The properties the broker adds to every half message of a prepared batch."""
        return {PROPERTY_MSG_REGION: self.region_id, PROPERTY_TRACE_SWITCH: self.trace_on,
                PROPERTY_CLUSTER: self.broker_config.broker_cluster_name}

    async def _send_half_batch(self, conn: RemotingConnection, request: RemotingCommand,
                               header: SendMessageRequestHeader, config: TopicConfig, queue_id: int,
                               items: list[BatchMessage], transaction_id: str | None) -> RemotingCommand:
        """rmq's prepared batch: each item a half message (as if sent alone) bound for ``queue_id``, all in one put,
        each registered open; refused whole, nothing stored, when one item may not be (transaction/batch.py)."""
        if self.broker_config.reject_transaction_message:
            return self._answer(request, ResponseCode.NO_PERMISSION, self._transactions_forbidden())
        refusal = half_batch_refusal(items, header.producer_group)
        if refusal is not None:
            return self._answer(request, ResponseCode.MESSAGE_ILLEGAL, refusal)
        origin = self._half_batch_origin(conn, header, config, queue_id)
        halves, commits = half_batch_messages(items, origin, self._added_properties())
        result = await self._put(halves, len(request.body), HALF_TOPIC, _PREPARED)
        if result is None:
            return self._answer(request, ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)
        self.transactional_message_service.half_batch_stored(halves, commits, result)
        return self.put_response(request, result, queue_id, transaction_id)

    def _metric_properties(self, request: RemotingCommand) -> Mapping[str, str]:
        """A single send's properties for the metrics' message type, decoded only when metrics are on (the fast
        path itself never builds the dict)."""
        if self.metrics is None:
            return {}
        ext = request.ext_fields or {}
        return decode_properties(ext.get("properties") or ext.get("i") or "")

    # -- the put and its answer ---------------------------------------------------------------------------------------

    async def _put(self, msgs: list[StoreMessage | EncodedRecord], size: int, topic: str,
                   props: Mapping[str, str]) -> PutMessageResult | None:
        """The store's result, or None when too many puts already wait for the store (back-pressure); ``topic`` is
        what the stats and metrics count it under (the messages' topic), ``props`` the request's properties (what
        the metrics' message type is read from)."""
        if self.puts_in_flight and (self.puts_in_flight >= self.max_puts_in_flight
                                    or self.bytes_in_flight + size > self.max_bytes_in_flight):
            log.warning("send refused: %d puts (%d bytes) already wait for the store", self.puts_in_flight,
                        self.bytes_in_flight)
            return None
        self.puts_in_flight += 1
        self.bytes_in_flight += size
        try:
            result = await self.put_messages(msgs)
        finally:
            self.puts_in_flight -= 1
            self.bytes_in_flight -= size
        if result.ok and result.append is not None:
            if self.stats_manager is not None:  # statsAll's TOPIC_PUT_NUMS
                self.stats_manager.record_put(topic, len(msgs), result.append.wrote_bytes)
            if self.metrics is not None:
                self.metrics.record_in(topic, props, len(msgs), result.append.wrote_bytes)
        return result

    def put_response(self, request: RemotingCommand, result: PutMessageResult, queue_id: int,
                     transaction_id: str | None) -> RemotingCommand:
        """SendMessageProcessor.handlePutMessageResult: Java's code and remark for each PutMessageStatus; a stored
        message (also on FLUSH_DISK_TIMEOUT) gets the response header with its offsetMsgId(s) and queue offset."""
        code, remark = send_put_status(result.status, self.store_config)
        if not result.ok or result.append is None:
            if result.reason and self.store_config.enable_d_leger_commit_log:  # rmq: which quorum or leader failed
                remark = f"{remark} ({result.reason})"
            return self._answer(request, code, remark)
        append = result.append
        header = SendMessageResponseHeader(msg_id=append.msg_id_text, queue_id=queue_id,
                                           queue_offset=append.queue_offset, transaction_id=transaction_id)
        return self._answer(request, code, None, header)
