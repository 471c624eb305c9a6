"""DLedger's election between in-process members on loopback: one leader per term, a new one when it stops, none
without a quorum; and the vote and heartbeat rules as a member answers them on the wire, with DLedger's codes."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from pathlib import Path

import pytest

from broker.common.errors import ConfigError, MalformedBody
from broker.common.properties import read_properties
from broker.dledger.config import DLedgerConfig
from broker.dledger.elector import LeaderElector, VoteTally
from broker.dledger.member_state import MemberState, Role
from broker.dledger.protocol import (
    DLedgerRequestCode,
    DLedgerResponseCode,
    HeartBeatRequest,
    HeartBeatResponse,
    MetadataRequest,
    ParseResult,
    VoteRequest,
    VoteResponse,
    VoteResult,
)
from broker.dledger.server import DLedgerServer
from broker.remoting.client import RemotingClient
from broker.remoting.codes import ResponseCode
from broker.remoting.command import create_request
from broker.store.config import MessageStoreConfig
from tests.helpers import eventually, run
from tests.unit.dledger.dledger_group import ELECTION_S, HB_MS, MAX_VOTE_MS, MIN_VOTE_MS, TIMINGS, Group, group


def test_three_members_elect_one_leader_all_agree(tmp_path: Path) -> None:
    async def scenario() -> None:
        started = time.monotonic()
        async with group(tmp_path) as members:
            await eventually("one leader that all follow", members.settled, ELECTION_S)
            elected_in = time.monotonic() - started
            leader = members.leaders()[0].member_state
            await asyncio.sleep(5 * HB_MS / 1000)  # heartbeats keep it so: nobody's term moves
            assert members.settled() and members.leaders()[0].member_state is leader
            assert {m.current_term for m in (members.state(i) for i in members.peers)} == {leader.current_term}
            # the votes are on disk in DLedger's currterm file: the leader voted for itself in its term
            props = read_properties(str(tmp_path / f"dledger-{leader.self_id}" / "currterm"))
            assert props == {"currTerm": str(leader.current_term), "voteLeader": leader.self_id}
            assert (leader.self_id, leader.current_term, Role.LEADER) in members.changes
            follower = next(i for i in members.peers if i != leader.self_id)
            assert (follower, leader.current_term, Role.FOLLOWER) in members.changes
            assert elected_in < ELECTION_S

    run(scenario())


def test_leader_stops_others_elect_a_new_one_old_returns_as_follower(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with group(tmp_path) as members:
            await eventually("first leader", members.settled, ELECTION_S)
            old = members.leaders()[0].member_state
            old_id, old_term = old.self_id, old.current_term
            stopped = time.monotonic()
            await members.stop(old_id)
            await eventually("a new leader", members.settled, ELECTION_S + 3 * HB_MS / 1000)
            new = members.leaders()[0].member_state
            assert new.self_id != old_id and new.current_term > old_term
            assert time.monotonic() - stopped >= 3 * HB_MS / 1000 * 0.9  # followers waited maxHeartBeatLeak beats
            await members.start(old_id)  # same folder, same port: it reloads its old term
            await eventually("the old leader follows the new one", members.settled, ELECTION_S)
            assert members.leaders()[0].member_state is new
            assert members.state(old_id).role is Role.FOLLOWER
            assert members.state(old_id).current_term == new.current_term

    run(scenario())


def test_quorum_one_of_three_down_elects_two_down_does_not(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with group(tmp_path, start=("n0", "n1")) as members:
            await eventually("a leader among two of three", members.settled, ELECTION_S)
            leader = members.leaders()[0].member_state
            follower = "n1" if leader.self_id == "n0" else "n0"
            await members.stop(follower)  # the leader loses its quorum of heartbeat answers and steps down
            await eventually("the leader steps down", lambda: not leader.is_leader, 6 * HB_MS / 1000 + 1)
            term = leader.current_term
            elector = members.members[leader.self_id].elector
            vote_time = elector.next_time_to_request_vote
            await asyncio.sleep(1.0)
            assert elector.next_time_to_request_vote > vote_time  # more rounds went out
            assert leader.role is Role.CANDIDATE and leader.leader_id is None
            # alone it keeps asking, but without a quorum of answers a round is WAIT_TO_REVOTE: the term stays
            assert leader.current_term == term
            assert (leader.self_id, term, Role.CANDIDATE) in members.changes

    run(scenario())


def test_the_most_recent_log_wins(tmp_path: Path) -> None:
    async def scenario() -> None:
        members = Group(tmp_path)
        for member_id, (index, term) in {"n0": (20, 0), "n1": (9, 1), "n2": (9, 1)}.items():
            config = DLedgerConfig("broker-a", member_id, members.peers, store_base_dir=str(tmp_path), **TIMINGS)
            state = MemberState(str(tmp_path / member_id), member_id)
            state.update_ledger_index_and_term(index, term)
            members.members[member_id] = await DLedgerServer(config, state).start()
        try:
            await eventually("a leader", members.settled, ELECTION_S)
            # n0's longer log ends in an older term: both others refuse it, and it votes for either of them
            assert members.leaders()[0].member_state.self_id in ("n1", "n2")
        finally:
            await members.stop()

    run(scenario())


# -- one member answering on the wire --------------------------------------------------------------------------------


async def call(client: RemotingClient, address: str, code: DLedgerRequestCode, body: bytes) -> dict:
    response = await client.invoke(address, create_request(code, body=body))
    assert response.code == 200  # DLedger's SUCCESS whatever the outcome, which is in the body
    return json.loads(response.body)


def test_vote_and_heartbeat_rules_on_the_wire(tmp_path: Path) -> None:
    """A member with a log ending at index 10 in term 2, in term 3, electing nothing itself."""

    async def scenario() -> None:
        async with group(tmp_path, start=(), enable_leader_elector=False) as members:
            await members.start("n0")
            me = members.state("n0")
            me.current_term = 3
            me.update_ledger_index_and_term(10, 2)
            address = members.peers["n0"]

            def vote(candidate: str = "n1", term: int = 3, end_index: int = 10, end_term: int = 2,
                     **base: str) -> bytes:
                request = VoteRequest(group="broker-a", leader_id=candidate, local_id=candidate, remote_id="n0",
                                      term=term, ledger_end_index=end_index, ledger_end_term=end_term)
                for name, value in base.items():
                    setattr(request, name, value)
                return request.encode()

            async with RemotingClient() as client:
                async def result(body: bytes) -> tuple[str, int]:
                    answer = await call(client, address, DLedgerRequestCode.VOTE, body)
                    return answer["voteResult"], answer["term"]

                first = await call(client, address, DLedgerRequestCode.VOTE, vote(end_index=9))
                assert first == {"code": 200, "group": "broker-a", "leaderId": "n1", "localId": "n1",
                                 "remoteId": "n0", "term": 3, "voteResult": "REJECT_SMALL_LEDGER_END_INDEX"}
                assert await result(vote(end_index=99, end_term=1)) == ("REJECT_EXPIRED_LEDGER_TERM", 3)
                assert await result(vote(term=2)) == ("REJECT_EXPIRED_VOTE_TERM", 3)
                assert await result(vote(candidate="n9")) == ("REJECT_UNKNOWN_LEADER", 3)
                assert await result(vote(candidate="n0")) == ("REJECT_UNEXPECTED_LEADER", 3)
                # a larger term: the member adopts it first (it is a candidate now), and votes when asked again
                assert await result(vote(term=4)) == ("REJECT_TERM_NOT_READY", 3)
                assert me.role is Role.CANDIDATE and me.known_max_term_in_group == 4
                me.next_term()
                assert await result(vote(term=4)) == ("ACCEPT", 4)
                assert await result(vote(term=4)) == ("ACCEPT", 4)  # asking again is no second vote
                assert await result(vote(candidate="n2", term=4)) == ("REJECT_ALREADY_VOTED", 4)
                assert read_properties(me.path) == {"currTerm": "4", "voteLeader": "n1"}
                me.update_ledger_index_and_term(10, 5)  # a log written in a later term than the vote's
                assert await result(vote(term=4, end_term=5)) == ("REJECT_TERM_SMALL_THAN_LEDGER", 5)
                # a request for another member or group never reaches the election
                wrong = await call(client, address, DLedgerRequestCode.VOTE, vote(remote_id="n2"))
                assert wrong["code"] == DLedgerResponseCode.UNKNOWN_MEMBER and wrong["voteResult"] == "UNKNOWN"
                wrong = await call(client, address, DLedgerRequestCode.VOTE, vote(group="broker-b"))
                assert wrong["code"] == DLedgerResponseCode.UNKNOWN_GROUP

                def beat(leader: str, term: int) -> bytes:
                    return HeartBeatRequest(group="broker-a", local_id=leader, remote_id="n0", leader_id=leader,
                                            term=term).encode()

                async def beat_answer(leader: str, term: int) -> tuple[int, int]:
                    answer = await call(client, address, DLedgerRequestCode.HEART_BEAT, beat(leader, term))
                    return answer["code"], answer["term"]

                assert await beat_answer("n2", 3) == (DLedgerResponseCode.EXPIRED_TERM, 4)
                assert await beat_answer("n1", 4) == (DLedgerResponseCode.SUCCESS, -1)
                assert me.role is Role.FOLLOWER and me.leader_id == "n1"
                # voted for n1, and now follows it: another candidate of that term hears of the leader
                assert await result(vote(candidate="n2", term=4, end_term=5)) == ("REJECT_ALREADY_HAS_LEADER", 4)
                assert await beat_answer("n0", 4) == (DLedgerResponseCode.UNEXPECTED_MEMBER, 4)  # itself as leader
                assert await beat_answer("n2", 4) == (DLedgerResponseCode.INCONSISTENT_LEADER, -1)
                assert await beat_answer("n2", 5) == (DLedgerResponseCode.TERM_NOT_READY, -1)
                assert me.role is Role.CANDIDATE and me.current_term == 4
                assert await beat_answer("n9", 5) == (DLedgerResponseCode.UNKNOWN_MEMBER, 4)
                metadata = MetadataRequest(group="broker-a", remote_id="n0").encode()
                answer = await call(client, address, DLedgerRequestCode.METADATA, metadata)
                assert answer == {"code": 200, "group": "broker-a", "peers": members.peers, "term": -1}
                pull = await call(client, address, DLedgerRequestCode.PULL, metadata)  # DLedger's push only
                assert pull["code"] == DLedgerResponseCode.UNSUPPORTED and pull["remoteId"] == "n0"
                # garbage is refused by the remoting layer, not taken for a request
                bad = await client.invoke(address, create_request(DLedgerRequestCode.VOTE, body=b"{not json"))
                assert bad.code == ResponseCode.SYSTEM_ERROR

    run(scenario())


def test_bodies_as_fastjson_writes_them() -> None:
    request = VoteRequest(group="g", leader_id="n1", local_id="n1", remote_id="n0", term=3, ledger_end_index=7,
                          ledger_end_term=2)
    assert request.encode() == (b'{"code":200,"group":"g","leaderId":"n1","ledgerEndIndex":7,"ledgerEndTerm":2,'
                                b'"localId":"n1","remoteId":"n0","term":3}')
    assert VoteRequest.decode(request.encode()) == request
    assert HeartBeatResponse().encode() == b'{"code":200,"term":-1}'
    response = VoteResponse.decode(b'{"code":200,"term":5,"voteResult":"REJECT_ALREADY_HAS_LEADER","extra":1}')
    assert response.vote_result is VoteResult.REJECT_ALREADY_HAS_LEADER and response.term == 5
    assert HeartBeatResponse.decode(b'{"code":999}').code == 999  # a code from a later DLedger is still a code
    with pytest.raises(MalformedBody, match="voteResult"):
        VoteResponse.decode(b'{"voteResult":"REJECT_SOMETHING_NEW"}')
    with pytest.raises(MalformedBody, match="term"):
        VoteRequest.decode(b'{"term":"3"}')
    assert [int(c) for c in DLedgerRequestCode] == [50000, 50001, 50002, 51001, 51002, 51003, 51004, 51005]


# -- what a candidate does with a round's answers ---------------------------------------------------------------------


@pytest.mark.parametrize(("answers", "expected", "next_vote_after_ms"), [
    ({"accepted_num": 2}, ParseResult.PASSED, None),
    ({"accepted_num": 1, "not_ready_term_num": 1}, ParseResult.REVOTE_IMMEDIATELY, None),
    ({"accepted_num": 1}, ParseResult.WAIT_TO_REVOTE, MIN_VOTE_MS),  # no quorum answered at all: same term, later
    ({"accepted_num": 1, "rejected": 1}, ParseResult.WAIT_TO_VOTE_NEXT, MIN_VOTE_MS),  # voted for another: next term
    # two others have more log: same term, after a longer wait
    ({"accepted_num": 1, "bigger_ledger_num": 2}, ParseResult.WAIT_TO_REVOTE, MIN_VOTE_MS + MAX_VOTE_MS),
    ({"accepted_num": 1, "already_has_leader": True}, ParseResult.WAIT_TO_REVOTE, MIN_VOTE_MS + 3 * HB_MS),
    ({"known_max_term": 9}, ParseResult.WAIT_TO_VOTE_NEXT, MIN_VOTE_MS),  # a larger term exists: adopt it next round
])
def test_candidate_reads_a_round_as_dledger(tmp_path: Path, answers: dict, expected: ParseResult,
                                            next_vote_after_ms: int | None) -> None:
    peers = {"n0": "127.0.0.1:1", "n1": "127.0.0.1:2", "n2": "127.0.0.1:3"}
    state = MemberState(str(tmp_path), "n0", current_term=3, peers=peers)
    elector = LeaderElector(DLedgerConfig("g", "n0", peers, **TIMINGS), state, peers=None)  # type: ignore[arg-type]
    tally = VoteTally(term=3, known_max_term=answers.pop("known_max_term", 3))
    rejected = answers.pop("rejected", 0)
    for name, value in answers.items():
        setattr(tally, name, value)
    tally.valid_num = tally.accepted_num + tally.not_ready_term_num + tally.bigger_ledger_num + rejected \
        + tally.already_has_leader
    before = time.monotonic_ns() // 1_000_000
    assert elector._parse(tally) is expected
    if next_vote_after_ms is not None:
        assert before + next_vote_after_ms <= elector.next_time_to_request_vote
    if tally.known_max_term > 3:
        assert state.known_max_term_in_group == 9 and state.next_term() == 9


def test_config_from_the_broker_keys() -> None:
    store = MessageStoreConfig.from_properties({"dLegerGroup": "broker-a", "dLegerSelfId": "n1",
                                                "dLegerPeers": "n0-127.0.0.1:40911;n1-127.0.0.1:40912",
                                                "storePathRootDir": "/data/store"})
    config = DLedgerConfig.from_store_config(store)
    assert (config.group, config.self_id, config.self_address) == ("broker-a", "n1", "127.0.0.1:40912")
    assert (config.heart_beat_time_interval_ms, config.max_heart_beat_leak, config.min_vote_interval_ms,
            config.max_vote_interval_ms, config.max_pending_requests_num, config.max_batch_push_size,
            config.peer_push_throttle_point, config.peer_push_quota) == (
        2000, 3, 300, 1000, 10_000, 4096, 300 * 1024 * 1024, 20 * 1024 * 1024)  # DLedger's, which Apache's keeps
    sized = DLedgerConfig.from_store_config(MessageStoreConfig.from_properties({
        "dLegerGroup": "broker-a", "dLegerSelfId": "n1", "dLegerPeers": "n1-127.0.0.1:40912",
        "dLegerMaxPendingRequestsNum": "64", "dLegerMaxBatchPushSize": "65536",
        "dLegerPeerPushThrottlePoint": "65536", "dLegerPeerPushQuota": "262144"}))
    assert (sized.max_pending_requests_num, sized.max_batch_push_size, sized.peer_push_throttle_point,
            sized.peer_push_quota) == (64, 65536, 65536, 262144)
    short = dataclasses.replace(store, d_leger_heart_beat_time_interval_ms=50, d_leger_max_heart_beat_leak=2,
                                d_leger_min_vote_interval_ms=20, d_leger_max_vote_interval_ms=60)
    config = DLedgerConfig.from_store_config(short)  # rmq's keys
    assert (config.heart_beat_time_interval_ms, config.max_heart_beat_leak, config.min_vote_interval_ms,
            config.max_vote_interval_ms) == (50, 2, 20, 60)
    with pytest.raises(ConfigError, match="n7"):
        DLedgerConfig("broker-a", "n7", config.peers)
    for bad, key in (({"d_leger_min_vote_interval_ms": 500, "d_leger_max_vote_interval_ms": 500},
                      "dLegerMinVoteIntervalMs 500 must be at least 0 and below dLegerMaxVoteIntervalMs 500"),
                     ({"d_leger_min_vote_interval_ms": -1}, "dLegerMinVoteIntervalMs -1"),
                     ({"d_leger_heart_beat_time_interval_ms": 0}, "dLegerHeartBeatTimeIntervalMs must be positive"),
                     ({"d_leger_max_heart_beat_leak": -2}, "dLegerMaxHeartBeatLeak must be positive"),
                     ({"d_leger_max_pending_requests_num": 0}, "dLegerMaxPendingRequestsNum must be positive"),
                     ({"d_leger_max_batch_push_size": -1}, "dLegerMaxBatchPushSize must be positive"),
                     ({"d_leger_peer_push_throttle_point": 0}, "dLegerPeerPushThrottlePoint must be positive"),
                     ({"d_leger_peer_push_quota": -5}, "dLegerPeerPushQuota must be positive, not -5")):
        with pytest.raises(ConfigError, match=key):
            DLedgerConfig.from_store_config(dataclasses.replace(store, **bad))
