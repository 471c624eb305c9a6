"""The leader's side of log replication, as DLedgerEntryPusher of DLedger 0.3.2 works: an EntryDispatcher per
follower, a QuorumAckChecker, and the appends waiting for their quorum.

A dispatcher starts every term in COMPARE: it sends its last entry and walks back (to the follower's end, then one
by one) until the follower holds the same entry; TRUNCATE then makes that entry the follower's last (dropping a
tail the follower has from an older term, or writing the entry when the follower lacks it), and APPEND pushes the
entries after it, a thousand pushes in flight at most. A push unanswered after maxPushTimeOutMs goes again; an
INCONSISTENT_STATE answer sends the dispatcher back to COMPARE. When there is nothing to push, a COMMIT carries the
committed index at least once a second (APPENDs carry it too). A follower catching up from far behind (more than
1000 entries and peerPushThrottlePoint bytes) is pushed peerPushQuota bytes a second at most: the dispatcher waits
out the rest of a second whose quota is spent (checkQuotaAndWait; as DLedger does from 0.4.0, in batch pushes too).

Each member's progress is its water mark, per term; the QuorumAckChecker takes the middle one as the quorum index,
moves the store's committed index there and completes the appends up to it. Appends past it that waited
maxWaitAckTimeMs fail with WAIT_QUORUM_ACK_TIMEOUT; appends of an older term fail with TERM_CHANGED, as soon as
the member is no longer the leader of that term.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from broker.common.clock import monotonic_ms
from broker.common.errors import DLedgerError
from broker.common.tasks import cancel_and_wait
from broker.dledger.config import DLedgerConfig
from broker.dledger.layout import DLedgerEntry
from broker.dledger.member_state import MemberState
from broker.dledger.protocol import (
    AppendEntryResponse,
    DLedgerResponseCode,
    PushEntryRequest,
    PushEntryResponse,
    PushType,
)
from broker.dledger.quota import Quota
from broker.dledger.store import DLedgerMmapFileStore

log = logging.getLogger(__name__)

MAX_PENDING_PUSHES = 1000  # a dispatcher's pushes in flight (EntryDispatcher.maxPendingSize)
COMMIT_PUSH_INTERVAL_MS = 1000  # a COMMIT push when nothing else went for this long
LEAK_CHECK_MS = 1000
COMPARE_WAIT_S = 3.0  # a COMPARE or TRUNCATE answer is awaited this long
ERROR_PAUSE_S = 0.5
IDLE_WAIT_S = 0.05

Push = Callable[[PushEntryRequest], Awaitable[PushEntryResponse]]


@dataclass(slots=True)
class PendingAppend:
    """An append waiting for its quorum (DLedger's AppendFuture)."""

    pos: int
    timeout_ms: int
    future: asyncio.Future[AppendEntryResponse] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())
    created_ms: int = field(default_factory=monotonic_ms)

    @property
    def timed_out(self) -> bool:
        return monotonic_ms() - self.created_ms >= self.timeout_ms

    def complete(self, response: AppendEntryResponse) -> None:
        if not self.future.done():
            self.future.set_result(response)


class _Wakeable:
    """A task that runs ``_loop`` until stopped and can be woken from its idle wait."""

    name = "dledger"

    def __init__(self) -> None:
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._loop(), name=self.name)

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    def wakeup(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _idle(self, seconds: float = IDLE_WAIT_S) -> None:
        assert self._wake is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)
        self._wake.clear()

    async def _loop(self) -> None:
        raise NotImplementedError


