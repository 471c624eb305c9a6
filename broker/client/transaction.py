"""TransactionProducer: transactional sends (client/producer/TransactionMQProducer, DefaultMQProducerImpl
.sendMessageInTransaction / endTransaction / checkTransactionState).

A transactional send is a half message (TRAN_MSG=true, PGROUP, the PREPARED sysFlag) that stays invisible; then the
listener's ``execute_local_transaction`` runs and its answer ends the transaction with END_TRANSACTION (oneway):
COMMIT_MESSAGE makes the message visible, ROLLBACK_MESSAGE drops it, UNKNOW leaves it to the broker's check, which
later sends CHECK_TRANSACTION_STATE; ``check_local_transaction`` answers that, again with END_TRANSACTION.

Listener methods may be plain functions or coroutines. They run on the event loop, so a slow one should be async.

Examples:
    >>> class Listener:
    ...     def execute_local_transaction(self, msg, arg):
    ...         return LocalTransactionState.COMMIT_MESSAGE if save_order(arg) else LocalTransactionState.UNKNOW
    ...     def check_local_transaction(self, msg):
    ...         return LocalTransactionState.COMMIT_MESSAGE if order_saved(msg.msg_id) else LocalTransactionState.UNKNOW
    >>> async with TransactionProducer("tx_group", "127.0.0.1:9876", listener=Listener()) as producer:
    ...     result = await producer.send_message_in_transaction(Message("Orders", b"paid"), arg=order)
    ...     result.local_transaction_state  # doctest: +SKIP
    <LocalTransactionState.COMMIT_MESSAGE: 'COMMIT_MESSAGE'>
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from broker.client import protocol
from broker.client.blocking import BlockingRemotingClient, RequestTemplate
from broker.client.instance import ClientConfig, MQClientInstance
from broker.client.message import (
    Message,
    MessageBatch,
    MessageExt,
    MessageQueue,
    SendResult,
    SendStatus,
    check_message,
)
from broker.client.producer import Producer, ProducerConfig
from broker.client.route import TopicPublishInfo
from broker.common.errors import ConfigError, CorruptRecord, LocalProtocolError, MQClientError, RemotingError
from broker.common.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    decode_offset_msg_id,
    encode_properties,
)
from broker.common.properties import parse_properties
from broker.common.record import decode_record
from broker.common.validation import DEFAULT_PRODUCER_GROUP
from broker.remoting.client import DEFAULT_TIMEOUT_MS
from broker.remoting.codes import RequestCode, ResponseCode, RmqRequestCode
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.connection import RemotingConnection, exception_simple_desc
from broker.remoting.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionBatchRequestHeader,
    EndTransactionBatchResponseHeader,
    HeaderError,
    SendMessageRequestHeader,
)
from broker.remoting.transaction_batch import TRANSACTION_BATCH_ENABLE_KEY, TransactionHandle, encode_end_batch_body

log = logging.getLogger(__name__)


class LocalTransactionState(Enum):
    """producer/LocalTransactionState (UNKNOW is RocketMQ's spelling)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"

    @property
    def transaction_type(self) -> int:
        """The commitOrRollback value END_TRANSACTION carries (MessageSysFlag transaction types)."""
        return _END_TYPE[self]


_END_TYPE = {
    LocalTransactionState.COMMIT_MESSAGE: TRANSACTION_COMMIT_TYPE,
    LocalTransactionState.ROLLBACK_MESSAGE: TRANSACTION_ROLLBACK_TYPE,
    LocalTransactionState.UNKNOW: TRANSACTION_NOT_TYPE,
}


class TransactionListener(Protocol):
    """producer/TransactionListener. Either method may return the state or an awaitable of it."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState | Awaitable[
            LocalTransactionState]: ...

    def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState | Awaitable[
            LocalTransactionState]: ...


@dataclass(frozen=True, slots=True)
class TransactionSendResult(SendResult):
    """producer/TransactionSendResult: the half message's SendResult and what the local transaction said."""

    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


async def _state_of(value: LocalTransactionState | Awaitable[LocalTransactionState] | None) -> LocalTransactionState:
    if inspect.isawaitable(value):
        value = await value
    return value if isinstance(value, LocalTransactionState) else LocalTransactionState.UNKNOW


class TransactionProducer(Producer):
    """A Producer that also sends transactional messages; see the module docstring.

    Arguments:
        group: the producer group; the broker asks a live producer of this group about open transactions.
        listener: executes and checks local transactions (TransactionListener).
        namesrv_addr, config, client_config, instance: as for Producer.
    """

    def __init__(self, group: str = DEFAULT_PRODUCER_GROUP, namesrv_addr: str | None = None, *,
                 listener: TransactionListener | None = None, config: ProducerConfig | None = None,
                 client_config: ClientConfig | None = None, instance: MQClientInstance | None = None) -> None:
        super().__init__(group, namesrv_addr, config=config, client_config=client_config, instance=instance)
        self.listener = listener
        self._checks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Keep the route of the createTopicKey topic (TBW102), as 4.x's DefaultMQProducerImpl.start did (5.x no
        longer does): a producer that has sent nothing yet still learns the brokers and heartbeats them, so their
        checks reach it, e.g. when it replaces a crashed producer of the group."""
        self.topic_publish_info.setdefault(self.config.create_topic_key, TopicPublishInfo())
        await super().start()

    async def shutdown(self) -> None:
        for task in list(self._checks):
            task.cancel()
        await asyncio.gather(*self._checks, return_exceptions=True)
        await super().shutdown()

    async def send_message_in_transaction(self, msg: Message, arg: Any = None) -> TransactionSendResult:
        """Send ``msg`` as a half message, run the local transaction, end the transaction with its answer.

        Raises MQClientError when there is no listener or the half message cannot be sent; an exception of the
        local transaction is not raised: the transaction stays UNKNOW for the broker's check."""
        if self.listener is None:
            raise MQClientError(-1, "tranExecutor is null")
        if msg.delay_time_level != 0:  # a transactional message is never delayed
            msg.properties.pop(PROPERTY_DELAY_TIME_LEVEL, None)
        check_message(msg, self.config.max_message_size)
        msg.properties[PROPERTY_TRANSACTION_PREPARED] = "true"
        msg.properties[PROPERTY_PRODUCER_GROUP] = self.group
        try:
            result = await self.send(msg)
        except Exception as err:
            raise MQClientError(-1, "send message Exception") from err
        state, local_error = LocalTransactionState.UNKNOW, None
        if result.send_status is SendStatus.SEND_OK:
            if result.transaction_id is not None:
                msg.properties[PROPERTY_TRANSACTION_ID] = result.transaction_id
            try:
                state = await _state_of(self.listener.execute_local_transaction(msg, arg))
            except Exception as err:
                log.exception("executeLocalTransactionBranch failed for %s", result.msg_id)
                local_error = err
        else:  # stored, but not confirmed on disk or on the replica: not worth committing
            state = LocalTransactionState.ROLLBACK_MESSAGE
        try:
            await self.end_transaction(msg, result, state, local_error)
        except (MQClientError, RemotingError) as err:
            log.warning("local transaction %s is %s, but ending it at the broker failed: %s", result.msg_id,
                        state.value, err)
        return TransactionSendResult(result.send_status, result.msg_id, result.offset_msg_id, result.message_queue,
                                     result.queue_offset, result.transaction_id, result.region_id, state)

    async def end_transaction(self, msg: Message, result: SendResult, state: LocalTransactionState,
                              local_error: BaseException | None = None) -> None:
        """END_TRANSACTION (oneway) for the half message ``result`` names, to the master it went to."""
        _, commit_log_offset = decode_offset_msg_id(result.offset_msg_id or result.msg_id or "")
        broker_name = result.message_queue.broker_name
        addr = await self.instance.broker_address_for(result.message_queue)
        remark = (None if local_error is None
                  else f"executeLocalTransactionBranch exception: {type(local_error).__name__}: {local_error}")
        request = protocol.end_transaction_request(
            self.group, topic=msg.topic, broker_name=broker_name, msg_id=result.msg_id or "",
            commit_log_offset=commit_log_offset, queue_offset=result.queue_offset, transaction_id=result.transaction_id,
            commit_or_rollback=state.transaction_type, remark=remark)
        await self.instance.remoting.invoke_oneway(addr, request, self.config.send_msg_timeout)

    # -- CHECK_TRANSACTION_STATE (DefaultMQProducerImpl.checkTransactionState) ----------------------------------------

    def check_transaction_state(self, conn: RemotingConnection, msg: MessageExt,
                                header: CheckTransactionStateRequestHeader) -> None:
        """The broker asks about ``msg``: ask the listener (in a task of our own), answer on the same connection."""
        task = asyncio.get_running_loop().create_task(self._answer_check(conn, msg, header))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _answer_check(self, conn: RemotingConnection, msg: MessageExt,
                            header: CheckTransactionStateRequestHeader) -> None:
        if self.listener is None:
            log.warning("CheckTransactionState: producer group %s has no transaction listener", self.group)
            return
        state, error = LocalTransactionState.UNKNOW, None
        try:
            state = await _state_of(self.listener.check_local_transaction(msg))
        except Exception as err:
            log.exception("Broker call checkTransactionState, but checkLocalTransactionState failed")
            error = err
        if state is not LocalTransactionState.COMMIT_MESSAGE:
            log.warning("when broker check, client answers %s for transaction %s", state.value, header.transaction_id)
        remark = None if error is None else f"checkLocalTransactionState Exception: {exception_simple_desc(error)}"
        end = protocol.end_transaction_request(
            self.group, topic=header.topic, broker_name=header.bname,
            msg_id=msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id,
            commit_log_offset=header.commit_log_offset, queue_offset=header.tran_state_table_offset,
            transaction_id=header.transaction_id, commit_or_rollback=state.transaction_type, from_check=True,
            remark=remark)
        try:
            await conn.invoke_oneway(end)
        except RemotingError as err:
            log.error("endTransactionOneway to %s failed: %s", conn.remote_address, err)


