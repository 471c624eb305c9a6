"""CommitLog: the append-only log every message is written to, and the source all indexes are rebuilt from.

Appends are single-writer (one lock, RocketMQ's PutMessageLock). Inside it a put's records are packed in one pass
with their final queue offsets, offsets and store time, then copied into the mapped file at once (``put``). A put of
several records (a batch) always lands contiguously in one file: when it does not fit, the file is closed with a
BLANK filler and the put goes to the next file. A PrefaultService keeps the pages ahead of the write position
mapped, so the copy does not take a page fault per page.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from zlib import crc32

from broker.message import (
    TRANSACTION_MASK,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    SysFlag,
    encode_properties,
    pack_host,
)
from broker.store.config import MessageStoreConfig
from broker.store.layout import (
    END_FILE_MIN_BLANK_LENGTH,
    MAX_PROPERTIES_LENGTH,
    PROPERTIES_LENGTH,
    MessageRecord,
    MessageVersion,
    RecordCheck,
    RecordKind,
    check_record,
    decode_record,
    encode_blank,
    record_head,
    record_size,
    store_timestamp_pos,
    topic_field,
)
from broker.store.mapped_file import MappedFile, MappedFileQueue, PrefaultService
from broker.store.results import AppendMessageResult, PutMessageStatus

_LOCAL = pack_host("127.0.0.1", 0)
# Host flag bits as plain ints: encode runs per message, and IntFlag arithmetic costs about a microsecond an operation.
_BORNHOST_V6 = int(SysFlag.BORNHOST_V6)
_STOREHOST_V6 = int(SysFlag.STOREHOSTADDRESS_V6)
_HOST_V6_MASK = _BORNHOST_V6 | _STOREHOST_V6
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


def _stored_sys_flag(msg: StoreMessage, store_v6: int) -> int:
    """The SYSFLAG a record is written with: the message's, its host bits set by the hosts' lengths."""
    sys_flag = (int(msg.sys_flag) & ~_HOST_V6_MASK) | store_v6
    return sys_flag | _BORNHOST_V6 if len(msg.born_host) == 20 else sys_flag


class CommitLog:
    def __init__(self, config: MessageStoreConfig, store_host: bytes) -> None:
        self.config = config
        self.store_host = store_host
        self.queue = MappedFileQueue(config.commit_log_dir, config.mapped_file_size_commit_log)
        self.prefaulter = PrefaultService(self.queue)  # started with the store's services
        self._topic_fields: dict[str, tuple[int, bytes]] = {}  # topic -> (MAGICCODE, TOPIC field)
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

    def put(self, msgs: list[StoreMessage]) -> AppendMessageResult:
        """Encode ``msgs`` and append them contiguously, all or none; EncodeError when one cannot be stored.

        Records are packed with their final queue offsets, physical offsets and store time inside the lock, in one
        pass and one ``join`` per put: with the GIL, encoding outside the lock would buy no parallelism, and a
        second stamping pass costs a few struct calls per message."""
        with self._lock:
            mf = self.queue.last_file_for_write(0)
            store_ts = max(int(time.time() * 1000), self.last_store_timestamp)
            parts, queue_offsets, record_offsets, pending, total = self._encode(msgs, mf.end_offset, store_ts)
            if total + END_FILE_MIN_BLANK_LENGTH > mf.free_space:
                if total + END_FILE_MIN_BLANK_LENGTH > self.config.mapped_file_size_commit_log:
                    raise EncodeError(PutMessageStatus.MESSAGE_ILLEGAL,
                                      f"{total} bytes do not fit a CommitLog file of "
                                      f"{self.config.mapped_file_size_commit_log} bytes")
                mf = self._roll(mf)
                parts, queue_offsets, record_offsets, pending, total = self._encode(msgs, mf.end_offset, store_ts)
            base = mf.end_offset
            mf.append(b"".join(parts))
            self.queue_offsets.update(pending)
            self.last_store_timestamp = store_ts
        self.prefaulter.poke(mf)
        return AppendMessageResult(base, total, store_ts, queue_offsets, record_offsets, self.store_host)

    def _encode(self, msgs: list[StoreMessage], base: int,
                store_ts: int) -> tuple[list[bytes], list[int], list[int], dict[tuple[str, int], int], int]:
        """The parts of the records of ``msgs`` placed at ``base`` (five per record, in order), their queue and
        physical offsets, the next queue offsets they take (committed by the caller once the put succeeds) and
        their total size."""
        limit = self.config.max_message_size
        record_limit = limit + _RECORD_HEADROOM
        store_host, store_v6 = self.store_host, self._store_v6
        topic_fields, next_offsets = self._topic_fields, self.queue_offsets
        pending: dict[tuple[str, int], int] = {}
        head_v4 = record_head(0)  # both hosts IPv4: nearly every record
        pack_props_length = PROPERTIES_LENGTH.pack
        parts: list[bytes] = []
        queue_offsets: list[int] = []
        record_offsets: list[int] = []
        pos = base
        for msg in msgs:
            props = msg.encoded_properties
            if props is None:
                props = encode_properties(msg.properties).encode()
            props_len = len(props)
            if props_len > MAX_PROPERTIES_LENGTH:
                raise EncodeError(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                                  f"properties are {props_len} bytes, at most {MAX_PROPERTIES_LENGTH} are allowed")
            body = msg.body
            body_len = len(body)
            if body_len > limit:
                raise EncodeError(PutMessageStatus.MESSAGE_ILLEGAL,
                                  f"message body is {body_len} bytes, maxMessageSize is {limit}")
            topic = msg.topic
            field = topic_fields.get(topic)
            if field is None:
                field = topic_fields[topic] = topic_field(topic.encode())
            magic, topic_bytes = field
            sys_flag = _stored_sys_flag(msg, store_v6)
            head = record_head(sys_flag) if sys_flag & _HOST_V6_MASK else head_v4
            size = head.size + body_len + len(topic_bytes) + PROPERTIES_LENGTH.size + props_len
            if size > record_limit:
                raise EncodeError(PutMessageStatus.MESSAGE_ILLEGAL,
                                  f"message is {size} bytes stored, at most {record_limit} fit")
            tx = sys_flag & TRANSACTION_MASK
            if tx == TRANSACTION_PREPARED_TYPE or tx == TRANSACTION_ROLLBACK_TYPE:
                queue_offset = 0  # prepared and rolled-back records never enter a ConsumeQueue
            else:
                key = (topic, msg.queue_id)
                queue_offset = pending.get(key)
                if queue_offset is None:
                    queue_offset = next_offsets.get(key, 0)
                pending[key] = queue_offset + 1
            parts += (
                head.pack(size, magic, crc32(body) & 0x7FFFFFFF, msg.queue_id, msg.flag, queue_offset, pos, sys_flag,
                          msg.born_timestamp, msg.born_host, store_ts, store_host, msg.reconsume_times,
                          msg.prepared_transaction_offset, body_len),
                body, topic_bytes, pack_props_length(props_len), props,
            )
            queue_offsets.append(queue_offset)
            record_offsets.append(pos)
            pos += size
        return parts, queue_offsets, record_offsets, pending, pos - base

    def stored_record(self, msg: StoreMessage, append: AppendMessageResult, index: int = 0) -> MessageRecord:
        """What ``read_record`` returns for ``msgs[index]`` of the put that ``append`` describes, made from the message
        instead of read back and decoded: for callers that keep what they just wrote (the open half messages, which
        END_TRANSACTION ends). ``record.properties`` is ``msg.properties`` itself, so it says what was stored only
        when every key and value is a non-empty string (``decode_properties`` drops the others)."""
        offsets = append.record_offsets
        offset = offsets[index]
        end = offsets[index + 1] if index + 1 < len(offsets) else append.wrote_offset + append.wrote_bytes
        return MessageRecord(end - offset, MessageVersion.for_topic(msg.topic.encode()), crc32(msg.body) & 0x7FFFFFFF,
                             msg.queue_id, msg.flag, append.queue_offsets[index], offset,
                             _stored_sys_flag(msg, self._store_v6), msg.born_timestamp, msg.born_host,
                             append.store_timestamp, self.store_host,
                             msg.reconsume_times, msg.prepared_transaction_offset, msg.body, msg.topic, msg.properties)

    def _roll(self, mf: MappedFile) -> MappedFile:
        """Close ``mf`` with a BLANK filler and start the next file."""
        blank = mf.free_space
        mf.append(encode_blank(blank)[:blank])
        mf.wrote_position = mf.file_size
        return self.queue.last_file_for_write(0)

    # -- reads ----------------------------------------------------------------------------------------------------

    def read(self, offset: int, size: int) -> bytes | None:
        """``size`` bytes at ``offset`` if they are written and still kept, else None."""
        view = self.read_view(offset, size)
        return None if view is None else bytes(view)

    def read_view(self, offset: int, size: int) -> memoryview | None:
        """``read`` without the copy: a view into the mapped file, for bytes that go straight to a socket (a file
        closed by retention meanwhile stays mapped until its last view is gone, see ``MappedFile.close``)."""
        mf = self.queue.find(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos + size > mf.wrote_position:
            return None
        try:
            return mf.buffer[pos:pos + size]
        except ValueError:  # closed between find and here
            return None

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
