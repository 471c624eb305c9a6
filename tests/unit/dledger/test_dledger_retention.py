"""Retention in DLedger mode, in process: each member of a group deletes its expired data files (aged by their
mtime, as retention reads it) and a follower stopped meanwhile catches up from what the leader kept; a broker's
DLedger store drops the ConsumeQueue units of the deleted range, answers min offsets from what is left and restarts
from its first kept file; an old plain CommitLog goes first, while DLedger deletes nothing; a disk above the force
ratio deletes young files, above the full ratio appends fail with DISK_FULL. About 6 s in all."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from pathlib import Path

from broker.common.record import decode_record
from broker.dledger.layout import INDEX_UNIT_SIZE, decode_entry_header
from broker.dledger.message_store import DLedgerMessageStore
from broker.dledger.retention import DISABLED_RESERVED_HOURS, RetentionSettings
from broker.dledger.server import DLedgerServer
from broker.store.commit_log import StoreMessage
from broker.store.config import MessageStoreConfig
from broker.store.message_store import MessageStore
from broker.store.results import GetMessageStatus, PutMessageStatus
from tests.helpers import eventually, run
from tests.unit.dledger.dledger_group import group
from tests.unit.dledger.test_dledger_message_store import HOST, dispatched, store_config
from tests.unit.dledger.test_dledger_replication import CATCH_UP_S, FILES, body, caught_up, elected, member_files

EVERY_HOUR = ";".join(f"{h:02d}" for h in range(24))  # deleteWhen: the hour never stops a test
# an hour's reservation, files aged by two; disk ratios no test machine reaches
RETENTION = RetentionSettings(file_reserved_hours=1, delete_when=EVERY_HOUR, disk_space_ratio_to_check_expired=0.99,
                              disk_space_ratio_to_force_clean=0.99)


def age(paths: list[str], hours: float = 2) -> None:
    old = time.time() - hours * 3600
    for path in paths:
        os.utime(path, (old, old))


def age_all_but_last(server: DLedgerServer) -> None:
    age([mf.path for mf in server.store.data.files[:-1]])


def first_entry_index(server: DLedgerServer) -> int:
    return decode_entry_header(server.store.data.files[0].buffer, 0).index


def test_every_member_deletes_and_a_stopped_follower_catches_up_from_what_the_leader_kept(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with group(tmp_path, **FILES, retention=RETENTION, heart_beat_time_interval_ms=1000) as members:
            leader = await elected(members)
            for i in range(20):
                await leader.append(body(i))
            behind = next(m for m in members.peers if m != leader.config.self_id)
            await members.stop(behind)
            await asyncio.gather(*(leader.append(body(i)) for i in range(20, 400)))
            await eventually("the other follower holds all", lambda: caught_up(members, leader), CATCH_UP_S)
            running = list(members.members.values())
            files_before = len(leader.store.data.files)
            assert files_before >= 4
            for member in running:  # young files stay, whatever deleteWhen says
                assert member.clean_space.run_once() == 0
                age_all_but_last(member)
            # each member's own clean loop (every 100 ms) deletes them
            await eventually("every running member deleted its old files",
                             lambda: all(len(m.store.data.files) == 1 for m in running), CATCH_UP_S)
            begin = leader.store.ledger_begin_index
            assert begin > 20 and all(m.store.ledger_begin_index == begin == first_entry_index(m) for m in running)
            index = leader.store.index.files[0]  # index files wholly below the first entry's unit went too
            assert index.file_from_offset <= begin * INDEX_UNIT_SIZE < index.file_from_offset + index.file_size
            assert leader.store.get(begin).body == body(begin)

            await members.start(behind)  # it holds entries 0..19, the leader begins at ``begin``
            await eventually("the stopped follower catches up", lambda: caught_up(members, leader), CATCH_UP_S)
            caught = members.members[behind].store
            assert caught.ledger_begin_index == begin and caught.data.min_offset == leader.store.data.min_offset
            await leader.append(body(400))
            await eventually("and follows on", lambda: caught_up(members, leader), CATCH_UP_S)
            await members.stop(behind)
            await members.start(behind)  # its log, begun mid-way, recovers from its first file
            restarted = members.members[behind].store
            assert (restarted.ledger_begin_index, restarted.ledger_end_index) == (begin, 400)
            assert restarted.get(begin).same_as(leader.store.get(begin))
        data = {m: {k: v for k, v in member_files(tmp_path, m).items() if k.startswith("data/")} for m in members.peers}
        assert data["n0"] == data["n1"] == data["n2"]  # the caught-up follower's data files are the leader's

    run(scenario())


def retention_config(root: Path) -> MessageStoreConfig:
    """64 KiB data files, 40 units a ConsumeQueue file; the test runs the broker's retention rounds itself."""
    return dataclasses.replace(store_config(root), file_reserved_time=0, delete_when=EVERY_HOUR,
                               mapped_file_size_consume_queue=20 * 40, clean_resource_interval=3_600_000)


def open_store(config: MessageStoreConfig) -> DLedgerMessageStore:
    store = DLedgerMessageStore(config, HOST)
    store.start()
    store.server.clean_space.disk_usage = store.cleaner.disk_usage = lambda _path: 10.0  # a disk with room
    return store


