"""The CommitLog record: RocketMQ's message layout on disk and in pull responses, byte for byte.

Rule 1: the record and the BLANK filler at the end of a CommitLog file are defined here once, with their encode and
decode; the store, the broker, the client and the connector all call these. A ``struct`` format for these bytes
anywhere else means the layout is being defined twice (the SEND_BATCH_MESSAGE body, a layout of its own, is
``broker.common.message_batch``'s). All integers are big-endian.

CommitLog record (MessageExtEncoder / MessageDecoder)::

    off  field                         size
    0    TOTALSIZE                     4     whole record, this field included
    4    MAGICCODE                     4     V1 0xDAA320A7 (1-byte topic length) | V2 0xDAA320AB (2-byte)
    8    BODYCRC                       4     crc32(body) & 0x7FFFFFFF
    12   QUEUEID                       4
    16   FLAG                          4
    20   QUEUEOFFSET                   8     index in the ConsumeQueue
    28   PHYSICALOFFSET                8     byte offset in the CommitLog
    36   SYSFLAG                       4     MessageSysFlag
    40   BORNTIMESTAMP                 8
    48   BORNHOST                      8|20  ip (4|16) + int port; 20 when SysFlag.BORNHOST_V6
    ..   STORETIMESTAMP                8
    ..   STOREHOSTADDRESS              8|20  20 when SysFlag.STOREHOSTADDRESS_V6
    ..   RECONSUMETIMES                4
    ..   PREPARED TRANSACTION OFFSET   8
    ..   BODY                          int length + bytes
    ..   TOPIC                         byte (V1) | short (V2) length + UTF-8
    ..   PROPERTIES                    short length + UTF-8 "k\\x01v\\x02..."

BLANK filler at the end of a CommitLog file: TOTALSIZE = bytes left in the file, MAGICCODE = 0xCBD43194; only
these 8 bytes are written, the rest of the file stays as it is.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum, IntEnum
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from broker.common.errors import CorruptRecord
from broker.common.message import SysFlag, decode_properties, offset_msg_id

# -- CommitLog record ---------------------------------------------------------------------------------------------

MESSAGE_MAGIC_V1 = -626843481  # 0xDAA320A7
MESSAGE_MAGIC_V2 = -626843477  # 0xDAA320AB
BLANK_MAGIC = -875286124  # 0xCBD43194
END_FILE_MIN_BLANK_LENGTH = 8


class MessageVersion(IntEnum):
    V1 = MESSAGE_MAGIC_V1
    V2 = MESSAGE_MAGIC_V2

    @property
    def topic_length_size(self) -> int:
        return 1 if self is MessageVersion.V1 else 2

    @classmethod
    def for_topic(cls, topic_bytes: bytes) -> MessageVersion:
        """RocketMQ switches to V2 only when the topic does not fit a signed byte length."""
        return _V1 if len(topic_bytes) <= 127 else _V2


_V1, _V2 = MessageVersion.V1, MessageVersion.V2  # reading a member off the enum class costs 100 ns a time


# The fixed part of a record, up to and including the body length: (struct code, field), in order; None is a host
# (ip + int port), HOST_V4_LENGTH or HOST_V6_LENGTH bytes by the host flags. Every offset, index and struct of these
# fields is derived from this table; broker/_speedups.c, which cannot import it, repeats the offsets as constants
# that tests/unit/test_record_layout.py holds to it.
_RECORD_FIXED_FIELDS = (
    ("i", "TOTALSIZE"),
    ("i", "MAGICCODE"),
    ("i", "BODYCRC"),
    ("i", "QUEUEID"),
    ("i", "FLAG"),
    ("q", "QUEUEOFFSET"),
    ("q", "PHYSICALOFFSET"),
    ("i", "SYSFLAG"),
    ("q", "BORNTIMESTAMP"),
    (None, "BORNHOST"),
    ("q", "STORETIMESTAMP"),
    (None, "STOREHOSTADDRESS"),
    ("i", "RECONSUMETIMES"),
    ("q", "PREPARED TRANSACTION OFFSET"),
    ("i", "BODY length"),
)
RECORD_FIELDS = tuple(name for _, name in _RECORD_FIXED_FIELDS)
# Where each field is in the tuple ``record_head(sys_flag).unpack`` returns (the same for every host length).
RECORD_FIELD_INDEX = MappingProxyType({name: i for i, name in enumerate(RECORD_FIELDS)})
HOST_V4_LENGTH = 8  # 4-byte ip + int port
HOST_V6_LENGTH = 20  # 16-byte ip + int port
# What dispatch reads of a record; the other fixed fields are skipped as pad bytes (see ``dispatch_fields``).
_DISPATCH_FIELDS = frozenset({"TOTALSIZE", "MAGICCODE", "QUEUEID", "QUEUEOFFSET", "PHYSICALOFFSET", "SYSFLAG",
                              "STORETIMESTAMP", "BODY length"})

# Host flag bits as plain ints: the hot paths below test them per record, and IntFlag arithmetic costs about a
# microsecond per operation where int arithmetic costs tens of nanoseconds.
_BORNHOST_V6 = int(SysFlag.BORNHOST_V6)
_STOREHOST_V6 = int(SysFlag.STOREHOSTADDRESS_V6)
_HOST_V6_MASK = _BORNHOST_V6 | _STOREHOST_V6
# The four layouts of the fixed part, by the record's host flag bits (sys_flag & _HOST_V6_MASK).
_HOST_FLAGS = tuple(born_v6 | store_v6 for born_v6 in (0, _BORNHOST_V6) for store_v6 in (0, _STOREHOST_V6))


def _field_codes(flags: int) -> list[tuple[str, str]]:
    """(struct code, field) of the table for these host flags: each host as raw bytes of its length."""
    born_len = HOST_V6_LENGTH if flags & _BORNHOST_V6 else HOST_V4_LENGTH
    store_len = HOST_V6_LENGTH if flags & _STOREHOST_V6 else HOST_V4_LENGTH
    return [(code or f"{born_len if name == 'BORNHOST' else store_len}s", name) for code, name in _RECORD_FIXED_FIELDS]


def _field_offsets(flags: int) -> MappingProxyType[str, int]:
    offsets, pos = {}, 0
    for code, name in _field_codes(flags):
        offsets[name] = pos
        pos += struct.calcsize(">" + code)
    return MappingProxyType(offsets)


_FIELD_OFFSETS = {flags: _field_offsets(flags) for flags in _HOST_FLAGS}


def record_field_offsets(sys_flag: int) -> Mapping[str, int]:
    """Field -> byte offset from the record's start, for the host flags in ``sys_flag``: the fields after a host move
    with its length."""
    return _FIELD_OFFSETS[sys_flag & _HOST_V6_MASK]


# Offsets up to and including BORNHOST's are the same in every record.
_OFFSETS_V4 = _FIELD_OFFSETS[0]
TOTALSIZE_POS = _OFFSETS_V4["TOTALSIZE"]
MAGIC_POS = _OFFSETS_V4["MAGICCODE"]
BODYCRC_POS = _OFFSETS_V4["BODYCRC"]
QUEUEID_POS = _OFFSETS_V4["QUEUEID"]
FLAG_POS = _OFFSETS_V4["FLAG"]
QUEUEOFFSET_POS = _OFFSETS_V4["QUEUEOFFSET"]
PHYSICALOFFSET_POS = _OFFSETS_V4["PHYSICALOFFSET"]
SYSFLAG_POS = _OFFSETS_V4["SYSFLAG"]
BORNTIMESTAMP_POS = _OFFSETS_V4["BORNTIMESTAMP"]
BORNHOST_POS = _OFFSETS_V4["BORNHOST"]
assert all(offsets["BORNHOST"] == BORNHOST_POS for offsets in _FIELD_OFFSETS.values())


def _fixed_struct(flags: int, only: frozenset[str] | None = None) -> struct.Struct:
    """The fixed part for these host flags; with ``only``, the other fields become pad bytes (not unpacked)."""
    return struct.Struct(">" + "".join(code if only is None or name in only else f"{struct.calcsize(code)}x"
                                       for code, name in _field_codes(flags)))


# The fixed part, up to and including the body length, keyed by the record's host flag bits (sys_flag & mask).
_FIXED = {flags: _fixed_struct(flags) for flags in _HOST_FLAGS}
FIXED_SIZE_V4 = _FIXED[0].size  # 88: the 84-byte header plus the body length


def _fixed_dtype(flags: int) -> np.dtype:
    types = {"i": ">i4", "q": ">i8"}
    return np.dtype([(name, types.get(code, f"S{code[:-1]}")) for code, name in _field_codes(flags)])


# The same fixed part as numpy record dtypes (fields named as in the table, hosts as raw bytes): readers of many
# records gather all their heads at once (connector/records.py).
_FIXED_DTYPE = {flags: _fixed_dtype(flags) for flags in _HOST_FLAGS}

assert all(_FIXED_DTYPE[flags].itemsize == _FIXED[flags].size for flags in _FIXED)
assert all(_FIXED_DTYPE[flags].fields[name][1] == offset  # numpy's offsets are the table's too
           for flags, offsets in _FIELD_OFFSETS.items() for name, offset in offsets.items())


def record_head_dtype(sys_flag: int) -> np.dtype:
    """``record_head(sys_flag)`` as a numpy dtype."""
    return _FIXED_DTYPE[sys_flag & _HOST_V6_MASK]


_DISPATCH_HEAD = {flags: _fixed_struct(flags, _DISPATCH_FIELDS) for flags in _HOST_FLAGS}
_DISPATCH_HEAD_V4 = _DISPATCH_HEAD[0]
_TOPIC_LEN = {MessageVersion.V1: struct.Struct(">b"), MessageVersion.V2: struct.Struct(">h")}
_VERSION_BY_MAGIC = {int(v): v for v in MessageVersion}  # a dict lookup; calling the enum is ten times slower
_SHORT = struct.Struct(">h")
_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_TWO_INTS = struct.Struct(">ii")
MAX_PROPERTIES_LENGTH = 32767  # a signed short


def _fixed_for(sys_flag: int) -> struct.Struct:
    return _FIXED[sys_flag & _HOST_V6_MASK]


def record_head(sys_flag: int) -> struct.Struct:
    """The fixed part of a record, TOTALSIZE up to and including the body length, for the host flags in
    ``sys_flag``. Its ``pack`` takes the fields in the order of the table above; the batch append path packs
    records with it directly (``encode_record`` does the same, one record per call)."""
    return _FIXED[sys_flag & _HOST_V6_MASK]


def topic_field(topic: bytes) -> tuple[int, bytes]:
    """(MAGICCODE, the TOPIC field: its length then its bytes) of a record for ``topic``, UTF-8 encoded."""
    version = MessageVersion.for_topic(topic)
    return int(version), _TOPIC_LEN[version].pack(len(topic)) + topic


PROPERTIES_LENGTH = _SHORT  # the short that precedes the PROPERTIES bytes
TOTALSIZE = _INT  # the int a record starts with: walks from record to record read it


def store_timestamp_pos(sys_flag: int) -> int:
    return _FIELD_OFFSETS[sys_flag & _HOST_V6_MASK]["STORETIMESTAMP"]


def store_timestamp_of(head) -> int:
    """STORETIMESTAMP of the record that ``head`` (its first bytes, at least up to that field) starts with, without
    decoding it: the ConsumeQueue's search by time reads only the head of each record it probes."""
    sys_flag = int.from_bytes(head[SYSFLAG_POS:SYSFLAG_POS + _INT.size], "big")
    pos = store_timestamp_pos(sys_flag)
    return int.from_bytes(head[pos:pos + _LONG.size], "big", signed=True)


