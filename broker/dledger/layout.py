"""DLedger's on-disk byte layouts, byte for byte as DLedger (0.3.x, the version Apache RocketMQ 5.x runs) writes them.

Rule 1: each layout is defined here once, with its encode and decode; the store, its recovery and the CommitLog
adapter call these. All integers are big-endian.

Data entry (DLedgerEntry / DLedgerEntryCoder)::

    off  field       size
    0    magic       4     1 (CURRENT_MAGIC); -1 (BLANK_MAGIC_CODE) starts the pad that ends a data file
    4    size        4     the whole entry, header included: 48 + body size
    8    index       8     the entry's place in the log, from 0, one more per entry
    16   term        8     the leader's term when it appended the entry
    24   pos         8     the entry's own offset in the data files (what recovery checks it against)
    32   channel     4     reserved, 0
    36   chainCrc    4     reserved, 0
    40   bodyCrc     4     DLedger never fills it in: 0
    44   bodySize    4
    48   body        bodySize   (for RocketMQ: one CommitLog record)

Index unit (DLedgerEntryCoder.encodeIndex), at ``index * 32`` in the index files::

    magic 4 | pos 8 | size 4 | index 8 | term 8     = 32 bytes

A data file ends with a pad when the next entry (plus 8 bytes) does not fit: magic -1 and the bytes left in the
file, then zeros to the file's end. Index files are a multiple of 32 bytes and take no pad.

Beside them, two Java properties files in the member's folder: ``checkpoint`` (endIndex, committedIndex) and
``currterm`` (currTerm, voteLeader).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import NamedTuple

ENTRY_HEADER = struct.Struct(
    ">"
    "i"  # magic
    "i"  # size
    "q"  # index
    "q"  # term
    "q"  # pos
    "i"  # channel
    "i"  # chainCrc
    "i"  # bodyCrc
    "i"  # bodySize
)
BODY_OFFSET = ENTRY_HEADER.size  # 48
POS_OFFSET = 24
HEADER_SIZE = BODY_OFFSET - 4  # DLedger's HEADER_SIZE leaves out bodySize: an entry's size must exceed it
CURRENT_MAGIC = 1

INDEX_UNIT = struct.Struct(
    ">"
    "i"  # magic
    "q"  # pos
    "i"  # size
    "q"  # index
    "q"  # term
)
INDEX_UNIT_SIZE = INDEX_UNIT.size  # 32

BLANK = struct.Struct(">ii")  # BLANK_MAGIC_CODE, bytes left in the file
BLANK_MAGIC_CODE = -1
MIN_BLANK_LEN = BLANK.size  # 8

MAX_ENTRY_SIZE = 4 * 1024 * 1024  # DLedger encodes an entry into a 4 MiB buffer: a larger one cannot be appended

_POS = struct.Struct(">q")


class EntryHeader(NamedTuple):
    magic: int
    size: int
    index: int
    term: int
    pos: int
    channel: int
    chain_crc: int
    body_crc: int
    body_size: int


@dataclass(slots=True, frozen=True)
class DLedgerEntry:
    """One entry as read from the log or received from a leader: its header's fields and its body."""

    index: int
    term: int
    pos: int
    size: int
    body: bytes
    magic: int = CURRENT_MAGIC
    channel: int = 0  # reserved; like chain_crc and body_crc, DLedger writes 0 and carries whatever it reads
    chain_crc: int = 0
    body_crc: int = 0

    @property
    def body_pos(self) -> int:
        return self.pos + BODY_OFFSET

    def same_as(self, other: DLedgerEntry | None) -> bool:
        """DLedgerEntry.equals: size, magic, index, term, channel, pos and body (the crc fields do not count)."""
        return other is not None and (self.size, self.magic, self.index, self.term, self.channel, self.pos,
                                      self.body) == (other.size, other.magic, other.index, other.term,
                                                     other.channel, other.pos, other.body)


class IndexUnit(NamedTuple):
    magic: int
    pos: int
    size: int
    index: int
    term: int


def encode_entry(body: bytes, index: int, term: int, pos: int, magic: int = CURRENT_MAGIC, channel: int = 0,
                 chain_crc: int = 0, body_crc: int = 0) -> bytearray:
    """A whole entry; a bytearray, so that an append hook can still patch the body (RocketMQ's PHYSICALOFFSET). A
    follower writes the reserved fields as the leader sent them."""
    entry = bytearray(BODY_OFFSET + len(body))
    ENTRY_HEADER.pack_into(entry, 0, magic, len(entry), index, term, pos, channel, chain_crc, body_crc, len(body))
    entry[BODY_OFFSET:] = body
    return entry


def decode_entry_header(buf, pos: int = 0) -> EntryHeader:
    return EntryHeader(*ENTRY_HEADER.unpack_from(buf, pos))


def set_entry_pos(entry: bytearray, pos: int) -> None:
    _POS.pack_into(entry, POS_OFFSET, pos)


def encode_index_unit(pos: int, size: int, index: int, term: int, magic: int = CURRENT_MAGIC) -> bytes:
    return INDEX_UNIT.pack(magic, pos, size, index, term)


def decode_index_unit(buf, pos: int = 0) -> IndexUnit:
    return IndexUnit(*INDEX_UNIT.unpack_from(buf, pos))


def encode_blank(remaining: int) -> bytes:
    """The first 8 bytes of the pad that ends a data file (zeros follow to the file's end)."""
    return BLANK.pack(BLANK_MAGIC_CODE, remaining)


def entry_problem(header: EntryHeader, at: int) -> str | None:
    """Why the header read at data offset ``at`` is not an entry DLedger's recovery would accept, None if it is."""
    if header.magic != CURRENT_MAGIC:
        return f"magic {header.magic}"
    if header.pos != at:
        return f"pos {header.pos} != {at}"
    if header.body_size + BODY_OFFSET != header.size:
        return f"size {header.size} != {header.body_size} + {BODY_OFFSET}"
    if header.size <= HEADER_SIZE:
        return f"size {header.size} should > {HEADER_SIZE}"
    return None


def index_problem(header: EntryHeader, unit: IndexUnit, at: int) -> str | None:
    """Why the index unit of the entry at ``at`` disagrees with it, None if it agrees."""
    expected = IndexUnit(header.magic, at, header.size, header.index, header.term)
    if unit != expected:
        return f"index unit {unit} != {expected}"
    return None


# -- the member's folder ----------------------------------------------------------------------------------------------

CHECKPOINT_FILE = "checkpoint"
END_INDEX_KEY = "endIndex"
COMMITTED_INDEX_KEY = "committedIndex"
TERM_PERSIST_FILE = "currterm"
TERM_KEY = "currTerm"
VOTE_FOR_KEY = "voteLeader"


def member_dir(store_base_dir: str, self_id: str) -> str:
    """DLedgerConfig.getDefaultPath: ``<storeBaseDir>/dledger-<selfId>``; RocketMQ's storeBaseDir is its
    storePathRootDir."""
    return os.path.join(store_base_dir, f"dledger-{self_id}")


def data_dir(store_base_dir: str, self_id: str) -> str:
    return os.path.join(member_dir(store_base_dir, self_id), "data")


def index_dir(store_base_dir: str, self_id: str) -> str:
    return os.path.join(member_dir(store_base_dir, self_id), "index")
