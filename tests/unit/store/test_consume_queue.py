import os
import struct
import threading

import pytest

from broker.common.errors import ConfigError, IllegalName
from broker.store.consume_queue import BLANK_UNIT, NO_PHYSIC_OFFSET, ConsumeQueue, ConsumeQueueStore, is_blank
from broker.store.layout import CqUnit, cq_pos, encode_cq_unit, offset_file_name

UNITS_PER_FILE = 10
FILE_SIZE = cq_pos(UNITS_PER_FILE)  # 200 bytes
MSG = 100  # every test record is 100 bytes, so unit i points at CommitLog offset i * MSG


@pytest.fixture
def open_cq(tmp_path):
    opened = []

    def _open(topic="TopicTest", queue_id=0):
        cq = ConsumeQueue(topic, queue_id, str(tmp_path), FILE_SIZE)
        cq.load()
        cq.recover()
        opened.append(cq)
        return cq

    yield _open
    for cq in opened:
        cq.close()


def fill(cq, count, start=0):
    for i in range(start, start + count):
        assert cq.put(i, i * MSG, MSG, i)


def unit(i):
    return CqUnit(i * MSG, MSG, i)


def queue_dir(tmp_path, topic="TopicTest", queue_id=0):
    return tmp_path / topic / str(queue_id)


def file_bytes(tmp_path, start_pos, topic="TopicTest"):
    return (queue_dir(tmp_path, topic) / offset_file_name(start_pos)).read_bytes()


def test_put_and_get_across_files(open_cq, tmp_path):
    cq = open_cq()
    assert (cq.min_offset, cq.max_offset, cq.max_physic_offset) == (0, 0, NO_PHYSIC_OFFSET)
    fill(cq, 25)
    assert sorted(os.listdir(queue_dir(tmp_path))) == [offset_file_name(cq_pos(n)) for n in (0, 10, 20)]
    assert [cq.get_unit(i) for i in range(25)] == [unit(i) for i in range(25)]
    assert (cq.min_offset, cq.max_offset, cq.max_physic_offset) == (0, 25, 25 * MSG)
    assert cq.get_unit(25) is None
    assert cq.get_unit(-1) is None


def test_iter_units_spans_files(open_cq):
    cq = open_cq()
    fill(cq, 25)
    assert cq.iter_units(5, 12) == [unit(i) for i in range(5, 17)]
    assert cq.iter_units(0, 25) == [unit(i) for i in range(25)]
    assert cq.iter_units(20, 100) == [unit(i) for i in range(20, 25)]
    assert cq.iter_units(25, 5) == []
    assert cq.iter_units(3, 0) == []


def test_file_is_concatenation_of_big_endian_units(open_cq, tmp_path):
    cq = open_cq()
    fill(cq, 12)
    assert cq.put(12, 0x0102030405060708, 0x11223344, -2)
    cq.flush()
    first = file_bytes(tmp_path, 0)
    assert len(first) == FILE_SIZE
    assert first == b"".join(encode_cq_unit(i * MSG, MSG, i) for i in range(10))
    assert first == b"".join(struct.pack(">qiq", i * MSG, MSG, i) for i in range(10))
    second = file_bytes(tmp_path, FILE_SIZE)
    assert second[:cq_pos(2)] == b"".join(struct.pack(">qiq", i * MSG, MSG, i) for i in (10, 11))
    assert second[cq_pos(2):cq_pos(3)] == bytes.fromhex("0102030405060708" "11223344" "fffffffffffffffe")
    assert second[cq_pos(3):] == bytes(FILE_SIZE - cq_pos(3))


def test_recover_after_reopen(open_cq):
    cq = open_cq()
    fill(cq, 45)  # five files: recovery scans only the last three, the first two stay full
    cq.flush()
    cq.close()
    cq = open_cq()
    assert (cq.min_offset, cq.max_offset, cq.max_physic_offset) == (0, 45, 45 * MSG)
    assert cq.iter_units(0, 100) == [unit(i) for i in range(45)]
    assert cq.put(45, 45 * MSG, MSG, 45)
    assert cq.get_unit(45) == unit(45)


def test_recover_ends_at_file_boundary(open_cq, tmp_path):
    cq = open_cq()
    fill(cq, 20)
    cq.close()
    cq = open_cq()
    assert cq.max_offset == 20
    fill(cq, 1, start=20)
    assert sorted(os.listdir(queue_dir(tmp_path)))[-1] == offset_file_name(cq_pos(20))