def serve_check_transaction_state(producers: Mapping[str, object], conn: RemotingConnection,
                                  request: RemotingCommand) -> None:
    """ClientRemotingProcessor.checkTransactionState: decode the message the broker sends, hand it to the producer
    of its PGROUP. Nothing is answered (the request is oneway); the producer ends the transaction itself."""
    try:
        header = CheckTransactionStateRequestHeader.from_ext(request.ext_fields)
        msg = MessageExt.from_record(decode_record(request.body), header.bname or "")
    except (HeaderError, CorruptRecord, ValueError) as err:
        log.warning("checkTransactionState from %s: cannot decode it: %s", conn.remote_address, err)
        return
    group = msg.properties.get(PROPERTY_PRODUCER_GROUP)
    producer = producers.get(group) if group is not None else None
    check = getattr(producer, "check_transaction_state", None)
    if check is None:
        log.debug("checkTransactionState: no transactional producer of group %s here", group)
        return
    check(conn, msg, header)


# -- helpers for synchronous callers (the Spark sink, connector/sink.py) ----------------------------------------------


def half_properties(group: str, extra: Mapping[str, str]) -> str:
    """The properties string every half message of ``group`` carries (TRAN_MSG, PGROUP, then ``extra``), for
    callers that append the per-message ones (UNIQ_KEY, TAGS...) themselves."""
    return encode_properties({PROPERTY_TRANSACTION_PREPARED: "true", PROPERTY_PRODUCER_GROUP: group, **extra})


