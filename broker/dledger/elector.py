"""LeaderElector: DLedger's Raft election (DLedgerLeaderElector of openmessaging/dledger 0.3.2), on asyncio.

One task maintains the member's role every 10 ms. A CANDIDATE asks every member (itself included) for its vote
once its randomised vote time comes, and reads the answers as DLedger does (``_parse``): elected with a quorum of
ACCEPT; at once again in the same term when the missing votes were only catching up on it; later in the next term
otherwise; later in the same term when a leader exists (after maxHeartBeatLeak heartbeats) or when too many members
hold a longer log. A LEADER sends heartbeats every heartBeatTimeIntervalMs and steps down when a larger term
answers, when another leader of its term answers, or when no quorum answered for maxHeartBeatLeak periods. A
FOLLOWER whose leader was silent that long becomes CANDIDATE. A member only votes in its own term: a request with a
larger term makes it a candidate that adopts the term first (TERM_NOT_READY), so terms spread before votes do.

The handlers (``handle_vote``, ``handle_heart_beat``) run on the same event loop and never await, which is what
DLedger's ``synchronized (memberState)`` buys. Role-change handlers get ``(term, role)`` on every change.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from broker.common.clock import monotonic_ms
from broker.common.tasks import cancel_and_wait
from broker.dledger.config import DLedgerConfig
from broker.dledger.member_state import MemberState, Role
from broker.dledger.protocol import (
    DLedgerResponseCode,
    HeartBeatRequest,
    HeartBeatResponse,
    ParseResult,
    VoteRequest,
    VoteResponse,
    VoteResult,
)

log = logging.getLogger(__name__)

MAINTAIN_SLEEP_MS = 10  # StateMaintainer's pause between rounds
VOTE_WAIT_MS = 2000  # a round waits for its answers at most this + random(maxVoteIntervalMs)

RoleChangeHandler = Callable[[int, Role], None]


class PeerCalls(Protocol):
    def vote(self, request: VoteRequest) -> Awaitable[VoteResponse]: ...

    def heart_beat(self, request: HeartBeatRequest) -> Awaitable[HeartBeatResponse]: ...


def _elapsed(since_ms: int) -> int:
    return monotonic_ms() - since_ms


@dataclass(slots=True)
class VoteTally:
    """One round's answers, counted as maintainAsCandidate counts them."""

    term: int
    known_max_term: int
    all_num: int = 0
    valid_num: int = 0
    accepted_num: int = 0
    not_ready_term_num: int = 0
    bigger_ledger_num: int = 0
    already_has_leader: bool = False

    def add(self, response: VoteResponse) -> None:
        self.all_num += 1
        result = response.vote_result
        if result is not VoteResult.UNKNOWN:
            self.valid_num += 1
        if result is VoteResult.ACCEPT:
            self.accepted_num += 1
        elif result is VoteResult.REJECT_ALREADY_HAS_LEADER:
            self.already_has_leader = True
        elif result in (VoteResult.REJECT_TERM_SMALL_THAN_LEDGER, VoteResult.REJECT_EXPIRED_VOTE_TERM):
            self.known_max_term = max(self.known_max_term, response.term)
        elif result in (VoteResult.REJECT_EXPIRED_LEDGER_TERM, VoteResult.REJECT_SMALL_LEDGER_END_INDEX):
            self.bigger_ledger_num += 1
        elif result is VoteResult.REJECT_TERM_NOT_READY:
            self.not_ready_term_num += 1