@pytest.mark.parametrize("torn", [
    struct.pack(">q", 1300),  # only the commit log offset made it: size is still 0
    b"\xff" * 11,  # garbage: a negative commit log offset
])
def test_recover_after_torn_last_unit(open_cq, tmp_path, torn):
    cq = open_cq()
    fill(cq, 13)
    cq.close()
    path = queue_dir(tmp_path) / offset_file_name(FILE_SIZE)
    with open(path, "r+b") as f:
        f.seek(cq_pos(3))
        f.write(torn)
    cq = open_cq()
    assert (cq.max_offset, cq.max_physic_offset) == (13, 13 * MSG)
    assert cq.iter_units(0, 100) == [unit(i) for i in range(13)]
    assert path.read_bytes()[cq_pos(3):] == bytes(FILE_SIZE - cq_pos(3))  # zeroed on disk
    assert cq.put(13, 13 * MSG, MSG, 13)


def test_recover_stops_at_first_invalid_unit_and_drops_later_files(open_cq, tmp_path):
    cq = open_cq()
    fill(cq, 25)
    cq.close()
    with open(queue_dir(tmp_path) / offset_file_name(FILE_SIZE), "r+b") as f:
        f.seek(cq_pos(4))
        f.write(struct.pack(">qiq", 1400, 0, 0))  # size 0 ends the data: unit 14 and all after are gone
    cq = open_cq()
    assert cq.max_offset == 14
    assert sorted(os.listdir(queue_dir(tmp_path))) == [offset_file_name(cq_pos(n)) for n in (0, 10)]


def test_duplicate_put_is_ignored(open_cq):
    cq = open_cq()
    fill(cq, 3)
    assert cq.put(1, 1 * MSG, MSG, 1)  # re-dispatch of a unit the queue already has
    assert cq.put(2, 2 * MSG, MSG, 2)
    assert cq.max_offset == 3
    assert cq.put(2, 3 * MSG, MSG, 2) is False  # a new record for a taken queue offset
    assert cq.max_offset == 3
    assert cq.iter_units(0, 10) == [unit(i) for i in range(3)]


def test_queue_starting_mid_file(open_cq, tmp_path):
    cq = open_cq()
    assert cq.put(13, 13 * MSG, MSG, 13)
    assert os.listdir(queue_dir(tmp_path)) == [offset_file_name(FILE_SIZE)]
    assert (cq.min_offset, cq.max_offset) == (13, 14)
    assert cq.get_unit(12) is None
    assert cq.iter_units(12, 5) == []
    assert cq.iter_units(13, 5) == [unit(13)]
    data = file_bytes(tmp_path, FILE_SIZE)
    assert data[:cq_pos(3)] == struct.pack(">qiq", 0, 0x7FFFFFFF, 0) * 3  # Java fillPreBlank
    cq.close()
    cq = open_cq()
    assert (cq.min_offset, cq.max_offset, cq.max_physic_offset) == (13, 14, 14 * MSG)


def test_hole_is_filled_with_blank_units_that_survive_recovery(open_cq):
    cq = open_cq()
    fill(cq, 2)
    assert cq.put(23, 23 * MSG, MSG, 23)
    assert cq.max_offset == 24
    units = cq.iter_units(0, 100)
    assert units[:2] == [unit(0), unit(1)] and units[23] == unit(23)
    assert all(is_blank(u) for u in units[2:23]) and units[2] == BLANK_UNIT
    cq.close()
    cq = open_cq()
    assert (cq.min_offset, cq.max_offset, cq.max_physic_offset) == (0, 24, 24 * MSG)


def test_truncate_dirty(open_cq, tmp_path):
    cq = open_cq()
    fill(cq, 25)
    cq.truncate_dirty(1250)  # records from CommitLog offset 1250 on are gone: units 13.. point at or past it
    assert (cq.max_offset, cq.max_physic_offset) == (13, 13 * MSG)
    assert sorted(os.listdir(queue_dir(tmp_path))) == [offset_file_name(cq_pos(n)) for n in (0, 10)]
    assert file_bytes(tmp_path, FILE_SIZE)[cq_pos(3):] == bytes(FILE_SIZE - cq_pos(3))
    cq.close()
    cq = open_cq()
    assert cq.max_offset == 13
    assert cq.put(13, 13 * MSG, MSG, 13)


def test_truncate_dirty_at_file_boundary_then_again(open_cq):
    cq = open_cq()
    fill(cq, 25)
    cq.truncate_dirty(10 * MSG)
    assert cq.max_offset == 10
    cq.truncate_dirty(5 * MSG)  # the second file is now empty: the cut must reach into the first
    assert (cq.max_offset, cq.max_physic_offset) == (5, 5 * MSG)
    cq.truncate_dirty(0)
    assert (cq.min_offset, cq.max_offset, cq.max_physic_offset) == (0, 0, NO_PHYSIC_OFFSET)
    fill(cq, 3)
    assert cq.iter_units(0, 10) == [unit(i) for i in range(3)]


