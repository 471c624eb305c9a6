"""What the client API speaks: Message, MessageExt, MessageQueue, SendResult, PullResult, and the client message id.

Rule 1: the client-side message types, the UNIQ_KEY format (MessageClientIDSetter) and the decoding of a pulled body
into MessageExt live here. Byte layouts come from ``broker.store.layout``, property names and flags from
``broker.common.message``, and so does MessageQueue, which the broker shares (it is imported here so that client
code keeps finding it beside Message).

UNIQ_KEY (MessageClientIDSetter.createUniqID), 16 bytes written as 32 upper-case hex digits::

    off  field                 size
    0    client ip             4     the host's address (16 for IPv6: 56 hex digits, as Java)
    4    pid                   2     low 16 bits
    6    class loader hash     4     Java: MessageClientIDSetter's class loader hashCode; here a random int per process
    10   ms since month start  4     local time, first day of the month 00:00:00.000
    14   counter               2     low 16 bits of a process-wide counter
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from broker.common.errors import MQClientError
from broker.common.message import (
    COMPRESSION_TYPE_MASK,
    COMPRESSION_ZLIB_TYPE,
    KEY_SEPARATOR,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_SHARDING_KEY,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    MessageQueue,
    SysFlag,
    create_uniq_id,
    format_host,
    offset_msg_id,
)
from broker.common.message_batch import BatchMessage, encode_batch_body
from broker.common.record import MessageRecord, iter_records
from broker.common.validation import (
    RETRY_GROUP_TOPIC_PREFIX,
    TOPIC_MAX_LENGTH,
    VALID_NAME_PATTERN,
    is_not_allowed_send_topic,
    is_topic_or_group_illegal,
)
from broker.remoting.codes import ResponseCode

log = logging.getLogger(__name__)

_ZLIB_TYPES = (0, COMPRESSION_ZLIB_TYPE)
_COMPRESSED = int(SysFlag.COMPRESSED)
MAX_MESSAGE_SIZE = 4 * 1024 * 1024  # DefaultMQProducer.maxMessageSize


# -- Message -----------------------------------------------------------------------------------------------------------


class Message:
    """A message to send (common/.../message/Message): topic, body, flag and properties.

    Like Java's constructor it always sets the WAIT property (``wait_store_msg_ok``).

    Examples:
        >>> msg = Message("TopicTest", b"hello", tags="TagA", keys=["k1", "k2"])
        >>> msg.tags, msg.keys, msg.properties["WAIT"]
        ('TagA', 'k1 k2', 'true')
    """

    __slots__ = ("topic", "body", "flag", "properties")

    def __init__(self, topic: str, body: bytes, *, tags: str | None = None, keys: str | Iterable[str] | None = None,
                 flag: int = 0, properties: Mapping[str, str] | None = None, wait_store_msg_ok: bool = True) -> None:
        self.topic = topic
        self.body = bytes(body) if body is not None else body
        self.flag = flag
        self.properties: dict[str, str] = {}
        if tags:
            self.properties[PROPERTY_TAGS] = tags
        if keys:
            self.properties[PROPERTY_KEYS] = keys if isinstance(keys, str) else KEY_SEPARATOR.join(keys)
        self.properties[PROPERTY_WAIT_STORE_MSG_OK] = "true" if wait_store_msg_ok else "false"
        if properties:
            self.properties.update(properties)

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(PROPERTY_KEYS)

    @property
    def wait_store_msg_ok(self) -> bool:
        return self.properties.get(PROPERTY_WAIT_STORE_MSG_OK) != "false"

    @property
    def delay_time_level(self) -> int:
        value = self.properties.get(PROPERTY_DELAY_TIME_LEVEL)
        return int(value) if value else 0

    @delay_time_level.setter
    def delay_time_level(self, level: int) -> None:
        self.properties[PROPERTY_DELAY_TIME_LEVEL] = str(level)

    @property
    def sharding_key(self) -> str | None:
        return self.properties.get(PROPERTY_SHARDING_KEY)

    @property
    def uniq_id(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    def put_user_property(self, name: str, value: str) -> None:
        self.properties[name] = value

    def __repr__(self) -> str:
        size = len(self.body) if self.body is not None else None
        return f"Message(topic={self.topic!r}, flag={self.flag}, properties={self.properties!r}, body={size} bytes)"


# -- MessageExt --------------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class MessageExt:
    """A stored message as a consumer sees it (MessageClientExt): the record's fields, hosts as "ip:port", and the
    queue it came from. ``msg_id`` is the UNIQ_KEY when the producer set one, else the offsetMsgId, as in Java."""

    topic: str
    body: bytes
    flag: int
    properties: dict[str, str]
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: str
    store_timestamp: int
    store_host: str
    reconsume_times: int
    prepared_transaction_offset: int
    body_crc: int
    store_size: int
    offset_msg_id: str
    broker_name: str = ""

    @classmethod
    def from_record(cls, record: MessageRecord, broker_name: str = "") -> MessageExt:
        body, sys_flag = record.body or b"", record.sys_flag
        if sys_flag & _COMPRESSED:
            body, sys_flag = _decompress(body, sys_flag, record.commit_log_offset)
        return cls(
            topic=record.topic, body=body, flag=record.flag, properties=record.properties, queue_id=record.queue_id,
            queue_offset=record.queue_offset, commit_log_offset=record.commit_log_offset, sys_flag=sys_flag,
            born_timestamp=record.born_timestamp, born_host=format_host(record.born_host),
            store_timestamp=record.store_timestamp, store_host=format_host(record.store_host),
            reconsume_times=record.reconsume_times, prepared_transaction_offset=record.prepared_transaction_offset,
            body_crc=record.body_crc, store_size=record.store_size,
            offset_msg_id=offset_msg_id(record.store_host, record.commit_log_offset), broker_name=broker_name,
        )

    @property
    def msg_id(self) -> str:
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or self.offset_msg_id

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> str | None:
        return self.properties.get(PROPERTY_KEYS)

    @property
    def message_queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)


def _decompress(body: bytes, sys_flag: int, offset: int) -> tuple[bytes, int]:
    """MessageDecoder inflates a COMPRESSED body and clears the flag. Only ZLIB ships with Python; an LZ4 or ZSTD
    body, or one that does not inflate, is handed over as stored, with the flag kept so the caller can tell."""
    if sys_flag & COMPRESSION_TYPE_MASK not in _ZLIB_TYPES:
        log.warning("message at commit log offset %s is compressed with type %s, which this client cannot inflate",
                    offset, (sys_flag & COMPRESSION_TYPE_MASK) >> 8)
        return body, sys_flag
    try:
        return zlib.decompress(body), sys_flag & ~_COMPRESSED
    except zlib.error as err:
        # A producer may flag a body compressed that is not; one such message must not make a queue unreadable.
        log.warning("message at commit log offset %s is flagged compressed but does not inflate: %s", offset, err)
        return body, sys_flag


def compress_body(body: bytes, level: int = 5) -> tuple[bytes, int]:
    """The producer's tryToCompressMessage with ZLIB: the deflated body and the sysFlag bits to send with it."""
    return zlib.compress(body, level), _COMPRESSED | COMPRESSION_ZLIB_TYPE


