"""DLedgerServer: one member of a DLedger group, as far as the election goes: its state, its RPC, its elector.

The member loads its term and vote from ``currterm`` (``member_state``), listens on its peer address, and elects
with the others. Requests meant for another member or group are refused before the elector sees them, with
UNKNOWN_MEMBER or UNKNOWN_GROUP and the leader this member knows, as DLedgerServer's PreConditions do.
"""

from __future__ import annotations

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


class DLedgerServer:
    """A member: ``start`` listens and elects, ``stop`` ends both; role changes go to the handlers added.

    Examples:
        >>> config = DLedgerConfig("broker-a", "n0", {"n0": "127.0.0.1:40911", "n1": "127.0.0.1:40912",
        ...                        "n2": "127.0.0.1:40913"}, store_base_dir="/tmp/store")
        >>> server = DLedgerServer(config)
        >>> server.elector.add_role_change_handler(lambda term, role: print(term, role))
        >>> await server.start()  # doctest: +SKIP
    """

    def __init__(self, config: DLedgerConfig, member_state: MemberState | None = None) -> None:
        """``member_state``: the store's, when the log is open (its end goes into votes); else one of our own."""
        self.config = config
        if member_state is None:
            member_state = MemberState(member_dir(config.store_base_dir, config.self_id), config.self_id)
            member_state.load()
        member_state.group, member_state.peers = config.group, dict(config.peers)
        self.member_state = member_state
        self.rpc = DLedgerRpcService(config.self_address, self, config.peers)
        self.elector = LeaderElector(config, member_state, self.rpc.client)

    def add_role_change_handler(self, handler: RoleChangeHandler) -> None:
        self.elector.add_role_change_handler(handler)

    async def start(self) -> DLedgerServer:
        await self.rpc.start()
        await self.elector.start()
        return self

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
