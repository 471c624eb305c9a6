"""Outcomes of store operations as values (RocketMQ's PutMessageStatus, GetMessageStatus and their results).

Rule 1: these enums are the only statement of what a put or a get can come to; processors map them to response
codes, tests and clients read them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum

from broker.common.message import offset_msg_ids, offset_msg_ids_text
from broker.common.record import record_size


class PutMessageStatus(Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    IN_SYNC_REPLICAS_NOT_ENOUGH = "IN_SYNC_REPLICAS_NOT_ENOUGH"  # DLedger: no quorum held the entry in time
    UNKNOWN_ERROR = "UNKNOWN_ERROR"

    @property
    def ok(self) -> bool:
        """Stored: PUT_OK, or stored but not yet confirmed on disk or on a slave (the client sees which, and the
        message is kept either way: Java's sendOK)."""
        # asked several times a request: no class lookups, PUT_OK first
        return self is _PUT_OK or self is _FLUSH_DISK_TIMEOUT or self is _FLUSH_SLAVE_TIMEOUT or self is _NO_SLAVE


_PUT_OK, _FLUSH_DISK_TIMEOUT = PutMessageStatus.PUT_OK, PutMessageStatus.FLUSH_DISK_TIMEOUT
_FLUSH_SLAVE_TIMEOUT, _NO_SLAVE = PutMessageStatus.FLUSH_SLAVE_TIMEOUT, PutMessageStatus.SLAVE_NOT_AVAILABLE


@dataclass(slots=True)
class AppendMessageResult:
    """Where a put (one message or a batch) landed in the CommitLog."""

    wrote_offset: int  # commit log offset of the first record
    wrote_bytes: int
    store_timestamp: int
    queue_offsets: list[int] = field(default_factory=list)  # one per record, in order
    record_offsets: list[int] = field(default_factory=list)  # commit log offset of each record
    store_host: bytes = b""  # packed, for the message ids

    @property
    def msg_ids(self) -> list[str]:
        """offsetMsgId of each record, made when asked for: the append path does not pay for ids nobody reads."""
        return offset_msg_ids(self.store_host, self.record_offsets)

    @property
    def msg_id_text(self) -> str:
        """``msg_ids`` comma-joined, as a send response's msgId carries them (a batch's: one per message)."""
        return offset_msg_ids_text(self.store_host, self.record_offsets)

    @property
    def queue_offset(self) -> int:
        return self.queue_offsets[0] if self.queue_offsets else 0

    @property
    def msg_num(self) -> int:
        return len(self.queue_offsets)


@dataclass(slots=True)
class PutMessageResult:
    status: PutMessageStatus
    append: AppendMessageResult | None = None
    reason: str = ""  # for MESSAGE_ILLEGAL and friends: what was wrong, for the response remark

    @property
    def ok(self) -> bool:
        return self.status.ok


class GetMessageStatus(Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class GetMessageResult:
    """Raw records, exactly the bytes a PULL_MESSAGE response body carries, and where to pull next.

    ``buffers`` hold whole records, one or more each (records that lie back to back in the CommitLog are read as
    one buffer, a view of the mapped file: copy what is kept); ``queue_offsets`` has one entry per record."""

    status: GetMessageStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    buffers: list[bytes | memoryview] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)
    # The reader is so far behind the CommitLog's end that its reads come from disk (accessMessageInMemoryMaxRatio):
    # with slaveReadEnable the broker sends its next pulls to a slave.
    suggest_pulling_from_slave: bool = False

    @property
    def message_count(self) -> int:
        return len(self.queue_offsets)

    def records(self) -> Iterator[bytes]:
        """Each record on its own (a copy), in queue order."""
        for buffer in self.buffers:
            pos = 0
            while pos < len(buffer):
                size = record_size(buffer, pos)
                yield bytes(buffer[pos:pos + size])
                pos += size

    @property
    def buffer_total_size(self) -> int:
        return sum(len(b) for b in self.buffers)

    def body(self) -> bytes:
        return b"".join(self.buffers)


@dataclass(slots=True)
class QueryMessageResult:
    """Records found by key, newest index file first (as RocketMQ's queryMessage)."""

    buffers: list[bytes] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0

    def body(self) -> bytes:
        return b"".join(self.buffers)
