"""CommitLog: the append-only log every message is written to, and the source all indexes are rebuilt from.

Appends are single-writer (one lock, RocketMQ's PutMessageLock). Records are encoded outside the lock; inside it the
CommitLog only assigns queue offsets, stamps offsets and store time, and copies bytes into the mapped file. A put of
several records (a batch) always lands contiguously in one file: when it does not fit, the file is closed with a
BLANK filler and the put goes to the next file.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from broker.message import (
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    SysFlag,
    encode_properties,
    offset_msg_id,
    pack_host,
    transaction_type,
)
from broker.store.config import MessageStoreConfig
from broker.store.layout import (
    END_FILE_MIN_BLANK_LENGTH,
    MAX_PROPERTIES_LENGTH,
    MessageRecord,
    RecordCheck,
    RecordKind,
    check_record,
    decode_record,
    encode_blank,
    encode_record,
    record_size,
    stamp_record,
    store_timestamp_pos,
)
from broker.store.mapped_file import MappedFile, MappedFileQueue
from broker.store.results import AppendMessageResult, PutMessageStatus

_LOCAL = pack_host("127.0.0.1", 0)
# Host flag bits as plain ints: encode runs per message, and IntFlag arithmetic costs about a microsecond an operation.
_BORNHOST_V6 = int(SysFlag.BORNHOST_V6)
_STOREHOST_V6 = int(SysFlag.STOREHOSTADDRESS_V6)
# maxMessageSize bounds the body; the whole record may be this much larger (MessageExtEncoder does the same).
_RECORD_HEADROOM = 64 * 1024


@dataclass(slots=True)
class StoreMessage:
    """A message as the broker hands it to the store (RocketMQ's MessageExtBrokerInner)."""

    topic: str
    queue_id: int
    body: bytes
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = _LOCAL  # packed ip + port (message.pack_host)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    # Stored instead of encode_properties(properties) when set: a batch item's bytes as the producer wrote them
    # (layout.BatchMessage.encoded_properties); ``properties`` must say the same.
    encoded_properties: bytes | None = None


class EncodeError(Exception):
    """Internal: why a message cannot be stored; becomes a PutMessageResult status at the facade."""

    def __init__(self, status: PutMessageStatus, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def _takes_queue_offset(sys_flag: int) -> bool:
    """Prepared and rolled-back transaction records never enter a ConsumeQueue, so they take no queue offset."""
    return transaction_type(sys_flag) not in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)


class CommitLog:
    def __init__(self, config: MessageStoreConfig, store_host: bytes) -> None:
        self.config = config
        self.store_host = store_host
        self.queue = MappedFileQueue(config.commit_log_dir, config.mapped_file_size_commit_log)
        self.queue_offsets: dict[tuple[str, int], int] = {}  # next queue offset per (topic, queueId)
        self._lock = threading.Lock()
        self.last_store_timestamp = 0
        self._store_v6 = _STOREHOST_V6 if len(store_host) == 20 else 0

    # -- offsets ------------------------------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.queue.min_offset

    @property
    def max_offset(self) -> int:
        return self.queue.max_offset

    # -- append -------------------------------------------------------------------------------------------------

    def encode(self, msg: StoreMessage) -> bytes:
        """The record for ``msg`` with offsets and store time left zero; EncodeError when it cannot be stored."""
        props = (msg.encoded_properties if msg.encoded_properties is not None
                 else encode_properties(msg.properties).encode())
        if len(props) > MAX_PROPERTIES_LENGTH:
            raise EncodeError(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                              f"properties are {len(props)} bytes, at most {MAX_PROPERTIES_LENGTH} are allowed")
        topic = msg.topic.encode()
        limit = self.config.max_message_size
        if len(msg.body) > limit:
            raise EncodeError(PutMessageStatus.MESSAGE_ILLEGAL,
                              f"message body is {len(msg.body)} bytes, maxMessageSize is {limit}")
        sys_flag = (int(msg.sys_flag) & ~(_BORNHOST_V6 | _STOREHOST_V6)) | self._store_v6
        if len(msg.born_host) == 20:
            sys_flag |= _BORNHOST_V6
        record = encode_record(
            topic=topic, queue_id=msg.queue_id, body=msg.body, properties=props, flag=msg.flag, sys_flag=sys_flag,
            born_timestamp=msg.born_timestamp, born_host=msg.born_host, store_host=self.store_host,
            reconsume_times=msg.reconsume_times, prepared_transaction_offset=msg.prepared_transaction_offset,
        )
        if len(record) > limit + _RECORD_HEADROOM:
            raise EncodeError(PutMessageStatus.MESSAGE_ILLEGAL,
                              f"message is {len(record)} bytes stored, at most {limit + _RECORD_HEADROOM} fit")
        return record

    def append(self, msgs: list[StoreMessage], records: list[bytes]) -> AppendMessageResult:
        """Append encoded ``records`` (of ``msgs``) contiguously; assigns queue offsets, offsets and store time."""
        data = bytearray().join(records)  # one copy; stamped in place, then copied into the mapped file
        total = len(data)
        if total + END_FILE_MIN_BLANK_LENGTH > self.config.mapped_file_size_commit_log:
            raise EncodeError(PutMessageStatus.MESSAGE_ILLEGAL,
                              f"{total} bytes do not fit a CommitLog file of "
                              f"{self.config.mapped_file_size_commit_log} bytes")
        with self._lock:
            mf = self._file_with_room(total)
            store_ts = max(int(time.time() * 1000), self.last_store_timestamp)
            base = mf.end_offset
            result = AppendMessageResult(base, total, store_ts)
            pos = 0
            for msg, record in zip(msgs, records, strict=True):
                key = (msg.topic, msg.queue_id)
                if _takes_queue_offset(msg.sys_flag):
                    queue_offset = self.queue_offsets.get(key, 0)
                    self.queue_offsets[key] = queue_offset + 1
                else:
                    queue_offset = 0
                stamp_record(data, pos, queue_offset, base + pos, store_ts)
                result.queue_offsets.append(queue_offset)
                result.record_offsets.append(base + pos)
                pos += len(record)
            mf.append(data)
            self.last_store_timestamp = store_ts
        result.msg_ids = [offset_msg_id(self.store_host, off) for off in result.record_offsets]
        return result

    def _file_with_room(self, size: int) -> MappedFile:
        mf = self.queue.last_file_for_write(0)
        if size + END_FILE_MIN_BLANK_LENGTH > mf.free_space:
            blank = mf.free_space
            mf.append(encode_blank(blank)[:blank])
            mf.wrote_position = mf.file_size
            mf = self.queue.last_file_for_write(0)
        return mf

    # -- reads ----------------------------------------------------------------------------------------------------

    def read(self, offset: int, size: int) -> bytes | None:
        """``size`` bytes at ``offset`` if they are written and still kept, else None."""
        mf = self.queue.find(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos + size > mf.wrote_position:
            return None
        return bytes(mf.buffer[pos:pos + size])

    def read_record(self, offset: int, *, body: bool = True) -> MessageRecord | None:
        """The message stored at ``offset`` (lookup by physical offset, as VIEW_MESSAGE_BY_ID needs)."""
        mf = self.queue.find(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        check = check_record(mf.buffer, pos, mf.wrote_position)
        if check.kind is not RecordKind.MESSAGE:
            return None
        return decode_record(mf.buffer[pos:pos + check.size], body=body)

    def size_at(self, offset: int) -> int | None:
        mf = self.queue.find(offset)
        if mf is None or offset - mf.file_from_offset + 4 > mf.wrote_position:
            return None
        return record_size(mf.buffer, offset - mf.file_from_offset)

    def store_time_at(self, offset: int, size: int) -> int | None:
        """Store time of the record at ``offset`` without decoding it (ConsumeQueue time search)."""
        head = self.read(offset, min(size, 128))
        if head is None:
            return None
        sys_flag = int.from_bytes(head[36:40], "big")
        pos = store_timestamp_pos(sys_flag)
        return int.from_bytes(head[pos:pos + 8], "big", signed=True)

    def scan(self, offset: int, end: int | None = None) -> Iterator[tuple[int, RecordCheck, memoryview]]:
        """Walk the log from ``offset``: (offset, check, file buffer) per record or BLANK, stopping at the first
        invalid bytes or at ``end``. BLANKs are yielded so the caller sees file boundaries."""
        limit = self.max_offset if end is None else end
        while offset < limit:
            mf = self.queue.find(offset)
            if mf is None:
                return
            pos = offset - mf.file_from_offset
            check = check_record(mf.buffer, pos, mf.wrote_position)
            if check.kind is RecordKind.END:
                return
            yield offset, check, mf.buffer
            offset += check.size

    def first_store_timestamp(self, mf: MappedFile) -> int:
        """Store time of a file's first record, 0 when it has none (recovery picks its start file by this)."""
        check = check_record(mf.buffer, 0, mf.wrote_position)
        if check.kind is not RecordKind.MESSAGE:
            return 0
        return decode_record(mf.buffer[:check.size], body=False).store_timestamp
