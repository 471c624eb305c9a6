"""DLedgerMmapFileStore: the Raft log on disk, data entries and their index, as DLedger keeps them.

Data entries (``layout``) go into ``<member dir>/data``, their 32-byte index units into ``<member dir>/index``; an
entry's place in the log (its index) finds its unit at ``index * 32``, the unit its data. ``checkpoint`` in the member
folder keeps the committed index across restarts. ``recover`` is DLedgerMmapFileStore.recover: the same checks, the
same place to stop, so that a folder either side wrote opens the same way in the other. Retention
(``delete_expired_files``, run by ``retention.CleanSpaceService``) deletes the oldest data files; the log then begins
at the first entry left (ledgerBeginIndex), whose index unit's file becomes the first index file.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from broker.common.errors import DLedgerError, StoreError
from broker.common.persist import write_atomic
from broker.common.properties import read_properties
from broker.dledger.layout import (
    BLANK_MAGIC_CODE,
    BODY_OFFSET,
    CHECKPOINT_FILE,
    COMMITTED_INDEX_KEY,
    CURRENT_MAGIC,
    END_INDEX_KEY,
    INDEX_UNIT_SIZE,
    MAX_ENTRY_SIZE,
    DLedgerEntry,
    EntryHeader,
    decode_entry_header,
    decode_index_unit,
    encode_entry,
    encode_index_unit,
    entry_problem,
    index_problem,
    set_entry_pos,
)
from broker.dledger.member_state import MemberState, Role
from broker.dledger.mmap_file_list import MmapFileList
from broker.dledger.protocol import DLedgerResponseCode

log = logging.getLogger(__name__)

DEFAULT_DATA_FILE_SIZE = 1024 * 1024 * 1024  # DLedgerConfig.mappedFileSizeForEntryData (RocketMQ sets its own)
DEFAULT_INDEX_FILE_SIZE = INDEX_UNIT_SIZE * 5 * 1024 * 1024  # mappedFileSizeForEntryIndex: 160 MiB
RECOVER_FROM_LAST_FILES = 3  # recovery checks the log from the third last data file on

# Called with a new entry's bytes (a bytearray, its pos already in) before they are written: RocketMQ's append hook
# rewrites the record's PHYSICALOFFSET there.
AppendHook = Callable[[bytearray, int], None]

# Told the new committed index each time it moves forward (the broker dispatches up to it).
CommitListener = Callable[[int], None]


def _check(expression: bool, code: DLedgerResponseCode, message: str, leader_id: str | None = None) -> None:
    """DLedger's PreConditions.check: a DLedgerError with ``code`` when ``expression`` is false."""
    if not expression:
        raise DLedgerError(code, f"{code.name} {message}", leader_id)


