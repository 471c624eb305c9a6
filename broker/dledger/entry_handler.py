"""EntryHandler: a follower's side of log replication, as DLedgerEntryPusher.EntryHandler of DLedger 0.3.2 works.

APPEND pushes wait in ``write_requests`` by their first index and are written strictly in order: the one starting
at the log's end + 1 goes next, whatever order they came in. COMPARE, TRUNCATE and COMMIT go first, in arrival
order; a COMPARE or TRUNCATE drops the appends still waiting (the leader starts over from the match point, and
those pushes are never answered, as in DLedger). Only a follower works through them: a leader or candidate lets
them wait. Every answer carries the follower's log bounds, which the leader's COMPARE reads.

A push of entries the log holds already (the answer to an earlier one was lost) is answered by comparing them,
SUCCESS or INCONSISTENT_STATE: when it arrives, where DLedger waits for its once-a-second check. The leader pushes
again only its follower's water mark + 1, so a follower that held a long run of entries whose answers were lost (a
slow restart) would otherwise be caught up one entry a second. The check at most once a second (checkAbnormalFuture)
answers those that were waiting already when the log reached them, and one stuck case: a push past the log's
end that waited over a second while nothing before it came is answered INCONSISTENT_STATE, which sends the leader
back to COMPARE. Any failure to write an entry is INCONSISTENT_STATE too, whatever the store said (a stale term, a
leader this member does not follow, an entry not at its pos).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from broker.common.clock import monotonic_ms
from broker.common.errors import DLedgerError
from broker.common.tasks import cancel_and_wait
from broker.dledger.member_state import MemberState, Role
from broker.dledger.protocol import DLedgerResponseCode, PushEntryRequest, PushEntryResponse, PushType
from broker.dledger.rpc import RPC_TIMEOUT_MS
from broker.dledger.store import DLedgerMmapFileStore

log = logging.getLogger(__name__)

PUSH_WAIT_MS = 1000  # a waiting push counts as stuck after this (the follower's TimeoutFuture)
ABNORMAL_CHECK_MS = 1000  # how often stuck pushes are looked for
PRIORITY_QUEUE_SIZE = 100  # COMPARE, TRUNCATE and COMMIT waiting at most; a further one waits for room
IDLE_WAIT_S = 0.1


@dataclass(slots=True)
class _Push:
    request: PushEntryRequest
    future: asyncio.Future[PushEntryResponse | None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())
    created_ms: int = field(default_factory=monotonic_ms)

    def answer(self, response: PushEntryResponse | None) -> None:
        """The first answer counts: None is the leader's call given up on (no answer is written)."""
        if not self.future.done():
            self.future.set_result(response)


