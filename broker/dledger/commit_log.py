"""DLedgerCommitLog: a RocketMQ CommitLog kept as a DLedger log (RocketMQ's store/dledger/DLedgerCommitLog).

Each entry's body is one CommitLog record (``broker.common.record``), its PHYSICALOFFSET the entry's pos + 48: the
record's own offset in the data files, so ConsumeQueue units, IndexFile entries and message ids point straight at
it and a pull reads it in place. A batch is one entry per message. Only committed entries are readable (below
``committed_pos``). Dispatch walks entries, not records: it steps from one entry's pos to the next and hands the
record inside to the ConsumeQueue and IndexFile builders.

A broker moving from a plain CommitLog to DLedger starts the DLedger data at ``divided_commit_log_offset``: the end
of the last CommitLog file, closed with a BLANK record; offsets below it are the old CommitLog's.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.common.errors import StoreError
from broker.common.record import END_FILE_MIN_BLANK_LENGTH, encode_blank, record_size, set_physical_offset
from broker.dledger.layout import BLANK_MAGIC_CODE, BODY_OFFSET, data_dir, decode_entry_header, index_dir, member_dir
from broker.dledger.member_state import MemberState
from broker.dledger.store import DEFAULT_INDEX_FILE_SIZE, DLedgerEntry, DLedgerMmapFileStore
from broker.store.config import MessageStoreConfig
from broker.store.dispatch import (
    DISPATCH_BATCH,
    DISPATCH_PROPERTIES,
    CommitLogDispatcher,
    DispatchRequest,
    TagsCodeHook,
    default_tags_code,
    dispatch_requests,
    scan_records,
)
from broker.store.mapped_file import MappedFileQueue


def set_record_offset(entry: bytearray, pos: int) -> None:
    """DLedgerCommitLog's append hook: the record's PHYSICALOFFSET is where it lands, its entry's pos + 48."""
    set_physical_offset(entry, pos + BODY_OFFSET, BODY_OFFSET)


@dataclass(frozen=True, slots=True)
class DLedgerSetup:
    """DLedgerConfig as RocketMQ's DLedgerCommitLog fills it from MessageStoreConfig."""

    group: str
    self_id: str
    peers: dict[str, str]
    store_base_dir: str  # storePathRootDir
    data_dir: str
    data_file_size: int  # mappedFileSizeCommitLog
    index_file_size: int = DEFAULT_INDEX_FILE_SIZE

    @classmethod
    def from_store_config(cls, config: MessageStoreConfig) -> DLedgerSetup:
        peers = config.d_leger_peer_map
        if config.d_leger_self_id not in peers:
            raise StoreError(f"dLegerSelfId {config.d_leger_self_id!r} is not one of dLegerPeers {list(peers)}")
        root = config.store_path_root_dir
        return cls(config.d_leger_group, config.d_leger_self_id, peers, root,
                   config.store_path_d_ledger_commit_log or data_dir(root, config.d_leger_self_id),
                   config.mapped_file_size_commit_log)


@dataclass(frozen=True, slots=True)
class PutRecordResult:
    wrote_offset: int  # the record's PHYSICALOFFSET: its entry's pos + 48
    size: int
    entry: DLedgerEntry


