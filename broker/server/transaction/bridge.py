"""What a transaction writes, as Java's TransactionalMessageBridge, EndTransactionProcessor, TransactionalMessageUtil
and DefaultTransactionalMessageCheckListener build it: the half message, the committed message, the op record, the
re-put half message of a check, the discarded message and the CHECK_TRANSACTION_STATE request.

Rule 1: the one statement of how transactional records are derived from each other. Pure functions over
StoreMessage / MessageRecord; the state machine lives in ``broker.server.transaction.service``.

The reference is Apache RocketMQ 5.5.0 (the version tests/apache/ runs; the mirror's HEAD differs in places).
Properties are written in the iteration order of the Java HashMap each record's properties string is built from
(``broker.server.message_properties``), so the records are Apache's byte for byte. Java quirks kept on purpose:

- The committed message has the half record's properties minus REAL_TOPIC and REAL_QID; TRAN_MSG=true, PGROUP and
  __transactionId__ stay (EndTransactionProcessor removes TRAN_MSG from the property map only after the string the
  store encodes was built), so that is what consumers of Apache see.
- The op record's properties are TAGS=d and WAIT=true (the string is built before setWaitStoreMsgOK(false) and the
  UNIQ_KEY are put in the map).
- The CHECK_TRANSACTION_STATE body carries WAIT=false (renewHalfMessageInner writes it into the shared map).

One difference: Java's re-put half message loses the message flag (renewHalfMessageInner never copies it); we keep
it, so a checked-then-committed message has the flag its producer gave it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence

from broker.common import validation as v
from broker.common.message import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    encode_properties,
)
from broker.common.record import MessageRecord, encode_record
from broker.remoting.codes import RequestCode
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.headers import CheckTransactionStateRequestHeader
from broker.server.message_properties import MESSAGE_MAP_CAPACITY, java_ordered
from broker.store.commit_log import StoreMessage

HALF_TOPIC = v.RMQ_SYS_TRANS_HALF_TOPIC
OP_TOPIC = v.RMQ_SYS_TRANS_OP_HALF_TOPIC
CHECK_MAX_TIME_TOPIC = v.RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC
TRANS_GROUP = v.CID_SYS_RMQ_TRANS  # the consumer group whose offsets say how far half and op queues are done
HALF_QUEUE_ID = 0  # every half message goes to queue 0; its op records to the op topic's queue 0
REMOVE_TAG = "d"  # TransactionalMessageUtil.REMOVE_TAG: the tag of op records
OFFSET_SEPARATOR = ","
# BrokerConfig.transactionOpMsgMaxSize's default: Java's getOpMessage appends "offset," entries to an op body while
# it is shorter than this, then starts the next op record; ours are cut the same way.
OP_MSG_MAX_SIZE = 4096
TCMT_QUEUE_NUMS = 1  # queues of TRANS_CHECK_MAX_TIME_TOPIC
_JAVA_LONG = re.compile(r"[+-]?\d+")


def parse_java_long(text: str | None) -> int | None:
    """Long.parseLong, or None where it would throw."""
    if text is None or not _JAVA_LONG.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def with_transaction_type(sys_flag: int, transaction_type: int) -> int:
    """MessageSysFlag.resetTransactionValue."""
    return (sys_flag & ~TRANSACTION_MASK) | transaction_type


def transaction_id(record: MessageRecord) -> str:
    """What ties a half message to its re-puts: the UNIQ_KEY its producer gave it (the send path always sets one)."""
    props = record.properties
    return (props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or props.get(PROPERTY_TRANSACTION_ID)
            or f"@{record.commit_log_offset}")


# -- immunity (CHECK_IMMUNITY_TIME_IN_SECONDS) -------------------------------------------------------------------------


def check_immunity_ms(text: str | None, transaction_timeout: int) -> int:
    """How old a half message must be before the check asks about it (TransactionalMessageServiceImpl's
    getImmunityTime: the property in seconds, or the transaction timeout when it is absent or not a number)."""
    seconds = parse_java_long(text)
    return transaction_timeout if seconds is None else seconds * 1000


@functools.lru_cache(maxsize=256)  # every END_TRANSACTION asks; producers use one or a few values
def end_immunity_ms(text: str, transaction_timeout: int) -> int:
    """After how long a producer may no longer end a message that has the property itself
    (TransactionalMessageUtil.getImmunityTime: never less than the transaction timeout)."""
    seconds = parse_java_long(text)
    return max(0 if seconds is None else seconds * 1000, transaction_timeout)


def past_end_immunity(half: MessageRecord, transaction_time_out: int, now_ms: int) -> bool:
    """A producer's own end of a half message with CHECK_IMMUNITY_TIME_IN_SECONDS comes too late once that time (at
    least transactionTimeOut) has passed: the check decides it now (EndTransactionProcessor's
    rejectCommitOrRollback)."""
    return past_immunity(half.properties.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS), half.born_timestamp,
                         transaction_time_out, now_ms)


def past_immunity(immunity: str | None, born_timestamp: int, transaction_time_out: int, now_ms: int) -> bool:
    """``past_end_immunity`` from the property's value and the half message's born timestamp."""
    if not immunity:
        return False
    return now_ms - born_timestamp > end_immunity_ms(immunity, transaction_time_out)


# -- records -----------------------------------------------------------------------------------------------------------


def half_message(msg: StoreMessage) -> StoreMessage:
    """TransactionalMessageBridge.parseHalfMessageInner: the prepared send parked in the half topic's queue 0, its
    destination kept in REAL_TOPIC / REAL_QID, its transaction id in __transactionId__, no transaction type."""
    props = dict(msg.properties)
    uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if uniq:
        props[PROPERTY_TRANSACTION_ID] = uniq
    props[PROPERTY_REAL_TOPIC] = msg.topic
    props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    return StoreMessage(HALF_TOPIC, HALF_QUEUE_ID, msg.body, java_ordered(props), msg.flag,  # not replace(): 2 us
                        with_transaction_type(msg.sys_flag, TRANSACTION_NOT_TYPE), msg.born_timestamp, msg.born_host,
                        msg.reconsume_times, msg.prepared_transaction_offset)


def real_queue(half: MessageRecord) -> tuple[str, int] | None:
    """(REAL_TOPIC, REAL_QID) of a half record, None when they are missing or malformed."""
    topic = half.properties.get(PROPERTY_REAL_TOPIC)
    queue_id = parse_java_long(half.properties.get(PROPERTY_REAL_QUEUE_ID))
    if not topic or queue_id is None or not 0 <= queue_id < 2**31:
        return None
    return topic, queue_id


def committed_message(half: MessageRecord, prepared_offset: int) -> StoreMessage:
    """EndTransactionProcessor.endMessageTransaction + the commit type: the message in its real queue, visible,
    pointing back at the half record (``prepared_offset``, its commit log offset)."""
    target = real_queue(half)
    if target is None:
        raise ValueError(f"half message at {half.commit_log_offset} has no REAL_TOPIC/REAL_QID")
    topic, queue_id = target
    props = {k: value for k, value in half.properties.items() if k not in (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID)}
    return StoreMessage(topic, queue_id, half.body or b"", java_ordered(props), half.flag,
                        with_transaction_type(half.sys_flag, TRANSACTION_COMMIT_TYPE), half.born_timestamp,
                        half.born_host, half.reconsume_times, prepared_offset)


_OP_PROPERTIES = java_ordered({PROPERTY_TAGS: REMOVE_TAG, PROPERTY_WAIT_STORE_MSG_OK: "true"}, MESSAGE_MAP_CAPACITY)


def op_message(half_offsets: Iterable[int], store_host: bytes, now_ms: int) -> StoreMessage:
    """An op record (TransactionalMessageBridge.makeOpMessageInner): tag "d", body the ended half queue offsets,
    each followed by "," (TransactionalMessageServiceImpl.deletePrepareMessage)."""
    body = "".join(f"{offset}{OFFSET_SEPARATOR}" for offset in half_offsets).encode()
    return StoreMessage(OP_TOPIC, HALF_QUEUE_ID, body, dict(_OP_PROPERTIES), 0, 0, now_ms, store_host)


def op_messages(half_offsets: Sequence[int], store_host: bytes, now_ms: int,
                max_size: int = OP_MSG_MAX_SIZE) -> list[tuple[StoreMessage, list[int]]]:
    """The op records that end ``half_offsets``, each with the offsets it names: as many as Java's op batches would
    be (an entry is added while the body is shorter than ``max_size``), in order. Each entry's text is made once,
    and a record's body is its entries joined (op_message's bytes)."""
    texts = [f"{offset}{OFFSET_SEPARATOR}" for offset in half_offsets]
    starts: list[int] = []
    size = max_size
    for index, text in enumerate(texts):
        if size >= max_size:
            starts.append(index)
            size = 0
        size += len(text)
    spans = zip(starts, [*starts[1:], len(texts)], strict=True)
    return [(StoreMessage(OP_TOPIC, HALF_QUEUE_ID, "".join(texts[start:end]).encode(), dict(_OP_PROPERTIES), 0, 0,
                          now_ms, store_host), list(half_offsets[start:end])) for start, end in spans]


def op_offsets(op: MessageRecord) -> list[int]:
    """The half queue offsets an op record ends (fillOpRemoveMap); none when its tag is not "d"."""
    if op.properties.get(PROPERTY_TAGS) != REMOVE_TAG or not op.body:
        return []
    parsed = (parse_java_long(part) for part in op.body.decode(errors="replace").split(OFFSET_SEPARATOR) if part)
    return [offset for offset in parsed if offset is not None]


def check_times(half: MessageRecord) -> int:
    """TRANSACTION_CHECK_TIMES: how often the check has asked about this half message (0 before the first)."""
    return parse_java_long(half.properties.get(PROPERTY_TRANSACTION_CHECK_TIMES)) or 0


def renewed_half_message(half: MessageRecord, times: int) -> StoreMessage:
    """The half message written again at the end of the half queue before a check (putBackHalfMsgQueue with
    renewHalfMessageInner), counting the check in TRANSACTION_CHECK_TIMES."""
    props = java_ordered({**half.properties, PROPERTY_TRANSACTION_CHECK_TIMES: str(times)})
    return StoreMessage(HALF_TOPIC, HALF_QUEUE_ID, half.body or b"", props, half.flag, half.sys_flag,
                        half.born_timestamp, half.born_host, half.reconsume_times)


def discarded_message(half: MessageRecord) -> StoreMessage:
    """A half message checked transactionCheckMax times, moved to TRANS_CHECK_MAX_TIME_TOPIC queue 0
    (DefaultTransactionalMessageCheckListener.toMessageExtBrokerInner)."""
    return StoreMessage(CHECK_MAX_TIME_TOPIC, 0, half.body or b"", dict(half.properties), half.flag, half.sys_flag,
                        half.born_timestamp, half.born_host, half.reconsume_times)


def check_request(half: MessageRecord, renewed: MessageRecord, broker_name: str) -> RemotingCommand:
    """CHECK_TRANSACTION_STATE about ``renewed`` (the re-put of ``half``), as AbstractTransactionalMessageCheckListener
    .sendCheckMessage and Broker2Client build it: the header names the new half record; the body is the message
    encoded by MessageDecoder.encode with its real topic and queue and storeSize 0 (so: computed)."""
    uniq = half.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    header = CheckTransactionStateRequestHeader(
        tran_state_table_offset=renewed.queue_offset, commit_log_offset=renewed.commit_log_offset, topic=HALF_TOPIC,
        msg_id=uniq, transaction_id=uniq, offset_msg_id=renewed.msg_id, bname=broker_name)
    topic, queue_id = real_queue(half) or (HALF_TOPIC, HALF_QUEUE_ID)
    props = java_ordered({**renewed.properties, PROPERTY_WAIT_STORE_MSG_OK: "false"})
    body = encode_record(
        topic=topic.encode(), queue_id=queue_id, body=half.body or b"", properties=encode_properties(props).encode(),
        flag=half.flag, sys_flag=half.sys_flag, born_timestamp=half.born_timestamp, born_host=half.born_host,
        store_host=half.store_host, store_timestamp=half.store_timestamp, queue_offset=renewed.queue_offset,
        commit_log_offset=renewed.commit_log_offset, reconsume_times=half.reconsume_times,
        prepared_transaction_offset=half.prepared_transaction_offset, crc=half.body_crc)
    return create_request(RequestCode.CHECK_TRANSACTION_STATE, header.to_ext(), body)


def producer_group(half: MessageRecord) -> str | None:
    return half.properties.get(PROPERTY_PRODUCER_GROUP)


def immunity_property(half: MessageRecord) -> str | None:
    return half.properties.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