def half_message_template(group: str, topic: str, broker_name: str) -> RequestTemplate:
    """SEND_MESSAGE_V2 of a half message of ``group`` to ``topic`` on ``broker_name``, as send_message_header fills
    it, with queueId, sysFlag, bornTimestamp and properties open (in that order). Nothing in the frame but the
    sysFlag and the properties makes it a half message: with plain ones it sends a plain message."""
    return _send_template(RequestCode.SEND_MESSAGE_V2, group, topic, broker_name)


def batch_message_template(group: str, topic: str, broker_name: str) -> RequestTemplate:
    """SEND_BATCH_MESSAGE of ``group`` to ``topic`` on ``broker_name`` (the body: message_batch.encode_batch_body),
    with the same open fields as ``half_message_template``: a plain batch with sysFlag 0, rmq's prepared batch
    (every item a half message) with TRANSACTION_PREPARED_TYPE."""
    return _send_template(RequestCode.SEND_BATCH_MESSAGE, group, topic, broker_name)


def _send_template(code: RequestCode, group: str, topic: str, broker_name: str) -> RequestTemplate:
    header = protocol.send_message_header(group, Message(topic, b""), MessageQueue(topic, broker_name, 0), 0,
                                          batch=code == RequestCode.SEND_BATCH_MESSAGE)
    wire = SendMessageRequestHeader.V2_WIRE
    ext: dict[str, str | None] = dict(header.to_ext(wire))
    for name in ("queue_id", "sys_flag", "born_timestamp", "properties"):
        ext[wire[name]] = None
    return RequestTemplate(code, ext)