class DLedgerMmapFileStore:
    def __init__(self, member_state: MemberState, data_dir: str, index_dir: str,
                 data_file_size: int = DEFAULT_DATA_FILE_SIZE, index_file_size: int = DEFAULT_INDEX_FILE_SIZE) -> None:
        if index_file_size % INDEX_UNIT_SIZE:
            raise StoreError(f"index file size {index_file_size} is not a multiple of {INDEX_UNIT_SIZE}")
        self.member_state = member_state
        self.data = MmapFileList(data_dir, data_file_size)
        self.index = MmapFileList(index_dir, index_file_size)
        self.ledger_begin_index = -1
        self.ledger_end_index = -1
        self.ledger_end_term = -1
        self.committed_index = -1
        self.committed_pos = -1
        self.disk_full = False  # set by CleanSpaceService: appends fail with DISK_FULL meanwhile
        self.append_hooks: list[AppendHook] = []
        self.commit_listeners: list[CommitListener] = []

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.member_state.directory, CHECKPOINT_FILE)

    # -- open -----------------------------------------------------------------------------------------------------

    def load(self) -> None:
        self.data.load()
        self.index.load()

    def recover(self) -> None:
        """Find where the log ends and cut both file lists there; rewrite index units that disagree with their
        entries. The walk starts at the first entry of the third last data file (or an earlier file whose first
        entry is sound) and stops at the first header DLedger would not accept: a torn or stale tail is cut."""
        files = self.data.files
        if not files:
            self.index.truncate(0)
            return
        start = self._recovery_start()
        last_index, last_term = -1, -1
        process_offset = files[start].file_from_offset
        rewrite_index = False
        for mf in files[start:]:
            process_offset = mf.file_from_offset
            pos, blank = 0, False
            while pos + 4 <= mf.file_size:
                if int.from_bytes(mf.buffer[pos:pos + 4], "big", signed=True) == BLANK_MAGIC_CODE:
                    blank = True
                    break
                if pos + BODY_OFFSET > mf.file_size:
                    break
                header = decode_entry_header(mf.buffer, pos)
                if header.size == 0:
                    break
                at = mf.file_from_offset + pos
                problem = _walk_problem(header, at, mf.file_size - pos, last_index, last_term)
                if problem:
                    log.info("DLedger data ends at %d: %s", at, problem)
                    break
                if not rewrite_index and self._index_problem(header, at):
                    log.warning("index unit %d disagrees with its entry; rewriting the index from there", header.index)
                    self.index.truncate(header.index * INDEX_UNIT_SIZE)
                    rewrite_index = True
                if rewrite_index:
                    self._append_index(header.index, at, header.size, header.term)
                last_index, last_term = header.index, header.term
                pos += header.size
                process_offset = at + header.size
            if not blank:
                break
            process_offset = mf.file_from_offset + mf.file_size
        if files[-1].file_from_offset - process_offset > self.data.file_size:
            raise StoreError(f"DLedger data ends at {process_offset}, files before the last one "
                             f"({files[-1].path}) would be cut: check the folder by hand")
        self._set_ledger_end(last_index, last_term)
        self.data.truncate(process_offset)
        self.index.truncate((last_index + 1) * INDEX_UNIT_SIZE)
        if last_index != -1:
            self._revise_ledger_begin_index()
        self._load_checkpoint()

    def _recovery_start(self) -> int:
        """The data file to walk from: the third last, or the latest before it whose first entry is sound and
        agrees with its index unit."""
        for i in range(max(len(self.data.files) - RECOVER_FROM_LAST_FILES, 0), -1, -1):
            mf = self.data.files[i]
            header = decode_entry_header(mf.buffer, 0)
            if header.magic != BLANK_MAGIC_CODE and not entry_problem(header, mf.file_from_offset) \
                    and not self._index_problem(header, mf.file_from_offset):
                return i
        return 0

    def _index_problem(self, header: EntryHeader, at: int) -> str | None:
        unit = self.index.view(header.index * INDEX_UNIT_SIZE, INDEX_UNIT_SIZE)
        if unit is None:
            return f"no index unit {header.index}"
        return index_problem(header, decode_index_unit(unit), at)

    def _revise_ledger_begin_index(self) -> None:
        """The log begins at the first data file's first entry; index files wholly below its unit go
        (reviseLedgerBeginIndex and the index list's resetOffset)."""
        first = self.data.files[0]
        self.ledger_begin_index = decode_entry_header(first.buffer, 0).index
        index = self.index.queue
        while index.files and index.files[0].file_from_offset + index.file_size <= \
                self.ledger_begin_index * INDEX_UNIT_SIZE:
            log.info("index file %s holds only units below the log's first entry %d: deleted", index.files[0].path,
                     self.ledger_begin_index)
            index.delete_first()

    def delete_expired_files(self, reserved_ms: float, now: float, *, clean_at_once: bool, end: int) -> int:
        """Retention (MmapFileList.deleteExpiredFileByTime on the data files): delete the oldest data files not
        modified for ``reserved_ms`` (any, when ``clean_at_once``), never the last one nor one reaching past data
        offset ``end``; the log then begins at the first entry left. Returns how many files went."""
        if self.committed_index < 0:
            return 0
        end = min(end, self.committed_pos)
        deleted = self.data.queue.delete_expired(reserved_ms, now, clean_at_once=clean_at_once, end=end)
        if deleted:
            self._revise_ledger_begin_index()
        return len(deleted)

    def _load_checkpoint(self) -> None:
        if not os.path.exists(self.checkpoint_path):
            return
        value = read_properties(self.checkpoint_path).get(COMMITTED_INDEX_KEY, "").strip()
        if value:
            if not value.lstrip("-").isdigit():
                raise StoreError(f"{self.checkpoint_path}: {COMMITTED_INDEX_KEY} is {value!r}, not a number")
            self.update_committed_index(self.member_state.current_term, int(value))

    # -- write ----------------------------------------------------------------------------------------------------

    def _append_index(self, index: int, pos: int, size: int, term: int, magic: int = CURRENT_MAGIC) -> None:
        expected = index * INDEX_UNIT_SIZE
        if not self.index.files:
            self.index.queue.last_file_for_write(expected)
        at = self.index.append(encode_index_unit(pos, size, index, term, magic), use_blank=False)
        if at != expected:
            raise StoreError(f"index unit {index} went to {at}, not {expected}")

    def add_append_hook(self, hook: AppendHook) -> None:
        """Patch every entry appended as leader once its pos is known, before it is written (addAppendHook)."""
        if hook not in self.append_hooks:
            self.append_hooks.append(hook)

    def append_as_leader(self, body: bytes, hook: AppendHook | None = None) -> DLedgerEntry:
        """Append ``body`` as the next entry of the current term; the append hooks (and ``hook``) may patch the
        entry once its pos is known (before anything is written)."""
        state = self.member_state
        _check(state.is_leader, DLedgerResponseCode.NOT_LEADER, f"{state.self_id} is {state.role}", state.leader_id)
        _check(not self.disk_full, DLedgerResponseCode.DISK_FULL, f"the disk of {state.self_id} is full")
        if BODY_OFFSET + len(body) > MAX_ENTRY_SIZE:
            raise StoreError(f"an entry of {BODY_OFFSET + len(body)} bytes is more than DLedger's {MAX_ENTRY_SIZE}")
        index, term = self.ledger_end_index + 1, state.current_term
        entry = encode_entry(body, index, term, 0)
        pos = self.data.pre_append(len(entry))
        set_entry_pos(entry, pos)
        for each in (*self.append_hooks, hook) if hook is not None else self.append_hooks:
            each(entry, pos)
        at = self.data.append(entry)
        if at != pos:
            raise StoreError(f"entry {index} went to {at}, not {pos}")
        self._append_index(index, pos, len(entry), term)
        self._set_ledger_end(index, term)
        if self.ledger_begin_index == -1:
            self.ledger_begin_index = index
        return DLedgerEntry(index, term, pos, len(entry), bytes(entry[BODY_OFFSET:]))

    def append_as_follower(self, entry: DLedgerEntry, leader_term: int, leader_id: str | None) -> DLedgerEntry:
        """Write the leader's ``entry`` as it is (header fields included) at its own pos, as the log's next entry."""
        self._check_follower(leader_term, leader_id)
        _check(not self.disk_full, DLedgerResponseCode.DISK_FULL, f"the disk of {self.member_state.self_id} is full")
        _check(entry.index == self.ledger_end_index + 1, DLedgerResponseCode.INCONSISTENT_INDEX,
               f"entry {entry.index} after {self.ledger_end_index}")
        self._write_entry(entry)
        if self.ledger_begin_index == -1:
            self.ledger_begin_index = entry.index
        return entry

    def truncate(self, entry: DLedgerEntry, leader_term: int, leader_id: str | None) -> int:
        """DLedgerMmapFileStore.truncate: make the leader's ``entry`` this log's last one, dropping everything after
        it (and writing it, unless the same entry is there already); returns its index."""
        self._check_follower(leader_term, leader_id)
        try:
            existed = entry.same_as(self.get(entry.index))
        except StoreError:
            existed = False
        data_end = entry.pos + entry.size if existed else entry.pos
        if data_end != self.data.max_wrote_position:
            log.warning("truncating at entry %d (pos %d), the data ends at %d: usual on a former leader",
                        entry.index, data_end, self.data.max_wrote_position)
        _truncate_or_rebuild(self.data, data_end)
        _truncate_or_rebuild(self.index, entry.index * INDEX_UNIT_SIZE)
        if existed:
            self._append_index(entry.index, entry.pos, entry.size, entry.term)
            self._set_ledger_end(entry.index, entry.term)
        else:
            self._write_entry(entry)
        first = decode_entry_header(self.data.files[0].buffer, 0)
        self.ledger_begin_index = first.index if first.magic == CURRENT_MAGIC else entry.index
        if self.committed_index > entry.index:
            self.committed_index, self.committed_pos = entry.index, entry.pos + entry.size
        return entry.index

    def _check_follower(self, leader_term: int, leader_id: str | None) -> None:
        state = self.member_state
        _check(state.role is Role.FOLLOWER, DLedgerResponseCode.NOT_FOLLOWER, f"role={state.role}", state.leader_id)
        _check(leader_term == state.current_term, DLedgerResponseCode.INCONSISTENT_TERM,
               f"term {leader_term} != {state.current_term}", state.leader_id)
        _check(leader_id == state.leader_id, DLedgerResponseCode.INCONSISTENT_LEADER,
               f"leaderId {leader_id} != {state.leader_id}", state.leader_id)

    def _write_entry(self, entry: DLedgerEntry) -> None:
        """Write a leader's entry at its pos, its index unit after it, and move the log's end to it."""
        data = encode_entry(entry.body, entry.index, entry.term, entry.pos, entry.magic, entry.channel,
                            entry.chain_crc, entry.body_crc)
        at = self.data.append(data)
        _check(at == entry.pos, DLedgerResponseCode.DISK_ERROR, f"entry {entry.index} went to {at}, not {entry.pos}")
        self._append_index(entry.index, entry.pos, len(data), entry.term, entry.magic)
        self._set_ledger_end(entry.index, entry.term)

    def _set_ledger_end(self, index: int, term: int) -> None:
        """The log's end, here and in the member state, whose votes show it (DLedger's updateLedgerIndexAndTerm)."""
        self.ledger_end_index, self.ledger_end_term = index, term
        self.member_state.update_ledger_index_and_term(index, term)

    def truncate_after(self, index: int) -> None:
        """Drop every entry after ``index`` (a follower giving up what the leader does not have; -1 drops all)."""
        if index > self.ledger_end_index:
            raise StoreError(f"cannot truncate after {index}: the log ends at {self.ledger_end_index}")
        if index < self.ledger_begin_index - 1:
            raise StoreError(f"cannot truncate after {index}: the log begins at {self.ledger_begin_index}")
        data_end = self.data.min_offset if index < self.ledger_begin_index else sum(self.entry_pos_and_size(index))
        self.data.truncate(data_end)
        self.index.truncate((index + 1) * INDEX_UNIT_SIZE)
        self._set_ledger_end(index, self.get(index).term if index >= self.ledger_begin_index else -1)
        if index < self.ledger_begin_index:
            self.ledger_begin_index = -1
        if self.committed_index > index:
            self.committed_index = index
            self.committed_pos = data_end if index >= 0 else -1

    def update_committed_index(self, term: int, index: int) -> None:
        """DLedgerMmapFileStore.updateCommittedIndex: only forward, never past the log's end."""
        if index == -1 or self.ledger_end_index == -1 or term < self.member_state.current_term \
                or index == self.committed_index:
            return
        if index < self.committed_index or index < self.ledger_begin_index:
            log.warning("not moving the committed index back from %d to %d", self.committed_index, index)
            return
        index = min(index, self.ledger_end_index)
        pos, size = self.entry_pos_and_size(index)
        self.committed_index, self.committed_pos = index, pos + size
        for listener in self.commit_listeners:
            try:
                listener(index)
            except Exception:  # a listener's failure must not undo the commit nor stop replication
                log.exception("commit listener %r failed at index %d", listener, index)

    # -- read -----------------------------------------------------------------------------------------------------

    def _check_index(self, index: int) -> None:
        """INDEX_OUT_OF_RANGE as DLedger's get: what retention deleted, or what is not written yet."""
        _check(0 <= self.ledger_begin_index <= index <= self.ledger_end_index, DLedgerResponseCode.INDEX_OUT_OF_RANGE,
               f"entry {index} is outside the log [{self.ledger_begin_index}, {self.ledger_end_index}]")

    def entry_pos_and_size(self, index: int) -> tuple[int, int]:
        self._check_index(index)
        unit = self.index.view(index * INDEX_UNIT_SIZE, INDEX_UNIT_SIZE)
        if unit is None:
            raise StoreError(f"no index unit for entry {index}")
        decoded = decode_index_unit(unit)
        return decoded.pos, decoded.size

    def get(self, index: int) -> DLedgerEntry:
        pos, size = self.entry_pos_and_size(index)
        view = self.data.view(pos, size)
        if view is None:
            raise StoreError(f"no data for entry {index} at {pos}")
        header = decode_entry_header(view)
        if header.pos != pos or header.index != index:
            raise StoreError(f"entry {index} at {pos} reads as entry {header.index} at {header.pos}")
        return DLedgerEntry(header.index, header.term, header.pos, header.size, bytes(view[BODY_OFFSET:]),
                            header.magic, header.channel, header.chain_crc, header.body_crc)

    # -- persist --------------------------------------------------------------------------------------------------

    def flush(self) -> None:
        self.data.flush()
        self.index.flush()

    def persist_checkpoint(self) -> None:
        write_atomic(self.checkpoint_path,
                     f"{COMMITTED_INDEX_KEY}={self.committed_index}\n{END_INDEX_KEY}={self.ledger_end_index}\n")

    def shutdown(self) -> None:
        self.flush()
        self.persist_checkpoint()
        self.data.close()
        self.index.close()


def _truncate_or_rebuild(files: MmapFileList, offset: int) -> None:
    """Cut ``files`` at ``offset``; when they do not reach it (a follower far behind), start them over there
    (MmapFileList.rebuildWithPos)."""
    files.truncate(offset)
    if files.max_wrote_position != offset:
        files.queue.delete_all()
        files.queue.last_file_for_write(offset)


def _walk_problem(header: EntryHeader, at: int, room: int, last_index: int, last_term: int) -> str | None:
    """Why recovery's walk stops at the entry at ``at`` (``room`` bytes left in its file), after the entry
    ``last_index`` of term ``last_term``; None when it goes on."""
    problem = entry_problem(header, at)
    if problem:
        return problem
    if header.size > room:
        return "runs past its file"
    if last_index != -1 and header.index != last_index + 1:
        return f"index {header.index} after {last_index}"
    if header.term < last_term:
        return f"term {header.term} after {last_term}"
    return None