def body_crc(body: bytes) -> int:
    """UtilAll.crc32: java.util.zip.CRC32 with the sign bit cleared."""
    return zlib.crc32(body) & 0x7FFFFFFF


@dataclass(slots=True)
class MessageRecord:
    """One decoded CommitLog record (RocketMQ's MessageExt). Hosts stay packed (ip bytes + port)."""

    store_size: int
    version: MessageVersion
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    commit_log_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: bytes
    store_timestamp: int
    store_host: bytes
    reconsume_times: int
    prepared_transaction_offset: int
    body: bytes | None
    topic: str
    properties: dict[str, str]

    @property
    def msg_id(self) -> str:
        """offsetMsgId: store host + commit log offset."""
        return offset_msg_id(self.store_host, self.commit_log_offset)


def encode_record(
    *,
    topic: bytes,
    queue_id: int,
    body: bytes,
    properties: bytes,
    flag: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: bytes,
    store_host: bytes,
    store_timestamp: int = 0,
    queue_offset: int = 0,
    commit_log_offset: int = 0,
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    crc: int | None = None,
) -> bytes:
    """A whole record. ``topic`` and ``properties`` come UTF-8 encoded; the host flags in ``sys_flag`` must agree
    with the lengths of ``born_host``/``store_host``. (The CommitLog packs whole batches itself with
    ``record_head``, ``topic_field`` and ``PROPERTIES_LENGTH``: the same fields, fewer calls.)"""
    if len(properties) > MAX_PROPERTIES_LENGTH:
        raise ValueError(f"properties are {len(properties)} bytes, more than {MAX_PROPERTIES_LENGTH}")
    version = MessageVersion.for_topic(topic)
    fixed = _fixed_for(sys_flag)
    topic_len = _TOPIC_LEN[version]
    size = fixed.size + len(body) + topic_len.size + len(topic) + _SHORT.size + len(properties)
    return b"".join(
        (
            fixed.pack(
                size,
                version,
                body_crc(body) if crc is None else crc,
                queue_id,
                flag,
                queue_offset,
                commit_log_offset,
                sys_flag,
                born_timestamp,
                born_host,
                store_timestamp,
                store_host,
                reconsume_times,
                prepared_transaction_offset,
                len(body),
            ),
            body,
            topic_len.pack(len(topic)),
            topic,
            _SHORT.pack(len(properties)),
            properties,
        )
    )


