"""TransactionalMessageService: which transactions are open, ending them, and asking producers about old ones.

Rule 1: the transaction state machine. A half message is OPEN from its prepared send until END_TRANSACTION commits
or rolls it back, or until the check has asked transactionCheckMax times and discards it; each of these writes an
op record, so the op topic is the durable record of what ended. A check re-puts the half message (a new half queue
offset with TRANSACTION_CHECK_TIMES + 1) and supersedes the old offset.

Java (TransactionalMessageServiceImpl) re-reads both queues on every check round; here the open transactions are
kept in memory, keyed by transaction id (UNIQ_KEY), and rebuilt at start from the half and op topics. The consume
offsets of the group CID_RMQ_SYS_TRANS on both queues mean what they mean in Java (every half offset below the half
offset is ended or superseded; every op record below the op offset names only such offsets), so a restart reads only
what is still relevant, and Apache's broker can take the store over. Keying by transaction id is what makes a
restart exact even when those offsets were not persisted: every re-put of a transaction shares its id, so an op
record for any of its offsets ends all of them, and none is asked about (and committed) twice.

Examples:
    >>> service = TransactionalMessageService(controller)  # doctest: +SKIP
    >>> await service.start()  # rebuild from RMQ_SYS_TRANS_HALF_TOPIC and RMQ_SYS_TRANS_OP_HALF_TOPIC
    >>> service.half_stored(half_msg, put_result)  # the send processor, after a prepared send
    >>> outcome = await service.end(record, commit=True, prepared_offset=record.commit_log_offset)
    >>> await service.check()  # TransactionalMessageCheckService, every transactionCheckInterval
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from broker.common.errors import RemotingError
from broker.common.message import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    format_host,
)
from broker.common.record import MessageRecord, decode_record
from broker.common.topic import PERM_READ, PERM_WRITE
from broker.server.transaction import bridge
from broker.server.transaction.batch import (
    HalfBatch,
    HalfBatchOrigin,
    RecordLimits,
    half_batch_records,
    set_prepared_offsets,
)
from broker.server.transaction.bridge import HALF_QUEUE_ID, HALF_TOPIC, OP_TOPIC, TRANS_GROUP
from broker.server.transaction.state import (
    COMMIT_OVERHEAD,
    READY_COMMITS_BYTES,
    EndOutcome,
    EndStatus,
    HalfMessage,
    KeptByOffset,
    QueueProgress,
    Ready,
    ReadyCommit,
    outcome,
)
from broker.store.commit_log import RECORD_HEADROOM, StoreMessage
from broker.store.results import GetMessageStatus, PutMessageResult

if TYPE_CHECKING:
    from broker.server.broker_controller import BrokerController

log = logging.getLogger(__name__)

REBUILD_BATCH = 256  # records read per get_message while rebuilding
END_BATCH_MAX = 256  # ends stored in one put at most


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class TransactionalMessageService:
    def __init__(self, controller: BrokerController) -> None:
        self.controller = controller
        self.half_records: KeptByOffset[MessageRecord] = KeptByOffset()  # of single prepared sends
        self.ready_commits: KeptByOffset[ReadyCommit] = KeptByOffset(READY_COMMITS_BYTES, COMMIT_OVERHEAD)
        self.open: dict[str, HalfMessage] = {}  # by transaction id
        self.half = QueueProgress(0)
        self.op = QueueProgress(0)
        self._op_refs: dict[int, int] = {}  # op queue offset -> the highest half offset it names (not yet done)
        self._committed: dict[str, int] = {}  # the CID_RMQ_SYS_TRANS offsets as last committed (or first read)
        self._discarded: dict[str, HalfMessage] = {}  # moved to TRANS_CHECK_MAX_TIME_TOPIC since start
        self._ends: list[tuple[HalfMessage, list[int], StoreMessage | None]] = []  # the put being gathered
        self._ends_stored: asyncio.Future[PutMessageResult] | None = None  # settled once that put is stored
        self._end_tasks: set[asyncio.Task[None]] = set()

    # -- start: rebuild from the half and op topics -----------------------------------------------------------------

    async def start(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.rebuild)

    def rebuild(self) -> None:
        """Open transactions from the store: half records from the half consume offset on, minus those an op record
        from the op consume offset on ends, one (the newest) per transaction id."""
        self.open.clear()
        self._op_refs.clear()
        self.half_records.clear()
        self.ready_commits.clear()
        self.half = QueueProgress(self._consume_offset(HALF_TOPIC))
        self.op = QueueProgress(self._consume_offset(OP_TOPIC))
        self._committed = {HALF_TOPIC: self.half.offset, OP_TOPIC: self.op.offset}
        ended: set[int] = set()
        for op_offset, record in self._scan(OP_TOPIC, self.op.offset, body=True):
            offsets = bridge.op_offsets(record)
            ended.update(offsets)
            self._op_refs[op_offset] = max(offsets, default=-1)
        chains: dict[str, list[int]] = {}
        newest: dict[str, HalfMessage] = {}
        for queue_offset, record in self._scan(HALF_TOPIC, self.half.offset, body=False):
            entry = HalfMessage.from_record(record, queue_offset)
            chains.setdefault(entry.transaction_id, []).append(queue_offset)
            newest[entry.transaction_id] = entry
        for tx, offsets in chains.items():
            if ended.isdisjoint(offsets):
                self.open[tx] = newest[tx]
                offsets = offsets[:-1]
            for offset in offsets:
                self.half.done(offset)
        self._progressed()
        log.info("transactions rebuilt: %d open, half offset %d, op offset %d", len(self.open), self.half.offset,
                 self.op.offset)

    def _consume_offset(self, topic: str) -> int:
        """fetchConsumeOffset: the committed offset, else the queue's minimum (never below it)."""
        store = self.controller.store
        committed = self.controller.consumer_offset_manager.query_offset(TRANS_GROUP, topic, HALF_QUEUE_ID)
        return max(committed, store.min_offset_in_queue(topic, HALF_QUEUE_ID))

    def _scan(self, topic: str, offset: int, *, body: bool) -> Iterator[tuple[int, MessageRecord]]:
        """(queue offset, record) of ``topic`` queue 0 from ``offset`` to its end."""
        store = self.controller.store
        while True:
            result = store.get_message(TRANS_GROUP, topic, HALF_QUEUE_ID, offset, REBUILD_BATCH)
            for queue_offset, data in zip(result.queue_offsets, result.records(), strict=True):
                yield queue_offset, decode_record(data, body=body)
            if result.status not in (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE,
                                     GetMessageStatus.MESSAGE_WAS_REMOVING, GetMessageStatus.OFFSET_TOO_SMALL):
                return
            if result.next_begin_offset <= offset:
                return
            offset = result.next_begin_offset

    # -- progress: the CID_RMQ_SYS_TRANS offsets ---------------------------------------------------------------------

    def _done(self, half_offsets: list[int], op_refs: Mapping[int, list[int]] | None = None) -> None:
        """``half_offsets`` are ended or superseded; ``op_refs``: the op records just written (op queue offset ->
        the half offsets it names)."""
        for op_offset, named in (op_refs or {}).items():
            self._op_refs[op_offset] = max(named, default=-1)
        moved = False
        for offset in half_offsets:
            moved = self.half.done(offset) or moved
        if moved or op_refs:
            self._progressed()

    def _progressed(self) -> None:
        """Mark op records done whose half offsets all lie below the half consume offset; commit both offsets."""
        while self.op.offset in self._op_refs and self._op_refs[self.op.offset] < self.half.offset:
            del self._op_refs[self.op.offset]
            self.op.done(self.op.offset)
        for topic, progress in ((HALF_TOPIC, self.half), (OP_TOPIC, self.op)):
            if self._committed.get(topic) != progress.offset:  # as Java, only once it moved: a broker without
                self._committed[topic] = progress.offset  # transactions lists no CID_RMQ_SYS_TRANS offsets
                self.controller.consumer_offset_manager.commit_offset(
                    TRANS_GROUP, topic, HALF_QUEUE_ID, progress.offset,
                    format_host(self.controller.store.store_host))

    # -- prepared sends --------------------------------------------------------------------------------------------

    def half_stored(self, msg: StoreMessage, result: PutMessageResult) -> None:
        """A prepared send was stored as ``msg`` (bridge.half_message): it is open from now on."""
        if not result.ok or result.append is None or msg.topic != HALF_TOPIC:
            return  # not stored, or a delay level sent it to the schedule topic instead (as Java's store hook does)
        append = result.append
        entry = self._open(msg, append.wrote_offset, append.queue_offset, append.store_timestamp)
        props = msg.properties
        values = props.values()
        if None not in values and "" not in values and "" not in props:  # else the stored properties say less
            self.half_records.add(entry.commit_log_offset, self.controller.store.stored_record(msg, append),
                                  append.wrote_bytes)

    def half_batch_stored(self, halves: list[StoreMessage], commits: list[StoreMessage],
                          result: PutMessageResult) -> None:
        """A prepared batch was stored as ``halves`` (one put): each is open from now on, and its committed message
        ``commits[i]`` (batch.half_batch_messages) is kept ready for END_TRANSACTION_BATCH, pointing at its half."""
        if not result.ok or result.append is None:
            return
        append = result.append
        offsets, queue_offsets, stored = append.record_offsets, append.queue_offsets, append.store_timestamp
        ready = self.ready_commits
        for msg, commit, offset, queue_offset in zip(halves, commits, offsets, queue_offsets, strict=True):
            self._open(msg, offset, queue_offset, stored)
            commit.prepared_transaction_offset = offset
            ready.add(offset, (commit, commit.topic), len(commit.body) + len(commit.encoded_properties or b""))

    def half_batch_records_stored(self, batch: HalfBatch, producer_group: str, origin: HalfBatchOrigin,
                                  result: PutMessageResult) -> None:
        """``half_batch_stored`` for a batch encoded ahead (batch.half_batch_records): its records say nothing the
        batch does not, so each half is opened from the batch's lists, without a message object."""
        if not result.ok or result.append is None:
            return
        offsets, stored, born = result.append.record_offsets, result.append.store_timestamp, origin.born_timestamp
        set_prepared_offsets(batch.commits, offsets)
        for tx, immunity, offset, queue_offset in zip(batch.transaction_ids, batch.immunities, offsets,
                                                      result.append.queue_offsets, strict=True):
            self._register(HalfMessage(tx, producer_group, queue_offset, offset, born, stored, 0, immunity))
        commits, topic = batch.commits, origin.topic
        self.ready_commits.add_many(offsets, [(c, topic) for c in commits], [len(c) for c in commits])

    def half_batch_records(self, body: bytes, origin: HalfBatchOrigin, producer_group: str,
                           added: Mapping[str, str]) -> HalfBatch | None:
        """batch.half_batch_records for this broker's store: its host, maxMessageSize and record bound."""
        limit = self.controller.store_config.max_message_size
        limits = RecordLimits(self.controller.store.store_host, limit, limit + RECORD_HEADROOM)
        return half_batch_records(body, origin, producer_group, added, limits)

    def _open(self, msg: StoreMessage, offset: int, queue_offset: int, store_timestamp: int) -> HalfMessage:
        """Register the half message ``msg`` stored at ``offset`` as an open transaction."""
        props = msg.properties
        return self._register(HalfMessage(
            props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or f"@{offset}", props.get(PROPERTY_PRODUCER_GROUP),
            queue_offset, offset, msg.born_timestamp, store_timestamp,
            bridge.parse_java_long(props.get(PROPERTY_TRANSACTION_CHECK_TIMES)) or 0,
            props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)))

    def _register(self, entry: HalfMessage) -> HalfMessage:
        """``entry`` is open from now on; a producer's retry of the same send (same transaction id, not being
        ended) supersedes the earlier half."""
        previous = self.open.get(entry.transaction_id)
        self.open[entry.transaction_id] = entry
        if previous is not None and previous.busy is None:
            previous.ended = True
            self._forget(previous.commit_log_offset)
            self._done([previous.queue_offset])
        return entry

    def _forget(self, commit_log_offset: int) -> None:
        """Drop what is kept of the half record at ``commit_log_offset`` (ended, superseded or re-put)."""
        self.half_records.discard(commit_log_offset)
        self.ready_commits.discard(commit_log_offset)

    def is_open(self, half: MessageRecord) -> bool:
        """Whether END_TRANSACTION may still end the transaction of the half record ``half``: open, or discarded by
        the check since this broker started (Java ends those all the same)."""
        tx = bridge.transaction_id(half)
        return tx in self.open or tx in self._discarded

    def half_record(self, commit_log_offset: int) -> MessageRecord | None:
        """The record at ``commit_log_offset`` (getHalfMessageByOffset): kept since its prepared send, else read
        from the store. Callers do not change it."""
        record = self.half_records.get(commit_log_offset)
        return record if record is not None else self.controller.store.lookup_message(commit_log_offset)

    # -- END_TRANSACTION ------------------------------------------------------------------------------------------

    async def end(self, half: MessageRecord, *, commit: bool, prepared_offset: int) -> EndOutcome:
        """Commit (the message goes to its real queue) or roll back the transaction of the half record ``half``;
        either way an op record names the ended half offsets. Both records go in one put, so a crash keeps both
        or neither. A transaction ended before is not ended again; one the check discarded (since this broker
        started) is, as in Java.

        Ends that arrive in the same loop iteration (a producer pipelining them) share that put and one op record
        naming all their half offsets, as Java's TransactionalOpBatchService merges op records: one store write
        for many ends instead of two each."""
        entry = self._entry_of(half)
        if entry is None or not await self._claim(entry):
            return EndOutcome(EndStatus.ALREADY_ENDED)
        try:
            return outcome(await self._queue_end(entry, *self._end_of(entry, half, commit, prepared_offset)))
        finally:
            self._release(entry)

    def _entry_of(self, half: MessageRecord) -> HalfMessage | None:
        """The open transaction of ``half``; one the check discarded is open again (Java ends it all the same)."""
        tx = bridge.transaction_id(half)
        if tx not in self.open and tx in self._discarded:
            entry = self.open[tx] = self._discarded.pop(tx)
            entry.ended = False
        return self.open.get(tx)

    def _end_of(self, entry: HalfMessage, half: MessageRecord, commit: bool,
                prepared_offset: int) -> tuple[list[int], StoreMessage | None]:
        """The half offsets an end of ``half`` names and the message it stores (None rolling back). A committed
        message still carrying DELAY is parked for delayed delivery (Java's store hook parks any committed message
        with a delay level; official clients never send a half message with one)."""
        offsets = list(dict.fromkeys((half.queue_offset, entry.queue_offset)))
        if not commit:
            return offsets, None
        schedule = self.controller.schedule_message_service
        return offsets, schedule.handle_schedule_message(bridge.committed_message(half, prepared_offset))

    def ready_end(self, commit_log_offset: int, queue_offset: int, transaction_id: str,
                  producer_group: str, topic: str) -> Ready | None:
        """The open half message of a prepared batch that a handle names, with its committed message kept ready,
        when everything the handle and its request say matches it; None sends the caller the long way (reading
        the half record), which also says what does not match."""
        entry = self.open.get(transaction_id)
        if (entry is None or entry.commit_log_offset != commit_log_offset or entry.queue_offset != queue_offset
                or entry.producer_group != producer_group):
            return None
        kept = self.ready_commits.get(commit_log_offset)
        if kept is None or kept[1] != topic:
            return None
        return entry, kept[0]

    async def end_many(self, halves: list[Ready | MessageRecord], *, commit: bool) -> list[EndOutcome]:
        """``end`` for many half messages, queued in their order in one pass: those found by ``ready_end`` with
        their kept committed messages, the others from their half records (each ending as its own commit log
        offset says)."""
        loop = asyncio.get_running_loop()
        busy: asyncio.Future[None] = loop.create_future()  # shared by every entry claimed here without waiting
        claimed: list[HalfMessage] = []
        waits: list[asyncio.Future[PutMessageResult] | None] = []
        try:
            for half in halves:
                if isinstance(half, MessageRecord):
                    entry, kept = self._entry_of(half), None
                else:
                    entry, kept = half
                if entry is None:
                    ok = False
                elif entry.busy is None:
                    ok = not entry.ended
                    if ok:
                        entry.busy = busy
                else:
                    ok = await self._claim(entry)  # a check writes for it: wait, as ``end`` does
                if not ok or entry is None:
                    waits.append(None)
                    continue
                claimed.append(entry)
                if kept is None:
                    offsets, msg = self._end_of(entry, half, commit, half.commit_log_offset)
                else:
                    offsets, msg = [entry.queue_offset], kept if commit else None
                waits.append(self._queue_end(entry, offsets, msg))
            settled: dict[asyncio.Future[PutMessageResult], EndOutcome] = {}  # a few puts' futures, many ends each
            for wait in dict.fromkeys(w for w in waits if w is not None):
                settled[wait] = outcome(await wait)
            return [EndOutcome(EndStatus.ALREADY_ENDED) if wait is None else settled[wait] for wait in waits]
        finally:
            for entry in claimed:
                self._release(entry)
            if not busy.done():
                busy.set_result(None)

    def _queue_end(self, entry: HalfMessage, half_offsets: list[int],
                   msg: StoreMessage | None) -> asyncio.Future[PutMessageResult]:
        """Add an end to the put being gathered (stored at the end of this loop iteration, or now when full); the
        future is that put's, shared by every end in it."""
        if not self._ends:
            loop = asyncio.get_running_loop()
            loop.call_soon(self._put_ends)
            self._ends_stored = loop.create_future()
        future = self._ends_stored
        self._ends.append((entry, half_offsets, msg))
        if len(self._ends) >= END_BATCH_MAX:
            self._put_ends()
        return future

    def _put_ends(self) -> None:
        """Store the ends gathered so far: their committed messages and one op record, in one put."""
        ends, self._ends = self._ends, []
        if not ends:
            return
        offsets = [offset for _, entry_offsets, _ in ends for offset in entry_offsets]
        msgs = [msg for _, _, msg in ends if msg is not None]
        ops = bridge.op_messages(offsets, self.controller.store.store_host, now_ms())  # Java's op batch sizes
        msgs += [op for op, _ in ops]
        task = asyncio.get_running_loop().create_task(self._store_ends(
            [entry for entry, _, _ in ends], offsets, msgs, [named for _, named in ops], self._ends_stored))
        self._end_tasks.add(task)
        task.add_done_callback(self._end_tasks.discard)

    async def _store_ends(self, entries: list[HalfMessage], offsets: list[int], msgs: list[StoreMessage],
                          op_groups: list[list[int]], stored: asyncio.Future[PutMessageResult]) -> None:
        """Put ``msgs`` (the committed messages, then one op record per ``op_groups`` entry) and settle the ends of
        ``entries`` through ``stored``."""
        try:
            result = await self.controller.put_messages(msgs)
        except asyncio.CancelledError:
            stored.cancel()
            raise
        except Exception as err:  # each end() raises it (its request is answered SYSTEM_ERROR)
            stored.set_exception(err)
            return
        if result.ok and result.append is not None:
            for entry in entries:
                entry.ended = True
                if self.open.get(entry.transaction_id) is entry:
                    del self.open[entry.transaction_id]
                self._forget(entry.commit_log_offset)
            op_offsets = result.append.queue_offsets[-len(op_groups):]
            self._done(offsets, dict(zip(op_offsets, op_groups, strict=True)))
        stored.set_result(result)

    def _close(self, entry: HalfMessage, half_offsets: list[int], op_offset: int | None) -> None:
        entry.ended = True
        if self.open.get(entry.transaction_id) is entry:
            del self.open[entry.transaction_id]
        self._forget(entry.commit_log_offset)
        self._done(half_offsets, None if op_offset is None else {op_offset: half_offsets})

    async def _claim(self, entry: HalfMessage) -> bool:
        """Make ``entry`` ours to write for; False when it ended meanwhile."""
        while entry.busy is not None:
            await asyncio.shield(entry.busy)
        if entry.ended:
            return False
        entry.busy = asyncio.get_running_loop().create_future()
        return True

    @staticmethod
    def _release(entry: HalfMessage) -> None:
        busy, entry.busy = entry.busy, None
        if busy is not None and not busy.done():
            busy.set_result(None)

    # -- the check (TransactionalMessageServiceImpl.check) ------------------------------------------------------------

    async def check(self) -> int:
        """One round: every open half message older than its immunity is asked about once (re-put with one more
        check counted, then CHECK_TRANSACTION_STATE to a live producer of its group); those asked
        transactionCheckMax times already, or older than the store keeps files, are discarded. Returns how many
        were asked."""
        config = self.controller.broker_config
        start = now_ms()
        asked = 0
        for entry in sorted(self.open.values(), key=lambda e: e.queue_offset):
            if entry.busy is not None or entry.ended or entry.store_timestamp >= start:
                continue  # being ended, or stored during this round: the next round looks at it
            if entry.check_times >= max(config.transaction_check_max, 1) or self._expired(entry, start):
                await self._discard(entry)
            elif self._due(entry, now_ms()):
                asked += await self._ask(entry)
        return asked

    def _due(self, entry: HalfMessage, now: int) -> bool:
        age = now - entry.born_timestamp
        timeout = self.controller.broker_config.transaction_time_out
        immunity = timeout if entry.immunity is None else bridge.check_immunity_ms(entry.immunity, timeout)
        return age > immunity or age <= -1

    def _expired(self, entry: HalfMessage, now: int) -> bool:
        """needSkip: older than fileReservedTime, so its records may be gone."""
        return now - entry.born_timestamp > self.controller.store_config.file_reserved_time * 3600 * 1000

    async def _ask(self, entry: HalfMessage) -> int:
        if not await self._claim(entry):
            return 0
        try:
            half = self.half_record(entry.commit_log_offset)
            if half is None:
                log.warning("half message of transaction %s at %d is gone; forgetting it", entry.transaction_id,
                            entry.commit_log_offset)
                self._close(entry, [entry.queue_offset], None)
                return 0
            renewed = await self._put_back(entry, half)
        finally:
            self._release(entry)
        if renewed is not None:
            await self._send_check(entry, half, renewed)
        return 1

    async def _put_back(self, entry: HalfMessage, half: MessageRecord) -> MessageRecord | None:
        """putBackHalfMsgQueue: the half message again at the end of the queue, one more check counted."""
        result = await self.controller.put_messages([bridge.renewed_half_message(half, entry.check_times + 1)])
        if not result.ok or result.append is None:
            log.error("put back of half message %s failed: %s", entry.transaction_id, result.status)
            return None
        old = entry.queue_offset
        self._forget(entry.commit_log_offset)
        entry.queue_offset, entry.commit_log_offset = result.append.queue_offset, result.append.wrote_offset
        entry.store_timestamp = result.append.store_timestamp
        entry.check_times += 1
        self._done([old])
        return self.controller.store.lookup_message(entry.commit_log_offset)

    async def _send_check(self, entry: HalfMessage, half: MessageRecord, renewed: MessageRecord) -> None:
        """sendCheckMessage: CHECK_TRANSACTION_STATE (oneway) to one live producer of the group, if any."""
        channel = self.controller.producer_manager.any_channel(entry.producer_group or "")
        if channel is None:
            log.warning("check transaction %s failed: no producer of group %s is connected", entry.transaction_id,
                        entry.producer_group)
            return
        request = bridge.check_request(half, renewed, self.controller.broker_config.broker_name)
        try:
            await channel.connection.invoke_oneway(request)
        except RemotingError as err:
            log.warning("check transaction %s with %s failed: %s", entry.transaction_id, channel.address, err)

    async def _discard(self, entry: HalfMessage) -> None:
        """resolveDiscardMsg: the half message to TRANS_CHECK_MAX_TIME_TOPIC. Java writes no op record for it; we
        do (in the same put), so a restart does not discard it a second time."""
        if not await self._claim(entry):
            return
        try:
            half = self.half_record(entry.commit_log_offset)
            msgs = [bridge.op_message([entry.queue_offset], self.controller.store.store_host, now_ms())]
            if half is not None:
                self.controller.topic_config_manager.create_topic_of_tran_check_max_time(
                    bridge.TCMT_QUEUE_NUMS, PERM_READ | PERM_WRITE)
                msgs.insert(0, bridge.discarded_message(half))
            log.error("half message of transaction %s was checked %d times; discarding it to %s",
                      entry.transaction_id, entry.check_times, bridge.CHECK_MAX_TIME_TOPIC)
            result = await self.controller.put_messages(msgs)
            if result.ok and result.append is not None:
                self._close(entry, [entry.queue_offset], result.append.queue_offsets[-1])
                self._discarded[entry.transaction_id] = entry
            else:
                log.error("discarding half message %s failed: %s", entry.transaction_id, result.status)
        finally:
            self._release(entry)
