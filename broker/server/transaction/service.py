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
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from broker.common.clock import now_ms
from broker.common.errors import RemotingError
from broker.common.message import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    format_host,
)
from broker.common.record import MessageRecord
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
from broker.server.transaction.ends import EndPuts
from broker.server.transaction.rebuild import read_transactions
from broker.server.transaction.state import (
    ALREADY_ENDED,
    COMMIT_OVERHEAD,
    READY_COMMITS_BYTES,
    EndOutcome,
    HalfMessage,
    KeptByOffset,
    QueueProgress,
    Ready,
    ReadyCommit,
    outcome,
)
from broker.store.commit_log import RECORD_HEADROOM, StoreMessage
from broker.store.results import PutMessageResult

if TYPE_CHECKING:
    from broker.server.broker_controller import BrokerController

log = logging.getLogger(__name__)


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
        self._puts = EndPuts(controller.put_messages, controller.store.store_host, self._ended)

    # -- start: rebuild from the half and op topics -----------------------------------------------------------------

    async def start(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.rebuild)

    def rebuild(self) -> None:
        """Open transactions from the store (``rebuild.read_transactions``); nothing of before is kept."""
        self.half_records.clear()
        self.ready_commits.clear()
        stored = read_transactions(self.controller.store, self.controller.consumer_offset_manager)
        self.open.clear()
        self.open.update(stored.open)
        self._op_refs.clear()
        self._op_refs.update(stored.op_refs)
        self.half, self.op, self._committed = stored.half, stored.op, stored.read_from
        self._progressed()
        log.info("transactions rebuilt: %d open, half offset %d, op offset %d", len(self.open), self.half.offset,
                 self.op.offset)

    # -- progress: the CID_RMQ_SYS_TRANS offsets ---------------------------------------------------------------------

    def _done(self, half_offsets: list[int], op_refs: Mapping[int, list[int]] | None = None) -> None:
        """``half_offsets`` are ended or superseded; ``op_refs``: the op records just written (op queue offset ->
        the half offsets it names)."""
        for op_offset, named in (op_refs or {}).items():
            self._op_refs[op_offset] = max(named, default=-1)
        moved = self.half.done_many(half_offsets)
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
        ids = batch.transaction_ids
        entries = [HalfMessage(tx, producer_group, queue_offset, offset, born, stored, 0, immunity)
                   for tx, immunity, offset, queue_offset in zip(ids, batch.immunities, offsets,
                                                                 result.append.queue_offsets, strict=True)]
        if self.open.keys().isdisjoint(ids):  # no item retries an open one (half_batch_records refuses repeats)
            self.open.update(zip(ids, entries, strict=True))
        else:
            for entry in entries:
                self._register(entry)
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
        either way an op record names the ended half offsets. Both records go in one put (``ends.EndPuts``, shared
        with the other ends of this loop iteration), so a crash keeps both or neither. A transaction ended before
        is not ended again; one the check discarded (since this broker started) is, as in Java."""
        entry = self._entry_of(half)
        if entry is None or not await self._claim(entry):
            return ALREADY_ENDED
        try:
            return outcome(await self._puts.add(entry, *self._end_of(entry, half, commit, prepared_offset)))
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

    def ready_ends(self, commit_log_offsets: Sequence[int], queue_offsets: Sequence[int],
                   transaction_ids: Sequence[str], producer_group: str, topic: str) -> list[Ready | None]:
        """Per handle of an END_TRANSACTION_BATCH (its three columns), in one pass: the open half message of a
        prepared batch it names, with its committed message kept ready, when everything the handle and its request
        say matches it; None sends the caller the long way (reading the half record), which also says what does not
        match."""
        entries = map(self.open.get, transaction_ids)
        kept = self.ready_commits.get_many(commit_log_offsets)
        return [(entry, ready[0]) if (entry is not None and ready is not None and entry.commit_log_offset == offset
                                      and entry.queue_offset == queue_offset
                                      and entry.producer_group == producer_group and ready[1] == topic) else None
                for entry, ready, offset, queue_offset in zip(entries, kept, commit_log_offsets, queue_offsets,
                                                              strict=True)]

    async def end_many(self, halves: list[Ready | MessageRecord], *, commit: bool) -> list[EndOutcome]:
        """``end`` for many half messages, in their order: a run of those found by ``ready_ends`` is claimed and
        queued in one step with its kept committed messages; any other (a half record, or an entry a check is
        writing for) is ended as ``end`` ends it, as its own commit log offset says."""
        busy: asyncio.Future[None] = asyncio.get_running_loop().create_future()  # of every entry claimed unawaited
        shared: list[HalfMessage] = []  # claimed with ``busy``
        own: list[HalfMessage] = []  # claimed after waiting, each with its own future
        waits: list[asyncio.Future[PutMessageResult] | None] = []
        run: list[HalfMessage] = []  # ready ends claimed, not queued yet
        run_msgs: list[StoreMessage | bytearray] = []
        try:
            for half in halves:
                if isinstance(half, tuple) and half[0].busy is None and not half[0].ended:
                    half[0].busy = busy
                    run.append(half[0])
                    run_msgs.append(half[1])
                    continue
                if run:
                    waits += self._queue_run(run, run_msgs, commit)
                    shared += run
                    run, run_msgs = [], []
                waits.append(await self._end_one(half, commit, busy, shared, own))
            if run:
                waits += self._queue_run(run, run_msgs, commit)
                shared += run
            settled: dict[asyncio.Future[PutMessageResult] | None, EndOutcome] = {None: ALREADY_ENDED}
            for wait in dict.fromkeys(waits):  # a few puts' futures, many ends each (and None: ended before)
                if wait is not None:
                    settled[wait] = outcome(await wait)
            return list(map(settled.__getitem__, waits))
        finally:
            for entry in shared:
                entry.busy = None
            for entry in own:
                self._release(entry)
            busy.set_result(None)

    def _queue_run(self, entries: list[HalfMessage], msgs: list[StoreMessage | bytearray],
                   commit: bool) -> list[asyncio.Future[PutMessageResult]]:
        """Queue the ends of claimed ready entries, each naming its half offset (one future per end)."""
        return self._puts.add_many(entries, [entry.queue_offset for entry in entries], msgs if commit else None)

    async def _end_one(self, half: Ready | MessageRecord, commit: bool, busy: asyncio.Future[None],
                       shared: list[HalfMessage],
                       own: list[HalfMessage]) -> asyncio.Future[PutMessageResult] | None:
        """One end of ``end_many`` the long way: claimed with ``busy`` (added to ``shared``), or after waiting for
        a check that writes for it (added to ``own``); None when it was ended before."""
        if isinstance(half, MessageRecord):
            entry, kept = self._entry_of(half), None
        else:
            entry, kept = half
        if entry is None or (entry.busy is None and entry.ended):
            return None
        if entry.busy is None:
            entry.busy = busy
            shared.append(entry)
        elif await self._claim(entry):
            own.append(entry)
        else:
            return None
        if kept is None:
            offsets, msg = self._end_of(entry, half, commit, half.commit_log_offset)
        else:
            offsets, msg = [entry.queue_offset], kept if commit else None
        return self._puts.add(entry, offsets, msg)

    def _ended(self, entries: list[HalfMessage], half_offsets: list[int], op_refs: dict[int, list[int]]) -> None:
        """A put of ends was stored (``EndPuts``' bookkeeping, once per put): ``entries`` are ended, what is kept of
        their half records is dropped, and ``half_offsets`` and the op records ``op_refs`` are done."""
        open_ = self.open
        for entry in entries:
            entry.ended = True
            if open_.get(entry.transaction_id) is entry:
                del open_[entry.transaction_id]
        offsets = [entry.commit_log_offset for entry in entries]
        self.half_records.discard_many(offsets)
        self.ready_commits.discard_many(offsets)
        self._done(half_offsets, op_refs)

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