def test_truncate_dirty_beyond_end_changes_nothing(open_cq):
    cq = open_cq()
    fill(cq, 7)
    cq.truncate_dirty(10_000)
    assert (cq.max_offset, cq.max_physic_offset) == (7, 7 * MSG)


def test_delete_expired_and_min_offset(open_cq, tmp_path):
    cq = open_cq()
    fill(cq, 25)
    assert cq.delete_expired(1050) == 1  # file 0 ends at unit 9 (offset 900); file 1 ends at 1900
    assert sorted(os.listdir(queue_dir(tmp_path))) == [offset_file_name(cq_pos(n)) for n in (10, 20)]
    assert cq.min_offset == 11  # the first unit at or past 1050
    assert cq.get_unit(10) is None
    assert cq.iter_units(10, 5) == []
    assert cq.delete_expired(1500) == 0
    assert cq.min_offset == 15  # exact hit
    assert cq.delete_expired(10_000) == 1  # the last file is never deleted
    assert sorted(os.listdir(queue_dir(tmp_path))) == [offset_file_name(cq_pos(20))]
    assert (cq.min_offset, cq.max_offset) == (25, 25)  # nothing left points into the CommitLog
    assert cq.put(25, 25 * MSG, MSG, 25)
    assert cq.iter_units(cq.min_offset, 10) == [unit(25)]


def test_min_offset_after_reopen_of_trimmed_queue(open_cq):
    cq = open_cq()
    fill(cq, 25)
    cq.delete_expired(1250)
    cq.close()
    cq = open_cq()
    assert (cq.min_offset, cq.max_offset) == (10, 25)
    cq.correct_min_offset(1250)
    assert cq.min_offset == 13


STORE_TIMES = [10, 10, 20, 20, 20, 30, 40, 40, 50, 60, 60, 60, 70]


