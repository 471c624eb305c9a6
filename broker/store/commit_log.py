"""CommitLog: the append-only log every message is written to, and the source all indexes are rebuilt from.

Appends are single-writer (one lock, RocketMQ's PutMessageLock). Inside it a put's records are packed with their
final queue offsets, offsets and store time (``pack_records``: in C from ``broker/_speedups.c``, in Python where
that was not built): straight into the mapped file under ASYNC_FLUSH, whose pages a PrefaultService maps ahead of
the writer; into a buffer written to the file at once under SYNC_FLUSH (see ``CommitLog.__init__``). A put of
several records (a batch) always lands contiguously in one file: when it does not fit, the file is closed with a
BLANK filler and the put goes to the next file.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from zlib import crc32

from broker.common.errors import CorruptRecord
from broker.common.message import (
    TRANSACTION_MASK,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    SysFlag,
    encode_properties,
    pack_host,
)
from broker.common.message_batch import decode_batch_items
from broker.common.record import (
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
    stamp_record,
    store_timestamp_of,
    topic_field,
)
from broker.store.config import FlushDiskType, MessageStoreConfig
from broker.store.mapped_file import MappedFile, MappedFileQueue, PrefaultService
from broker.store.results import AppendMessageResult, PutMessageStatus

_LOCAL = pack_host("127.0.0.1", 0)
# Host flag bits as plain ints: encode runs per message, and IntFlag arithmetic costs about a microsecond an operation.
_BORNHOST_V6 = int(SysFlag.BORNHOST_V6)
_STOREHOST_V6 = int(SysFlag.STOREHOSTADDRESS_V6)
_HOST_V6_MASK = _BORNHOST_V6 | _STOREHOST_V6
# maxMessageSize bounds the body; the whole record may be this much larger (MessageExtEncoder does the same).
RECORD_HEADROOM = 64 * 1024
MAX_TOPIC_FIELD_LENGTH = 32767  # a V2 record's signed short


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
    # (message_batch.BatchMessage.encoded_properties); ``properties`` must say the same.
    encoded_properties: bytes | None = None


# A record encoded ahead of its put (``encode_ahead``; transaction/batch.py's prepared batches, in C): a put takes it
# whole, writing in only its queue offset, physical offset, store timestamp and store host.
EncodedRecord = bytes | bytearray


class EncodeError(Exception):
    """Internal: why a message cannot be stored; becomes a PutMessageResult status at the facade."""

    def __init__(self, status: PutMessageStatus, reason: str) -> None:
        super().__init__(reason)
        self.status = status


def _stored_sys_flag(msg: StoreMessage, store_v6: int) -> int:
    """The SYSFLAG a record is written with: the message's, its host bits set by the hosts' lengths."""
    sys_flag = (int(msg.sys_flag) & ~_HOST_V6_MASK) | store_v6
    return sys_flag | _BORNHOST_V6 if len(msg.born_host) == 20 else sys_flag


@functools.lru_cache(maxsize=4096)
def _topic_field(topic: str) -> tuple[int, bytes]:
    encoded = topic.encode()
    if len(encoded) > MAX_TOPIC_FIELD_LENGTH:
        raise ValueError("MESSAGE_ILLEGAL", f"topic is {len(encoded)} bytes, at most {MAX_TOPIC_FIELD_LENGTH} fit")
    return topic_field(encoded)


def _encoded_properties(properties: dict[str, str]) -> bytes:
    return encode_properties(properties).encode()


# (total size, queue offsets, physical offsets, next queue offsets per (topic, queueId)); all but the total are None
# when the records did not fit and nothing was written.
PackedRecords = tuple[int, list[int] | None, list[int] | None, dict[tuple[str, int], int] | None]


def _next_queue_offset(key: tuple[str, int], sys_flag: int, pending: dict[tuple[str, int], int],
                       next_offsets: dict[tuple[str, int], int]) -> int:
    """The queue offset a record of ``key`` takes, counted on in ``pending``; prepared and rolled-back records never
    enter a ConsumeQueue (0)."""
    tx = sys_flag & TRANSACTION_MASK
    if tx == TRANSACTION_PREPARED_TYPE or tx == TRANSACTION_ROLLBACK_TYPE:
        return 0
    queue_offset = pending.get(key)
    if queue_offset is None:
        queue_offset = next_offsets.get(key, 0)
    pending[key] = queue_offset + 1
    return queue_offset


def _encoded_record_key(record: bytes | bytearray, store_host: bytes) -> tuple[int, tuple[str, int], int]:
    """(size, (topic, queueId), SYSFLAG) of a record encoded ahead; TypeError when it is not one record made for a
    store host of ``store_host``'s length."""
    try:
        decoded = decode_record(record, body=False)
    except CorruptRecord as err:
        raise TypeError(f"a record encoded ahead is malformed: {err}") from None
    if decoded.store_size != len(record) or len(decoded.store_host) != len(store_host):
        raise TypeError("a record encoded ahead is malformed (or was encoded for another store host)")
    return decoded.store_size, (decoded.topic, decoded.queue_id), decoded.sys_flag


