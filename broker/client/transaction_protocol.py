"""Transactions on the wire, sans IO: the half message and END_TRANSACTION frames, rmq's transactional batches
(prepared SEND_BATCH_MESSAGE, END_TRANSACTION_BATCH) and how a broker says it serves them.

Rule 1: nothing here opens a connection or imports the asyncio clients: the Spark sink's tasks and driver frame their
requests with these (connector/sink_send.py, connector/sink_commit.py), and ``TransactionProducer``
(``broker.client.transaction``) builds on the same pieces. The batch body's layout is
``broker.remoting.transaction_batch``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from broker.client import protocol
from broker.client.blocking import BlockingRemotingClient, RequestTemplate
from broker.client.message import (
    Message,
    MessageBatch,
    MessageQueue,
    SendResult,
)
from broker.common.errors import ConfigError, LocalProtocolError, MQClientError
from broker.common.message import (
    PROPERTY_PRODUCER_GROUP,
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
from broker.remoting.codes import RequestCode, ResponseCode, RmqRequestCode
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.exchange import DEFAULT_TIMEOUT_MS
from broker.remoting.headers import (
    EndTransactionBatchRequestHeader,
    EndTransactionBatchResponseHeader,
    SendMessageRequestHeader,
)
from broker.remoting.signing import SessionCredentials
from broker.remoting.transaction_batch import TRANSACTION_BATCH_ENABLE_KEY, TransactionHandle, encode_end_batch_body


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



# -- helpers for synchronous callers (the Spark sink, connector/sink.py) ----------------------------------------------


def half_properties(group: str, extra: Mapping[str, str]) -> str:
    """The properties string every half message of ``group`` carries (TRAN_MSG, PGROUP, then ``extra``), for
    callers that append the per-message ones (UNIQ_KEY, TAGS...) themselves."""
    return encode_properties({PROPERTY_TRANSACTION_PREPARED: "true", PROPERTY_PRODUCER_GROUP: group, **extra})


def half_message_template(group: str, topic: str, broker_name: str,
                          credentials: SessionCredentials | None = None) -> RequestTemplate:
    """SEND_MESSAGE_V2 of a half message of ``group`` to ``topic`` on ``broker_name``, as send_message_header fills
    it, with queueId, sysFlag, bornTimestamp and properties open (in that order). Nothing in the frame but the
    sysFlag and the properties makes it a half message: with plain ones it sends a plain message. ``credentials``
    sign every frame (RequestTemplate)."""
    return _send_template(RequestCode.SEND_MESSAGE_V2, group, topic, broker_name, credentials)


def batch_message_template(group: str, topic: str, broker_name: str,
                           credentials: SessionCredentials | None = None) -> RequestTemplate:
    """SEND_BATCH_MESSAGE of ``group`` to ``topic`` on ``broker_name`` (the body: message_batch.encode_batch_body),
    with the same open fields as ``half_message_template``: a plain batch with sysFlag 0, rmq's prepared batch
    (every item a half message) with TRANSACTION_PREPARED_TYPE."""
    return _send_template(RequestCode.SEND_BATCH_MESSAGE, group, topic, broker_name, credentials)


def _send_template(code: RequestCode, group: str, topic: str, broker_name: str,
                   credentials: SessionCredentials | None) -> RequestTemplate:
    header = protocol.send_message_header(group, Message(topic, b""), MessageQueue(topic, broker_name, 0), 0,
                                          batch=code == RequestCode.SEND_BATCH_MESSAGE)
    wire = SendMessageRequestHeader.V2_WIRE
    ext: dict[str, str | None] = dict(header.to_ext(wire))
    for name in ("queue_id", "sys_flag", "born_timestamp", "properties"):
        ext[wire[name]] = None
    return RequestTemplate(code, ext, credentials)


def end_transaction_template(group: str, topic: str, broker_name: str, state: LocalTransactionState,
                             credentials: SessionCredentials | None = None) -> RequestTemplate:
    """END_TRANSACTION ``state`` as protocol.end_transaction_request builds it, with tranStateTableOffset,
    commitLogOffset, msgId and transactionId open (in that order): a producer's own end, answered (invoke it, not
    oneway)."""
    marks = {"queue_offset": -101, "commit_log_offset": -102, "msg_id": "\x00m", "transaction_id": "\x00t"}
    request = protocol.end_transaction_request(group, topic=topic, broker_name=broker_name,
                                               commit_or_rollback=state.transaction_type, **marks)
    opened = {str(v) for v in marks.values()}
    ext = {k: (None if v in opened else v) for k, v in request.ext_fields.items()}
    template = RequestTemplate(RequestCode.END_TRANSACTION, ext, credentials)
    assert len(template.open_fields) == 4 + (credentials is not None), template.open_fields
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
    return end_transaction_batch_body_request(group, topic, broker_name, state, encode_end_batch_body(handles))


def end_transaction_batch_body_request(group: str, topic: str, broker_name: str | None,
                                       state: LocalTransactionState, body: bytes) -> RemotingCommand:
    """END_TRANSACTION_BATCH with its body made already (``join_end_batch_body``: a sink's driver joins the
    handle bytes its tasks kept)."""
    if state is LocalTransactionState.UNKNOW:
        raise LocalProtocolError("END_TRANSACTION_BATCH commits or rolls back; UNKNOW is left to the check")
    header = EndTransactionBatchRequestHeader(producer_group=group, topic=topic,
                                              commit_or_rollback=state.transaction_type, bname=broker_name)
    return create_request(RmqRequestCode.END_TRANSACTION_BATCH, header.to_ext(), body)


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
