"""Crash test of the store: a child process appends with SYNC_FLUSH and is killed with SIGKILL at random moments.

After every restart each acknowledged message must be readable by topic/queue/offset, by key and by id; the
CommitLog must end at a whole record with nothing after it, and the ConsumeQueues must agree with the log. A tail
garbled on purpose must be cut, not served, and new puts must continue at the cut.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.common.message import PROPERTY_KEYS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, decode_offset_msg_id
from broker.common.record import FIXED_SIZE_V4, RecordKind, decode_record, encode_blank
from broker.store.checkpoint import StoreCheckpoint
from broker.store.commit_log import StoreMessage
from broker.store.index_service import IndexService
from broker.store.message_store import MessageStore
from broker.store.results import GetMessageStatus, PutMessageStatus
from tests.integration.crash_writer import (
    READY_LINE,
    STARTING_LINE,
    Ack,
    crash_config,
    message_keys,
    no_disk_pressure,
    read_acks,
)

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 6
KILL_WHILE_STARTING_ROUNDS = {2}  # after an abandoned store: killed during the writer's crash recovery
PAUSE_MS = 10  # writer threads pause up to this after each put, so that checking every ack stays quick
READY_TIMEOUT = 30.0


# -- the writer process ---------------------------------------------------------------------------------------------


def spawn_writer(store_dir: Path, acks: Path, round_no: int, seed: int, log: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    with open(log, "ab") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.integration.crash_writer", "--store", str(store_dir), "--acks", str(acks),
             "--round", str(round_no), "--seed", str(seed), "--threads", "3", "--pause-ms", str(PAUSE_MS)],
            cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=err,
        )


def wait_line(proc: subprocess.Popen, expected: str, log: Path) -> float:
    """Wait for the writer to print ``expected``; returns the time it printed it (monotonic)."""
    assert proc.stdout is not None
    readable, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT)
    line = proc.stdout.readline().decode().strip() if readable else ""
    if line != expected:
        proc.kill()
        proc.wait()
        pytest.fail(f"writer did not print {expected!r} (exit {proc.returncode}):\n{log.read_text()}")
    return time.monotonic()


def kill_writer(proc: subprocess.Popen, log: Path) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.stdout is not None
    proc.stdout.close()
    if proc.returncode != -signal.SIGKILL:
        pytest.fail(f"writer ended on its own (exit {proc.returncode}) before the kill:\n{log.read_text()}")


# -- opening and leaving the store ------------------------------------------------------------------------------------


def open_store(store_dir: Path, **overrides) -> MessageStore:
    store = MessageStore(dataclasses.replace(crash_config(str(store_dir)), **overrides), disk_usage=no_disk_pressure)
    store.start()
    return store


def abandon(store: MessageStore) -> None:
    """Leave the store as a crash of this process would: threads stopped and files unmapped, but no shutdown,
    so the abort file stays and the next start runs crash recovery."""
    store.running = False
    for service in reversed(store._services):  # there is no public way to stop them without a shutdown
        service.shutdown()
    store.commit_log.queue.close()
    store.consume_queues.close()
    if store.index is not None:
        store.index.close()


# -- checks -----------------------------------------------------------------------------------------------------------


def check_commit_log(store: MessageStore) -> dict[int, tuple[str, int, int]]:
    """The log is whole records (or BLANK fillers) from its minimum to its end, and only zeros after the end.
    Returns (topic, queueId, queueOffset) of every record by physical offset."""
    log = store.commit_log
    records: dict[int, tuple[str, int, int]] = {}
    end = log.min_offset
    for offset, check, buf in log.scan(log.min_offset):
        assert offset == end
        end = offset + check.size
        if check.kind is RecordKind.MESSAGE:
            pos = offset % store.config.mapped_file_size_commit_log
            record = decode_record(buf[pos:pos + check.size], body=False)
            assert record.commit_log_offset == offset, f"record at {offset} says it is at {record.commit_log_offset}"
            records[offset] = (record.topic, record.queue_id, record.queue_offset)
    assert end == log.max_offset, f"valid records end at {end}, the CommitLog claims {log.max_offset}"
    last = log.queue.files[-1]
    assert not any(last.buffer[last.wrote_position:]), f"bytes after the CommitLog end {log.max_offset}"
    assert log.read_record(log.max_offset) is None
    on_disk = sorted(n for n in os.listdir(store.config.commit_log_dir) if n.isdigit())
    assert on_disk == [os.path.basename(mf.path) for mf in log.queue.files]
    return records


def check_consume_queues(store: MessageStore, records: dict[int, tuple[str, int, int]]) -> None:
    """Every ConsumeQueue is contiguous from 0 and points at exactly the log's records of its queue, in order."""
    seen: set[int] = set()
    for cq in store.consume_queues.queues():
        assert cq.min_offset == 0
        units = cq.iter_units(0, cq.max_offset)
        assert len(units) == cq.max_offset
        for queue_offset, unit in enumerate(units):
            expected = (cq.topic, cq.queue_id, queue_offset)
            assert records.get(unit.commit_log_offset) == expected, f"{cq} unit {queue_offset}: {unit}"
            assert unit.commit_log_offset + unit.size <= store.commit_log.max_offset
            seen.add(unit.commit_log_offset)
        assert store.commit_log.queue_offsets.get((cq.topic, cq.queue_id), 0) == cq.max_offset
    assert seen == set(records), "CommitLog records without a ConsumeQueue unit"


