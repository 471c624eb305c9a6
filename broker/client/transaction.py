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
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from broker.client import protocol
from broker.client.instance import ClientConfig, MQClientInstance
from broker.client.message import (
    Message,
    MessageExt,
    SendResult,
    SendStatus,
    check_message,
)
from broker.client.producer import Producer, ProducerConfig
from broker.client.route import TopicPublishInfo
from broker.client.transaction_protocol import LocalTransactionState
from broker.common.errors import CorruptRecord, MQClientError, RemotingError
from broker.common.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    decode_offset_msg_id,
)
from broker.common.record import decode_record
from broker.common.validation import DEFAULT_PRODUCER_GROUP
from broker.remoting.command import RemotingCommand
from broker.remoting.connection import RemotingConnection, exception_simple_desc
from broker.remoting.headers import (
    CheckTransactionStateRequestHeader,
    HeaderError,
)
from broker.remoting.signing import SessionCredentials

log = logging.getLogger(__name__)


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
        namesrv_addr, config, client_config, instance, credentials: as for Producer.
    """

    def __init__(self, group: str = DEFAULT_PRODUCER_GROUP, namesrv_addr: str | None = None, *,
                 listener: TransactionListener | None = None, config: ProducerConfig | None = None,
                 client_config: ClientConfig | None = None, instance: MQClientInstance | None = None,
                 credentials: SessionCredentials | None = None) -> None:
        super().__init__(group, namesrv_addr, config=config, client_config=client_config, instance=instance,
                         credentials=credentials)
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
                                     result.queue_offset, result.transaction_id, result.region_id, result.trace_on,
                                     local_transaction_state=state)

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
        if self.trace_dispatcher is not None:
            self.trace_dispatcher.end_transaction(self.group, msg, result.msg_id, addr, state.value,
                                                  result.transaction_id, from_check=False)
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
        msg_id = msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id
        end = protocol.end_transaction_request(
            self.group, topic=header.topic, broker_name=header.bname, msg_id=msg_id,
            commit_log_offset=header.commit_log_offset, queue_offset=header.tran_state_table_offset,
            transaction_id=header.transaction_id, commit_or_rollback=state.transaction_type, from_check=True,
            remark=remark)
        if self.trace_dispatcher is not None:
            self.trace_dispatcher.end_transaction(self.group, msg, msg_id, conn.remote_address,
                                                  state.value, header.transaction_id, from_check=True)
        try:
            await conn.invoke_oneway(self.instance.remoting.signed(end))
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
