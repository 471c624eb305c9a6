"""The store's own on-disk byte layouts, byte for byte as Apache RocketMQ writes them.

Rule 1: each layout (ConsumeQueue unit, IndexFile header/slot/entry, checkpoint, file names) is defined here once,
with its encode and decode. Other modules call these functions; a ``struct`` format anywhere else under
``broker/store`` means a layout is being defined twice. All integers are big-endian.

The CommitLog record itself (and the BLANK filler that ends a CommitLog file) is ``broker.common.record``'s: the
client and the connector decode the same bytes from pull responses, and must not load the store to do so.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from typing import NamedTuple, NewType

PhysicalOffset = NewType("PhysicalOffset", int)
QueueOffset = NewType("QueueOffset", int)


# -- ConsumeQueue unit ----------------------------------------------------------------------------------------------
#   commitLogOffset 8 | size 4 | tagsCode 8   = 20 bytes

CQ_UNIT = struct.Struct(
    ">"
    "q"  # commitLogOffset
    "i"  # size
    "q"  # tagsCode
)
CQ_UNIT_SIZE = CQ_UNIT.size  # 20
CQ_UNITS_PER_FILE = 300_000


def cq_pos(index: int) -> int:
    """Byte position of unit ``index`` in a ConsumeQueue counted from its first file's start."""
    return index * CQ_UNIT_SIZE


def cq_index(pos: int) -> int:
    return pos // CQ_UNIT_SIZE


class CqUnit(NamedTuple):
    commit_log_offset: int
    size: int
    tags_code: int


def encode_cq_unit(commit_log_offset: int, size: int, tags_code: int) -> bytes:
    return CQ_UNIT.pack(commit_log_offset, size, tags_code)


def encode_cq_units(units: list[tuple[int, int, int, int]]) -> bytes:
    """Consecutive units from (queue offset, commitLogOffset, size, tagsCode); the queue offset is where they go,
    not part of the unit."""
    pack = CQ_UNIT.pack
    return b"".join([pack(offset, size, tags) for _, offset, size, tags in units])


def decode_cq_unit(buf, pos: int = 0) -> CqUnit:
    return CqUnit(*CQ_UNIT.unpack_from(buf, pos))


def iter_cq_units(buf) -> Iterator[CqUnit]:
    return (CqUnit(*u) for u in CQ_UNIT.iter_unpack(buf))


# -- IndexFile ------------------------------------------------------------------------------------------------------
#   header (40) | hashSlotNum x slot (4) | indexNum x entry (20)
#
#   header: beginTimestamp 8 | endTimestamp 8 | beginPhyOffset 8 | endPhyOffset 8 | hashSlotCount 4 | indexCount 4
#   slot:   the number of the newest entry whose key hashes to it (0: empty)
#   entry:  keyHash 4 | phyOffset 8 | timeDiff 4 (seconds since beginTimestamp) | prevIndex 4 (0: none)
#   indexCount starts at 1, so entry 0 is never used and 0 can mean "none".

INDEX_HEADER = struct.Struct(
    ">"
    "q"  # beginTimestamp
    "q"  # endTimestamp
    "q"  # beginPhyOffset
    "q"  # endPhyOffset
    "i"  # hashSlotCount
    "i"  # indexCount
)
INDEX_HEADER_SIZE = INDEX_HEADER.size  # 40
INDEX_SLOT = struct.Struct(">i")
INDEX_SLOT_SIZE = INDEX_SLOT.size  # 4
INDEX_ENTRY = struct.Struct(
    ">"
    "i"  # keyHash
    "q"  # phyOffset
    "i"  # timeDiff, seconds
    "i"  # prevIndex
)
INDEX_ENTRY_SIZE = INDEX_ENTRY.size  # 20
MAX_HASH_SLOT_NUM = 5_000_000
MAX_INDEX_NUM = 20_000_000


class IndexHeader(NamedTuple):
    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    hash_slot_count: int
    index_count: int


class IndexEntry(NamedTuple):
    key_hash: int
    phy_offset: int
    time_diff: int
    prev_index: int


