"""Dispatch in its own process (dispatchMode=PROCESS) against dispatch in a thread, and a dispatch process that dies."""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from broker.common.message import TRANSACTION_PREPARED_TYPE
from broker.store import commit_log as commit_log_module
from broker.store.commit_log import StoreMessage
from broker.store.config import DispatchMode, MessageStoreConfig
from broker.store.consume_queue import QueueState
from broker.store.dispatch_process import DeleteTopics, DispatchProcess, Done, Step, decode_report, encode_report
from broker.store.message_store import MessageStore


def tiny_config(root: Path, mode: DispatchMode) -> MessageStoreConfig:
    """Files small enough that CommitLog, ConsumeQueue and IndexFile all roll several times."""
    return MessageStoreConfig(store_path_root_dir=str(root), mapped_file_size_commit_log=8192,
                              mapped_file_size_consume_queue=10 * 20, max_hash_slot_num=64, max_index_num=64,
                              dispatch_mode=mode)


def messages(round_no: int, count: int) -> list[StoreMessage]:
    msgs = []
    for i in range(count):
        props = {"KEYS": f"k{round_no}-{i} shared-{i % 5}", "TAGS": f"Tag{'ABC'[i % 3]}",
                 "UNIQ_KEY": f"U{round_no:04d}{i:08d}"}
        sys_flag = TRANSACTION_PREPARED_TYPE if i % 11 == 7 else 0  # half messages: indexed, not queued
        msgs.append(StoreMessage(f"Topic{i % 2}", i % 3, bytes([i % 251]) * (50 + i * 7 % 300), props,
                                 sys_flag=sys_flag, born_timestamp=1_700_000_000_000 + i))
    return msgs


def put_all(store: MessageStore, msgs: list[StoreMessage]) -> None:
    for i in range(0, len(msgs), 10):  # batches that fit a tiny CommitLog file
        assert store.put_messages(msgs[i:i + 10]).ok


def wait_dispatched(store: MessageStore, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while store.dispatch_behind_bytes and time.monotonic() < deadline:
        time.sleep(0.005)
    assert store.dispatch_behind_bytes == 0


def derived_files(root: Path) -> tuple[dict[str, bytes], list[bytes]]:
    """ConsumeQueue files by path, index files in name (= creation) order: their names are creation times."""
    cq = {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / "consumequeue").rglob("*")) if p.is_file()}
    index = [p.read_bytes() for p in sorted((root / "index").iterdir())]
    return cq, index