def end_transaction_template(group: str, topic: str, broker_name: str,
                             state: LocalTransactionState) -> RequestTemplate:
    """END_TRANSACTION ``state`` as protocol.end_transaction_request builds it, with tranStateTableOffset,
    commitLogOffset, msgId and transactionId open (in that order): a producer's own end, answered (invoke it, not
    oneway)."""
    marks = {"queue_offset": -101, "commit_log_offset": -102, "msg_id": "\x00m", "transaction_id": "\x00t"}
    request = protocol.end_transaction_request(group, topic=topic, broker_name=broker_name,
                                               commit_or_rollback=state.transaction_type, **marks)
    opened = {str(v) for v in marks.values()}
    ext = {k: (None if v in opened else v) for k, v in request.ext_fields.items()}
    template = RequestTemplate(RequestCode.END_TRANSACTION, ext)
    assert len(template.open_fields) == 4, template.open_fields
    return template


# -- rmq's transactional batches (broker/remoting/transaction_batch.py; rmq's broker only) ----------------------------


def broker_config_request() -> RemotingCommand:
    """GET_BROKER_CONFIG, to the master's address: its answer says whether transactional batches are served."""
    return create_request(RequestCode.GET_BROKER_CONFIG)


def transaction_batch_enabled(response: RemotingCommand) -> bool:
    """Whether a GET_BROKER_CONFIG answer says ``rmqTransactionBatchEnable=true``. Any other answer (a refusal,
    text that does not parse, the key missing as on Apache's broker, ``false``) means no: use the per-message path."""
    if response.code != ResponseCode.SUCCESS or not response.body:
        return False
    try:
        props = parse_properties(response.body.decode("utf-8"))
    except (UnicodeDecodeError, ConfigError):
        return False
    return props.get(TRANSACTION_BATCH_ENABLE_KEY, "").strip().lower() == "true"


def supports_transaction_batch(remote: BlockingRemotingClient | Callable[[RemotingCommand], RemotingCommand],
                               timeout_ms: float = DEFAULT_TIMEOUT_MS) -> bool:
    """Ask the broker ``remote`` talks to (a client of the master's address, or a function that invokes a request
    there) whether it serves transactional batches; detected, never assumed. A transport failure (RemotingError)
    is raised: no answer says nothing either way.

    Examples:
        >>> with BlockingRemotingClient(master_addr) as broker:  # doctest: +SKIP
        ...     batched = supports_transaction_batch(broker)
    """
    request = broker_config_request()
    if isinstance(remote, BlockingRemotingClient):
        return transaction_batch_enabled(remote.invoke(request, timeout_ms))
    return transaction_batch_enabled(remote(request))


