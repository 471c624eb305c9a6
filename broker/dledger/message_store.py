"""The message store in DLedger mode (``enableDLegerCommitLog=true``): MessageStore over a DLedgerCommitLog.

A put is encoded as a plain put's records are (queue offsets, store time), then each record becomes an entry through
``DLedgerServer.append``: the answer waits until the group committed it, and DLedger's refusals become the put
statuses Apache's DLedgerCommitLog gives (NOT_LEADER or LEADER_PENDING_FULL before the append: OS_PAGE_CACHE_BUSY;
WAIT_QUORUM_ACK_TIMEOUT: IN_SYNC_REPLICAS_NOT_ENOUGH; INCONSISTENT_LEADER, NOT_LEADER, LEADER_NOT_READY, DISK_FULL:
SERVICE_NOT_AVAILABLE; any other, such as TERM_CHANGED: UNKNOWN_ERROR). Dispatch walks committed entries only, woken
by the server's commit listener. Reads go through the plain CommitLog's code: below ``dividedCommitlogOffset`` in the
old CommitLog files, above it in DLedger's data files, where each record sits 48 bytes into its entry.

Puts are serialised (one lock): queue offsets are taken in the order entries land in the log, and ``start_append``
writes a put's entries locally, all or none (one pending check, as DLedger's batch append), before it first waits.
DLedger mode always dispatches in a thread, never in a dispatch process; the SYNC_FLUSH group commit does not run:
DLedger's files are DLedger's to flush. Retention is DLedger's too, with the broker's keys (``retention``); a member
never deletes a data file it has not dispatched.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time

from broker.common.errors import DLedgerError, StoreError
from broker.common.record import MessageRecord
from broker.dledger.commit_log import DLedgerCommitLog, DLedgerSetup
from broker.dledger.config import DLedgerConfig
from broker.dledger.layout import BODY_OFFSET
from broker.dledger.protocol import DLedgerResponseCode
from broker.dledger.retention import DLedgerCleanCommitLogService
from broker.dledger.server import DLedgerServer
from broker.store.checkpoint import StoreCheckpoint
from broker.store.commit_log import CommitLog, EncodedRecord, EncodeError, StoreMessage
from broker.store.config import DispatchMode, MessageStoreConfig
from broker.store.dispatch import DISPATCH_BATCH, ReputMessageService
from broker.store.flush import FlushConsumeQueueService, FlushRealTimeService
from broker.store.mapped_file import MappedFile, MappedFileQueue
from broker.store.message_store import MessageStore
from broker.store.recovery import NORMAL_RECOVERY_FILES, valid_end
from broker.store.results import AppendMessageResult, PutMessageResult, PutMessageStatus

log = logging.getLogger(__name__)

# DLedgerCommitLog.asyncPutMessage: the code an append answered with, as the put's status
_AFTER_APPEND = {DLedgerResponseCode.WAIT_QUORUM_ACK_TIMEOUT: PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH,
                 DLedgerResponseCode.LEADER_PENDING_FULL: PutMessageStatus.OS_PAGE_CACHE_BUSY,
                 **dict.fromkeys((DLedgerResponseCode.INCONSISTENT_LEADER, DLedgerResponseCode.NOT_LEADER,
                                  DLedgerResponseCode.LEADER_NOT_READY, DLedgerResponseCode.DISK_FULL),
                                 PutMessageStatus.SERVICE_NOT_AVAILABLE)}


def put_status_of(err: DLedgerError, appended: bool) -> PutMessageStatus:
    """A refused append as Apache's broker answers it: refused before its entry was written (handleAppend's pos
    -1), OS_PAGE_CACHE_BUSY; after, by the code."""
    if not appended:
        return PutMessageStatus.OS_PAGE_CACHE_BUSY
    return _AFTER_APPEND.get(err.code, PutMessageStatus.UNKNOWN_ERROR)


def _failed(err: Exception, appended: bool) -> PutMessageResult:
    if isinstance(err, DLedgerError):
        return PutMessageResult(put_status_of(err, appended), reason=str(err))
    log.error("DLedger put failed: %s", err, exc_info=err)  # asyncPutMessage's "Put message error"
    return PutMessageResult(PutMessageStatus.UNKNOWN_ERROR, reason=str(err))


class DividedQueue:
    """The files CommitLog's reads look in: the old plain CommitLog below ``dividedCommitlogOffset``, DLedger's data
    files from there. Its end is the end of the committed entries."""

    def __init__(self, old: MappedFileQueue, dledger: DLedgerCommitLog) -> None:
        self.old = old
        self.dledger = dledger
        self.data = dledger.store.data.queue

    def find(self, offset: int) -> MappedFile | None:
        return (self.old if offset < self.dledger.divided_commit_log_offset else self.data).find(offset)

    @property
    def files(self) -> list[MappedFile]:
        return self.old.files + self.data.files

    @property
    def min_offset(self) -> int:
        return self.old.min_offset if self.old.files else self.dledger.min_offset

    @property
    def max_offset(self) -> int:
        return self.dledger.max_offset

    def unflushed_bytes(self) -> int:
        return self.data.unflushed_bytes()

    def flush(self) -> int:
        self.dledger.flush()
        return self.data.flushed_offset

    def close(self) -> None:
        self.old.close()  # DLedger's files close with DLedgerCommitLog.shutdown


class DLedgerRecordLog(CommitLog):
    """The CommitLog face of a DLedger log: reads as CommitLog's, over ``DividedQueue``; encodes puts, which
    DLedgerMessageStore appends."""

    def __init__(self, config: MessageStoreConfig, store_host: bytes, dledger: DLedgerCommitLog,
                 plain_queue: MappedFileQueue) -> None:
        super().__init__(config, store_host)
        self.dledger = dledger
        self.queue = DividedQueue(plain_queue, dledger)  # type: ignore[assignment]
        self._scratch = bytearray(1 << 20)

    def encode(self, msgs: list[StoreMessage | EncodedRecord], store_ts: int) -> tuple[list[bytearray], list[int],
                                                                                        dict[tuple[str, int], int]]:
        """The records of a put, each its own bytes, their queue offsets, and the next queue offsets once they are
        stored (not applied yet); EncodeError as a plain put's."""
        total, queue_offsets, record_offsets, pending = self.pack_into(self._scratch, 0, len(self._scratch), 0, msgs,
                                                                      store_ts)
        if queue_offsets is None:  # did not fit the scratch buffer: grow it once
            self._scratch = bytearray(total)
            total, queue_offsets, record_offsets, pending = self.pack_into(self._scratch, 0, total, 0, msgs,
                                                                          store_ts)
        assert queue_offsets is not None and record_offsets is not None and pending is not None
        ends = [*record_offsets[1:], total]
        records = [self._scratch[start:end] for start, end in zip(record_offsets, ends, strict=True)]
        return records, queue_offsets, pending

    def take_offsets(self, pending: dict[tuple[str, int], int], store_ts: int) -> None:
        """A put's entries are in the log: its queues' next offsets (``encode``'s) and its store time hold."""
        self.queue_offsets.update(pending)
        self.last_store_timestamp = store_ts

    def stored_record(self, msg: StoreMessage, append: AppendMessageResult, index: int = 0) -> MessageRecord:
        """As CommitLog's, each record's size read from it: the records of a put lie in separate entries."""
        offset = append.record_offsets[index]
        size = self.size_at(offset) or 0
        one = AppendMessageResult(offset, size, append.store_timestamp, [append.queue_offsets[index]], [offset],
                                  append.store_host)
        return super().stored_record(msg, one)

    def put(self, msgs: list[StoreMessage | EncodedRecord]) -> AppendMessageResult:
        raise StoreError("a DLedger CommitLog is written through DLedgerMessageStore.put_messages_async")

    def append_data(self, start_offset: int, chunks: object) -> bool:
        return False  # DLedger members copy entries, never raw CommitLog bytes


