"""DLedgerServer: one member of a DLedger group: its log, its RPC, its elector, and the log's replication.

The member loads its term and vote from ``currterm`` (``member_state``), listens on its peer address, and elects
with the others. As leader it appends (``append``, or a client's APPEND) and its EntryPusher replicates
(``pusher``); as follower its EntryHandler takes the leader's pushes (``entry_handler``). Requests meant for another
member or group are refused before either sees them, with UNKNOWN_MEMBER or UNKNOWN_GROUP and the leader this
member knows, as DLedgerServer's PreConditions do. Like DLedger's store, the member flushes its log every
flushFileInterval, writes the committed index to ``checkpoint`` every checkPointInterval, and deletes its expired
data files (``retention``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass

from broker.common.errors import DLedgerError
from broker.common.tasks import cancel_and_wait
from broker.dledger.config import DLedgerConfig
from broker.dledger.elector import LeaderElector, RoleChangeHandler
from broker.dledger.entry_handler import EntryHandler
from broker.dledger.layout import DLedgerEntry, data_dir, index_dir, member_dir
from broker.dledger.member_state import MemberState, Role
from broker.dledger.protocol import (
    AppendEntryRequest,
    AppendEntryResponse,
    Body,
    DLedgerResponseCode,
    HeartBeatRequest,
    HeartBeatResponse,
    MetadataRequest,
    MetadataResponse,
    PushEntryRequest,
    PushEntryResponse,
    RequestOrResponse,
    VoteRequest,
    VoteResponse,
)
from broker.dledger.pusher import DLedgerEntryPusher, PendingAppend
from broker.dledger.retention import CLEAN_SPACE_INTERVAL_MS, CleanSpaceService
from broker.dledger.rpc import DLedgerRpcService
from broker.dledger.store import CommitListener, DLedgerMmapFileStore

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AppendResult:
    """A committed entry: its index in the log and its pos in the data files (its body, a CommitLog record, starts
    48 bytes later)."""

    index: int
    pos: int


class DLedgerServer:
    """A member: ``start`` listens, elects and replicates, ``stop`` ends all three; role changes go to the handlers
    added, each advance of the committed index to the commit listeners.

    Examples:
        >>> config = DLedgerConfig("broker-a", "n0", {"n0": "127.0.0.1:40911", "n1": "127.0.0.1:40912",
        ...                        "n2": "127.0.0.1:40913"}, store_base_dir="/tmp/store")
        >>> server = DLedgerServer(config)
        >>> server.add_role_change_handler(lambda term, role: print(term, role))
        >>> await server.start()  # doctest: +SKIP
        >>> await server.append(b"a record")  # doctest: +SKIP
        AppendResult(index=0, pos=0)
    """

    def __init__(self, config: DLedgerConfig, member_state: MemberState | None = None,
                 store: DLedgerMmapFileStore | None = None) -> None:
        """``store``: the log, open and recovered (DLedgerCommitLog's); without one the member opens its own in
        its folder, on ``member_state`` if given (its ledger end then stays as given until entries arrive)."""
        self.config = config
        self._own_store = store is None
        if store is None:
            if member_state is None:
                member_state = MemberState(member_dir(config.store_base_dir, config.self_id), config.self_id)
                member_state.load()
            store = DLedgerMmapFileStore(member_state, data_dir(config.store_base_dir, config.self_id),
                                         index_dir(config.store_base_dir, config.self_id),
                                         config.mapped_file_size_for_entry_data,
                                         config.mapped_file_size_for_entry_index)
            store.load()
            store.recover()
        member_state = store.member_state
        member_state.group, member_state.peers = config.group, dict(config.peers)
        self.member_state = member_state
        self.store = store
        self.rpc = DLedgerRpcService(config.self_address, self, config.peers)
        self.elector = LeaderElector(config, member_state, self.rpc.client)
        self.pusher = DLedgerEntryPusher(config, member_state, store, self.rpc.client.push)
        self.entry_handler = EntryHandler(member_state, store)
        self.clean_space = CleanSpaceService(store, config.retention, config.store_base_dir)
        self.elector.add_role_change_handler(self._role_changed)
        self._flush_task: asyncio.Task[None] | None = None
        self._clean_task: asyncio.Task[None] | None = None

    def add_role_change_handler(self, handler: RoleChangeHandler) -> None:
        self.elector.add_role_change_handler(handler)

    def add_commit_listener(self, listener: CommitListener) -> None:
        """Call ``listener(committed_index)`` each time the committed index moves forward, as leader or follower.
        It runs on the event loop inside the store's update, so it should only note the index or wake a task."""
        if listener not in self.store.commit_listeners:
            self.store.commit_listeners.append(listener)

    async def start(self) -> DLedgerServer:
        await self.rpc.start()
        await self.entry_handler.start()
        self.pusher.start()
        if self.member_state.is_leader:  # a group of one leads from the open: its handlers hear it as if elected,
            # and it is a quorum of everything it holds
            self.store.update_committed_index(self.member_state.current_term, self.store.ledger_end_index)
            self.elector.change_role_to_leader(self.member_state.current_term)
        await self.elector.start()
        self._flush_task = asyncio.create_task(self._flush_loop(), name=f"dledger-flush-{self.config.self_id}")
        self._clean_task = asyncio.create_task(self._clean_loop(), name=f"dledger-clean-{self.config.self_id}")
        return self

    async def stop(self) -> None:
        await self.elector.stop()
        await self.pusher.stop()
        await self.entry_handler.stop()
        await cancel_and_wait(self._flush_task)
        await cancel_and_wait(self._clean_task)
        self._flush_task = self._clean_task = None
        await self.rpc.stop()
        if self._own_store:
            self.store.shutdown()
        else:
            self.store.flush()
            self.store.persist_checkpoint()

    async def _flush_loop(self) -> None:
        """DLedgerMmapFileStore's FlushDataService."""
        last_checkpoint = time.monotonic()
        while True:
            await asyncio.sleep(self.config.flush_file_interval_ms / 1000)
            try:
                self.store.flush()
                if (time.monotonic() - last_checkpoint) * 1000 > self.config.check_point_interval_ms:
                    self.store.persist_checkpoint()
                    last_checkpoint = time.monotonic()
            except Exception:
                log.exception("%s: flushing the DLedger log failed", self.config.self_id)

    async def _clean_loop(self) -> None:
        """DLedgerMmapFileStore's CleanSpaceService, on the event loop: the store changes only there."""
        while True:
            await asyncio.sleep(CLEAN_SPACE_INTERVAL_MS / 1000)
            try:
                self.clean_space.run_once()
            except Exception:
                log.exception("%s: cleaning the DLedger log failed", self.config.self_id)

    def _role_changed(self, term: int, role: Role) -> None:
        if role is not Role.LEADER:  # no waiting append can reach its quorum through this member any more
            self.pusher.fail_pending(DLedgerResponseCode.TERM_CHANGED, f"no longer the leader (now {role} in term "
                                     f"{term})")
        if role is Role.FOLLOWER:
            self.entry_handler.wakeup()
        else:
            self.pusher.wake_up_dispatchers()

    # -- append ---------------------------------------------------------------------------------------------------

    async def append(self, body: bytes) -> AppendResult:
        """Append ``body`` as the next entry and return once a quorum holds it (the committed index passed it).
        DLedgerError with DLedger's code: NOT_LEADER (naming the leader) on another member, LEADER_PENDING_FULL
        with too many appends waiting, WAIT_QUORUM_ACK_TIMEOUT without a quorum within maxWaitAckTimeMs,
        TERM_CHANGED when leadership was lost meanwhile (the entry may or may not survive)."""
        _, done = self.start_append([body])
        return await done

    def start_append(self, bodies: Sequence[bytes]) -> tuple[list[AppendResult], Awaitable[AppendResult]]:
        """``append`` in two halves, for one entry or a batch (DLedger's BatchAppendEntryRequest): the leader and
        pending checks pass once for all (else DLedgerError NOT_LEADER / LEADER_PENDING_FULL and nothing is
        appended), every entry is in this member's log when this returns (their index and pos), and the awaitable
        answers once a quorum holds the last, and so all of them. A caller that must keep its own order (the
        broker's queue offsets) needs no lock across the quorum's wait, and a batch never lands in part."""
        if not bodies:
            raise ValueError("start_append needs at least one body")
        state = self.member_state
        if not state.is_leader:
            raise DLedgerError(DLedgerResponseCode.NOT_LEADER, f"NOT_LEADER: {state.self_id} of group {state.group} is "
                               f"not the leader; the leader is {state.leader_id or 'not known yet'}", state.leader_id)
        term = state.current_term
        if self.pusher.is_pending_full(term):
            raise DLedgerError(DLedgerResponseCode.LEADER_PENDING_FULL, f"LEADER_PENDING_FULL: more "
                               f"than {self.config.max_pending_requests_num} appends wait for their quorum on "
                               f"{state.self_id}", state.self_id)
        entries = [self.store.append_as_leader(body) for body in bodies]
        appended = [AppendResult(entry.index, entry.pos) for entry in entries]
        last = entries[-1]
        if state.peer_size == 1:
            self.store.update_committed_index(last.term, last.index)
            done: asyncio.Future[AppendResult] = asyncio.get_running_loop().create_future()
            done.set_result(appended[-1])
            return appended, done
        pending = self.pusher.wait_ack(last)
        self.pusher.wake_up_dispatchers()
        return appended, self._quorum_of(last, term, pending)

    async def _quorum_of(self, entry: DLedgerEntry, term: int, pending: PendingAppend) -> AppendResult:
        state = self.member_state
        # the QuorumAckChecker fails it after maxWaitAckTimeMs; this is only a backstop
        timer = asyncio.get_running_loop().call_later(
            2 * self.config.max_wait_ack_time_ms / 1000, pending.complete,
            self.pusher.answer(term, entry.index, code=DLedgerResponseCode.WAIT_QUORUM_ACK_TIMEOUT))
        try:
            response = await pending.future
        finally:
            timer.cancel()
        if response.code != DLedgerResponseCode.SUCCESS:
            code = DLedgerResponseCode(response.code)
            quorum = f"quorum of {state.peer_size // 2 + 1} of {state.peer_size} members"
            why = {DLedgerResponseCode.WAIT_QUORUM_ACK_TIMEOUT: f"no {quorum} acknowledged it within "
                   f"{self.config.max_wait_ack_time_ms} ms",
                   DLedgerResponseCode.TERM_CHANGED: f"{state.self_id} lost the leadership (now {state.role.name} in "
                   f"term {state.current_term}) before a {quorum} held it; it may or may not survive"}.get(code, "")
            raise DLedgerError(code, f"{code.name}: entry {entry.index} of term {term} in group {state.group}: "
                               f"{why}", response.leader_id or state.leader_id)
        return AppendResult(entry.index, entry.pos)

    # -- answering ------------------------------------------------------------------------------------------------

    def _refused(self, request: RequestOrResponse, response: Body) -> Body | None:
        """``response`` with the refusal's code if ``request`` is for another member or group, else None."""
        if request.remote_id != self.member_state.self_id:
            code = DLedgerResponseCode.UNKNOWN_MEMBER
        elif request.group != self.member_state.group:
            code = DLedgerResponseCode.UNKNOWN_GROUP
        else:
            return None
        return self._failed(request, response, code)

    def _failed(self, request: RequestOrResponse, response: Body, code: int) -> Body:
        response.copy_base_info(request)
        response.code, response.leader_id = code, self.member_state.leader_id
        return response

    def handle_vote(self, request: VoteRequest) -> VoteResponse:
        return self._refused(request, VoteResponse()) or self.elector.handle_vote(request)

    def handle_heart_beat(self, request: HeartBeatRequest) -> HeartBeatResponse:
        return self._refused(request, HeartBeatResponse()) or self.elector.handle_heart_beat(request)

    def handle_metadata(self, request: MetadataRequest) -> MetadataResponse:
        return self._refused(request, MetadataResponse()) or MetadataResponse(
            group=self.member_state.group, peers=dict(self.member_state.peers), leader_id=self.member_state.leader_id)

    async def handle_push(self, request: PushEntryRequest) -> PushEntryResponse | None:
        refused = self._refused(request, PushEntryResponse())
        if refused is not None:
            return refused
        try:
            return await self.entry_handler.handle_push(request)
        except DLedgerError as err:
            return self._failed(request, PushEntryResponse(), err.code)

    async def handle_append(self, request: AppendEntryRequest) -> AppendEntryResponse:
        refused = self._refused(request, AppendEntryResponse())
        if refused is not None:
            return refused
        try:
            if request.body is None:
                raise DLedgerError(DLedgerResponseCode.REQUEST_WITH_EMPTY_BODYS, "an APPEND without a body")
            result = await self.append(request.body)
        except DLedgerError as err:
            log.info("%s: an APPEND fails: %s", self.member_state.self_id, err)
            return self._failed(request, AppendEntryResponse(), err.code)
        return AppendEntryResponse(group=self.member_state.group, term=self.member_state.current_term,
                                   index=result.index, pos=result.pos, leader_id=self.member_state.self_id)