def _pack_records_py(buf, pos: int, room: int, base: int, msgs: list[StoreMessage | EncodedRecord],
                     store_ts: int,
                     store_host: bytes, max_body: int, max_record: int, next_offsets: dict[tuple[str, int], int],
                     encode_props: Callable[[dict[str, str]], bytes]) -> PackedRecords:
    """Lay the records of ``msgs`` out at ``buf[pos:]`` (physical offset ``base``) if their total size is at most
    ``room``. The queue offsets they take are counted on from ``next_offsets`` in the returned dict, which the
    caller commits once the put has landed. ValueError(PutMessageStatus name, reason) when a message cannot be
    stored; TypeError for a malformed EncodedRecord. ``_speedups.pack_records`` does the same in C, about five times
    faster."""
    store_v6 = _STOREHOST_V6 if len(store_host) == 20 else 0
    pending: dict[tuple[str, int], int] = {}
    head_v4 = record_head(0)  # both hosts IPv4: nearly every record
    pack_props_length = PROPERTIES_LENGTH.pack
    parts: list[bytes] = []
    queue_offsets: list[int] = []
    record_offsets: list[int] = []
    offset = base
    for msg in msgs:
        if isinstance(msg, (bytes, bytearray)):
            size, key, sys_flag = _encoded_record_key(msg, store_host)
            if size > max_record:
                raise ValueError("MESSAGE_ILLEGAL", f"message is {size} bytes stored, at most {max_record} fit")
            queue_offset = _next_queue_offset(key, sys_flag, pending, next_offsets)
            parts.append(stamp_record(msg, queue_offset, offset, store_ts, store_host))
            queue_offsets.append(queue_offset)
            record_offsets.append(offset)
            offset += size
            continue
        body = msg.body
        body_len = len(body)
        if body_len > max_body:
            raise ValueError("MESSAGE_ILLEGAL", f"message body is {body_len} bytes, maxMessageSize is {max_body}")
        if len(msg.born_host) not in (8, 20):
            raise ValueError("MESSAGE_ILLEGAL", "born host must be 8 (IPv4) or 20 (IPv6) packed bytes")
        props = msg.encoded_properties
        if props is None:
            props = encode_props(msg.properties)
        props_len = len(props)
        if props_len > MAX_PROPERTIES_LENGTH:
            raise ValueError("PROPERTIES_SIZE_EXCEEDED",
                             f"properties are {props_len} bytes, at most {MAX_PROPERTIES_LENGTH} are allowed")
        magic, topic_bytes = _topic_field(msg.topic)
        sys_flag = _stored_sys_flag(msg, store_v6)
        head = record_head(sys_flag) if sys_flag & _HOST_V6_MASK else head_v4
        size = head.size + body_len + len(topic_bytes) + PROPERTIES_LENGTH.size + props_len
        if size > max_record:
            raise ValueError("MESSAGE_ILLEGAL", f"message is {size} bytes stored, at most {max_record} fit")
        queue_offset = _next_queue_offset((msg.topic, msg.queue_id), sys_flag, pending, next_offsets)
        parts += (
            head.pack(size, magic, crc32(body) & 0x7FFFFFFF, msg.queue_id, msg.flag, queue_offset, offset, sys_flag,
                      msg.born_timestamp, msg.born_host, store_ts, store_host, msg.reconsume_times,
                      msg.prepared_transaction_offset, body_len),
            body, topic_bytes, pack_props_length(props_len), props,
        )
        queue_offsets.append(queue_offset)
        record_offsets.append(offset)
        offset += size
    total = offset - base
    if total > room:
        return total, None, None, None
    buf[pos:pos + total] = b"".join(parts)
    return total, queue_offsets, record_offsets, pending


def encode_ahead(msg: StoreMessage, store_host: bytes, max_body: int, max_record: int) -> bytearray:
    """``msg``'s record as a put packs it, with what only the put knows (queue offset, physical offset, store
    timestamp) zero: a record encoded ahead, which a later put takes as it is (``pack_records`` stamps those in).
    ValueError(PutMessageStatus name, reason) as ``pack_records`` when it cannot be stored."""
    args = (0, store_host, max_body, max_record, {}, _encoded_properties)
    size = _pack_records_py(bytearray(), 0, 0, 0, [msg], *args)[0]
    buf = bytearray(size)
    _pack_records_py(buf, 0, size, 0, [msg], *args)
    return buf


