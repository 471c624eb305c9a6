"""Retention in a DLedger group of three ``python -m broker`` processes (tests/integration/dledger_processes.py) with
64 KiB data files, fileReservedTime=0 (DLedger's fileReservedHours 1) and every hour a deleteWhen hour: files aged
past the hour (their mtime set back, as retention reads it) go on every member, the master answers min offsets from
what is left and keeps serving reads and writes, and a member restarted recovers from its first kept file.
About 12 s on 2 shared cores, most of it the three brokers' start.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import pytest

from broker.client.blocking import BlockingClient
from broker.client.blocking_api import get_min_offset
from broker.client.blocking_remoting import BlockingRemotingClient
from broker.client.message import Message
from broker.common.message import MessageQueue
from broker.common.record import decode_record
from broker.dledger.layout import BODY_OFFSET
from tests.helpers import wait_until
from tests.integration.dledger_processes import GROUP, MEMBERS, Group, dledger_group

pytestmark = pytest.mark.slow

TOPIC = "DLedgerRetention"
FILE_SIZE = 64 * 1024
EVERY_HOUR = ";".join(f"{h:02d}" for h in range(24))
CONF = {"mappedFileSizeCommitLog": FILE_SIZE, "fileReservedTime": 0, "deleteWhen": EVERY_HOUR,
        "cleanResourceInterval": 200, "mappedFileSizeConsumeQueue": 20 * 100,
        "dLegerHeartBeatTimeIntervalMs": 1000}  # a leader kept through a loaded minute: this test is no failover
MQ = MessageQueue(TOPIC, GROUP, 0)


def data_files(group: Group, member: str) -> list[Path]:
    folder = group.home / member / "store" / f"dledger-{member}" / "data"
    return sorted(folder.iterdir()) if folder.is_dir() else []  # none before its first entry


def age_all_but_last(group: Group) -> None:
    old = time.time() - 2 * 3600
    for member in MEMBERS:
        for path in data_files(group, member)[:-1]:
            with contextlib.suppress(FileNotFoundError):  # deleted meanwhile
                os.utime(path, (old, old))


def first_queue_offset(group: Group, member: str) -> int:
    """The queue offset of the record in the member's first data entry."""
    return decode_record(data_files(group, member)[0].read_bytes()[BODY_OFFSET:]).queue_offset


def min_offset_at(addr: str) -> int:
    with BlockingRemotingClient(addr) as client:
        return get_min_offset(client, MQ)


def test_every_member_deletes_old_files_and_serves_on_and_a_restart_recovers(tmp_path: Path) -> None:
    with dledger_group(tmp_path, TOPIC, **CONF) as group, BlockingClient(group.namesrv.addr) as client:
        master = group.master()
        sent = client.get_max_offset(MQ)  # the group's first message may be in this queue
        for _ in range(40):  # 640 messages of 2 KiB: about 20 data files
            batch = [Message(TOPIC, b"r%05d" % (sent + i) + bytes(2048)) for i in range(16)]
            assert client.send_batch(batch, MQ).queue_offset == sent
            sent += 16
        assert len(data_files(group, master)) > 10

        def deleted_everywhere() -> bool:
            age_all_but_last(group)  # again each time: a follower may still be writing what it copies
            return all(len(data_files(group, m)) == 1 for m in MEMBERS)

        wait_until("every member deleted its old data files", deleted_everywhere, timeout=10)
        # CleanConsumeQueueService on each member (every cleanResourceInterval): the queue begins at the first
        # message of the data file left
        low = first_queue_offset(group, master)
        assert sent // 2 < low < sent
        wait_until("every member's min offset follows", lambda: all(min_offset_at(p.addr) == low
                                                                    for p in group.procs.values()), timeout=5)
        pulled = client.pull(MQ, low, 4, decode=True)  # the first message left, read at the min offset
        assert [m.body[:6] for m in pulled.messages] == [b"r%05d" % (low + i) for i in range(4)]
        assert client.pull(MQ, 0, 4).next_begin_offset == low
        assert client.send(Message(TOPIC, b"after"), MQ).queue_offset == sent

        follower = next(m for m in MEMBERS if m != master)
        first_kept = data_files(group, follower)[0].name
        group.procs[follower].stop()
        group.start(follower)  # registers again once its store recovered
        assert data_files(group, follower)[0].name == first_kept
        assert min_offset_at(group.procs[follower].addr) == min_offset_at(group.procs[master].addr)
        assert client.send(Message(TOPIC, b"after restart"), MQ).queue_offset == sent + 1
        wait_until("both read back (from whichever member the pull is sent to)",
                   lambda: [m.body for m in client.pull(MQ, sent, 4, decode=True).messages] == [b"after",
                                                                                               b"after restart"],
                   timeout=5)