def check_ack(store: MessageStore, ack: Ack) -> None:
    where = f"{ack.topic}/{ack.queue_id}/{ack.queue_offset} ({ack.key})"
    got = store.get_message("crash-test", ack.topic, ack.queue_id, ack.queue_offset, 1)
    assert got.status is GetMessageStatus.FOUND, f"{where}: {got.status}"
    check_record_bytes(got.buffers[0], ack, where)

    _, physical_offset = decode_offset_msg_id(ack.offset_msg_id)
    record = store.lookup_message(physical_offset)
    assert record is not None, f"{where}: nothing at offsetMsgId {ack.offset_msg_id}"
    assert (record.topic, record.queue_id, record.queue_offset) == (ack.topic, ack.queue_id, ack.queue_offset)
    assert hashlib.sha1(record.body or b"").hexdigest() == ack.body_sha1

    for key in (ack.key, ack.uniq_key):
        found = store.query_message(ack.topic, key, 64)
        assert found.buffers, f"{where}: query by key {key!r} found nothing"
        for data in found.buffers:  # the same record may be indexed twice after a re-dispatch, never another one
            assert decode_record(data, body=False).commit_log_offset == physical_offset, f"{where}: key {key!r}"
        check_record_bytes(found.buffers[0], ack, where)


def check_record_bytes(data: bytes, ack: Ack, where: str) -> None:
    record = decode_record(data)
    assert (record.topic, record.queue_id, record.queue_offset) == (ack.topic, ack.queue_id, ack.queue_offset), where
    assert hashlib.sha1(record.body or b"").hexdigest() == ack.body_sha1, f"{where}: body differs"
    assert record.properties[PROPERTY_KEYS] == ack.key
    assert record.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == ack.uniq_key


def wait_dispatched(store: MessageStore, timeout: float = 10.0) -> None:
    """Puts are dispatched to ConsumeQueue and index by a thread of their own; wait until it has caught up."""
    deadline = time.monotonic() + timeout
    while store.dispatch_behind_bytes > 0:
        assert time.monotonic() < deadline, f"dispatch is {store.dispatch_behind_bytes} bytes behind"
        time.sleep(0.005)


def check_store(store: MessageStore, acks: list[Ack]) -> None:
    wait_dispatched(store)
    records = check_commit_log(store)
    check_consume_queues(store, records)
    for ack in acks:
        check_ack(store, ack)


# -- the crash rounds -------------------------------------------------------------------------------------------------


def run_writer_round(store_dir: Path, acks: Path, round_no: int, rnd: random.Random, log: Path, *,
                     kill_while_starting: float | None) -> float:
    """One writer life ended by SIGKILL: a random 0.3-1.5 s after it started writing or, with
    ``kill_while_starting`` (seconds), at a random moment of its start-up (recovery). Returns the start-up time."""
    proc = spawn_writer(store_dir, acks, round_no, rnd.randrange(1 << 30), log)
    starting = wait_line(proc, STARTING_LINE, log)
    if kill_while_starting is not None:
        time.sleep(rnd.uniform(0, kill_while_starting))
        kill_writer(proc, log)
        return 0.0
    ready = wait_line(proc, READY_LINE, log)
    time.sleep(rnd.uniform(0.3, 1.5))
    kill_writer(proc, log)
    return ready - starting