class DLedgerEntryPusher:
    def __init__(self, config: DLedgerConfig, member_state: MemberState, store: DLedgerMmapFileStore,
                 push: Push) -> None:
        self.config = config
        self.member_state = member_state
        self.store = store
        self.push = push
        self.peer_water_marks_by_term: dict[int, dict[str, int]] = {}
        self.pending_by_term: dict[int, dict[int, PendingAppend]] = {}
        self.quorum_ack_checker = QuorumAckChecker(self)
        self.dispatchers = {peer: EntryDispatcher(self, peer) for peer in config.peers if peer != config.self_id}

    def start(self) -> None:
        self.quorum_ack_checker.start()
        for dispatcher in self.dispatchers.values():
            dispatcher.start()

    async def stop(self) -> None:
        for task in (self.quorum_ack_checker, *self.dispatchers.values()):
            await task.stop()
        self.fail_pending(DLedgerResponseCode.TERM_CHANGED, "the member stopped")

    def wake_up_dispatchers(self) -> None:
        for dispatcher in self.dispatchers.values():
            dispatcher.wakeup()

    # -- water marks and pending appends --------------------------------------------------------------------------

    def water_marks(self, term: int) -> dict[str, int]:
        return self.peer_water_marks_by_term.setdefault(term, dict.fromkeys(self.member_state.peers, -1))

    def update_peer_water_mark(self, term: int, peer: str, index: int) -> None:
        marks = self.water_marks(term)
        if marks.get(peer, -1) < index:
            marks[peer] = index

    def pending(self, term: int) -> dict[int, PendingAppend]:
        return self.pending_by_term.setdefault(term, {})

    def is_pending_full(self, term: int) -> bool:
        return len(self.pending(term)) > self.config.max_pending_requests_num

    def wait_ack(self, entry: DLedgerEntry) -> PendingAppend:
        """Register ``entry`` (just appended by this leader) to be completed when a quorum holds it."""
        self.update_peer_water_mark(entry.term, self.member_state.self_id, entry.index)
        pending = PendingAppend(entry.pos, self.config.max_wait_ack_time_ms)
        if self.pending(entry.term).setdefault(entry.index, pending) is not pending:
            log.warning("%s: an append at index %d is waiting already", self.member_state.self_id, entry.index)
            self.pending(entry.term)[entry.index] = pending
        self.quorum_ack_checker.wakeup()
        return pending

    def answer(self, term: int, index: int, pos: int = -1,
               code: DLedgerResponseCode = DLedgerResponseCode.SUCCESS) -> AppendEntryResponse:
        state = self.member_state
        leader = state.self_id if code == DLedgerResponseCode.SUCCESS else state.leader_id
        return AppendEntryResponse(group=state.group, term=term, index=index, leader_id=leader, pos=pos, code=code)

    def fail_pending(self, code: DLedgerResponseCode, why: str, keep_term: int | None = None) -> None:
        """Fail every waiting append (of every term but ``keep_term``) with ``code``."""
        for term in [t for t in self.pending_by_term if t != keep_term]:
            for index, pending in self.pending_by_term.pop(term).items():
                log.info("%s: append at index %d of term %d fails: %s", self.member_state.self_id, index, term, why)
                pending.complete(self.answer(term, index, code=code))


