"""In-process members of one DLedger group on loopback ports, for the election and replication tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from broker.dledger.config import DLedgerConfig
from broker.dledger.member_state import MemberState, Role
from broker.dledger.server import DLedgerServer
from tests.helpers import free_port

# Heartbeats every 200 ms: a silent leader is replaced after 600 ms. Three members share one event loop and each
# vote is an fsync'ed currterm file, so on a loaded machine much shorter periods make followers time out.
HB_MS = 200
MIN_VOTE_MS, MAX_VOTE_MS = 100, 300
TIMINGS = {"heart_beat_time_interval_ms": HB_MS, "max_heart_beat_leak": 3, "min_vote_interval_ms": MIN_VOTE_MS,
           "max_vote_interval_ms": MAX_VOTE_MS}
ELECTION_S = 5.0  # a few rounds of 100-300 ms; generous for a loaded machine


class Group:
    """Members of one group on free loopback ports, started and stopped one by one."""

    def __init__(self, root: Path, size: int = 3, **timings: int) -> None:
        self.root = root
        self.peers = {f"n{i}": f"127.0.0.1:{free_port()}" for i in range(size)}
        self.timings = {**TIMINGS, **timings}
        self.members: dict[str, DLedgerServer] = {}
        self.changes: list[tuple[str, int, Role]] = []

    async def start(self, *ids: str) -> None:
        for member_id in ids:
            server = DLedgerServer(self.config(member_id))
            server.add_role_change_handler(lambda term, role, m=member_id: self.changes.append((m, term, role)))
            self.members[member_id] = await server.start()

    def config(self, member_id: str) -> DLedgerConfig:
        return DLedgerConfig("broker-a", member_id, self.peers, store_base_dir=str(self.root), **self.timings)

    async def stop(self, *ids: str) -> None:
        for member_id in ids or tuple(self.members):
            await self.members.pop(member_id).stop()

    def leaders(self) -> list[DLedgerServer]:
        return [m for m in self.members.values() if m.member_state.is_leader]

    def settled(self) -> bool:
        """One leader, every running member following it in its term."""
        leaders = self.leaders()
        if len(leaders) != 1:
            return False
        lead = leaders[0].member_state
        return all(m.member_state.leader_id == lead.self_id and m.member_state.current_term == lead.current_term
                   for m in self.members.values())

    def state(self, member_id: str) -> MemberState:
        return self.members[member_id].member_state


@asynccontextmanager
async def group(root: Path, size: int = 3, start: tuple[str, ...] | None = None,
                **timings: int) -> AsyncIterator[Group]:
    members = Group(root, size, **timings)
    await members.start(*(tuple(members.peers) if start is None else start))
    try:
        yield members
    finally:
        await members.stop()