class LeaderElector:
    def __init__(self, config: DLedgerConfig, member_state: MemberState, peers: PeerCalls) -> None:
        self.config = config
        self.member_state = member_state
        self.peers = peers
        self.last_leader_heart_beat_time = -1
        self.last_send_heart_beat_time = -1
        self.last_succ_heart_beat_time = -1
        self.next_time_to_request_vote = -1
        self.need_increase_term_immediately = False
        self.last_parse_result = ParseResult.WAIT_TO_REVOTE
        self.last_vote_cost = 0
        self._handlers: list[RoleChangeHandler] = []
        self._task: asyncio.Task[None] | None = None

    def add_role_change_handler(self, handler: RoleChangeHandler) -> None:
        if handler not in self._handlers:
            self._handlers.append(handler)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._maintain(), name=f"dledger-elector-{self.member_state.self_id}")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def _maintain(self) -> None:
        while True:
            try:
                if self.config.enable_leader_elector:
                    await self.maintain_state()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: error in the election loop", self.member_state.self_id)
            await asyncio.sleep(MAINTAIN_SLEEP_MS / 1000)

    async def maintain_state(self) -> None:
        if self.member_state.role is Role.LEADER:
            await self._maintain_as_leader()
        elif self.member_state.role is Role.FOLLOWER:
            self._maintain_as_follower()
        else:
            await self._maintain_as_candidate()

    # -- role changes -------------------------------------------------------------------------------------------------

    def change_role_to_leader(self, term: int) -> None:
        state = self.member_state
        if state.current_term != term:
            log.warning("%s: skip to be the leader in term %s, the current term is %s", state.self_id, term,
                        state.current_term)
            return
        state.change_to_leader(term)
        self.last_send_heart_beat_time = -1
        log.info("%s: leader in term %s", state.self_id, term)
        self._role_changed(term, Role.LEADER)

    def change_role_to_candidate(self, term: int) -> None:
        state = self.member_state
        if term < state.current_term:
            log.info("%s: skip to be candidate in term %s, the current term is %s", state.self_id, term,
                     state.current_term)
            return
        state.change_to_candidate(term)
        log.info("%s: candidate, seen term %s, current term %s", state.self_id, term, state.current_term)
        self._role_changed(term, Role.CANDIDATE)

    def change_role_to_follower(self, term: int, leader_id: str) -> None:
        self.last_parse_result = ParseResult.WAIT_TO_REVOTE
        self.member_state.change_to_follower(term, leader_id)
        self.last_leader_heart_beat_time = monotonic_ms()
        log.info("%s: follower of %s in term %s", self.member_state.self_id, leader_id, term)
        self._role_changed(term, Role.FOLLOWER)

    def _role_changed(self, term: int, role: Role) -> None:
        for handler in self._handlers:
            try:
                handler(term, role)
            except Exception:  # a handler's failure must not stop the election
                log.exception("role change handler %r failed for term %s role %s", handler, term, role)

    # -- answering ----------------------------------------------------------------------------------------------------

    def handle_heart_beat(self, request: HeartBeatRequest) -> HeartBeatResponse:
        state = self.member_state
        if not state.is_peer_member(request.leader_id):
            log.warning("%s: heartbeat from unknown member %s", state.self_id, request.leader_id)
            return HeartBeatResponse(term=state.current_term, code=DLedgerResponseCode.UNKNOWN_MEMBER)
        if request.leader_id == state.self_id:
            log.warning("%s: heartbeat from a leader with my id", state.self_id)
            return HeartBeatResponse(term=state.current_term, code=DLedgerResponseCode.UNEXPECTED_MEMBER)
        if request.term < state.current_term:
            return HeartBeatResponse(term=state.current_term, code=DLedgerResponseCode.EXPIRED_TERM)
        if request.term == state.current_term:
            if state.leader_id is None:
                self.change_role_to_follower(request.term, request.leader_id)
                return HeartBeatResponse()
            if request.leader_id == state.leader_id:
                self.last_leader_heart_beat_time = monotonic_ms()
                return HeartBeatResponse()
            log.error("%s: term %s has leader %s, but %s sent a heartbeat", state.self_id, state.current_term,
                      state.leader_id, request.leader_id)
            return HeartBeatResponse(code=DLedgerResponseCode.INCONSISTENT_LEADER)
        # a larger term: do not follow at once; become candidate, adopt the term, then follow its heartbeat
        self.change_role_to_candidate(request.term)
        self.need_increase_term_immediately = True
        return HeartBeatResponse(code=DLedgerResponseCode.TERM_NOT_READY)

    def handle_vote(self, request: VoteRequest, from_self: bool = False) -> VoteResponse:
        state = self.member_state

        def answer(result: VoteResult, term: int | None = None) -> VoteResponse:
            return VoteResponse.answer(request, state.current_term if term is None else term, result)

        if not state.is_peer_member(request.leader_id):
            log.warning("%s: vote request from unknown member %s", state.self_id, request.leader_id)
            return answer(VoteResult.REJECT_UNKNOWN_LEADER)
        if not from_self and request.leader_id == state.self_id:
            log.warning("%s: vote request from a candidate with my id", state.self_id)
            return answer(VoteResult.REJECT_UNEXPECTED_LEADER)
        if request.ledger_end_term < state.ledger_end_term:
            return answer(VoteResult.REJECT_EXPIRED_LEDGER_TERM)
        if request.ledger_end_term == state.ledger_end_term and request.ledger_end_index < state.ledger_end_index:
            return answer(VoteResult.REJECT_SMALL_LEDGER_END_INDEX)
        if request.term < state.current_term:
            return answer(VoteResult.REJECT_EXPIRED_VOTE_TERM)
        if request.term > state.current_term:
            self.change_role_to_candidate(request.term)
            self.need_increase_term_immediately = True
            return answer(VoteResult.REJECT_TERM_NOT_READY)
        if state.vote_for is not None and state.vote_for != request.leader_id:
            return answer(VoteResult.REJECT_ALREADY_HAS_LEADER if state.leader_id is not None
                          else VoteResult.REJECT_ALREADY_VOTED)
        if request.term < state.ledger_end_term:
            return answer(VoteResult.REJECT_TERM_SMALL_THAN_LEDGER, state.ledger_end_term)
        # REJECT_TAKING_LEADERSHIP needs a leadership transfer under way, which rmq does not do yet
        state.set_vote_for(request.leader_id)
        return answer(VoteResult.ACCEPT)

    # -- leader -------------------------------------------------------------------------------------------------------

    async def _maintain_as_leader(self) -> None:
        if _elapsed(self.last_send_heart_beat_time) <= self.config.heart_beat_time_interval_ms:
            return
        state = self.member_state
        self.last_send_heart_beat_time = monotonic_ms()
        await self._send_heartbeats(state.current_term, state.self_id)

    async def _send_heartbeats(self, term: int, leader_id: str) -> None:
        state = self.member_state
        succ_num, not_ready_num, max_term, inconsistent_leader = 1, 0, -1, False
        calls = [asyncio.ensure_future(self.peers.heart_beat(HeartBeatRequest(
            group=state.group, local_id=state.self_id, remote_id=peer_id, leader_id=leader_id, term=term)))
            for peer_id in state.peers if peer_id != state.self_id]
        interval_ms = self.config.heart_beat_time_interval_ms
        try:
            for next_answer in asyncio.as_completed(calls, timeout=max(interval_ms - MAINTAIN_SLEEP_MS, 1) / 1000):
                try:
                    response = await next_answer
                except TimeoutError:
                    raise
                except Exception:
                    log.exception("%s: heartbeat failed", state.self_id)
                    continue
                code = response.code
                if code == DLedgerResponseCode.SUCCESS:
                    succ_num += 1
                elif code == DLedgerResponseCode.EXPIRED_TERM:
                    max_term = response.term
                elif code == DLedgerResponseCode.INCONSISTENT_LEADER:
                    inconsistent_leader = True
                elif code == DLedgerResponseCode.TERM_NOT_READY:
                    not_ready_num += 1
                if state.is_quorum(succ_num) or state.is_quorum(succ_num + not_ready_num):
                    break
        except TimeoutError:
            pass
        finally:
            for call in calls:
                call.cancel()
        await asyncio.sleep(MAINTAIN_SLEEP_MS / 1000)
        if max_term > term:
            log.warning("%s: term %s is not the group's largest, %s is", state.self_id, term, max_term)
            self.change_role_to_candidate(max_term)
        elif state.is_quorum(succ_num):
            self.last_succ_heart_beat_time = monotonic_ms()
        elif state.is_quorum(succ_num + not_ready_num):
            self.last_send_heart_beat_time = -1
        elif inconsistent_leader:
            self.change_role_to_candidate(term)
        elif _elapsed(self.last_succ_heart_beat_time) > self.config.max_heart_beat_leak * interval_ms:
            log.info("%s: no quorum answered heartbeats of term %s, stepping down", state.self_id, term)
            self.change_role_to_candidate(term)

    # -- follower -----------------------------------------------------------------------------------------------------

    def _maintain_as_follower(self) -> None:
        interval_ms = self.config.heart_beat_time_interval_ms
        if _elapsed(self.last_leader_heart_beat_time) > self.config.max_heart_beat_leak * interval_ms:
            log.info("%s: no heartbeat from %s for %s ms", self.member_state.self_id, self.member_state.leader_id,
                     _elapsed(self.last_leader_heart_beat_time))
            self.change_role_to_candidate(self.member_state.current_term)

    # -- candidate ----------------------------------------------------------------------------------------------------

    def _next_time_to_request_vote(self) -> int:
        low, high = self.config.min_vote_interval_ms, self.config.max_vote_interval_ms
        return monotonic_ms() + low + random.randrange(high - low)

    async def _maintain_as_candidate(self) -> None:
        if monotonic_ms() < self.next_time_to_request_vote and not self.need_increase_term_immediately:
            return
        state = self.member_state
        if state.role is not Role.CANDIDATE:
            return
        if self.last_parse_result is ParseResult.WAIT_TO_VOTE_NEXT or self.need_increase_term_immediately:
            previous, term = state.current_term, state.next_term()
            log.info("%s: term %s -> %s", state.self_id, previous, term)
            self.last_parse_result = ParseResult.WAIT_TO_REVOTE
        else:
            term = state.current_term
        if self.need_increase_term_immediately:
            self.next_time_to_request_vote = self._next_time_to_request_vote()
            self.need_increase_term_immediately = False
            return
        started = monotonic_ms()
        tally = await self._collect_votes(term, state.ledger_end_term, state.ledger_end_index)
        self.last_vote_cost = _elapsed(started)
        self.last_parse_result = self._parse(tally)
        log.info("%s: votes in term %s: %s -> %s (%s ms)", state.self_id, term, tally, self.last_parse_result,
                 self.last_vote_cost)
        if self.last_parse_result is ParseResult.PASSED:
            self.change_role_to_leader(term)

    async def _collect_votes(self, term: int, ledger_end_term: int, ledger_end_index: int) -> VoteTally:
        state = self.member_state
        tally = VoteTally(term, term)
        calls = []
        for peer_id in state.peers or {state.self_id: ""}:
            request = VoteRequest(group=state.group, ledger_end_index=ledger_end_index,
                                  ledger_end_term=ledger_end_term, leader_id=state.self_id, term=term,
                                  remote_id=peer_id, local_id=state.self_id)
            if peer_id == state.self_id:
                tally.add(self.handle_vote(request, from_self=True))
            else:
                calls.append(asyncio.ensure_future(self.peers.vote(request)))
        wait_s = (VOTE_WAIT_MS + random.randrange(self.config.max_vote_interval_ms)) / 1000
        try:
            for next_answer in asyncio.as_completed(() if self._round_decided(tally) else calls, timeout=wait_s):
                try:
                    tally.add(await next_answer)
                except TimeoutError:
                    raise
                except Exception:
                    log.exception("%s: vote response failed", state.self_id)
                    tally.all_num += 1
                if self._round_decided(tally):
                    break
        except TimeoutError:
            pass
        finally:
            for call in calls:
                call.cancel()
        return tally

    def _round_decided(self, tally: VoteTally) -> bool:
        quorum = self.member_state.is_quorum
        return (tally.already_has_leader or quorum(tally.accepted_num)
                or quorum(tally.accepted_num + tally.not_ready_term_num))

    def _parse(self, tally: VoteTally) -> ParseResult:
        """Decide on a round's answers, in DLedger's order, and set the next vote time."""
        quorum = self.member_state.is_quorum
        if tally.known_max_term > tally.term:
            self.next_time_to_request_vote = self._next_time_to_request_vote()
            self.change_role_to_candidate(tally.known_max_term)
            return ParseResult.WAIT_TO_VOTE_NEXT
        if tally.already_has_leader:
            self.next_time_to_request_vote = (self._next_time_to_request_vote()
                                              + self.config.heart_beat_time_interval_ms
                                              * self.config.max_heart_beat_leak)
            return ParseResult.WAIT_TO_REVOTE
        if not quorum(tally.valid_num):
            self.next_time_to_request_vote = self._next_time_to_request_vote()
            return ParseResult.WAIT_TO_REVOTE
        if not quorum(tally.valid_num - tally.bigger_ledger_num):
            self.next_time_to_request_vote = self._next_time_to_request_vote() + self.config.max_vote_interval_ms
            return ParseResult.WAIT_TO_REVOTE
        if quorum(tally.accepted_num):
            return ParseResult.PASSED
        if quorum(tally.accepted_num + tally.not_ready_term_num):
            return ParseResult.REVOTE_IMMEDIATELY
        self.next_time_to_request_vote = self._next_time_to_request_vote()
        return ParseResult.WAIT_TO_VOTE_NEXT