def stamp_record(record: bytes | bytearray, queue_offset: int, physical_offset: int, store_timestamp: int,
                 store_host: bytes) -> bytes:
    """A record encoded ahead of its put (a prepared batch's), with what only the put knows written in: its queue
    offset, physical offset, store timestamp and store host (the CommitLog's append does this in C)."""
    stamped = bytearray(record)
    (sys_flag,) = _INT.unpack_from(stamped, SYSFLAG_POS)
    offsets = record_field_offsets(sys_flag)
    _LONG.pack_into(stamped, offsets["QUEUEOFFSET"], queue_offset)
    _LONG.pack_into(stamped, offsets["PHYSICALOFFSET"], physical_offset)
    _LONG.pack_into(stamped, offsets["STORETIMESTAMP"], store_timestamp)
    host = offsets["STOREHOSTADDRESS"]
    stamped[host:host + len(store_host)] = store_host
    return bytes(stamped)


def set_prepared_offset(record: bytearray, offset: int) -> None:
    """Write PREPAREDTRANSACTIONOFFSET into a record encoded ahead: a committed message learns its half message's
    commit log offset once the half is stored."""
    (sys_flag,) = _INT.unpack_from(record, SYSFLAG_POS)
    _LONG.pack_into(record, record_field_offsets(sys_flag)["PREPARED TRANSACTION OFFSET"], offset)