def put(store: DLedgerMessageStore, first: int, count: int) -> None:
    for i in range(first, first + count):
        msg = StoreMessage("TopicD", 0, b"m%05d" % i + bytes(600), {"KEYS": f"k{i}"})
        assert asyncio.run(store.put_messages_async([msg])).status is PutMessageStatus.PUT_OK
    dispatched(store)


def first_body(store: DLedgerMessageStore) -> tuple[int, bytes]:
    low = store.min_offset_in_queue("TopicD", 0)
    found = store.get_message("g", "TopicD", 0, low, 1)
    assert found.status is GetMessageStatus.FOUND
    return low, decode_record(next(iter(found.records()))).body[:6]


def test_a_broker_store_drops_the_deleted_range_and_restarts_from_its_first_kept_file(tmp_path: Path) -> None:
    config = retention_config(tmp_path)
    store = open_store(config)
    try:
        put(store, 0, 400)  # 400 entries of ~720 bytes in 64 KiB files: 5 files
        dledger, cleaner = store.dledger.store, store.cleaner
        assert cleaner is not None and len(dledger.data.files) == 5
        cleaner.run_once()  # the broker's keys, as DLedger's: fileReservedTime 0 is an hour
        assert store.server.clean_space.settings == RetentionSettings(1, EVERY_HOUR, 0.75, 0.85, True)
        assert store.server.clean_space.run_once() == 0
        age([mf.path for mf in dledger.data.files[:2]])
        store.server.clean_space.deletable_end = lambda: 65536  # not dispatched past the first file
        assert store.server.clean_space.run_once() == 1
        store.server.clean_space.deletable_end = lambda: store.dispatch.reput_from_offset
        assert store.server.clean_space.run_once() == 1
        begin = dledger.ledger_begin_index
        assert store.commit_log.queue.min_offset == 2 * 65536 and begin == first_entry_index(store.server)
        cq_files = len(store.consume_queues.get("TopicD", 0)._mfq.files)
        cleaner.run_once()  # CleanConsumeQueueService: the units of the deleted range go
        assert len(store.consume_queues.get("TopicD", 0)._mfq.files) < cq_files
        assert first_body(store) == (begin, b"m%05d" % begin)  # one entry a message: queue offset = index
        too_small = store.get_message("g", "TopicD", 0, 0, 1)
        assert too_small.status is GetMessageStatus.OFFSET_TOO_SMALL and too_small.next_begin_offset == begin
    finally:
        store.shutdown()
    store = open_store(config)
    try:
        assert store.dledger.store.ledger_begin_index == begin and first_body(store) == (begin, b"m%05d" % begin)
        put(store, 400, 1)
        assert store.get_message("g", "TopicD", 0, 400, 1).status is GetMessageStatus.FOUND
    finally:
        store.shutdown()


def test_an_old_plain_commit_log_goes_first_and_a_full_disk_forces_cleaning_and_refuses_appends(tmp_path: Path) -> None:
    config = retention_config(tmp_path)
    plain = MessageStore(dataclasses.replace(config, enable_d_leger_commit_log=False), HOST)
    plain.start()
    for i in range(200):  # 200 records of ~700 bytes: 3 files of the old CommitLog
        plain.put_message(StoreMessage("TopicD", 0, b"m%05d" % i + bytes(600)))
    dispatched(plain)
    plain.shutdown()
    store = open_store(config)
    try:
        put(store, 200, 200)
        old = store.plain_log.queue.files
        assert len(old) >= 2 and len(store.dledger.store.data.files) >= 2
        age([mf.path for mf in (*old, *store.dledger.store.data.files[:-1])])
        clean_space = store.server.clean_space
        store.cleaner.run_once()  # the old files go, the last one too; DLedger's wait
        assert not store.plain_log.queue.files
        assert clean_space.settings.file_reserved_hours == DISABLED_RESERVED_HOURS
        assert not clean_space.settings.enable_disk_force_clean and clean_space.run_once() == 0
        assert first_body(store)[1] == b"m00200"  # the first message DLedger holds
        store.cleaner.run_once()  # no old file left: DLedger's turn
        assert clean_space.settings.file_reserved_hours == 1 and clean_space.run_once() >= 1
        store.cleaner.run_once()
        low, first = first_body(store)
        assert low > 200 and first == b"m%05d" % low
        put(store, 400, 100)  # young files, then a disk above 90 %: forced clean, and appends refused
        clean_space.disk_usage = lambda _path: 95.0
        assert clean_space.run_once() >= 1 and len(store.dledger.store.data.files) == 1
        full = asyncio.run(store.put_messages_async([StoreMessage("TopicD", 0, b"full")]))
        # refused before it is written: Apache's broker answers OS_PAGECACHE_BUSY, whatever DLedger's code
        assert full.status is PutMessageStatus.OS_PAGE_CACHE_BUSY and "DISK_FULL" in full.reason
        clean_space.disk_usage = lambda _path: 10.0
        clean_space.run_once()
        put(store, 500, 1)
    finally:
        store.shutdown()
