"""DLedger's log replication between in-process members on loopback: appends commit on a quorum and the followers'
files equal the leader's byte for byte; a follower catches up after a stop; a new leader's log wins over an old
leader's uncommitted tail; no quorum, no commit; and a follower's answers to bad pushes, with DLedger's codes."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from broker.common.errors import DLedgerError
from broker.common.properties import read_properties
from broker.dledger import entry_handler
from broker.dledger.layout import BODY_OFFSET, DLedgerEntry
from broker.dledger.member_state import Role
from broker.dledger.protocol import (
    AppendEntryRequest,
    DLedgerRequestCode,
    DLedgerResponseCode,
    PushEntryRequest,
    PushType,
)
from broker.dledger.server import DLedgerServer
from broker.remoting.client import RemotingClient
from broker.remoting.command import create_request
from tests.helpers import eventually, run
from tests.unit.dledger.dledger_group import ELECTION_S, Group, group

# Small files, so that a few hundred entries roll data files (with their pad) and index files.
FILES = {"mapped_file_size_for_entry_data": 16 * 1024, "mapped_file_size_for_entry_index": 32 * 64,
         "max_wait_ack_time_ms": 2000, "max_push_time_out_ms": 500}
CATCH_UP_S = 10.0


def member_files(root: Path, member_id: str) -> dict[str, bytes]:
    folder = root / f"dledger-{member_id}"
    return {f"{kind}/{name}": (folder / kind / name).read_bytes()
            for kind in ("data", "index") for name in sorted(os.listdir(folder / kind))}


def body(i: int, size: int = 100) -> bytes:
    return f"record {i:05d} ".encode().ljust(size, b".")


def caught_up(members: Group, leader: DLedgerServer) -> bool:
    """Every running member holds and has committed the leader's whole log."""
    end = leader.store.ledger_end_index
    return all(m.store.ledger_end_index == end and m.store.committed_index == end for m in members.members.values())


async def elected(members: Group) -> DLedgerServer:
    await eventually("one leader that all follow", members.settled, ELECTION_S)
    return members.leaders()[0]


@pytest.mark.parametrize("batch", [False, True], ids=["entry-a-push", "batch-push"])
def test_appends_commit_and_the_logs_are_equal_byte_for_byte(tmp_path: Path, batch: bool) -> None:
    async def scenario() -> None:
        # nobody is stopped here: 1 s heartbeats keep the leader through 300 appends on one loaded event loop
        async with group(tmp_path, **FILES, enable_batch_push=batch, heart_beat_time_interval_ms=1000) as members:
            leader = await elected(members)
            commits: list[int] = []
            leader.add_commit_listener(commits.append)
            # one at a time, then many at once: each returns committed, with its index and pos
            first = await leader.append(body(0))
            assert (first.index, first.pos) == (0, 0)
            assert leader.store.committed_index >= 0 and commits[-1] == 0
            results = await asyncio.gather(*(leader.append(body(i, 100 + i)) for i in range(1, 300)))
            assert [r.index for r in results] == list(range(1, 300))
            assert leader.store.committed_index == 299 and commits[-1] == 299 and commits == sorted(commits)
            assert leader.store.get(150).body == body(150, 250) and leader.store.get(150).pos == results[149].pos
            assert len(leader.store.data.files) > 3  # rolled, with pads
            await eventually("followers hold and commit all", lambda: caught_up(members, leader), CATCH_UP_S)
        files = {m: member_files(tmp_path, m) for m in members.peers}
        assert files["n0"] == files["n1"] == files["n2"]
        for m in members.peers:  # the committed index is in DLedger's checkpoint after a stop
            assert read_properties(str(tmp_path / f"dledger-{m}" / "checkpoint")) == {"committedIndex": "299",
                                                                                      "endIndex": "299"}

    run(scenario())