def half_batch_request(group: str, mq: MessageQueue, messages: Sequence[Message]) -> RemotingCommand:
    """SEND_BATCH_MESSAGE of ``messages`` as half messages of ``group`` into ``mq`` (rmq's prepared batch): each
    gets TRAN_MSG=true, PGROUP and its UNIQ_KEY (set on the messages, as a producer's send does), the header the
    TRANSACTION_PREPARED sysFlag. MQClientError when the messages cannot make a batch (MessageBatch's rules)."""
    for msg in messages:
        msg.properties[PROPERTY_TRANSACTION_PREPARED] = "true"
        msg.properties[PROPERTY_PRODUCER_GROUP] = group
    batch = MessageBatch(messages)
    header = protocol.send_message_header(group, batch, mq, TRANSACTION_PREPARED_TYPE, batch=True)
    return protocol.send_message_request(header, batch.body, batch=True)


def half_batch_handles(result: SendResult, messages: Sequence[Message]) -> list[TransactionHandle]:
    """The handles of a prepared batch's half messages from its SendResult (``protocol.parse_send_response``): the
    answer's offsetMsgIds in item order, the half queue offsets consecutive from its queueOffset."""
    offset_ids = result.offset_msg_id.split(",") if result.offset_msg_id else []
    if len(offset_ids) != len(messages):
        raise MQClientError(-1, f"the batch answer names {len(offset_ids)} stored messages, {len(messages)} were sent")
    return [TransactionHandle(decode_offset_msg_id(offset_id)[1], result.queue_offset + i,
                              msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""))
            for i, (offset_id, msg) in enumerate(zip(offset_ids, messages, strict=True))]


def end_transaction_batch_request(group: str, topic: str, broker_name: str | None, state: LocalTransactionState,
                                  handles: Sequence[TransactionHandle | tuple[int, int, str]]) -> RemotingCommand:
    """END_TRANSACTION_BATCH: commit or roll back every half message ``handles`` names (all sent by ``group`` to
    ``topic`` on ``broker_name``), answered (invoke it, not oneway). LocalProtocolError for UNKNOW (nothing to end)
    or a handle count outside 1..END_TRANSACTION_BATCH_MAX."""
    if state is LocalTransactionState.UNKNOW:
        raise LocalProtocolError("END_TRANSACTION_BATCH commits or rolls back; UNKNOW is left to the check")
    header = EndTransactionBatchRequestHeader(producer_group=group, topic=topic,
                                              commit_or_rollback=state.transaction_type, bname=broker_name)
    return create_request(RmqRequestCode.END_TRANSACTION_BATCH, header.to_ext(), encode_end_batch_body(handles))


@dataclass(frozen=True, slots=True)
class EndTransactionBatchResult:
    """What the broker answered an END_TRANSACTION_BATCH: SUCCESS with how many it ended now and how many had been
    ended before (by a check that won a race: not a failure), or a refusal (nothing ended) with its remark."""

    code: int
    remark: str | None
    ended: int = 0
    already_ended: int = 0

    @property
    def ok(self) -> bool:
        return self.code == ResponseCode.SUCCESS


def parse_end_transaction_batch_response(response: RemotingCommand) -> EndTransactionBatchResult:
    """The answer as a status value; HeaderError when a SUCCESS answer lacks its counts."""
    if response.code != ResponseCode.SUCCESS:
        return EndTransactionBatchResult(response.code, response.remark)
    header = EndTransactionBatchResponseHeader.from_ext(dict(response.ext_fields or {}))
    return EndTransactionBatchResult(response.code, response.remark, header.ended, header.already_ended)
