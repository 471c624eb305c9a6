"""The leader's pushes in an in-process group on loopback: a follower catching up from far behind is held to the push
quota while one that keeps up is not slowed; DLedger's Quota counts bytes per wall-clock second."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from broker.dledger.quota import Quota
from tests.helpers import eventually, run
from tests.unit.dledger.dledger_group import group
from tests.unit.dledger.test_dledger_replication import body, caught_up, elected, member_files

KIB = 1024
THROTTLE = {"mapped_file_size_for_entry_data": 512 * KIB, "mapped_file_size_for_entry_index": 32 * 1024,
            "peer_push_throttle_point": 64 * KIB, "peer_push_quota": 256 * KIB,
            "heart_beat_time_interval_ms": 1000}  # a leader kept through thousands of appends on one loaded loop
ENTRY_BODY = 1024
CHUNK = 100  # appends at once: a running follower stays within the 1000 entries DLedger never throttles


def test_quota_counts_bytes_per_second_in_a_window_of_five_slots() -> None:
    quota = Quota(100, window=2)
    assert quota.window == 5  # DLedger's least
    quota.sample(60, now_ms=7_100)
    assert not quota.validate_now(now_ms=7_200)
    quota.sample(40, now_ms=7_900)
    assert quota.validate_now(now_ms=7_999) and Quota.left_now_ms(now_ms=7_250) == 750
    assert not quota.validate_now(now_ms=8_000)  # a new second, a new budget
    quota.sample(10, now_ms=12_000)  # the slot of second 7 again (12 % 5): it starts over
    assert quota.samples[2] == 10 and not quota.validate_now(now_ms=12_500)
    assert not quota.validate_now(now_ms=17_500)  # its slot last counted another second


def test_a_follower_far_behind_catches_up_at_the_quota_and_one_that_keeps_up_is_not_slowed(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="broker.dledger.pusher")

    async def append_in_chunks(leader, first: int, count: int) -> None:
        for start in range(first, first + count, CHUNK):
            await asyncio.gather(*(leader.append(body(i, ENTRY_BODY)) for i in range(start, start + CHUNK)))

    async def scenario() -> float:
        async with group(tmp_path, **THROTTLE) as members:
            leader = await elected(members)
            leader_id = leader.config.self_id
            away, running = (m for m in members.peers if m != leader_id)
            await append_in_chunks(leader, 0, CHUNK)
            await members.stop(away)
            await append_in_chunks(leader, CHUNK, 2000)  # 2 MiB, a quorum of two commits it
            assert leader.store.committed_index == 2099
            assert f"push quota to {running}" not in caplog.text  # within 1000 entries: never throttled
            # entries 100..1098 at least are more than 1000 entries and 64 KiB behind the end: 999 of 1072 bytes
            size = leader.store.get(CHUNK).size
            throttled = (leader.store.ledger_end_index - 1000 - CHUNK) * size
            started = time.monotonic()
            await members.start(away)
            await append_in_chunks(leader, 2100, CHUNK)  # the running follower is not held up meanwhile
            assert members.members[away].store.ledger_end_index < 2099 < members.members[running].store.ledger_end_index
            await eventually("the returning follower catches up", lambda: caught_up(members, leader), 20)
            took = time.monotonic() - started
            # a second takes the quota and one entry at most, and each second whose quota is spent is waited out:
            # 4 spent (1 MiB at 256 KiB/s) end 3 seconds at least after the first began
            assert took > throttled // (THROTTLE["peer_push_quota"] + size) - 1, (took, throttled)
            assert f"push quota to {away} is spent" in caplog.text
            assert f"push quota to {running}" not in caplog.text
        assert member_files(tmp_path, away) == member_files(tmp_path, leader_id) == member_files(tmp_path, running)
        return took

    run(scenario())
