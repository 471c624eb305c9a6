"""DLedger's election across implementations: our member and two of Apache's DLedger brokers (5.5.0, DLedger
0.3.2) form one group. They elect one leader that all three name, the leader's heartbeats keep the others
following, and when the leader goes the other two elect a new one in a higher term."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from broker.dledger.config import DLedgerConfig
from broker.dledger.member_state import Role
from broker.dledger.protocol import DLedgerResponseCode, MetadataRequest
from broker.dledger.rpc import DLedgerRpcClient
from broker.dledger.server import DLedgerServer
from broker.tools.local_cluster import free_port
from tests.apache.servers import ApacheProcess, start_apache_broker, start_apache_namesrv
from tests.helpers import LoopThread, wait_until

pytestmark = [pytest.mark.java, pytest.mark.slow]

GROUP = "broker-a"
HB_S = 2.0  # Apache's members run on DLedger's default timings, so ours does too


@pytest.mark.parametrize("ours_first", [True, False], ids=["ours-leads", "apache-leads"])
def test_our_member_and_two_apache_brokers_elect_together(tmp_path: Path, ours_first: bool) -> None:
    """Started first, ours wins term 1 as soon as one Apache member is up; started last, it finds an Apache leader.
    Either way the leader then stops and the other two elect a new one."""
    peers = {member: f"127.0.0.1:{free_port()}" for member in ("n0", "n1", "n2")}
    dledger_peers = ";".join(f"{member}-{address}" for member, address in peers.items())
    loop = LoopThread(timeout=30)
    config = DLedgerConfig(GROUP, "n0", peers, store_base_dir=str(tmp_path / "ours"))
    ours = DLedgerServer(config)
    running: dict[str, ApacheProcess | None] = {}  # None: ours
    probe = DLedgerRpcClient(peers)

    def leader_named_by(member: str) -> str | None:
        if member == "n0":
            return ours.member_state.leader_id
        answer = loop.run(probe.metadata(MetadataRequest(group=GROUP, remote_id=member)))
        assert answer.code == DLedgerResponseCode.SUCCESS, answer
        assert answer.peers == peers
        return answer.leader_id

    def agreed_leader() -> str | None:
        named = {leader_named_by(member) for member in running}
        return named.pop() if len(named) == 1 and None not in named else None

    def start_ours() -> None:
        nonlocal ours
        ours = DLedgerServer(config)  # a fresh member on the same folder: what a restarted broker has
        loop.run(ours.start())
        running["n0"] = None

    with start_apache_namesrv(tmp_path / "namesrv") as namesrv:
        try:
            if ours_first:
                start_ours()
            for member in ("n1", "n2"):
                running[member] = start_apache_broker(
                    tmp_path / member, namesrv, tmp_path / member / "store", enableDLegerCommitLog=True,
                    dLegerGroup=GROUP, dLegerPeers=dledger_peers, dLegerSelfId=member)
            if not ours_first:
                wait_until("the Apache members elect between them", agreed_leader, 30)
                start_ours()
            wait_until("one leader named by all three", agreed_leader, 30)
            leader = agreed_leader()
            assert (leader == "n0") is ours_first
            term = ours.member_state.current_term
            # a few heartbeat periods later nothing moved: the leader's heartbeats reach and satisfy the others
            beat = ours.elector.last_leader_heart_beat_time
            time.sleep(3 * HB_S + 1)
            assert agreed_leader() == leader and ours.member_state.current_term == term
            if ours_first:
                assert ours.member_state.role is Role.LEADER  # a leader without a quorum of answers steps down
                loop.run(ours.stop())
            else:
                assert ours.member_state.role is Role.FOLLOWER
                assert ours.elector.last_leader_heart_beat_time > beat  # Apache's heartbeats keep ours following
                running[leader].stop()
            del running[leader]
            wait_until("a new leader after the old one stopped", lambda: agreed_leader() not in (None, leader), 30)
            if ours_first:  # ours comes back and follows the new leader, in its higher term
                start_ours()
                wait_until("ours follows the new leader", lambda: agreed_leader() not in (None, leader), 30)
                assert ours.member_state.role is Role.FOLLOWER
            assert ours.member_state.current_term > term
        finally:
            loop.run(ours.stop())
            loop.run(probe.close())
            loop.close()
            for proc in running.values():
                if proc is not None:
                    proc.close()