class EntryHandler:
    def __init__(self, member_state: MemberState, store: DLedgerMmapFileStore) -> None:
        self.member_state = member_state
        self.store = store
        self.write_requests: dict[int, _Push] = {}
        self._priority: asyncio.Queue[_Push] | None = None
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._last_abnormal_check_ms = monotonic_ms()

    async def start(self) -> None:
        self._priority = asyncio.Queue(PRIORITY_QUEUE_SIZE)
        self._wake = asyncio.Event()
        self._task = asyncio.create_task(self._run(), name=f"dledger-entry-handler-{self.member_state.self_id}")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None
        self.write_requests.clear()

    def wakeup(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def handle_push(self, request: PushEntryRequest) -> PushEntryResponse | None:
        """The answer once the push is worked through; None (no answer, as DLedger gives none) when it was dropped
        or still waits after the leader's call timed out."""
        push = _Push(request)
        if request.type is PushType.APPEND:
            if not request.entries:
                raise DLedgerError(DLedgerResponseCode.UNEXPECTED_ARGUMENT, "an APPEND push without entries")
            end = self.store.ledger_end_index
            if request.last_entry_index <= end and self.member_state.role is Role.FOLLOWER:
                self._answer_held(push, end)  # at once: the leader's pushes again come one by one
            elif self.write_requests.setdefault(request.first_entry_index, push) is not push:
                log.warning("%s: a push of index %d is waiting already", self.member_state.self_id,
                            request.first_entry_index)
                push.answer(self._response(request, DLedgerResponseCode.REPEATED_PUSH))
        else:
            if request.type is not PushType.COMMIT:
                if request.entry is None:
                    raise DLedgerError(DLedgerResponseCode.UNEXPECTED_ARGUMENT, f"a {request.type.name} push "
                                       "without an entry")
                self.write_requests.clear()
            assert self._priority is not None, "EntryHandler not started"
            await self._priority.put(push)
        self.wakeup()
        timer = asyncio.get_running_loop().call_later(RPC_TIMEOUT_MS / 1000, push.answer, None)
        try:
            return await push.future
        finally:
            timer.cancel()

    def _response(self, request: PushEntryRequest, code: DLedgerResponseCode) -> PushEntryResponse:
        response = PushEntryResponse(group=request.group, code=code, term=request.term,
                                     begin_index=self.store.ledger_begin_index, end_index=self.store.ledger_end_index)
        if request.type is not PushType.COMMIT:
            response.index, response.count = request.first_entry_index, len(request.entries)
        return response

    # -- the work loop --------------------------------------------------------------------------------------------

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            try:
                if self._do_work():
                    await asyncio.sleep(0)
                    continue
            except Exception:
                log.exception("%s: error in the entry handler", self.member_state.self_id)
                await asyncio.sleep(0.1)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), IDLE_WAIT_S)
            self._wake.clear()

    def _do_work(self) -> bool:
        """Work one push if there is one to work; False when there was none."""
        if self.member_state.role is not Role.FOLLOWER:
            return False
        assert self._priority is not None
        if not self._priority.empty():
            push = self._priority.get_nowait()
            {PushType.TRUNCATE: self._truncate, PushType.COMPARE: self._compare,
             PushType.COMMIT: self._commit}[push.request.type](push)
            return True
        end = self.store.ledger_end_index
        push = self.write_requests.pop(end + 1, None)
        if push is None:
            self._check_abnormal(end)
            return False
        self._append(end + 1, push)
        return True

    def _commit_to(self, request: PushEntryRequest) -> None:
        self.store.update_committed_index(request.term, request.commit_index)

    def _append(self, write_index: int, push: _Push) -> None:
        request = push.request
        try:
            if request.first_entry_index != write_index:
                raise DLedgerError(DLedgerResponseCode.INCONSISTENT_STATE,
                                   f"push of {request.first_entry_index} at write index {write_index}")
            for entry in request.entries:
                self.store.append_as_follower(entry, request.term, request.leader_id)
        except Exception as err:
            log.warning("%s: cannot append the push of index %d: %s", self.member_state.self_id, write_index, err)
            push.answer(self._response(request, DLedgerResponseCode.INCONSISTENT_STATE))
            return
        push.answer(self._response(request, DLedgerResponseCode.SUCCESS))
        self._commit_to(request)

    def _compare(self, push: _Push) -> None:
        request = push.request
        assert request.entry is not None
        try:
            same = request.entry.same_as(self.store.get(request.entry.index))
        except Exception:
            same = False
        push.answer(self._response(request, DLedgerResponseCode.SUCCESS if same
                                   else DLedgerResponseCode.INCONSISTENT_STATE))

    def _commit(self, push: _Push) -> None:
        try:
            self._commit_to(push.request)
        except Exception:
            log.exception("%s: cannot commit to %d", self.member_state.self_id, push.request.commit_index)
            push.answer(self._response(push.request, DLedgerResponseCode.UNKNOWN))
            return
        push.answer(self._response(push.request, DLedgerResponseCode.SUCCESS))

    def _truncate(self, push: _Push) -> None:
        request = push.request
        assert request.entry is not None
        log.info("%s: truncating at index %d pos %d", self.member_state.self_id, request.entry.index,
                 request.entry.pos)
        try:
            self.store.truncate(request.entry, request.term, request.leader_id)
        except Exception as err:
            log.warning("%s: cannot truncate at %d: %s", self.member_state.self_id, request.entry.index, err)
            push.answer(self._response(request, DLedgerResponseCode.INCONSISTENT_STATE))
            return
        push.answer(self._response(request, DLedgerResponseCode.SUCCESS))
        self._commit_to(request)

    def _answer_held(self, push: _Push, end: int) -> None:
        """A push of entries the log holds already (the answer to an earlier push was lost): SUCCESS when they are
        the leader's, else INCONSISTENT_STATE (DLedger's PushFallBehind)."""
        request = push.request
        try:
            same = all(entry.same_as(self.store.get(entry.index)) for entry in request.entries)
        except Exception:
            same = False
        log.warning("%s: a push of %d..%d arrived after the log reached %d", self.member_state.self_id,
                    request.first_entry_index, request.last_entry_index, end)
        push.answer(self._response(request, DLedgerResponseCode.SUCCESS if same
                                   else DLedgerResponseCode.INCONSISTENT_STATE))

    def _check_abnormal(self, end: int) -> None:
        """Answer the pushes that would otherwise wait for good (checkAbnormalFuture)."""
        if monotonic_ms() - self._last_abnormal_check_ms < ABNORMAL_CHECK_MS:
            return
        self._last_abnormal_check_ms = monotonic_ms()
        stuck = None
        for first, push in list(self.write_requests.items()):
            request = push.request
            if request.last_entry_index <= end:
                del self.write_requests[first]
                self._answer_held(push, end)
            elif first == end + 1:
                return
            elif monotonic_ms() - push.created_ms >= PUSH_WAIT_MS and (stuck is None or first < stuck):
                stuck = first
        if stuck is not None:
            log.warning("%s: a push of %d waits after the log's end %d: the leader must compare",
                        self.member_state.self_id, stuck, end)
            push = self.write_requests.pop(stuck)
            push.answer(self._response(push.request, DLedgerResponseCode.INCONSISTENT_STATE))