def set_physical_offset(buf, offset: int, pos: int = 0) -> None:
    """Write PHYSICALOFFSET into the record at ``buf[pos:]`` (DLedger's append hook: the record's offset is known
    only once its entry has a place)."""
    _LONG.pack_into(buf, pos + PHYSICALOFFSET_POS, offset)


def record_size(buf, pos: int = 0) -> int:
    return _INT.unpack_from(buf, pos + TOTALSIZE_POS)[0]


def is_blank(buf, pos: int = 0) -> bool:
    return _INT.unpack_from(buf, pos + MAGIC_POS)[0] == BLANK_MAGIC


def decode_record(buf, pos: int = 0, *, body: bool = True) -> MessageRecord:
    """Decode the record at ``buf[pos:]``; raises CorruptRecord when it is not a whole, well-formed record."""
    try:
        size, magic = _TWO_INTS.unpack_from(buf, pos)
        version = _VERSION_BY_MAGIC.get(magic)
        if version is None:
            raise ValueError(f"{magic} is not a valid MessageVersion")
        (sys_flag,) = _INT.unpack_from(buf, pos + SYSFLAG_POS)
        fixed = _fixed_for(sys_flag)
        (_, _, crc, queue_id, flag, queue_offset, phys, _, born_ts, born_host, store_ts, store_host,
         reconsume, prepared, body_len) = fixed.unpack_from(buf, pos)
        cur = pos + fixed.size
        body_bytes = bytes(buf[cur:cur + body_len]) if body else None
        cur += body_len
        topic_len_struct = _TOPIC_LEN[version]
        (topic_len,) = topic_len_struct.unpack_from(buf, cur)
        cur += topic_len_struct.size
        topic = bytes(buf[cur:cur + topic_len]).decode()
        cur += topic_len
        (props_len,) = _SHORT.unpack_from(buf, cur)
        cur += 2
        props = bytes(buf[cur:cur + props_len]).decode() if props_len > 0 else ""
        cur += max(props_len, 0)
    except (struct.error, ValueError) as err:
        raise CorruptRecord(pos, str(err)) from err
    if body_len < 0 or topic_len < 0 or cur - pos != size or cur > len(buf):
        raise CorruptRecord(pos, f"field lengths add up to {cur - pos}, TOTALSIZE says {size}")
    return MessageRecord(size, version, crc, queue_id, flag, queue_offset, phys, sys_flag, born_ts, born_host,
                         store_ts, store_host, reconsume, prepared, body_bytes, topic, decode_properties(props))