class SteppingClock:
    """Store times that are the same in every run: each put a millisecond after the previous one."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def time(self) -> float:
        self.now += 0.001
        return self.now


def test_the_dispatch_process_writes_what_the_dispatch_thread_writes_byte_for_byte(tmp_path, monkeypatch):
    written = {}
    for mode in DispatchMode:
        monkeypatch.setattr(commit_log_module, "time", SteppingClock())
        root = tmp_path / mode.value
        store = MessageStore(tiny_config(root, mode))
        store.start()
        for round_no in range(4):
            put_all(store, messages(round_no, 40)[:20])
            for msg in messages(round_no, 40)[20:]:
                store.put_message(msg)
            wait_dispatched(store)
        store.shutdown()
        commit_log = b"".join(p.read_bytes() for p in sorted((root / "commitlog").iterdir()))
        written[mode] = (commit_log, derived_files(root))
    thread, process = written[DispatchMode.THREAD], written[DispatchMode.PROCESS]
    assert process[0] == thread[0]  # the same CommitLog, so the derived files must be the same too
    assert len(thread[1][1]) > 2 and len(thread[1][0]) > 6  # index and queue files rolled
    assert process[1] == thread[1]


def test_a_dispatch_process_killed_alone_is_noticed_and_replaced(tmp_path, caplog):
    store = MessageStore(tiny_config(tmp_path / "store", DispatchMode.PROCESS))
    store.start()
    try:
        dispatch = store.dispatch
        assert isinstance(dispatch, DispatchProcess)
        put_all(store, messages(0, 30))
        wait_dispatched(store)
        first = dispatch.pid
        assert first is not None
        with caplog.at_level(logging.ERROR, logger="broker.store.dispatch_process"):
            os.kill(first, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while dispatch.pid == first and time.monotonic() < deadline:
                time.sleep(0.01)
            assert dispatch.pid != first and dispatch.restarts == 1
        assert any(f"dispatch process {first} exited" in r.getMessage() and r.levelno == logging.ERROR
                   for r in caplog.records)
        put_all(store, messages(1, 30))  # dispatched by the new process
        wait_dispatched(store)
        for round_no in range(2):
            for i in (0, 29):
                found = store.query_message(f"Topic{i % 2}", f"k{round_no}-{i}", 32)
                assert len(found.buffers) == 1, (round_no, i)
        queued = sum(1 for m in messages(0, 30) + messages(1, 30) if m.sys_flag == 0 and m.topic == "Topic0")
        assert sum(store.max_offset_in_queue("Topic0", q) for q in range(3)) == queued
    finally:
        store.shutdown()
    assert not os.path.exists(store.config.abort_path)  # everything was dispatched: a clean shutdown


def test_a_dispatch_process_ignores_group_signals_and_no_new_one_starts_once_shutdown_began(tmp_path, caplog):
    """Ctrl-C in a terminal and systemd's stop signal the broker's whole process group: the child keeps
    dispatching (the broker stops it). A child that dies while the broker shuts down is not replaced: a new one would
    never be told to stop, and the shutdown would wait for it for ever."""
    store = MessageStore(tiny_config(tmp_path / "store", DispatchMode.PROCESS))
    store.start()
    stopper = threading.Thread(target=store.shutdown, name="test-shutdown")
    try:
        dispatch = store.dispatch
        assert isinstance(dispatch, DispatchProcess) and dispatch.pid is not None
        first = dispatch.pid
        os.kill(first, signal.SIGTERM)
        os.kill(first, signal.SIGINT)
        put_all(store, messages(0, 30))
        wait_dispatched(store)
        assert (dispatch.pid, dispatch.restarts) == (first, 0)
        with caplog.at_level(logging.ERROR, logger="broker.store.dispatch_process"):
            os.kill(first, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while dispatch.restarts == 0 and time.monotonic() < deadline:
                time.sleep(0.001)
            assert dispatch.restarts == 1  # the reader saw it die and pauses before starting another
            stopper.start()
            stopper.join(30)
            assert not stopper.is_alive(), "the shutdown waits for a dispatch process started after it began"
        assert dispatch.pid == first  # none started after the shutdown began
    finally:
        if not stopper.is_alive() and stopper.ident is None:
            store.shutdown()


@pytest.mark.parametrize("mode", list(DispatchMode))
def test_long_polling_hears_of_each_queue_once_per_step(tmp_path, mode):
    store = MessageStore(dataclasses.replace(tiny_config(tmp_path / "store", mode), message_index_enable=False))
    heard: list[dict] = []
    store.dispatch.arrival_listeners.append(heard.append)
    store.start()
    try:
        put_all(store, messages(0, 12))
        wait_dispatched(store)
    finally:
        store.shutdown()
    arrivals: dict[tuple[str, int], tuple[int, list[int]]] = {}
    for step in heard:
        for key, (max_offset, codes) in step.items():
            arrivals[key] = (max_offset, arrivals.get(key, (0, []))[1] + codes)
    queued = [m for m in messages(0, 12) if m.sys_flag == 0]
    assert sorted(arrivals) == sorted({(m.topic, m.queue_id) for m in queued})
    for (topic, queue_id), (max_offset, codes) in arrivals.items():
        mine = [m for m in queued if (m.topic, m.queue_id) == (topic, queue_id)]
        assert max_offset == len(mine) and len(codes) == len(mine)


def test_reports_cross_the_pipe_as_bytes_and_come_back_equal():
    step = Step(8192, 1_700_000_000_123, {("TopicA", 3): QueueState(0, 20, 400, 8000)}, {("TopicA", 3): (20, [7, 0])},
                ["20240101000000000"], 8100)
    assert decode_report(encode_report(step)) == step
    assert decode_report(encode_report(Step(0, 0, {}, {}, None, -1))) == Step(0, 0, {}, {}, None, -1)
    done = Done(DeleteTopics({"TopicA"}))
    assert decode_report(encode_report(done)) == done
    with pytest.raises(ValueError, match="neither"):
        decode_report(b"X" + encode_report(step)[1:])