class DLedgerReput(ReputMessageService):
    """Dispatch of committed entries (DLedgerCommitLog.dispatch_from), from an entry's pos or a file's start."""

    def __init__(self, dledger: DLedgerCommitLog, reput: ReputMessageService) -> None:
        super().__init__(dledger, reput.dispatchers, reput.tags_code_of)  # type: ignore[arg-type]
        self.dledger = dledger

    def dispatch_batch(self, end: int) -> int | None:
        requests, offset = self.dledger.dispatch_from(self.reput_from_offset, DISPATCH_BATCH, self.tags_code_of)
        return self.hand_over(requests, offset)


class DLedgerMessageStore(MessageStore):
    """MessageStore whose CommitLog is a DLedger log, and the member (``server``) that appends to it."""

    def __init__(self, config: MessageStoreConfig, store_host: bytes) -> None:
        """ConfigError for a bad dLeger key."""
        dledger_config = DLedgerConfig.from_store_config(config)
        super().__init__(dataclasses.replace(config, dispatch_mode=DispatchMode.THREAD), store_host)
        self.dledger = DLedgerCommitLog(DLedgerSetup.from_store_config(config))
        self.server = DLedgerServer(dledger_config, member_state=self.dledger.member_state, store=self.dledger.store)
        self.plain_log = self.commit_log  # the CommitLog written before DLedger mode, if any: read below the divide
        self.commit_log = DLedgerRecordLog(self.config, store_host, self.dledger, self.plain_log.queue)
        self.reput = self.dispatch = DLedgerReput(self.dledger, self.reput)
        self.server.add_commit_listener(lambda _index: self.dispatch.wakeup())
        self.server.clean_space.deletable_end = lambda: self.dispatch.reput_from_offset
        self._live_config = config  # retention reads its keys again each round, as updated at runtime

    @property
    def caught_up(self) -> bool:
        """Every entry of the log is committed and dispatched: what a new leader waits for before it serves as a
        master (DLedgerRoleChangeHandler)."""
        store = self.dledger.store
        return store.ledger_end_index == store.committed_index and self.dispatch.behind == 0

    # -- lifecycle ------------------------------------------------------------------------------------------------

    def start(self) -> None:
        """Recover the old CommitLog (if any), open DLedger's log on it, recover the ConsumeQueues and index to the
        log's end, dispatch what is committed and not dispatched yet, then start the services."""
        config = self.config
        os.makedirs(config.store_path_root_dir, exist_ok=True)
        os.makedirs(config.commit_log_dir, exist_ok=True)  # retention measures the disk usage there
        last_exit_ok = not os.path.exists(config.abort_path)
        self.checkpoint = StoreCheckpoint(config.checkpoint_path)
        plain = self.plain_log.queue
        plain.load()
        if plain.files:  # the CommitLog written before DLedger mode: ends at its last whole record
            start = plain.files[max(len(plain.files) - NORMAL_RECOVERY_FILES, 0)].file_from_offset
            plain.truncate(valid_end(self.plain_log, start))
        self.consume_queues.load()
        if self.index is not None:
            self.index.load(last_exit_ok, self.checkpoint.value.index_msg_timestamp)
        self.dledger.open(plain)
        self.consume_queues.recover()
        end = self.dledger.store.data.max_wrote_position
        self.consume_queues.truncate_dirty(end)
        reput_from = self.consume_queues.max_physic_offset
        if self.index is not None:
            reput_from = min(reput_from, self.index.truncate(end))
        # an index file's offsets are records' (an entry's pos + 48): dispatch starts at the entry holding one
        self.reput.reput_from_offset = self.dledger.entry_start(max(min(reput_from, end), self.dledger.min_offset))
        self.reput.do_reput()
        for cq in self.consume_queues.queues():  # units below the log's first kept file are gone
            cq.correct_min_offset(self.commit_log.queue.min_offset)
        self.recover_topic_queue_table()
        self.commit_log.last_store_timestamp = max(self.reput.last_store_timestamp,
                                                   self.checkpoint.value.physic_msg_timestamp)
        with open(config.abort_path, "w"):
            pass
        self.cleaner = DLedgerCleanCommitLogService(self._live_config, self.plain_log, self.dispatch,
                                                    self.server.clean_space, lambda: self.commit_log.queue.min_offset,
                                                    self._disk_usage)
        self._services = [self.dispatch, FlushRealTimeService(config, self.commit_log, self.checkpoint),
                          FlushConsumeQueueService(config, self.consume_queues, self.index, self.dispatch,
                                                   self.checkpoint), self.cleaner]
        for service in self._services:
            service.start()
        self.running = True

    def shutdown(self) -> None:
        was_running = self.running
        super().shutdown()
        if was_running:
            self.dledger.shutdown()

    # -- writes ---------------------------------------------------------------------------------------------------

    def put_messages(self, msgs: list[StoreMessage | EncodedRecord]) -> PutMessageResult:
        raise StoreError("a DLedger store's puts wait for the group: use put_messages_async")

    async def put_messages_async(self, msgs: list[StoreMessage | EncodedRecord]) -> PutMessageResult:
        """Store ``msgs``, each as one entry, and answer once the group committed them (or refused)."""
        refusal = self._check_writable()
        if refusal is not None:
            return refusal
        log_ = self.commit_log
        # no await until every entry is in the log: puts take their queue offsets and entries in one order, and
        # only the quorum's wait overlaps with the next puts
        store_ts = max(int(time.time() * 1000), log_.last_store_timestamp)
        try:
            records, queue_offsets, pending = log_.encode(msgs, store_ts)
        except EncodeError as err:
            return PutMessageResult(err.status, reason=str(err))
        end_before = self.dledger.store.ledger_end_index
        try:
            appended, done = self.server.start_append(records)  # all of them or (refused) none
        except Exception as err:  # noqa: BLE001  (a refusal, or the store failing: both answered below)
            written = self.dledger.store.ledger_end_index != end_before
            if written:  # the store failed part way: the entries written hold their offsets (a gap, never twice)
                log_.take_offsets(pending, store_ts)
            return _failed(err, written)
        log_.take_offsets(pending, store_ts)
        try:
            await done
        except Exception as err:  # noqa: BLE001
            return _failed(err, True)
        offsets = [a.pos + BODY_OFFSET for a in appended]
        return PutMessageResult(PutMessageStatus.PUT_OK, AppendMessageResult(
            offsets[0], sum(len(r) for r in records), store_ts, queue_offsets, offsets, log_.store_host))

