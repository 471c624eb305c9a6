"""The store's background services, driven round by round: retention on request (DELETE_EXPIRED_COMMITLOG), and
forced by a full disk only with cleanFileForciblyEnable."""

from __future__ import annotations

import dataclasses
import os
import time

from broker.store.commit_log import StoreMessage
from broker.store.message_store import MessageStore
from tests.helpers import wait_until


def age(paths: list[str], hours: float) -> None:
    old = time.time() - hours * 3600
    for path in paths:
        os.utime(path, (old, old))


def test_a_manual_delete_request_lasts_twenty_rounds_outside_delete_when(store_config):
    far_hour = f"{(time.localtime().tm_hour + 12) % 24:02d}"
    config = dataclasses.replace(store_config, file_reserved_time=1, delete_when=far_hour,
                                 clean_resource_interval=3_600_000)  # the test runs the rounds itself
    store = MessageStore(config, disk_usage=lambda _path: 10.0)
    store.start()
    try:
        for i in range(60):
            store.put_message(StoreMessage("TopicA", 0, bytes([i]) * 300, {"KEYS": f"key-{i}"}))
        wait_until("dispatch caught up", lambda: not store.dispatch_behind_bytes, 5, interval=0.005)
        cleaner, queue = store.cleaner, store.commit_log.queue
        assert cleaner is not None and len(queue.files) > 5
        file_size = config.mapped_file_size_commit_log
        age([mf.path for mf in queue.files[:2]], 2)
        assert cleaner.run_once() == 0  # expired, but not the hour, and the disk has room

        store.execute_delete_files_manually()
        assert cleaner.run_once() == 2
        assert store.commit_log.min_offset == 2 * file_size
        assert store.min_offset_in_queue("TopicA", 0) > 0
        young = queue.files[0].path
        assert cleaner.run_once() == 0  # only what is older than fileReservedTime goes
        for _ in range(20 - 3):  # Java's MAX_MANUAL_DELETE_FILE_TIMES: rounds 3 to 19
            cleaner.run_once()
        age([young], 2)
        assert cleaner.run_once() == 1  # the twentieth round still deletes
        age([queue.files[0].path], 2)
        assert cleaner.run_once() == 0  # the request is used up
        assert store.commit_log.min_offset == 3 * file_size
    finally:
        store.shutdown()


def test_a_disk_above_the_forcibly_ratio_deletes_young_files_only_with_clean_file_forcibly_enable(store_config):
    far_hour = f"{(time.localtime().tm_hour + 12) % 24:02d}"
    config = dataclasses.replace(store_config, delete_when=far_hour, clean_resource_interval=3_600_000,
                                 clean_file_forcibly_enable=False)
    store = MessageStore(config, disk_usage=lambda _path: 87.0)  # above 85 % (forcibly), below 90 % (writes refused)
    store.start()
    try:
        for i in range(30):
            store.put_message(StoreMessage("TopicA", 0, bytes([i]) * 300))
        wait_until("dispatch caught up", lambda: not store.dispatch_behind_bytes, 5, interval=0.005)
        cleaner = store.cleaner
        assert cleaner is not None and len(store.commit_log.queue.files) > 2
        assert cleaner.run_once() == 0  # young files stay: forcing is not enabled
        object.__setattr__(config, "clean_file_forcibly_enable", True)  # as a runtime update sets it
        before = len(store.commit_log.queue.files)
        assert cleaner.run_once() == min(before - 1, 10)  # the oldest, however young, 10 a round, never the last
        assert len(store.commit_log.queue.files) == before - min(before - 1, 10)
    finally:
        store.shutdown()