def encode_batch_ahead(batch: StoreMessage, store_host: bytes, max_body: int,
                       max_record: int) -> list[bytearray] | None:
    """The records of a plain batch, encoded ahead: ``batch`` carries the request's fields and, as its body, the
    SEND_BATCH_MESSAGE body (RocketMQ's MessageExtBatch); each item becomes the record a put packs from its
    StoreMessage (the item's body, FLAG and PROPERTIES bytes). None when the body is malformed or empty or a limit is
    passed, and where the C extension is not built: the caller then takes the StoreMessage path, which names what is
    wrong (in Python, encoding ahead costs more than it saves)."""
    if _batch_records is None:
        return None
    return _batch_records(batch.body, batch.topic.encode(), batch.queue_id, batch.sys_flag, batch.born_timestamp,
                          batch.born_host, batch.reconsume_times, store_host, max_body, max_record)


def _encode_batch_ahead_py(body: bytes, topic: bytes, queue_id: int, sys_flag: int, born_timestamp: int,
                           born_host: bytes, reconsume_times: int, store_host: bytes, max_body: int,
                           max_record: int) -> list[bytearray] | None:
    """The Python twin of ``_speedups.batch_records``: ``encode_ahead`` of each item's StoreMessage."""
    try:
        items = decode_batch_items(body)
    except CorruptRecord:
        return None
    msgs = [StoreMessage(topic.decode(), queue_id, item_body, props, flag, sys_flag, born_timestamp, born_host,
                         reconsume_times, encoded_properties=encoded) for item_body, props, flag, encoded in items]
    try:
        return [encode_ahead(msg, store_host, max_body, max_record) for msg in msgs] or None
    except ValueError:
        return None


try:
    from broker._speedups import batch_records as _batch_records
    from broker._speedups import pack_records
except ImportError:  # built without a C compiler: the same records, slower
    pack_records = _pack_records_py
    _batch_records = None