def test_a_follower_stopped_meanwhile_catches_up(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with group(tmp_path, **FILES) as members:
            leader = await elected(members)
            for i in range(20):
                await leader.append(body(i))
            follower = next(m for m in members.peers if m != leader.config.self_id)
            await members.stop(follower)
            await asyncio.gather(*(leader.append(body(i)) for i in range(20, 200)))  # a quorum of two commits
            assert leader.store.committed_index == 199
            await members.start(follower)
            await eventually("the follower catches up", lambda: caught_up(members, leader), CATCH_UP_S)
            assert members.members[follower].store.get(150).same_as(leader.store.get(150))
        assert member_files(tmp_path, follower) == member_files(tmp_path, leader.config.self_id)

    run(scenario())


def test_an_old_leaders_uncommitted_tail_is_truncated(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with group(tmp_path, **FILES) as members:
            old = await elected(members)
            old_id, old_term = old.config.self_id, old.member_state.current_term
            for i in range(10):
                await old.append(body(i))
            await eventually("all hold 10", lambda: caught_up(members, old), CATCH_UP_S)
            for dispatcher in old.pusher.dispatchers.values():  # its pushes stop: what it appends stays its own
                await dispatcher.stop()
            for i in range(10, 15):
                old.store.append_as_leader(body(i, 333))
            assert old.store.ledger_end_index == 14 and old.store.committed_index == 9
            await members.stop(old_id)
            new = await elected(members)
            assert new.member_state.current_term > old_term and new.store.ledger_end_index == 9
            for i in range(10, 13):  # the new leader's entries 10..12 differ from the old one's
                await new.append(body(i, 120))
            await members.start(old_id)
            await eventually("the old leader follows", members.settled, ELECTION_S)
            assert members.leaders()[0] is new and members.state(old_id).role is Role.FOLLOWER
            await eventually("the old leader's log is the new one's", lambda: caught_up(members, new), CATCH_UP_S)
            returned = members.members[old_id].store
            assert returned.ledger_end_index == 12 and returned.get(11).body == body(11, 120)
            assert returned.get(11).term == new.member_state.current_term and returned.get(9).term == old_term
        files = {m: member_files(tmp_path, m) for m in members.peers}
        assert files["n0"] == files["n1"] == files["n2"]

    run(scenario())


def test_no_quorum_no_commit_and_only_the_leader_appends(tmp_path: Path) -> None:
    async def scenario() -> None:
        # an append gives up after 300 ms, before the lonely leader steps down (3 heartbeats of 200 ms); more than
        # two appends waiting is too many
        async with group(tmp_path, **{**FILES, "max_wait_ack_time_ms": 300, "max_pending_requests_num": 2}) as members:
            leader = await elected(members)
            await leader.append(body(0))
            leader_id = leader.config.self_id
            follower = members.members[next(m for m in members.peers if m != leader_id)]
            with pytest.raises(DLedgerError, match=f"NOT_LEADER.*the leader is {leader_id}") as refused:
                await follower.append(body(1))
            assert (refused.value.code, refused.value.leader_id) == (DLedgerResponseCode.NOT_LEADER, leader_id)
            async with RemotingClient() as client:  # a DLedger client's APPEND, on a follower and on the leader
                async def append(member: str) -> dict:
                    request = AppendEntryRequest(group="broker-a", remote_id=member, body=body(1))
                    response = await client.invoke(members.peers[member],
                                                   create_request(DLedgerRequestCode.APPEND, body=request.encode()))
                    return json.loads(response.body)

                answer = await append(follower.config.self_id)
                assert (answer["code"], answer["leaderId"]) == (DLedgerResponseCode.NOT_LEADER, leader_id)
                answer = await append(leader_id)
                assert answer == {"code": 200, "group": "broker-a", "index": 1, "leaderId": leader_id,
                                  "pos": leader.store.get(1).pos, "term": leader.member_state.current_term}
            await eventually("all hold 2", lambda: caught_up(members, leader), CATCH_UP_S)
            await members.stop(*(m for m in members.peers if m != leader_id))
            late = await asyncio.gather(*(leader.append(body(i)) for i in range(2, 6)), return_exceptions=True)
            assert [e.code for e in late] == [DLedgerResponseCode.WAIT_QUORUM_ACK_TIMEOUT] * 3 + [
                DLedgerResponseCode.LEADER_PENDING_FULL]
            assert "no quorum of 2 of 3 members acknowledged it within 300 ms" in str(late[0])
            assert "LEADER_PENDING_FULL: more than 2 appends wait" in str(late[3])
            assert leader.store.ledger_end_index == 4 and leader.store.committed_index == 1
            back = next(m for m in members.peers if m != leader_id)
            await members.start(back)
            now = await elected(members)
            result = await now.append(body(3))
            assert now.store.committed_index == result.index >= 2
            await eventually("both hold it", lambda: caught_up(members, now), CATCH_UP_S)

    run(scenario())


# -- one follower answering pushes on the wire ------------------------------------------------------------------------


def entries_from(index: int, term: int, pos: int, *bodies: bytes) -> list[DLedgerEntry]:
    out = []
    for i, data in enumerate(bodies):
        out.append(DLedgerEntry(index + i, term, pos, BODY_OFFSET + len(data), data))
        pos += BODY_OFFSET + len(data)
    return out


def test_a_follower_answers_pushes_with_dledgers_codes(tmp_path: Path) -> None:
    """n0 follows n1 in term 3 and holds entries 0..2; bad pushes leave its log as it was."""

    async def scenario() -> None:
        async with group(tmp_path, start=(), enable_leader_elector=False, **FILES) as members:
            await members.start("n0")
            me = members.state("n0")
            me.current_term = 3
            me.change_to_follower(3, "n1")
            address = members.peers["n0"]
            good = entries_from(0, 3, 0, b"a" * 10, b"b" * 20, b"c" * 30)

            async with RemotingClient() as client:
                async def push(push_type: PushType = PushType.APPEND, entry: DLedgerEntry | None = None,
                               **fields: object) -> dict:
                    request = PushEntryRequest(group="broker-a", remote_id="n0", local_id="n1", leader_id="n1",
                                               term=3, type=push_type, entry=entry, commit_index=1)
                    for name, value in fields.items():
                        setattr(request, name, value)
                    response = await client.invoke(address, create_request(DLedgerRequestCode.PUSH,
                                                                           body=request.encode()))
                    assert response.code == 200
                    return json.loads(response.body)

                answers = await asyncio.gather(*(push(entry=e) for e in reversed(good)))  # out of order: in order
                assert [a["code"] for a in answers] == [200] * 3
                assert answers[-1] == {"beginIndex": 0, "code": 200, "count": 1, "endIndex": 0, "group": "broker-a",
                                       "index": 0, "term": 3}
                store = members.members["n0"].store
                assert store.ledger_end_index == 2 and store.committed_index == 1  # the pushes' commitIndex
                assert [store.get(i).same_as(e) for i, e in enumerate(good)] == [True] * 3
                # a push of an entry held already (its answer was lost) is answered as it arrives: with the
                # once-a-second check switched off, SUCCESS when it is the leader's, else INCONSISTENT_STATE
                with pytest.MonkeyPatch.context() as patch:
                    patch.setattr(entry_handler, "ABNORMAL_CHECK_MS", 10**9)
                    held = await push(entry=good[1])
                    assert (held["code"], held["index"], held["endIndex"]) == (200, 1, 2)
                    not_ours = DLedgerEntry(1, 2, good[1].pos, good[1].size, b"y" * 20)
                    assert (await push(entry=not_ours))["code"] == DLedgerResponseCode.INCONSISTENT_STATE
                before = member_files(tmp_path, "n0")
                following = entries_from(3, 3, good[-1].pos + good[-1].size, b"d" * 5)[0]

                async def code(push_type: PushType = PushType.APPEND, entry: DLedgerEntry | None = following,
                               **fields: object) -> int:
                    return (await push(push_type, entry, **fields))["code"]

                assert await code(group="broker-b") == DLedgerResponseCode.UNKNOWN_GROUP
                assert await code(remote_id="n2") == DLedgerResponseCode.UNKNOWN_MEMBER
                assert await code(entry=None) == DLedgerResponseCode.UNEXPECTED_ARGUMENT
                assert await code(term=2) == DLedgerResponseCode.INCONSISTENT_STATE  # a stale term
                assert await code(leader_id="n2") == DLedgerResponseCode.INCONSISTENT_STATE  # not its leader
                assert await code(PushType.TRUNCATE, good[0], term=2) == DLedgerResponseCode.INCONSISTENT_STATE
                assert await code(PushType.COMPARE, good[1]) == DLedgerResponseCode.SUCCESS
                other = DLedgerEntry(1, 2, good[1].pos, good[1].size, b"x" * 20)
                compared = await push(PushType.COMPARE, other)
                assert (compared["code"], compared["beginIndex"], compared["endIndex"]) == (406, 0, 2)
                # a gap: index 7 waits for 3..6; after a second DLedger gives up on it, which sends the leader to
                # COMPARE. A second push of 7 meanwhile is a repeat.
                gap = entries_from(7, 3, 4096, b"g")[0]
                waiting = asyncio.create_task(code(entry=gap))
                await asyncio.sleep(0.1)
                assert await code(entry=gap) == DLedgerResponseCode.REPEATED_PUSH
                assert await waiting == DLedgerResponseCode.INCONSISTENT_STATE
                assert store.ledger_end_index == 2 and store.committed_index == 1
                assert member_files(tmp_path, "n0") == before
                # a COMMIT moves the committed index forward only, in the current term, never past the log's end
                assert await code(PushType.COMMIT, None, commit_index=2, term=2) == DLedgerResponseCode.SUCCESS
                assert await code(PushType.COMMIT, None, commit_index=0) == DLedgerResponseCode.SUCCESS
                assert store.committed_index == 1
                assert await code(PushType.COMMIT, None, commit_index=9) == DLedgerResponseCode.SUCCESS
                assert store.committed_index == 2

    run(scenario())


def test_push_bodies_as_fastjson_writes_them() -> None:
    entry = DLedgerEntry(5, 2, 260, 51, b"\0\0\0")
    request = PushEntryRequest(group="g", remote_id="n1", local_id="n0", leader_id="n0", term=2, commit_index=4,
                               entry=entry)
    assert request.encode() == (
        b'{"batch":false,"batchEntry":[],"code":200,"commitIndex":4,"count":1,"entry":{"body":"AAAA","bodyCrc":0,'
        b'"chainCrc":0,"channel":0,"index":5,"magic":1,"pos":260,"size":51,"term":2},"firstEntryIndex":5,'
        b'"group":"g","lastEntryIndex":5,"leaderId":"n0","localId":"n0","remoteId":"n1","term":2,"totalSize":0,'
        b'"type":"APPEND"}')
    assert PushEntryRequest.decode(request.encode()) == request
    batch = PushEntryRequest(type=PushType.APPEND, batch_entry=[entry, DLedgerEntry(6, 2, 311, 49, b"x")])
    data = json.loads(batch.encode())
    assert (data["batch"], data["count"], data["firstEntryIndex"], data["lastEntryIndex"], data["totalSize"]) == (
        True, 2, 5, 6, 100)
    assert PushEntryRequest.decode(batch.encode()).batch_entry == batch.batch_entry