def test_acked_messages_survive_sigkill(tmp_path):
    seed = int.from_bytes(os.urandom(4), "big")
    print(f"random seed {seed}")  # shown when the test fails
    rnd = random.Random(seed)
    store_dir, acks_path, writer_log = tmp_path / "store", tmp_path / "acks", tmp_path / "writer.log"
    acked_per_round: list[int] = []
    start_up = 0.0
    for round_no in range(ROUNDS):
        early = round_no in KILL_WHILE_STARTING_ROUNDS
        start_up = run_writer_round(store_dir, acks_path, round_no, rnd, writer_log,
                                    kill_while_starting=2 * start_up if early else None) or start_up
        acks = read_acks(str(acks_path))
        acked_per_round.append(len(acks) - sum(acked_per_round))
        print(f"round {round_no}: {acked_per_round[-1]} acked, {len(acks)} in all")
        store = open_store(store_dir)
        check_store(store, acks)
        if round_no % 2:
            abandon(store)  # the next writer starts with crash recovery
        else:
            store.shutdown()  # the next writer starts with a clean recovery
    assert all(n for r, n in enumerate(acked_per_round) if r not in KILL_WHILE_STARTING_ROUNDS), \
        f"a round acknowledged nothing (seed {seed}): {acked_per_round}"

    store = open_store(store_dir)
    try:
        check_store(store, read_acks(str(acks_path)))
    finally:
        store.shutdown()


# -- the dispatch process -------------------------------------------------------------------------------------------


def child_pids(pid: int) -> list[int]:
    """The processes ``pid`` started, from every thread (/proc/PID/task/TID/children)."""
    pids = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/children") as f:
            pids += [int(p) for p in f.read().split()]
    return pids


def is_running(pid: int) -> bool:
    """False once ``pid`` has exited, also while it waits, as a zombie, for whoever adopted it to reap it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_writer_killed_with_sigkill_leaves_no_dispatch_process(tmp_path):
    """The dispatch process dies with the process whose store it serves (PR_SET_PDEATHSIG): a broker killed and
    started again on the same files never meets an old dispatch process still writing them."""
    store_dir, acks_path, writer_log = tmp_path / "store", tmp_path / "acks", tmp_path / "writer.log"
    proc = spawn_writer(store_dir, acks_path, 0, 0, writer_log)
    wait_line(proc, STARTING_LINE, writer_log)
    wait_line(proc, READY_LINE, writer_log)
    (dispatch_pid,) = child_pids(proc.pid)
    assert is_running(dispatch_pid)
    time.sleep(0.3)  # writing and dispatching
    # Stopped, it cannot notice that its pipe to the broker closed (as when busy); SIGKILL ends it all the same.
    os.kill(dispatch_pid, signal.SIGSTOP)
    try:
        kill_writer(proc, writer_log)
        deadline = time.monotonic() + 10
        while is_running(dispatch_pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not is_running(dispatch_pid), f"dispatch process {dispatch_pid} outlived its broker"
    finally:
        if is_running(dispatch_pid):
            os.kill(dispatch_pid, signal.SIGKILL)
    store = open_store(store_dir)  # and what was acknowledged is all there
    try:
        check_store(store, read_acks(str(acks_path)))
    finally:
        store.shutdown()


# -- a tail garbled on purpose ----------------------------------------------------------------------------------------


TOPIC, QUEUE = "CrashTopicA", 0


@dataclasses.dataclass
class Written:
    acks: list[Ack]
    last_offset: int  # physical offset of the last record
    last_size: int
    last_body_size: int


def write_messages(store: MessageStore, rnd: random.Random, count: int) -> Written:
    acks: list[Ack] = []
    last = None
    for seq in range(count):
        key, uniq = message_keys(99, seq)
        body = rnd.randbytes(rnd.randint(0, 3000) if seq < count - 1 else 1500)
        topic, queue_id = (TOPIC, QUEUE) if seq % 3 == 0 or seq == count - 1 else ("CrashTopicB", seq % 2)
        msg = StoreMessage(topic, queue_id, body, {PROPERTY_KEYS: key, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq})
        result = store.put_message(msg)
        assert result.status is PutMessageStatus.PUT_OK and result.append is not None
        last = result.append
        acks.append(Ack(topic, queue_id, last.queue_offset, last.msg_ids[0], key, uniq,
                        hashlib.sha1(body).hexdigest()))
    assert last is not None
    return Written(acks, last.wrote_offset, last.wrote_bytes, 1500)


def file_and_pos(store_dir: Path, file_size: int, offset: int) -> tuple[Path, int]:
    return store_dir / "commitlog" / f"{offset - offset % file_size:020d}", offset % file_size


def garble_last_record(store_dir: Path, file_size: int, written: Written, rnd: random.Random) -> None:
    """Random bytes from the middle of the last record's body to beyond its end (its body CRC no longer holds)."""
    path, pos = file_and_pos(store_dir, file_size, written.last_offset)
    start = pos + FIXED_SIZE_V4 + written.last_body_size // 2
    end = min(pos + written.last_size + 300, file_size)
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(rnd.randbytes(end - start))