def dispatch_fields(buf, pos: int) -> tuple[int, int, int, int, int, int, str, str] | None:
    """(TOTALSIZE, QUEUEID, QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, STORETIMESTAMP, topic, properties text) of the
    record at ``buf[pos:]``, None for a BLANK filler: what dispatch needs, in one ``unpack_from`` for the fixed
    part. Dispatch reads only what the CommitLog wrote or recovery checked, so the record is trusted whole;
    CorruptRecord when it is not one at all."""
    try:
        size, magic, queue_id, queue_offset, phys, sys_flag, store_ts, body_len = _DISPATCH_HEAD_V4.unpack_from(
            buf, pos)
        head = _DISPATCH_HEAD_V4
        if sys_flag & _HOST_V6_MASK and magic != BLANK_MAGIC:
            head = _DISPATCH_HEAD[sys_flag & _HOST_V6_MASK]
            size, magic, queue_id, queue_offset, phys, sys_flag, store_ts, body_len = head.unpack_from(buf, pos)
    except struct.error:  # fewer bytes left than a record head: only a BLANK filler fits there
        if len(buf) - pos >= END_FILE_MIN_BLANK_LENGTH and is_blank(buf, pos):
            return None
        raise CorruptRecord(pos, "not a record: too few bytes") from None
    if magic == BLANK_MAGIC:
        return None
    cur = pos + head.size + body_len
    if magic == MESSAGE_MAGIC_V1:
        topic_len = buf[cur]
        cur += 1
    elif magic == MESSAGE_MAGIC_V2:
        topic_len = buf[cur] << 8 | buf[cur + 1]
        cur += 2
    else:
        raise CorruptRecord(pos, f"{magic} is not a valid MessageVersion")
    topic = str(buf[cur:cur + topic_len], "utf-8")
    cur += topic_len
    props_len = buf[cur] << 8 | buf[cur + 1]
    props = str(buf[cur + 2:cur + 2 + props_len], "utf-8") if props_len and props_len < 0x8000 else ""
    return size, queue_id, queue_offset, phys, sys_flag, store_ts, topic, props