def decode_messages(body: bytes, broker_name: str = "") -> list[MessageExt]:
    """The messages of a PULL_MESSAGE response body (MessageDecoder.decodesBatch, bodies read and inflated)."""
    return [MessageExt.from_record(record, broker_name) for record in iter_records(body)]


# -- results -----------------------------------------------------------------------------------------------------------


class SendStatus(Enum):
    """producer/SendStatus: every value means the broker stored the message; the last three say a replica or the
    disk did not confirm in time."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(frozen=True, slots=True)
class SendResult:
    """producer/SendResult. ``msg_id`` is the UNIQ_KEY (comma-separated for a batch), ``offset_msg_id`` the
    broker's store-host-and-offset id (comma-separated for a batch), ``queue_offset`` the first message's."""

    send_status: SendStatus
    msg_id: str | None
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str = "DefaultRegion"
    trace_on: bool = True  # the broker's traceOn (the TRACE_ON field of its answer): false turns Pub traces off


class PullStatus(Enum):
    """consumer/PullStatus, from the PULL_MESSAGE response code."""

    FOUND = "FOUND"  # SUCCESS
    NO_NEW_MSG = "NO_NEW_MSG"  # PULL_NOT_FOUND
    NO_MATCHED_MSG = "NO_MATCHED_MSG"  # PULL_RETRY_IMMEDIATELY
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"  # PULL_OFFSET_MOVED


@dataclass(slots=True)
class PullResult:
    """consumer/PullResult plus the raw body: ``body`` holds the stored records as the broker sent them (for bulk
    decoding, e.g. into Arrow); ``messages`` is filled when the caller asked for decoded messages."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    body: bytes | memoryview = b""  # a view of the frame's buffer when pulled with BlockingRemotingClient.receive
    messages: list[MessageExt] = field(default_factory=list)
    suggest_which_broker_id: int = 0