class DLedgerCommitLog:
    def __init__(self, setup: DLedgerSetup) -> None:
        self.setup = setup
        folder = member_dir(setup.store_base_dir, setup.self_id)
        self.member_state = MemberState(folder, setup.self_id)
        self.store = DLedgerMmapFileStore(self.member_state, setup.data_dir,
                                          index_dir(setup.store_base_dir, setup.self_id),
                                          setup.data_file_size, setup.index_file_size)
        self.divided_commit_log_offset = -1
        # every entry appended as leader, here or through DLedgerServer.append, gets its record's PHYSICALOFFSET
        self.store.add_append_hook(set_record_offset)

    def open(self, old_commit_log: MappedFileQueue | None = None) -> None:
        """Load and recover the log; a group of one leads at once. ``old_commit_log``, the plain CommitLog already
        recovered, is where a first start after it makes the DLedger data begin."""
        self.member_state.load()
        self.store.load()
        if not self.store.data.files and old_commit_log is not None and old_commit_log.files:
            self._divide(old_commit_log)
        self.store.recover()
        if self.store.data.files:
            self.divided_commit_log_offset = self.store.data.min_offset
        if list(self.setup.peers) == [self.setup.self_id]:
            self.member_state.lead_alone()

    def _divide(self, old: MappedFileQueue) -> None:
        """Close the old CommitLog's last file with a BLANK record where its data ends, and start DLedger's data
        at the end of that file (DLedgerCommitLog.setRecoverPosition)."""
        last = old.files[-1]
        if last.free_space >= END_FILE_MIN_BLANK_LENGTH:
            last.write_at(last.wrote_position, encode_blank(last.free_space))
            last.wrote_position = last.file_size
            last.flush()
        self.store.data.start_at(last.file_from_offset + last.file_size)

    # -- put ------------------------------------------------------------------------------------------------------

    def put_record(self, record: bytes) -> PutRecordResult:
        """Append one CommitLog record (queue offset, store time and hosts already in it) as the next entry, its
        PHYSICALOFFSET set to where it lands; a group of one commits it at once."""
        size = record_size(record)
        if size != len(record):
            raise StoreError(f"a record of {len(record)} bytes whose TOTALSIZE says {size}")
        entry = self.store.append_as_leader(record)
        if len(self.setup.peers) == 1:
            self.store.update_committed_index(entry.term, entry.index)
        return PutRecordResult(entry.body_pos, size, entry)

    # -- read -----------------------------------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.store.data.min_offset

    @property
    def max_offset(self) -> int:
        """The end of the committed entries: what readers and dispatch may see."""
        return max(self.store.committed_pos, self.store.data.min_offset)

    def entry_start(self, offset: int) -> int:
        """The pos of the entry holding data offset ``offset`` (a record's PHYSICALOFFSET, which an index file's
        offsets are, or an entry's own pos): where dispatch may begin. ``offset`` itself outside every entry."""
        store = self.store
        low, high = store.ledger_begin_index, store.ledger_end_index
        while 0 <= low <= high:
            middle = (low + high) // 2
            pos, size = store.entry_pos_and_size(middle)
            if offset < pos:
                high = middle - 1
            elif offset >= pos + size:
                low = middle + 1
            else:
                return pos
        return offset

    def get_message(self, offset: int, size: int) -> memoryview | None:
        """The ``size`` bytes of the record at PHYSICALOFFSET ``offset`` (an entry's pos + 48), if committed."""
        if offset + size > self.max_offset:
            return None
        return self.store.data.view(offset, size)

    def read_record(self, offset: int) -> memoryview | None:
        """The whole record at PHYSICALOFFSET ``offset``, its size read from its TOTALSIZE."""
        head = self.get_message(offset, 8)
        if head is None:
            return None
        return self.get_message(offset, record_size(head))

    # -- dispatch ---------------------------------------------------------------------------------------------------

    def dispatch_from(self, offset: int, max_entries: int,
                      tags_code_of: TagsCodeHook = default_tags_code) -> tuple[list[DispatchRequest], int]:
        """The dispatch requests of up to ``max_entries`` committed entries from data offset ``offset`` (an entry's
        pos or a file's start), and the offset to go on from. A data file's pad moves on to the next file."""
        data = self.store.data
        end = self.max_offset
        records = []
        while offset < end and len(records) < max_entries:
            mf = data.queue.find(offset)
            if mf is None:
                raise StoreError(f"no DLedger data file holds offset {offset}")
            pos = offset - mf.file_from_offset
            header = decode_entry_header(mf.buffer, pos) if pos + BODY_OFFSET <= mf.file_size else None
            if header is None or header.magic == BLANK_MAGIC_CODE:
                offset = mf.file_from_offset + mf.file_size
                continue
            body, body_end = pos + BODY_OFFSET, pos + header.size
            try:
                scanned, _, blank = scan_records(mf.buffer, body, body_end, 1, DISPATCH_PROPERTIES)
            except ValueError as err:
                raise StoreError(f"entry {header.index} at {offset}: {err.args[-1]}") from None
            if blank or len(scanned) != 1:
                raise StoreError(f"entry {header.index} at {offset} holds no CommitLog record")
            records.extend(scanned)
            offset += header.size
        return dispatch_requests(records, tags_code_of), offset

    def dispatch_to(self, dispatchers: list[CommitLogDispatcher], offset: int,
                    tags_code_of: TagsCodeHook = default_tags_code) -> int:
        """Hand every committed entry from data offset ``offset`` on to ``dispatchers`` (the ConsumeQueue and
        IndexFile builders), a step at a time; returns where the committed entries end. Apache's broker dispatches
        nothing at a clean start (its reput begins at the log's end), so entries are dispatched before a shutdown."""
        while offset < self.max_offset:
            requests, offset = self.dispatch_from(offset, DISPATCH_BATCH, tags_code_of)
            if requests:
                for dispatcher in dispatchers:
                    dispatcher.dispatch(requests)
        return offset

    # -- close ------------------------------------------------------------------------------------------------------

    def flush(self) -> None:
        self.store.flush()

    def shutdown(self) -> None:
        self.store.shutdown()