def decode_record_properties(buf, pos: int = 0) -> dict[str, str]:
    """Only the PROPERTIES of the record at ``buf[pos:]``, skipping the body unread (a SQL92 filter's view of a
    message, MessageDecoder.decodeProperties); CorruptRecord when the lengths run past the record."""
    try:
        size, magic = _TWO_INTS.unpack_from(buf, pos)
        version = _VERSION_BY_MAGIC[magic]
        (sys_flag,) = _INT.unpack_from(buf, pos + SYSFLAG_POS)
        fixed = _fixed_for(sys_flag)
        (body_len,) = _INT.unpack_from(buf, pos + _FIELD_OFFSETS[sys_flag & _HOST_V6_MASK]["BODY length"])
        cur = pos + fixed.size + body_len
        topic_len_struct = _TOPIC_LEN[version]
        (topic_len,) = topic_len_struct.unpack_from(buf, cur)
        cur += topic_len_struct.size + topic_len
        (props_len,) = _SHORT.unpack_from(buf, cur)
        cur += _SHORT.size
        if body_len < 0 or topic_len < 0 or cur + max(props_len, 0) > pos + size:
            raise ValueError(f"field lengths run past TOTALSIZE {size}")
        return decode_properties(bytes(buf[cur:cur + props_len]).decode()) if props_len > 0 else {}
    except (struct.error, KeyError, ValueError) as err:
        raise CorruptRecord(pos, f"properties: {err!r}") from err


def iter_records(buf, *, body: bool = True) -> Iterator[MessageRecord]:
    """The records of a concatenation, as in a PULL_MESSAGE response body."""
    pos, end = 0, len(buf)
    while pos < end:
        record = decode_record(buf, pos, body=body)
        yield record
        pos += record.store_size


class RecordKind(Enum):
    MESSAGE = "message"
    BLANK = "blank"
    END = "end"  # no valid record here: the end of the written data, or a torn/garbled one


class RecordCheck(NamedTuple):
    kind: RecordKind
    size: int


_END = RecordCheck(RecordKind.END, 0)


def check_record(buf, pos: int, limit: int) -> RecordCheck:
    """What recovery needs to know of ``buf[pos:limit]``: a whole record with a correct body CRC, a BLANK filler,
    or neither (the valid data ends here)."""
    if limit - pos < END_FILE_MIN_BLANK_LENGTH:
        return _END
    size, magic = _TWO_INTS.unpack_from(buf, pos)
    if magic == BLANK_MAGIC:
        return RecordCheck(RecordKind.BLANK, size) if size == limit - pos else _END
    if magic not in (MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2) or size < FIXED_SIZE_V4 or pos + size > limit:
        return _END
    try:
        record = decode_record(memoryview(buf)[pos:pos + size], body=True)
    except CorruptRecord:
        return _END
    if body_crc(record.body or b"") != record.body_crc:
        return _END
    return RecordCheck(RecordKind.MESSAGE, size)


def _check_records_py(buf, pos: int, limit: int) -> tuple[int, bool]:
    """``check_record`` one record after another from ``pos``: where the whole, intact records of ``buf[pos:limit]``
    end, and whether they end with a BLANK filler that reaches ``limit``. ``_speedups.check_records`` in C."""
    while True:
        check = check_record(buf, pos, limit)
        if check.kind is RecordKind.END:
            return pos, False
        pos += check.size
        if check.kind is RecordKind.BLANK:
            return pos, True


try:
    from broker._speedups import check_records
except ImportError:  # built without a C compiler
    check_records = _check_records_py


def encode_blank(size: int) -> bytes:
    return _TWO_INTS.pack(size, BLANK_MAGIC)