# -- UNIQ_KEY (MessageClientIDSetter) ----------------------------------------------------------------------------------


def set_uniq_id(msg: Message) -> str:
    """MessageClientIDSetter.setUniqID: keep an id the message already has."""
    uniq = msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if uniq is None:
        uniq = msg.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = create_uniq_id()
    return uniq


def encode_batch(messages: Iterable[Message]) -> bytes:
    """The SEND_BATCH_MESSAGE body of ``messages`` (MessageBatch.encode): each one's flag, body and properties."""
    return encode_batch_body(BatchMessage(m.body, m.properties, m.flag) for m in messages)


# -- Validators (client/Validators.java) and MessageBatch --------------------------------------------------------------


def check_topic(topic: str | None) -> None:
    """Validators.checkTopic and isNotAllowedSendTopic, with Java's texts."""
    if topic is None or not topic.strip():
        raise MQClientError(-1, "The specified topic is blank")
    if len(topic) > TOPIC_MAX_LENGTH:
        raise MQClientError(-1, f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}.")
    if is_topic_or_group_illegal(topic):
        raise MQClientError(-1, f"The specified topic[{topic}] contains illegal characters, allowing only "
                                f"{VALID_NAME_PATTERN}")
    if is_not_allowed_send_topic(topic):
        raise MQClientError(-1, f"Sending message to topic[{topic}] is forbidden.")


def check_message(msg: Message | None, max_message_size: int = MAX_MESSAGE_SIZE) -> None:
    """Validators.checkMessage: a topic a client may send to, and a body of 1 byte to ``max_message_size``."""
    if msg is None:
        raise MQClientError(ResponseCode.MESSAGE_ILLEGAL, "the message is null")
    check_topic(msg.topic)
    if msg.body is None:
        raise MQClientError(ResponseCode.MESSAGE_ILLEGAL, "the message body is null")
    if len(msg.body) == 0:
        raise MQClientError(ResponseCode.MESSAGE_ILLEGAL, "the message body length is zero")
    if len(msg.body) > max_message_size:
        raise MQClientError(ResponseCode.MESSAGE_ILLEGAL,
                            f"the message body size over max value, MAX: {max_message_size}")


class MessageBatch(Message):
    """Several messages of one topic sent as one SEND_BATCH_MESSAGE (common/message/MessageBatch)."""

    __slots__ = ("messages",)

    def __init__(self, messages: Sequence[Message], max_message_size: int = MAX_MESSAGE_SIZE) -> None:
        if not messages:
            raise MQClientError(-1, "Failed to initiate the MessageBatch: no messages")
        first = messages[0]
        for msg in messages:  # MessageBatch.generateFromList
            if msg.delay_time_level > 0:
                raise MQClientError(-1, "TimeDelayLevel is not supported for batching")
            if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                raise MQClientError(-1, "Retry Group is not supported for batching")
            if msg.topic != first.topic:
                raise MQClientError(-1, "The topic of the messages in one batch should be the same")
            if msg.wait_store_msg_ok != first.wait_store_msg_ok:
                raise MQClientError(-1, "The waitStoreMsgOK of the messages in one batch should the same")
            check_message(msg, max_message_size)
            set_uniq_id(msg)
        super().__init__(first.topic, encode_batch(messages), wait_store_msg_ok=first.wait_store_msg_ok)
        set_uniq_id(self)
        self.messages = list(messages)
