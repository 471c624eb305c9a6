"""DLedgerServer: one member of a DLedger group: its state, its RPC, its elector, and the leader's append.

The member loads its term and vote from ``currterm`` (``member_state``), listens on its peer address, and elects
with the others. Requests meant for another member or group are refused before the elector sees them, with
UNKNOWN_MEMBER or UNKNOWN_GROUP and the leader this member knows, as DLedgerServer's PreConditions do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.common.errors import DLedgerError
from broker.dledger.config import DLedgerConfig
from broker.dledger.elector import LeaderElector, RoleChangeHandler
from broker.dledger.layout import member_dir
from broker.dledger.member_state import MemberState
from broker.dledger.protocol import (
    Body,
    DLedgerResponseCode,
    HeartBeatRequest,
    HeartBeatResponse,
    MetadataRequest,
    MetadataResponse,
    RequestOrResponse,
    VoteRequest,
    VoteResponse,
)
from broker.dledger.rpc import DLedgerRpcService
from broker.dledger.store import DLedgerMmapFileStore

CommitListener = Callable[[int], None]  # hears the committed index each time it moves


@dataclass(frozen=True, slots=True)
class AppendResult:
    index: int  # the entry's index
    pos: int  # the entry's pos in the data files (its body, a CommitLog record, starts 48 bytes later)


class DLedgerServer:
    """A member: ``start`` listens and elects, ``stop`` ends both; role changes go to the handlers added.

    Examples:
        >>> config = DLedgerConfig("broker-a", "n0", {"n0": "127.0.0.1:40911", "n1": "127.0.0.1:40912",
        ...                        "n2": "127.0.0.1:40913"}, store_base_dir="/tmp/store")
        >>> server = DLedgerServer(config)
        >>> server.elector.add_role_change_handler(lambda term, role: print(term, role))
        >>> await server.start()  # doctest: +SKIP
    """

    def __init__(self, config: DLedgerConfig, member_state: MemberState | None = None,
                 store: DLedgerMmapFileStore | None = None) -> None:
        """``member_state``: the store's, when the log is open (its end goes into votes); else one of our own.
        ``store``: the open log that ``append`` writes (a member without one only elects)."""
        self.config = config
        self.store = store
        self._commit_listeners: list[CommitListener] = []
        if member_state is None:
            member_state = MemberState(member_dir(config.store_base_dir, config.self_id), config.self_id)
            member_state.load()
        member_state.group, member_state.peers = config.group, dict(config.peers)
        self.member_state = member_state
        self.rpc = DLedgerRpcService(config.self_address, self, config.peers)
        self.elector = LeaderElector(config, member_state, self.rpc.client)

    def add_role_change_handler(self, handler: RoleChangeHandler) -> None:
        self.elector.add_role_change_handler(handler)

    def add_commit_listener(self, listener: CommitListener) -> None:
        self._commit_listeners.append(listener)

    async def start(self) -> DLedgerServer:
        await self.rpc.start()
        if self.member_state.is_leader:  # a group of one leads from the open: its handlers hear it as if elected
            if self.store is not None:  # and it is a quorum of everything it holds
                self.store.update_committed_index(self.member_state.current_term, self.store.ledger_end_index)
            self.elector.change_role_to_leader(self.member_state.current_term)
        await self.elector.start()
        return self

    async def append(self, body: bytes) -> AppendResult:
        """Append ``body`` as the leader's next entry; returns once it is committed. This is the group of one's
        append (an entry is committed as soon as it is in the local store); DLedgerError NOT_LEADER on another
        member or with more than one member (no replication here)."""
        state = self.member_state
        if not state.is_leader or self.store is None:
            raise DLedgerError(DLedgerResponseCode.NOT_LEADER, f"{state.self_id} is {state.role.name}, not the leader"
                               f"{' (the leader is ' + state.leader_id + ')' if state.leader_id else ''}",
                               leader_id=state.leader_id)
        if len(self.config.peers) != 1:
            raise DLedgerError(DLedgerResponseCode.NOT_LEADER, f"{state.self_id} leads a group of "
                               f"{len(self.config.peers)}, and this build replicates to no other member",
                               leader_id=state.leader_id)
        entry = self.store.append_as_leader(body)
        self.store.update_committed_index(entry.term, entry.index)
        for listener in self._commit_listeners:
            listener(self.store.committed_index)
        return AppendResult(entry.index, entry.pos)

    async def stop(self) -> None:
        await self.elector.stop()
        await self.rpc.stop()

    def _refused(self, request: RequestOrResponse, response: Body) -> Body | None:
        """``response`` with the refusal's code if ``request`` is for another member or group, else None."""
        if request.remote_id != self.member_state.self_id:
            code = DLedgerResponseCode.UNKNOWN_MEMBER
        elif request.group != self.member_state.group:
            code = DLedgerResponseCode.UNKNOWN_GROUP
        else:
            return None
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