def store_time_at(commit_log_offset, size):
    assert size == MSG
    return STORE_TIMES[commit_log_offset // MSG]


@pytest.mark.parametrize(("timestamp", "expected"), [
    (10, 0), (20, 2), (30, 5), (40, 6), (60, 9), (70, 12),  # exact hits: the first of equal times
    (15, 2), (25, 5), (65, 12),  # between: the next record
    (0, 0), (-5, 0),  # before the first
    (71, 13), (1000, 13),  # after the last: max_offset
])
def test_offset_for_timestamp(open_cq, timestamp, expected):
    cq = open_cq()
    fill(cq, len(STORE_TIMES))
    assert cq.offset_for_timestamp(timestamp, store_time_at) == expected


def test_offset_for_timestamp_is_a_binary_search(open_cq):
    cq = open_cq()
    fill(cq, 100)
    calls = []

    def counting(commit_log_offset, size):
        calls.append(commit_log_offset)
        return commit_log_offset // MSG * 10

    assert cq.offset_for_timestamp(555, counting) == 56
    assert len(calls) <= 8


def test_offset_for_timestamp_with_gone_records_and_trimmed_queue(open_cq):
    cq = open_cq()
    fill(cq, len(STORE_TIMES))

    def partly_gone(commit_log_offset, size):
        return None if commit_log_offset < 3 * MSG else store_time_at(commit_log_offset, size)

    assert cq.offset_for_timestamp(0, partly_gone) == 3
    cq.delete_expired(6 * MSG)
    assert cq.offset_for_timestamp(0, store_time_at) == 6
    assert cq.offset_for_timestamp(45, store_time_at) == 8


def test_offset_for_timestamp_on_empty_queue(open_cq):
    cq = open_cq()
    assert cq.offset_for_timestamp(100, store_time_at) == 0


def test_destroy_removes_directory(open_cq, tmp_path):
    cq = open_cq()
    fill(cq, 15)
    cq.destroy()
    assert not queue_dir(tmp_path).exists()
    assert (cq.min_offset, cq.max_offset, cq.max_physic_offset) == (0, 0, NO_PHYSIC_OFFSET)


def test_file_size_must_hold_whole_units(tmp_path):
    with pytest.raises(ConfigError):
        ConsumeQueue("TopicTest", 0, str(tmp_path), FILE_SIZE + 7)


def test_reader_never_sees_a_partial_unit(open_cq):
    cq = open_cq()
    total = 3000
    stop = threading.Event()
    errors = []

    def reader():
        while not stop.is_set():
            start = cq.min_offset
            for i, u in enumerate(cq.iter_units(start, 64)):
                if u != unit(start + i):
                    errors.append((start + i, u))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        fill(cq, total)
    finally:
        stop.set()
        thread.join()
    assert errors == []
    assert cq.max_offset == total


# -- ConsumeQueueStore --------------------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path):
    s = ConsumeQueueStore(str(tmp_path / "consumequeue"), FILE_SIZE)
    yield s
    s.close()


@pytest.mark.parametrize("topic", ["", ".", "..", "a/b", "../x", "/abs", "a\0b"])
def test_illegal_topic_names_are_refused(store, tmp_path, topic):
    with pytest.raises(IllegalName):
        store.find_or_create(topic, 0)
    with pytest.raises(IllegalName):
        store.get(topic, 0)
    with pytest.raises(IllegalName):
        store.delete_topic(topic)
    with pytest.raises(IllegalName):
        ConsumeQueue(topic, 0, str(tmp_path), FILE_SIZE)
    assert not (tmp_path / "consumequeue").exists()


def test_store_find_or_create_and_get(store, tmp_path):
    assert store.get("%RETRY%group", 0) is None
    cq = store.find_or_create("%RETRY%group", 3)
    assert store.find_or_create("%RETRY%group", 3) is cq
    assert store.get("%RETRY%group", 3) is cq
    assert cq.directory == str(tmp_path / "consumequeue" / "%RETRY%group" / "3")
    assert store.topics() == ["%RETRY%group"]


def test_store_load_recover_and_operations(tmp_path):
    root = tmp_path / "consumequeue"
    first = ConsumeQueueStore(str(root), FILE_SIZE)
    fill(first.find_or_create("A", 0), 12)
    b1 = first.find_or_create("B", 1)
    for i in range(4):
        assert b1.put(i, (100 + i) * MSG, MSG, 0)
    first.flush_all()
    first.close()
    (root / "stray-file").write_text("x")
    (root / "A" / "notaqueue").mkdir()
    (root / "A" / "07").mkdir()
    (root / "A" / "5").write_text("x")

    store = ConsumeQueueStore(str(root), FILE_SIZE)
    try:
        store.load()
        store.recover()
        assert sorted(store.topics()) == ["A", "B"]
        assert sorted((cq.topic, cq.queue_id) for cq in store.queues()) == [("A", 0), ("B", 1)]
        assert store.get("A", 0).max_offset == 12
        assert store.max_physic_offset == 104 * MSG

        store.truncate_dirty(102 * MSG)
        assert (store.get("A", 0).max_offset, store.get("B", 1).max_offset) == (12, 2)
        assert store.max_physic_offset == 102 * MSG

        assert store.delete_expired(11 * MSG) == 1
        assert store.get("A", 0).min_offset == 11
        assert store.get("B", 1).min_offset == 0

        store.delete_topic("A")
        assert store.get("A", 0) is None
        assert not (root / "A").exists()
        assert store.topics() == ["B"]
    finally:
        store.close()


def test_store_max_physic_offset_without_units(store):
    assert store.max_physic_offset == NO_PHYSIC_OFFSET
    store.find_or_create("A", 0)
    assert store.max_physic_offset == NO_PHYSIC_OFFSET


@pytest.mark.parametrize("first", [0, 7, 23])
def test_put_units_leaves_the_bytes_of_put_one_by_one(tmp_path, first):
    """Batches across file ends, a queue starting mid-file, a hole (blank units) and a re-dispatch of old units."""
    units = [(q, q * MSG, MSG, q) for q in range(first, first + 25)]
    units = units[:12] + units[15:]  # queue offsets first+12..first+14 never arrive: a hole
    one = ConsumeQueue("TopicTest", 0, str(tmp_path / "one"), FILE_SIZE)
    many = ConsumeQueue("TopicTest", 0, str(tmp_path / "many"), FILE_SIZE)
    for u in units + units[3:9]:
        one.put(*u)
    for batch in (units[:5], units[5:14], units[14:], units[3:9]):
        many.put_units(batch)
    assert (many.min_offset, many.max_offset, many.max_physic_offset) == (one.min_offset, one.max_offset,
                                                                          one.max_physic_offset)
    assert many.iter_units(many.min_offset, 100) == one.iter_units(one.min_offset, 100)
    for name in sorted(os.listdir(tmp_path / "one" / "TopicTest" / "0")):
        assert (tmp_path / "many" / "TopicTest" / "0" / name).read_bytes() == \
            (tmp_path / "one" / "TopicTest" / "0" / name).read_bytes()
    one.close()
    many.close()