class QuorumAckChecker(_Wakeable):
    def __init__(self, pusher: DLedgerEntryPusher) -> None:
        super().__init__()
        self.pusher = pusher
        self.name = f"dledger-quorum-ack-{pusher.member_state.self_id}"
        self.last_quorum_index = -1
        self.last_check_leak_ms = monotonic_ms()

    async def _loop(self) -> None:
        while True:
            try:
                busy = self.do_work()
            except Exception:
                log.exception("%s: error in the quorum ack checker", self.pusher.member_state.self_id)
                await asyncio.sleep(0.1)
                continue
            if busy:
                await asyncio.sleep(0)
            else:
                await self._idle()

    def do_work(self) -> bool:
        """One round; True when appends were completed (look again at once)."""
        pusher, state = self.pusher, self.pusher.member_state
        if not state.is_leader:
            return False
        term = state.current_term
        pusher.fail_pending(DLedgerResponseCode.TERM_CHANGED, f"the term changed to {term}", keep_term=term)
        for old in [t for t in pusher.peer_water_marks_by_term if t != term]:
            del pusher.peer_water_marks_by_term[old]
        marks = sorted(pusher.water_marks(term).values(), reverse=True)
        quorum_index = marks[len(marks) // 2]
        pusher.store.update_committed_index(term, quorum_index)
        responses = pusher.pending(term)
        ack_num, need_check = 0, False
        for index in range(quorum_index, self.last_quorum_index, -1):
            pending = responses.pop(index, None)
            if pending is None:
                need_check = True
                break
            pending.complete(pusher.answer(term, index, pending.pos))
            ack_num += 1
        if ack_num == 0:
            index = quorum_index + 1
            while (pending := responses.get(index)) is not None and pending.timed_out:
                pending.complete(pusher.answer(term, index, code=DLedgerResponseCode.WAIT_QUORUM_ACK_TIMEOUT))
                del responses[index]
                index += 1
        if monotonic_ms() - self.last_check_leak_ms > LEAK_CHECK_MS or need_check:
            pusher.update_peer_water_mark(term, state.self_id, pusher.store.ledger_end_index)
            for index in [i for i in responses if i <= quorum_index]:
                pending = responses.pop(index)
                pending.complete(pusher.answer(term, index, pending.pos))
            self.last_check_leak_ms = monotonic_ms()
        self.last_quorum_index = quorum_index
        return ack_num > 0


class EntryDispatcher(_Wakeable):
    """Pushes the leader's log to one follower."""

    def __init__(self, pusher: DLedgerEntryPusher, peer: str) -> None:
        super().__init__()
        self.pusher = pusher
        self.peer = peer
        self.name = f"dledger-dispatcher-{pusher.member_state.self_id}-{peer}"
        self.type = PushType.COMPARE
        self.term = -1
        self.leader_id: str | None = None
        self.compare_index = -1
        self.write_index = -1
        self.last_push_commit_ms = -1
        self.last_check_leak_ms = monotonic_ms()
        self.pending: dict[int, tuple[int, int]] = {}  # first index -> (sent at, entry count)
        self.batch: list[DLedgerEntry] = []
        self.quota = Quota(pusher.config.peer_push_quota)
        self._calls: set[asyncio.Task[None]] = set()

    @property
    def store(self) -> DLedgerMmapFileStore:
        return self.pusher.store

    async def stop(self) -> None:
        await super().stop()
        for call in list(self._calls):
            call.cancel()

    async def _loop(self) -> None:
        while True:
            try:
                if not self.not_leader_and_fresh_state():
                    if self.type is PushType.APPEND:
                        await self.do_append()
                    else:
                        await self.do_compare()
                await self._idle()
            except Exception as err:
                if isinstance(err, DLedgerError):
                    log.info("%s: push to %s: %s", self.pusher.member_state.self_id, self.peer, err)
                else:
                    log.exception("%s: error pushing to %s", self.pusher.member_state.self_id, self.peer)
                self.change_state(-1, PushType.COMPARE)
                await asyncio.sleep(ERROR_PAUSE_S)

    def not_leader_and_fresh_state(self) -> bool:
        """True when this member does not lead; a new term starts the dispatcher over at COMPARE."""
        state = self.pusher.member_state
        if not state.is_leader:
            return True
        if self.term != state.current_term or self.leader_id != state.leader_id:
            self.term, self.leader_id = state.current_term, state.self_id
            self.change_state(-1, PushType.COMPARE)
        return False

    def change_state(self, index: int, target: PushType) -> None:
        log.info("%s: push to %s goes from %s to %s at %d", self.pusher.member_state.self_id, self.peer,
                 self.type.name, target.name, index)
        if target is PushType.APPEND:
            self.compare_index = -1
            self.pusher.update_peer_water_mark(self.term, self.peer, index)
            self.pusher.quorum_ack_checker.wakeup()
            self.write_index = index + 1
            self.batch = []
        elif target is PushType.COMPARE:
            if self.type is PushType.APPEND:
                self.compare_index = -1
                self.pending.clear()
        elif target is PushType.TRUNCATE:
            self.compare_index = -1
        self.type = target

    def _request(self, push_type: PushType, entry: DLedgerEntry | None = None,
                 batch: list[DLedgerEntry] | None = None) -> PushEntryRequest:
        state = self.pusher.member_state
        return PushEntryRequest(group=state.group, remote_id=self.peer, leader_id=self.leader_id,
                                local_id=state.self_id, term=self.term, type=push_type, entry=entry,
                                batch_entry=batch or [], commit_index=self.store.committed_index)

    def _call(self, request: PushEntryRequest, on_answer: Callable[[PushEntryResponse], None] | None = None) -> None:
        """Push without waiting; ``on_answer`` gets the answer."""
        async def call() -> None:
            response = await self.pusher.push(request)
            if on_answer is not None:
                on_answer(response)

        task = asyncio.create_task(call())
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)

    # -- APPEND ---------------------------------------------------------------------------------------------------

    async def do_append(self) -> None:
        config, store = self.pusher.config, self.store
        while not self.not_leader_and_fresh_state() and self.type is PushType.APPEND:
            if self.write_index > store.ledger_end_index:
                if self.batch:
                    self._send_batch()
                self._do_commit()
                await self._check_append_response()
                return
            if len(self.pending) >= MAX_PENDING_PUSHES or monotonic_ms() - self.last_check_leak_ms > LEAK_CHECK_MS:
                mark = self.pusher.water_marks(self.term)[self.peer]
                for first, (_, count) in list(self.pending.items()):
                    if first + count - 1 <= mark:
                        del self.pending[first]
                self.last_check_leak_ms = monotonic_ms()
            if len(self.pending) >= MAX_PENDING_PUSHES:
                await self._check_append_response()
                return
            entry = store.get(self.write_index)
            if self._far_behind(self.write_index) and await self._check_quota_and_wait(entry):
                return
            if not config.enable_batch_push:
                self._send([entry])
            else:
                self.batch.append(entry)
                if sum(e.size for e in self.batch) >= config.max_batch_push_size:
                    self._send_batch()
            self.write_index += 1

    def _far_behind(self, index: int) -> bool:
        """More than MAX_PENDING_PUSHES entries before the log's end: the first of checkQuotaAndWait's conditions,
        asked by the callers so that a push within it costs no coroutine."""
        return self.store.ledger_end_index - index > MAX_PENDING_PUSHES

    async def _check_quota_and_wait(self, entry: DLedgerEntry) -> bool:
        """Count ``entry`` (``_far_behind``: the caller looks) against the quota when the leader's data runs
        peerPushThrottlePoint bytes past it; wait the rest of the second once the quota is spent. True when the
        dispatcher must push nothing and start over: it stopped leading, or left APPEND, while it waited."""
        store, config = self.store, self.pusher.config
        if store.data.max_wrote_position - entry.pos < config.peer_push_throttle_point:
            return False
        self.quota.sample(entry.size)
        if not self.quota.validate_now():
            return False
        left_ms = self.quota.left_now_ms()
        log.warning("%s: the push quota to %s is spent (%d bytes a second), waiting %d ms",
                    self.pusher.member_state.self_id, self.peer, config.peer_push_quota, left_ms)
        await asyncio.sleep(left_ms / 1000)
        return self.not_leader_and_fresh_state() or self.type is not PushType.APPEND

    def _send(self, entries: list[DLedgerEntry]) -> None:
        """An APPEND of ``entries``: one in ``entry``, or a batch when enableBatchPush."""
        if self.pusher.config.enable_batch_push:
            request = self._request(PushType.APPEND, batch=list(entries))
        else:
            request = self._request(PushType.APPEND, entries[0])
        self.pending[entries[0].index] = (monotonic_ms(), len(entries))
        self._call(request, self._appended)
        self.last_push_commit_ms = monotonic_ms()

    def _send_batch(self) -> None:
        self._send(self.batch)
        self.batch = []

    def _appended(self, response: PushEntryResponse) -> None:
        code = response.code
        if code == DLedgerResponseCode.SUCCESS and response.index is not None:
            self.pending.pop(response.index, None)
            last = response.index + max(response.count, 1) - 1
            self.pusher.update_peer_water_mark(response.term, self.peer, last)
            self.pusher.quorum_ack_checker.wakeup()
            if self.pending:  # a push after a lost one may be due again: look now, not after the idle wait
                self.wakeup()
        elif code == DLedgerResponseCode.INCONSISTENT_STATE:
            log.info("%s: %s answers INCONSISTENT_STATE to the push of %s in term %s", self.pusher.member_state.self_id,
                     self.peer, response.index, response.term)
            self.change_state(-1, PushType.COMPARE)
            self.wakeup()
        else:
            log.debug("%s: %s answers %s to a push", self.pusher.member_state.self_id, self.peer, code)

    def _do_commit(self) -> None:
        if monotonic_ms() - self.last_push_commit_ms > COMMIT_PUSH_INTERVAL_MS:
            self._call(self._request(PushType.COMMIT))
            self.last_push_commit_ms = monotonic_ms()

    async def _check_append_response(self) -> None:
        """Push again what the follower should have answered by now (maxPushTimeOutMs), within the quota: a follower
        back from a stop is caught up by these pushes, one after the other, up to where its dispatcher got."""
        first = self.pusher.water_marks(self.term)[self.peer] + 1
        sent = self.pending.get(first)
        if sent is not None and monotonic_ms() - sent[0] > self.pusher.config.max_push_time_out_ms:
            entries = [self.store.get(i) for i in range(first, first + sent[1])]
            if self._far_behind(first):
                for entry in entries:
                    if await self._check_quota_and_wait(entry):
                        return
            log.warning("%s: pushing %d..%d to %s again", self.pusher.member_state.self_id, first,
                        first + sent[1] - 1, self.peer)
            self._send(entries)

    # -- COMPARE and TRUNCATE -------------------------------------------------------------------------------------

    async def _push_and_wait(self, request: PushEntryRequest) -> PushEntryResponse:
        try:
            return await asyncio.wait_for(self.pusher.push(request), COMPARE_WAIT_S)
        except TimeoutError:
            raise DLedgerError(DLedgerResponseCode.TIMEOUT, f"no answer from {self.peer} to {request.type.name} "
                               f"at {request.first_entry_index}") from None

    async def do_compare(self) -> None:
        store = self.store
        while not self.not_leader_and_fresh_state() and self.type in (PushType.COMPARE, PushType.TRUNCATE):
            if self.compare_index == -1 and store.ledger_end_index == -1:
                return  # nothing to compare: a new group
            if self.compare_index == -1 or not store.ledger_begin_index <= self.compare_index \
                    <= store.ledger_end_index:
                self.compare_index = store.ledger_end_index
            response = await self._push_and_wait(self._request(PushType.COMPARE, store.get(self.compare_index)))
            code = response.code
            if code not in (DLedgerResponseCode.SUCCESS, DLedgerResponseCode.INCONSISTENT_STATE):
                raise DLedgerError(code, f"{self.peer} answers {_code_name(code)} to COMPARE at {self.compare_index}")
            truncate_index = -1
            if code == DLedgerResponseCode.SUCCESS:
                if self.compare_index == response.end_index:
                    self.change_state(self.compare_index, PushType.APPEND)
                    return
                truncate_index = self.compare_index  # the follower has more after the match: drop it
            elif response.end_index < store.ledger_begin_index or response.begin_index > store.ledger_end_index:
                truncate_index = store.ledger_begin_index  # no entry in common
            elif self.compare_index < response.begin_index:
                truncate_index = store.ledger_begin_index
            elif self.compare_index > response.end_index:
                self.compare_index = response.end_index  # the follower is behind: compare at its end
            else:
                self.compare_index -= 1  # a different entry there: one back
            if self.compare_index < store.ledger_begin_index:
                truncate_index = store.ledger_begin_index
            if truncate_index != -1:
                self.change_state(truncate_index, PushType.TRUNCATE)
                await self.do_truncate(truncate_index)
                return

    async def do_truncate(self, truncate_index: int) -> None:
        entry = self.store.get(truncate_index)
        log.info("%s: truncating %s at index %d pos %d", self.pusher.member_state.self_id, self.peer, truncate_index,
                 entry.pos)
        response = await self._push_and_wait(self._request(PushType.TRUNCATE, entry))
        if response.code != DLedgerResponseCode.SUCCESS:
            raise DLedgerError(response.code, f"{self.peer} answers {_code_name(response.code)} to TRUNCATE at "
                               f"{truncate_index}")
        self.last_push_commit_ms = monotonic_ms()
        self.change_state(truncate_index, PushType.APPEND)


def _code_name(code: int) -> str:
    try:
        return DLedgerResponseCode(code).name
    except ValueError:
        return str(code)
