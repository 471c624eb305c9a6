"""A slave's store: its master's CommitLog bytes appended in any slices, dispatched into the same ConsumeQueues."""

from __future__ import annotations

import random
import time

from broker.store.commit_log import StoreMessage
from broker.store.message_store import MessageStore
from broker.store.results import GetMessageStatus


def fill(master: MessageStore, count: int) -> None:
    for i in range(count):
        master.put_message(StoreMessage("TopicR", i % 3, bytes([i % 251]) * (50 + i % 200), {"KEYS": f"k{i}"}))


def replicate(master: MessageStore, slave: MessageStore, start: int, rng: random.Random) -> None:
    """Copy the master's log from ``start`` in slices of random size, as frames of a small haTransferBatchSize,
    a few frames at a time (what one read of the socket holds; they may cross into the next file)."""
    offset = start
    while offset < master.max_phy_offset:
        first, chunks = offset, []
        for _ in range(rng.randint(1, 4)):
            data = master.commit_log_data(offset, rng.randint(1, 700))
            if data is None:
                break
            chunks.append(data)
            offset += len(data)
        assert slave.append_to_commit_log(first, chunks)


def wait_dispatched(store: MessageStore) -> None:
    deadline = time.monotonic() + 5
    while store.dispatch_behind_bytes and time.monotonic() < deadline:
        time.sleep(0.005)
    assert store.dispatch_behind_bytes == 0


def same_queues(master: MessageStore, slave: MessageStore) -> None:
    for queue_id in range(3):
        assert slave.max_offset_in_queue("TopicR", queue_id) == master.max_offset_in_queue("TopicR", queue_id)
        first = slave.min_offset_in_queue("TopicR", queue_id)
        got, want = (s.get_message("g", "TopicR", queue_id, first, 1000) for s in (slave, master))
        assert got.status is GetMessageStatus.FOUND
        assert b"".join(map(bytes, got.buffers)) == b"".join(map(bytes, want.buffers))


def test_slices_that_end_mid_record_are_dispatched_once_whole(open_store, store_config, tmp_path):
    master = open_store(store_path_root_dir=str(tmp_path / "master"))
    slave = open_store(store_path_root_dir=str(tmp_path / "slave"))
    fill(master, 120)
    wait_dispatched(master)
    replicate(master, slave, 0, random.Random(7))
    wait_dispatched(slave)
    same_queues(master, slave)
    assert slave.query_message("TopicR", "k77", 4).buffers


def test_a_slave_may_begin_at_a_later_file(open_store, store_config, tmp_path):
    """An empty slave starts at the beginning of its master's last file: its log and queues begin there."""
    master = open_store(store_path_root_dir=str(tmp_path / "master"))
    slave = open_store(store_path_root_dir=str(tmp_path / "slave"))
    fill(master, 120)
    wait_dispatched(master)
    end = master.max_phy_offset
    start = end - end % store_config.mapped_file_size_commit_log
    assert start > 0
    replicate(master, slave, start, random.Random(3))
    wait_dispatched(slave)
    assert slave.min_phy_offset == start
    for queue_id in range(3):
        assert slave.max_offset_in_queue("TopicR", queue_id) == master.max_offset_in_queue("TopicR", queue_id)


def test_bytes_not_at_the_end_are_refused(open_store, tmp_path):
    master = open_store(store_path_root_dir=str(tmp_path / "master"))
    slave = open_store(store_path_root_dir=str(tmp_path / "slave"))
    fill(master, 3)
    data = bytes(master.commit_log_data(0, 10_000))
    assert slave.append_to_commit_log(0, [data[:60], data[60:100]])
    assert not slave.append_to_commit_log(50, [data[50:120]])  # behind the end
    assert not slave.append_to_commit_log(200, [data[200:]])  # a gap
    assert slave.append_to_commit_log(100, [data[100:]])
    assert slave.max_phy_offset == master.max_phy_offset