def append_half_record(store_dir: Path, file_size: int, written: Written) -> None:
    """The first half of a copy of the last record, right after it: a put torn by a crash."""
    path, pos = file_and_pos(store_dir, file_size, written.last_offset)
    data = path.read_bytes()[pos:pos + written.last_size]
    after = pos + written.last_size
    assert after + written.last_size // 2 <= file_size
    with open(path, "r+b") as f:
        f.seek(after)
        f.write(data[:written.last_size // 2])


@pytest.mark.parametrize("damage, abort", [("garble", True), ("half", True), ("garble", False)])
def test_garbled_tail_is_cut(tmp_path, damage, abort):
    rnd = random.Random(7)
    store_dir = tmp_path / "store"
    config = crash_config(str(store_dir))
    file_size = config.mapped_file_size_commit_log
    store = open_store(store_dir)
    written = write_messages(store, rnd, 60)
    store.shutdown()
    assert written.last_offset // file_size > 0, "the test wants the log to have rolled to a second file"
    before, last = written.acks[:-1], written.acks[-1]
    if damage == "garble":
        garble_last_record(store_dir, file_size, written, rnd)
        cut, kept = written.last_offset, before
    else:
        append_half_record(store_dir, file_size, written)
        cut, kept = written.last_offset + written.last_size, written.acks
    if abort:
        Path(config.abort_path).touch()

    store = open_store(store_dir)
    try:
        assert store.commit_log.max_offset == cut
        check_store(store, kept)
        if damage == "garble":
            assert store.lookup_message(written.last_offset) is None
            assert store.get_message("g", TOPIC, QUEUE, last.queue_offset, 1).status \
                is GetMessageStatus.OFFSET_OVERFLOW_ONE
            assert not store.query_message(TOPIC, last.key, 64).buffers
            assert not store.query_message(TOPIC, last.uniq_key, 64).buffers

        result = store.put_message(StoreMessage(TOPIC, QUEUE, b"after the cut", {PROPERTY_KEYS: "after-cut"}))
        assert result.status is PutMessageStatus.PUT_OK and result.append is not None
        assert result.append.wrote_offset == cut
        assert result.append.queue_offset == (last.queue_offset if damage == "garble" else last.queue_offset + 1)
        wait_dispatched(store)
        got = store.get_message("g", TOPIC, QUEUE, result.append.queue_offset, 1)
        assert got.status is GetMessageStatus.FOUND
        assert decode_record(got.buffers[0]).body == b"after the cut"
        check_store(store, kept)
    finally:
        store.shutdown()


def test_blank_filler_at_the_end_rolls_to_the_next_file(tmp_path):
    """A BLANK filler that a crash left at the end of the last file, with no next file yet: the log keeps it and
    the next put goes to a new file."""
    store_dir = tmp_path / "store"
    store = open_store(store_dir)
    written = write_messages(store, random.Random(3), 10)
    store.shutdown()
    file_size = crash_config(str(store_dir)).mapped_file_size_commit_log
    end = written.last_offset + written.last_size
    path, pos = file_and_pos(store_dir, file_size, end)
    with open(path, "r+b") as f:
        f.seek(pos)
        f.write(encode_blank(file_size - pos))
    Path(crash_config(str(store_dir)).abort_path).touch()

    store = open_store(store_dir)
    try:
        check_store(store, written.acks)
        result = store.put_message(StoreMessage(TOPIC, QUEUE, b"next", {PROPERTY_KEYS: "next"}))
        assert result.status is PutMessageStatus.PUT_OK and result.append is not None
        assert result.append.wrote_offset == end - pos + file_size  # the next file
        assert result.append.queue_offset == written.acks[-1].queue_offset + 1
        check_store(store, written.acks)
    finally:
        store.shutdown()


# -- a kill between the index load and the re-dispatch of a start ------------------------------------------------------


def put_keyed(store: MessageStore, key: str, size: int = 1500) -> None:
    msg = StoreMessage(TOPIC, QUEUE, bytes(size), {PROPERTY_KEYS: key})
    assert store.put_message(msg).status is PutMessageStatus.PUT_OK


def jump_store_clock(store: MessageStore, store_timestamp: int) -> None:
    """Stamp the next records with ``store_timestamp`` (in the future), as if the broker had been idle until then:
    the CommitLog never stamps a record earlier than the last one."""
    store.commit_log.last_store_timestamp = store_timestamp


def start_killed_after_index_load(store_dir: Path, **overrides) -> None:
    """What a start that is killed early leaves behind: after an unclean exit the index load destroys the index
    files that end after the checkpoint, and the re-dispatch that would rebuild them never runs."""
    config = dataclasses.replace(crash_config(str(store_dir)), **overrides)
    checkpoint = StoreCheckpoint(config.checkpoint_path)
    index = IndexService(config.index_dir, config.max_hash_slot_num, config.max_index_num)
    index.load(last_exit_ok=False, checkpoint_index_timestamp=checkpoint.value.index_msg_timestamp)
    index.close()
    checkpoint.close()


def test_index_survives_a_kill_during_crash_recovery(tmp_path):
    """An index file that is still being written spans any time; after a clean shutdown the checkpoint must still
    not claim that it is on disk (RocketMQ records only full index files), or a crash, then a kill of the start
    that destroyed the file, leaves keys that no re-dispatch restores."""
    store_dir, small_index = tmp_path / "store", {"max_index_num": 200}
    now = int(time.time() * 1000)
    store = open_store(store_dir, **small_index)
    for i in range(250):  # fills the first index file; the second one stays open to the end
        put_keyed(store, f"fill-{i}", size=100)
    put_keyed(store, "early")
    for gap in (1, 2):  # two idle gaps, each followed by more than a CommitLog file of messages
        jump_store_clock(store, now + gap * 10_000)
        for i in range(60):
            put_keyed(store, f"gap{gap}-{i}")
    store.shutdown()
    assert len(os.listdir(crash_config(str(store_dir)).index_dir)) == 2

    store = open_store(store_dir, **small_index)
    jump_store_clock(store, now + 30_000)
    put_keyed(store, "late")
    abandon(store)
    start_killed_after_index_load(store_dir, **small_index)

    store = open_store(store_dir, **small_index)
    try:
        for key in ("fill-0", "fill-249", "early", "gap1-0", "gap2-59", "late"):
            assert store.query_message(TOPIC, key, 64).buffers, f"key {key!r} lost"
    finally:
        store.shutdown()


def leave_empty_next_index_file(store_dir: Path, **overrides) -> None:
    """What the killed start leaves when it got as far as creating the file that follows the full one: an index
    file without entries, which inherits the full file's end."""
    config = dataclasses.replace(crash_config(str(store_dir)), **overrides)
    index = IndexService(config.index_dir, config.max_hash_slot_num, config.max_index_num)
    index.load(last_exit_ok=True, checkpoint_index_timestamp=0)
    assert index.files[-1].is_write_full
    index.build_index(TOPIC, [], None, 0, 0)  # creates the next file even for a message with nothing to index
    assert not index.files[-1].has_entries
    index.close()


@pytest.mark.parametrize("next_file_created", [False, True])
def test_keys_split_across_an_index_roll_survive_a_killed_start(tmp_path, next_file_created):
    """A message whose keys did not all fit the index file that then became full has the rest in the next file.
    When a start destroys that next file and is killed, the message must still be indexed again in full."""
    store_dir, small_index = tmp_path / "store", {"max_index_num": 200}  # 199 entries a file
    store = open_store(store_dir, **small_index)
    for i in range(110):  # two keys each: message 99 has its UNIQ_KEY in the first file and its KEYS in the next
        key, uniq = message_keys(7, i)
        msg = StoreMessage(TOPIC, QUEUE, b"x", {PROPERTY_KEYS: key, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq})
        assert store.put_message(msg).status is PutMessageStatus.PUT_OK
    wait_dispatched(store)
    store.flush()  # the checkpoint names the full first file
    jump_store_clock(store, int(time.time() * 1000) + 1000)
    put_keyed(store, "late")
    abandon(store)
    start_killed_after_index_load(store_dir, **small_index)
    if next_file_created:
        leave_empty_next_index_file(store_dir, **small_index)

    store = open_store(store_dir, **small_index)
    try:
        for key in (*message_keys(7, 98), *message_keys(7, 99), *message_keys(7, 100), "late"):
            assert store.query_message(TOPIC, key, 64).buffers, f"key {key!r} lost"
    finally:
        store.shutdown()
