"""The leader's pushes in an in-process group on loopback: a lost push goes again after maxPushTimeOutMs and the log
goes on without a gap; with nothing to push, a COMMIT alone brings the followers the committed index within about a
second; appends waiting when the leader steps down fail with TERM_CHANGED; a follower catching up from far behind is
held to the push quota while one that keeps up is not slowed; DLedger's Quota counts bytes per wall-clock second;
the committed index is the middle water mark."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from broker.common.errors import DLedgerError
from broker.dledger.config import DLedgerConfig
from broker.dledger.member_state import MemberState, Role
from broker.dledger.protocol import DLedgerResponseCode, PushEntryRequest, PushEntryResponse, PushType
from broker.dledger.pusher import DLedgerEntryPusher
from broker.dledger.quota import Quota
from broker.dledger.server import DLedgerServer
from broker.dledger.store import DLedgerMmapFileStore
from tests.helpers import eventually, run
from tests.unit.dledger.dledger_group import HB_MS, group
from tests.unit.dledger.test_dledger_replication import FILES, body, caught_up, elected, member_files

KIB = 1024
THROTTLE = {"mapped_file_size_for_entry_data": 512 * KIB, "mapped_file_size_for_entry_index": 32 * 1024,
            "peer_push_throttle_point": 64 * KIB, "peer_push_quota": 256 * KIB,
            # a leader kept, and its appends waited for, through a thousand appends on one loaded event loop
            "heart_beat_time_interval_ms": 2000, "max_wait_ack_time_ms": 10_000}
BIG_BODY, BIG_ENTRIES = 4 * KIB, 270
CHUNK = 100  # appends at once


def test_a_lost_push_goes_again_and_a_commit_alone_brings_the_committed_index(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="broker.dledger.pusher")

    async def scenario() -> None:
        # pushes unanswered for 500 ms go again; 1 s heartbeats keep the leader on a loaded loop
        async with group(tmp_path, **FILES, heart_beat_time_interval_ms=1000) as members:
            leader = await elected(members)
            for i in range(5):
                await leader.append(body(i))
            lossy = next(m for m in members.peers if m != leader.config.self_id)
            push, lost = leader.pusher.push, []

            async def losing_one(request: PushEntryRequest) -> PushEntryResponse:
                if request.type is PushType.APPEND and request.remote_id == lossy and not lost:
                    lost.append(request.first_entry_index)  # never reaches the follower: no answer, as DLedger's
                    answer = PushEntryResponse(code=DLedgerResponseCode.NETWORK_ERROR)  # rpc has after its timeout
                    answer.copy_base_info(request)
                    return answer
                return await push(request)

            leader.pusher.push = losing_one
            await asyncio.gather(*(leader.append(body(i)) for i in range(5, 25)))  # the other follower's quorum
            await eventually("the follower that lost a push has all", lambda: caught_up(members, leader), 10)
            assert lost == [5] and f"pushing 5..5 to {lossy} again" in caplog.text
            # nothing more to push: the last APPEND carried the committed index before it, a COMMIT brings the rest
            last = await leader.append(body(25))
            appended = time.monotonic()
            assert leader.store.committed_index == last.index
            assert all(m.store.committed_index < last.index for m in members.members.values() if m is not leader)
            await eventually("the followers learn the committed index", lambda: caught_up(members, leader), 10)
            assert 0.5 < time.monotonic() - appended  # the COMMIT goes once nothing went for a second
        assert member_files(tmp_path, lossy) == member_files(tmp_path, leader.config.self_id)

    run(scenario())


def test_appends_waiting_when_the_leader_steps_down_fail_with_term_changed(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with group(tmp_path, **{**FILES, "max_wait_ack_time_ms": 10_000}) as members:
            leader = await elected(members)
            await leader.append(body(0))
            await members.stop(*(m for m in members.peers if m != leader.config.self_id))
            stopped = time.monotonic()
            failed = await asyncio.gather(*(leader.append(body(i)) for i in range(1, 4)), return_exceptions=True)
            # no quorum answers its heartbeats for 3 periods: it steps down, long before the appends' 10 s
            assert time.monotonic() - stopped < 8 and leader.member_state.role is Role.CANDIDATE
            assert [type(e) for e in failed] == [DLedgerError] * 3
            assert [e.code for e in failed] == [DLedgerResponseCode.TERM_CHANGED] * 3
            assert "lost the leadership (now CANDIDATE" in str(failed[0])
            assert time.monotonic() - stopped >= 3 * HB_MS / 1000 * 0.9

    run(scenario())


@pytest.mark.parametrize(("marks", "quorum_index"), [
    ({"n0": 9, "n1": 7, "n2": 3}, 7),  # 2 of 3 hold 7
    ({"n0": 9, "n1": 7, "n2": 3, "n3": 1}, 3),  # 3 of 4 hold 3, only 2 hold 7
    ({"n0": 9, "n1": 1, "n2": 8, "n3": 2, "n4": 5}, 5),  # 3 of 5
])
def test_the_quorum_index_is_the_middle_water_mark(tmp_path: Path, marks: dict[str, int], quorum_index: int) -> None:
    peers = {member: f"127.0.0.1:{40911 + i}" for i, member in enumerate(marks)}
    state = MemberState(str(tmp_path), "n0", peers=peers)
    state.lead_alone()
    assert [state.is_quorum(n) for n in range(len(peers) + 1)] == [n >= len(peers) // 2 + 1
                                                                    for n in range(len(peers) + 1)]
    store = DLedgerMmapFileStore(state, str(tmp_path / "data"), str(tmp_path / "index"), 4096, 32 * 64)
    store.load()
    store.recover()
    for i in range(10):
        store.append_as_leader(body(i))
    pusher = DLedgerEntryPusher(DLedgerConfig("broker-a", "n0", peers), state, store, push=None)
    for member, index in marks.items():
        pusher.update_peer_water_mark(state.current_term, member, index)
    pusher.quorum_ack_checker.do_work()
    assert store.committed_index == quorum_index  # sortedDesc(water marks)[size / 2]
    store.shutdown()


def test_quota_counts_bytes_per_second_in_a_window_of_five_slots() -> None:
    quota = Quota(100, window=2)
    assert quota.window == 5  # DLedger's least
    quota.sample(60, at_ms=7_100)
    assert not quota.validate_now(at_ms=7_200)
    quota.sample(40, at_ms=7_900)
    assert quota.validate_now(at_ms=7_999) and Quota.left_now_ms(at_ms=7_250) == 750
    assert not quota.validate_now(at_ms=8_000)  # a new second, a new budget
    quota.sample(10, at_ms=12_000)  # the slot of second 7 again (12 % 5): it starts over
    assert quota.samples[2] == 10 and not quota.validate_now(at_ms=12_500)
    assert not quota.validate_now(at_ms=17_500)  # its slot last counted another second


@pytest.mark.parametrize("batch", [False, True], ids=["entry-a-push", "batch-push"])
def test_a_follower_far_behind_catches_up_at_the_quota_and_one_that_keeps_up_is_not_slowed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, batch: bool) -> None:
    caplog.set_level(logging.WARNING, logger="broker.dledger.pusher")

    async def append(leader: DLedgerServer, first: int, count: int, size: int = 100) -> None:
        """In chunks: a running follower stays within the 1000 entries DLedger never throttles."""
        for start in range(first, first + count, CHUNK):
            await asyncio.gather(*(leader.append(body(i, size)) for i in range(start, min(start + CHUNK,
                                                                                          first + count))))

    async def scenario() -> None:
        async with group(tmp_path, **THROTTLE, enable_batch_push=batch) as members:  # DLedger 0.4.0 throttles both
            leader = await elected(members)
            leader_id = leader.config.self_id
            away, running = (m for m in members.peers if m != leader_id)
            await append(leader, 0, 10)
            await members.stop(away)
            await append(leader, 10, BIG_ENTRIES, BIG_BODY)  # 1.1 MB the away follower will be far behind on
            await append(leader, 10 + BIG_ENTRIES, 1000)  # and 1000 small entries after them
            end = leader.store.ledger_end_index
            assert leader.store.committed_index == end  # a quorum of two committed it
            assert f"push quota to {running}" not in caplog.text
            # the entries more than 1000 before the end are all big ones, and 64 KiB before it
            throttled = sum(leader.store.get(i).size for i in range(10, end - 1000))
            started = time.monotonic()
            await members.start(away)
            await append(leader, end + 1, CHUNK)  # the running follower is not held up meanwhile
            assert members.members[away].store.ledger_end_index < end < members.members[running].store.ledger_end_index
            await eventually("the returning follower catches up", lambda: caught_up(members, leader), 30)
            took = time.monotonic() - started
            # a second takes the quota and one entry at most, and each second whose quota is spent is waited out:
            # 4 spent end 3 seconds at least after the first began
            spent = throttled // (THROTTLE["peer_push_quota"] + BIG_BODY + 48)
            assert spent == 4 and took > spent - 1, (took, throttled)
            assert f"push quota to {away} is spent" in caplog.text
            assert f"push quota to {running}" not in caplog.text
        assert member_files(tmp_path, away) == member_files(tmp_path, leader_id) == member_files(tmp_path, running)

    run(scenario())