def index_file_size(slot_num: int, index_num: int) -> int:
    return INDEX_HEADER_SIZE + slot_num * INDEX_SLOT_SIZE + index_num * INDEX_ENTRY_SIZE


def index_entry_pos(slot_num: int, number: int) -> int:
    return INDEX_HEADER_SIZE + slot_num * INDEX_SLOT_SIZE + number * INDEX_ENTRY_SIZE


def encode_index_header(header: IndexHeader) -> bytes:
    return INDEX_HEADER.pack(*header)


def decode_index_header(buf) -> IndexHeader:
    return IndexHeader(*INDEX_HEADER.unpack_from(buf, 0))


def decode_index_entry(buf, pos: int) -> IndexEntry:
    return IndexEntry(*INDEX_ENTRY.unpack_from(buf, pos))


def read_index_slot(buf, slot: int) -> int:
    return INDEX_SLOT.unpack_from(buf, INDEX_HEADER_SIZE + slot * INDEX_SLOT_SIZE)[0]


def write_index_slot(buf, slot: int, number: int) -> None:
    INDEX_SLOT.pack_into(buf, INDEX_HEADER_SIZE + slot * INDEX_SLOT_SIZE, number)


# Allocation-free writers for the IndexFile hot path (IndexService.build_index runs for every dispatched message).


def write_index_header(buf, begin_timestamp: int, end_timestamp: int, begin_phy_offset: int, end_phy_offset: int,
                       hash_slot_count: int, index_count: int) -> None:
    INDEX_HEADER.pack_into(buf, 0, begin_timestamp, end_timestamp, begin_phy_offset, end_phy_offset,
                           hash_slot_count, index_count)


def write_index_entry(buf, pos: int, key_hash: int, phy_offset: int, time_diff: int, prev_index: int) -> None:
    INDEX_ENTRY.pack_into(buf, pos, key_hash, phy_offset, time_diff, prev_index)


def write_index_entries(buf, pos: int, entries: list[tuple[int, int, int, int]]) -> None:
    """Consecutive entries (keyHash, phyOffset, timeDiff, prevIndex) from ``pos`` on, in one write."""
    pack = INDEX_ENTRY.pack
    data = b"".join([pack(*entry) for entry in entries])
    buf[pos:pos + len(data)] = data


# -- checkpoint -------------------------------------------------------------------------------------------------------
#   physicMsgTimestamp 8 | logicsMsgTimestamp 8 | indexMsgTimestamp 8 | masterFlushedOffset 8 | confirmPhyOffset 8
#   in a file of one OS page (4096 bytes), the rest zero.

CHECKPOINT = struct.Struct(
    ">"
    "q"  # physicMsgTimestamp: store time of the last flushed CommitLog record
    "q"  # logicsMsgTimestamp: store time of the last flushed ConsumeQueue unit
    "q"  # indexMsgTimestamp: store time of the last flushed IndexFile
    "q"  # masterFlushedOffset
    "q"  # confirmPhyOffset
)
CHECKPOINT_FILE_SIZE = 4096


class Checkpoint(NamedTuple):
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0


def encode_checkpoint(cp: Checkpoint) -> bytes:
    return CHECKPOINT.pack(*cp).ljust(CHECKPOINT_FILE_SIZE, b"\0")


def decode_checkpoint(buf) -> Checkpoint:
    return Checkpoint(*CHECKPOINT.unpack_from(buf, 0))


# -- file names -------------------------------------------------------------------------------------------------------


def offset_file_name(offset: int) -> str:
    """CommitLog and ConsumeQueue files are named by their first byte offset, 20 digits, zero padded."""
    return f"{offset:020d}"


INDEX_FILE_NAME_LENGTH = 17


def index_file_name(timestamp_ms: int) -> str:
    """IndexFiles are named by their creation time in local time, yyyyMMddHHmmssSSS
    (UtilAll.timeMillisToHumanString)."""
    t = time.localtime(timestamp_ms // 1000)
    return (f"{t.tm_year:04d}{t.tm_mon:02d}{t.tm_mday:02d}{t.tm_hour:02d}{t.tm_min:02d}{t.tm_sec:02d}"
            f"{timestamp_ms % 1000:03d}")