class CommitLog:
    def __init__(self, config: MessageStoreConfig, store_host: bytes) -> None:
        self.config = config
        self.store_host = store_host
        self.queue = MappedFileQueue(config.commit_log_dir, config.mapped_file_size_commit_log)
        self.queue_offsets: dict[tuple[str, int], int] = {}  # next queue offset per (topic, queueId)
        self.prefaulter = PrefaultService(self.queue)  # started with the store's services
        # Where a put is packed. ASYNC_FLUSH: straight into the map, whose pages the prefaulter maps ahead.
        # SYNC_FLUSH: into this buffer, then written to the file in one pwrite (``MappedFile.write``): writes through
        # the map wait on pages that the last put's sync is still writing out, and took twice the time.
        self._scratch = bytearray(1 << 20) if config.flush_disk_type is FlushDiskType.SYNC_FLUSH else None
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

    def put(self, msgs: list[StoreMessage | EncodedRecord]) -> AppendMessageResult:
        """Pack ``msgs`` into the CommitLog contiguously, all or none; EncodeError when one cannot be stored.

        Records are packed with their final queue offsets, physical offsets and store time inside the lock, in one
        pass (in C, the copying and the CRCs without the GIL)."""
        with self._lock:
            mf = self.queue.last_file_for_write(0)
            store_ts = max(int(time.time() * 1000), self.last_store_timestamp)
            total, queue_offsets, record_offsets, pending = self._pack(mf, msgs, store_ts)
            if queue_offsets is None:  # did not fit the file's free space, or the scratch buffer
                if total + END_FILE_MIN_BLANK_LENGTH > mf.free_space:
                    if total + END_FILE_MIN_BLANK_LENGTH > self.config.mapped_file_size_commit_log:
                        raise EncodeError(PutMessageStatus.MESSAGE_ILLEGAL,
                                          f"{total} bytes do not fit a CommitLog file of "
                                          f"{self.config.mapped_file_size_commit_log} bytes")
                    mf = self._roll(mf)
                if self._scratch is not None and total > len(self._scratch):
                    self._scratch = bytearray(total)
                total, queue_offsets, record_offsets, pending = self._pack(mf, msgs, store_ts)
            base = mf.end_offset
            if self._scratch is None:
                mf.wrote_position += total
            else:
                mf.write(memoryview(self._scratch)[:total])
            self.queue_offsets.update(pending)
            self.last_store_timestamp = store_ts
        if self._scratch is None:
            self.prefaulter.poke(mf)
        return AppendMessageResult(base, total, store_ts, queue_offsets, record_offsets, self.store_host)

    def _pack(self, mf: MappedFile, msgs: list[StoreMessage | EncodedRecord], store_ts: int) -> PackedRecords:
        """``pack_records`` for ``mf``'s write position, leaving room for the BLANK filler that ends a file."""
        room = mf.free_space - END_FILE_MIN_BLANK_LENGTH
        if self._scratch is None:
            buf, pos = mf.buffer, mf.wrote_position
        else:
            buf, pos, room = self._scratch, 0, min(room, len(self._scratch))
        return self.pack_into(buf, pos, room, mf.end_offset, msgs, store_ts)

    def pack_into(self, buf: bytearray | memoryview, pos: int, room: int, base: int,
                  msgs: list[StoreMessage | EncodedRecord], store_ts: int) -> PackedRecords:
        """``pack_records`` at ``buf[pos:]`` (``room`` bytes), the first record's offset ``base``, with this log's
        next queue offsets (returned as pending, not applied); EncodeError when a message cannot be stored."""
        limit = self.config.max_message_size
        try:
            return pack_records(buf, pos, room, base, msgs, store_ts, self.store_host, limit,
                                limit + RECORD_HEADROOM, self.queue_offsets, _encoded_properties)
        except ValueError as err:
            status, reason = err.args
            raise EncodeError(PutMessageStatus[status], reason) from None

    def append_data(self, start_offset: int, chunks: Sequence) -> bool:
        """A slave's append of its master's CommitLog bytes at ``start_offset`` (RocketMQ's appendData): ``chunks``
        lie back to back, each within one file (the master sends from one file at a time), and may end mid-record.
        False when ``start_offset`` is not this log's end or a chunk overruns its file: what came before that chunk
        is written."""
        offset = start_offset
        touched: list[MappedFile] = []
        with self._lock:
            if self.queue.files and start_offset != self.max_offset:
                return False
            for data in chunks:
                mf = self.queue.last_file_for_write(offset)
                if mf.end_offset != offset or len(data) > mf.free_space:
                    return False
                mf.append(data)
                offset += len(data)
                if not touched or touched[-1] is not mf:
                    touched.append(mf)
        for mf in touched:
            self.prefaulter.poke(mf)
        return True

    def data_from(self, offset: int, max_size: int) -> memoryview | None:
        """Up to ``max_size`` written bytes from ``offset``, within its file (RocketMQ's getData, for a master
        feeding its slaves): a view of the map, None when nothing is written there yet or the file is gone."""
        mf = self.queue.find(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        end = min(mf.wrote_position, pos + max_size)
        if end <= pos:
            return None
        try:
            return mf.buffer[pos:end]
        except ValueError:  # closed by retention between find and here
            return None

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
        mf.seal()
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

    def read_views(self, spans: Sequence[tuple[int, int, int]]) -> list[memoryview]:
        """``read_view`` of each (_, offset, size) in order, up to the first that is not there: a pull's runs of
        records, which mostly lie in one file, found once instead of per run."""
        views: list[memoryview] = []
        mf: MappedFile | None = None
        for _, offset, size in spans:
            if mf is None or not mf.file_from_offset <= offset < mf.file_from_offset + mf.file_size:
                mf = self.queue.find(offset)
                if mf is None:
                    break
            pos = offset - mf.file_from_offset
            if pos + size > mf.wrote_position:
                break
            try:
                views.append(mf.buffer[pos:pos + size])
            except ValueError:  # closed by retention meanwhile
                break
        return views

    def read_record(self, offset: int, *, body: bool = True) -> MessageRecord | None:
        """The message stored at ``offset`` (lookMessageByOffset, as VIEW_MESSAGE_BY_ID and END_TRANSACTION need),
        None where no whole message is written. Decoded once; the body CRC is not checked (Java's lookup does not
        either; recovery does)."""
        mf = self.queue.find(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos + END_FILE_MIN_BLANK_LENGTH > mf.wrote_position:
            return None
        try:
            size = record_size(mf.buffer, pos)
            if pos + size > mf.wrote_position:
                return None
            return decode_record(mf.buffer[pos:pos + size], body=body)
        except (CorruptRecord, ValueError):  # a BLANK filler, not a record; or the file closed meanwhile
            return None

    def size_at(self, offset: int) -> int | None:
        mf = self.queue.find(offset)
        if mf is None or offset - mf.file_from_offset + 4 > mf.wrote_position:
            return None
        return record_size(mf.buffer, offset - mf.file_from_offset)

    def store_time_at(self, offset: int, size: int) -> int | None:
        """Store time of the record at ``offset`` without decoding it (ConsumeQueue time search)."""
        head = self.read(offset, min(size, 128))
        return None if head is None else store_timestamp_of(head)

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
