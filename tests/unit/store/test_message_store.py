"""The store as a whole: appends, file roll, reads, queries, restart, rebuild and retention."""

from __future__ import annotations

import os
import shutil
import time

from broker.common.message import SysFlag, decode_offset_msg_id, pack_host, tags_code
from broker.common.record import BLANK_MAGIC, decode_record, iter_records
from broker.store.commit_log import StoreMessage
from broker.store.config import FlushDiskType
from broker.store.results import GetMessageStatus, PutMessageStatus


def msg(i: int, topic: str = "TopicA", queue_id: int = 0, size: int = 100, tag: str = "TagA") -> StoreMessage:
    return StoreMessage(topic, queue_id, bytes([i % 256]) * size,
                        {"KEYS": f"key-{i}", "TAGS": tag, "UNIQ_KEY": f"UNIQ{i:08d}"},
                        born_timestamp=1_700_000_000_000 + i)


def wait_dispatched(store) -> None:
    deadline = time.monotonic() + 5
    while store.dispatch_behind_bytes and time.monotonic() < deadline:
        time.sleep(0.005)
    assert store.dispatch_behind_bytes == 0


def test_file_roll_leaves_blank_filler_and_offsets_continue(open_store, store_config):
    store = open_store()
    results = [store.put_message(msg(i, size=300)) for i in range(40)]  # 40 x ~430 B over 4 KiB files
    assert all(r.status is PutMessageStatus.PUT_OK for r in results)
    assert [r.append.queue_offset for r in results] == list(range(40))
    files = store.commit_log.queue.files
    assert len(files) >= 4
    for mf in files[:-1]:
        (last, tail) = _last_record_and_tail(mf)
        blank_size = int.from_bytes(mf.buffer[tail:tail + 4], "big")
        assert int.from_bytes(mf.buffer[tail + 4:tail + 8], "big", signed=True) == BLANK_MAGIC
        assert tail + blank_size == store_config.mapped_file_size_commit_log
    names = sorted(os.listdir(store_config.commit_log_dir))
    assert names[1] == f"{store_config.mapped_file_size_commit_log:020d}"
    wait_dispatched(store)
    got = store.get_message("g", "TopicA", 0, 0, 32)
    assert [r.queue_offset for r in iter_records(got.body())] == list(range(got.message_count))


def _last_record_and_tail(mf):
    pos, last = 0, 0
    while True:
        size = int.from_bytes(mf.buffer[pos:pos + 4], "big")
        magic = int.from_bytes(mf.buffer[pos + 4:pos + 8], "big", signed=True)
        if magic == BLANK_MAGIC:
            return last, pos
        last, pos = pos, pos + size


def test_batch_is_contiguous_with_own_queue_offsets(open_store):
    store = open_store()
    store.put_message(msg(0))
    batch = store.put_messages([msg(i, queue_id=1) for i in range(5)])
    assert batch.ok and batch.append.queue_offsets == [0, 1, 2, 3, 4]
    offsets = batch.append.record_offsets
    assert all(b > a for a, b in zip(offsets, offsets[1:], strict=False))
    assert offsets[-1] - offsets[0] + store.select_one_message(offsets[-1]).__len__() == batch.append.wrote_bytes
    assert [decode_offset_msg_id(m)[1] for m in batch.append.msg_ids] == offsets


def test_illegal_messages_get_a_status_and_nothing_is_stored(open_store):
    store = open_store(max_message_size=1024)
    too_big = store.put_message(StoreMessage("T", 0, b"x" * 2000))
    assert too_big.status is PutMessageStatus.MESSAGE_ILLEGAL and "maxMessageSize" in too_big.reason
    big_props = store.put_message(StoreMessage("T", 0, b"x", {"p": "v" * 40000}))
    assert big_props.status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
    assert store.commit_log.max_offset == 0
    ok = store.put_message(StoreMessage("T", 0, b"x"))
    assert ok.ok and ok.append.queue_offset == 0


def test_get_message_statuses(open_store):
    store = open_store()
    for i in range(5):
        store.put_message(msg(i))
    wait_dispatched(store)
    assert store.get_message("g", "Nope", 0, 0, 32).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    found = store.get_message("g", "TopicA", 0, 1, 2)
    assert (found.status, found.message_count, found.next_begin_offset) == (GetMessageStatus.FOUND, 2, 3)
    assert (found.min_offset, found.max_offset) == (0, 5)
    assert store.get_message("g", "TopicA", 0, 5, 32).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    badly = store.get_message("g", "TopicA", 0, 9, 32)
    assert (badly.status, badly.next_begin_offset) == (GetMessageStatus.OFFSET_OVERFLOW_BADLY, 5)
    limited = store.get_message("g", "TopicA", 0, 0, 32, max_total_size=250)
    assert limited.message_count == 1 and limited.next_begin_offset == 1


class TagFilter:
    match_all = False

    def __init__(self, tag: str) -> None:
        self.code = tags_code(tag)

    def is_matched_by_consume_queue(self, code: int) -> bool:
        return code == self.code

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        return True


def test_tag_filter_skips_units_and_advances(open_store):
    store = open_store()
    for i in range(10):
        store.put_message(msg(i, tag="TagA" if i % 3 == 0 else "TagB"))
    wait_dispatched(store)
    got = store.get_message("g", "TopicA", 0, 0, 32, message_filter=TagFilter("TagA"))
    assert [r.queue_offset for r in iter_records(got.body())] == [0, 3, 6, 9]
    assert got.next_begin_offset == 10
    none = store.get_message("g", "TopicA", 0, 7, 32, message_filter=TagFilter("TagC"))
    assert (none.status, none.next_begin_offset) == (GetMessageStatus.NO_MATCHED_MESSAGE, 10)


def test_query_by_key_and_lookup_by_offset(open_store):
    store = open_store()
    results = [store.put_message(msg(i, topic="TopicK")) for i in range(30)]
    wait_dispatched(store)
    found = store.query_message("TopicK", "key-17", 32)
    records = list(iter_records(found.body()))
    assert [r.properties["KEYS"] for r in records] == ["key-17"]
    assert store.query_message("TopicK", "UNIQ00000003", 32).buffers
    assert not store.query_message("Other", "key-17", 32).buffers
    host, offset = decode_offset_msg_id(results[12].append.msg_ids[0])
    record = store.lookup_message(offset)
    assert record.properties["KEYS"] == "key-12" and record.store_host == host


def test_offset_by_time_and_store_times(open_store):
    store = open_store()
    stamps = []
    for i in range(6):
        stamps.append(store.put_message(msg(i)).append.store_timestamp)
        time.sleep(0.003)
    wait_dispatched(store)
    assert store.offset_in_queue_by_time("TopicA", 0, stamps[3]) == 3
    assert store.offset_in_queue_by_time("TopicA", 0, stamps[-1] + 10_000) == 6
    assert store.offset_in_queue_by_time("TopicA", 0, 0) == 0
    assert store.earliest_message_time("TopicA", 0) == stamps[0]
    assert store.message_store_timestamp("TopicA", 0, 4) == stamps[4]


def test_clean_restart_keeps_everything_and_continues_offsets(open_store, store_config):
    store = open_store()
    for i in range(25):
        store.put_message(msg(i, queue_id=i % 2))
    store.shutdown()
    assert not os.path.exists(store_config.abort_path)
    again = open_store()
    assert again.max_offset_in_queue("TopicA", 0) == 13 and again.max_offset_in_queue("TopicA", 1) == 12
    assert again.put_message(msg(99, queue_id=1)).append.queue_offset == 12
    wait_dispatched(again)
    assert again.get_message("g", "TopicA", 1, 12, 1).status is GetMessageStatus.FOUND


def test_consume_queue_and_index_are_rebuilt_after_deletion(open_store, store_config):
    store = open_store()
    for i in range(40):
        store.put_message(msg(i, queue_id=i % 3, size=200))
    wait_dispatched(store)
    before = {q: store.get_message("g", "TopicA", q, 0, 32).body() for q in range(3)}
    store.shutdown()
    shutil.rmtree(store_config.consume_queue_dir)
    shutil.rmtree(store_config.index_dir)
    again = open_store()
    for q in range(3):
        assert again.get_message("g", "TopicA", q, 0, 32).body() == before[q]
    assert len(list(iter_records(again.query_message("TopicA", "key-31", 32).body()))) == 1


def test_prepared_messages_take_no_queue_offset_and_stay_invisible(open_store):
    store = open_store()
    half = store.put_message(StoreMessage("TopicT", 0, b"half", sys_flag=SysFlag.TRANSACTION_PREPARED))
    normal = store.put_message(StoreMessage("TopicT", 0, b"normal"))
    assert half.append.queue_offset == 0 and normal.append.queue_offset == 0
    wait_dispatched(store)
    got = store.get_message("g", "TopicT", 0, 0, 32)
    assert [r.body for r in iter_records(got.body())] == [b"normal"]
    assert store.lookup_message(half.append.wrote_offset).body == b"half"


def test_sync_flush_acknowledges_after_flush(open_store):
    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH)
    result = store.put_messages([msg(i) for i in range(3)])
    assert result.status is PutMessageStatus.PUT_OK
    assert store.commit_log.queue.flushed_offset >= result.append.wrote_offset + result.append.wrote_bytes


def test_ipv6_store_host(open_store, store_config):
    from broker.store.message_store import MessageStore

    store = MessageStore(store_config, pack_host("::1", 10911))
    store.start()
    try:
        result = store.put_message(StoreMessage("T6", 0, b"v6", born_host=pack_host("::2", 5)))
        record = store.lookup_message(result.append.wrote_offset)
        assert record.sys_flag & (SysFlag.BORNHOST_V6 | SysFlag.STOREHOSTADDRESS_V6)
        assert len(result.append.msg_ids[0]) == 56
    finally:
        store.shutdown()


def test_retention_deletes_expired_files_and_reads_report_new_minimum(tmp_path, store_config):
    from broker.store.message_store import MessageStore

    usage = {"percent": 10.0}
    store = MessageStore(store_config, disk_usage=lambda _path: usage["percent"])
    store.start()
    try:
        for i in range(60):
            store.put_message(msg(i, size=300))
        wait_dispatched(store)
        files = store.commit_log.queue.files
        assert len(files) > 4
        old = time.time() - 100 * 3600
        for mf in files[:3]:
            os.utime(mf.path, (old, old))
        usage["percent"] = 80.0  # above diskMaxUsedSpaceRatio: expired files go at any hour
        assert store.cleaner.run_once() == 3
        assert store.commit_log.min_offset == 3 * store_config.mapped_file_size_commit_log
        min_q = store.min_offset_in_queue("TopicA", 0)
        assert min_q > 0
        got = store.get_message("g", "TopicA", 0, 0, 32)
        assert (got.status, got.next_begin_offset) == (GetMessageStatus.OFFSET_TOO_SMALL, min_q)
        first = store.get_message("g", "TopicA", 0, min_q, 1)
        assert decode_record(first.body()).commit_log_offset >= store.commit_log.min_offset
        usage["percent"] = 95.0  # above the warning level: writes are refused
        store.cleaner.run_once()
        refused = store.put_message(msg(1000))
        assert refused.status is PutMessageStatus.SERVICE_NOT_AVAILABLE
    finally:
        store.shutdown()


def test_index_alone_is_rebuilt_when_its_files_are_gone(open_store, store_config):
    store = open_store()
    for i in range(20):
        store.put_message(msg(i))
    store.shutdown()
    shutil.rmtree(store_config.index_dir)
    again = open_store()
    assert [r.properties["KEYS"] for r in iter_records(again.query_message("TopicA", "key-4", 32).body())] == ["key-4"]
    assert again.max_offset_in_queue("TopicA", 0) == 20


def test_a_bad_message_fails_its_whole_batch_and_takes_no_queue_offsets(open_store):
    store = open_store(max_message_size=1024)
    store.put_message(msg(0))
    end = store.commit_log.max_offset
    bad = store.put_messages([msg(1), msg(2), StoreMessage("TopicA", 0, b"x" * 2000)])
    assert bad.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.commit_log.max_offset == end
    assert store.put_messages([msg(3), msg(4)]).append.queue_offsets == [1, 2]


def test_batch_that_does_not_fit_rolls_the_file_once(open_store, store_config):
    store = open_store()
    first = store.put_messages([msg(i, size=600) for i in range(4)])  # about 2,800 of 4,096 bytes
    second = store.put_messages([msg(i, size=600) for i in range(4, 8)])  # does not fit: the next file
    assert first.append.queue_offsets == [0, 1, 2, 3] and second.append.queue_offsets == [4, 5, 6, 7]
    assert second.append.wrote_offset == store_config.mapped_file_size_commit_log
    wait_dispatched(store)
    got = store.get_message("g", "TopicA", 0, 0, 32)
    assert [decode_record(b).commit_log_offset for b in got.records()] == (first.append.record_offsets
                                                                         + second.append.record_offsets)


def test_sync_flush_from_many_threads_groups_flushes(open_store):
    import threading

    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commit_log=1 << 20)
    results = []

    def put(t: int) -> None:
        for i in range(20):
            results.append(store.put_messages([msg(t * 100 + i, queue_id=t)]))

    threads = [threading.Thread(target=put, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 80 and all(r.status is PutMessageStatus.PUT_OK for r in results)
    assert store.commit_log.queue.flushed_offset == store.commit_log.max_offset


def test_sync_flush_writes_through_the_file_across_rolls_and_big_puts(open_store):
    """SYNC_FLUSH packs into a buffer and pwrites it: records read back through the maps whole, across file rolls,
    and a put larger than the buffer grows it."""
    store = open_store(flush_disk_type=FlushDiskType.SYNC_FLUSH, mapped_file_size_commit_log=4 << 20)
    small = [store.put_messages([msg(i, size=900) for i in range(8)]) for _ in range(5)]
    big = store.put_messages([msg(i, size=600_000) for i in range(3)])  # 1.8 MB: more than the 1 MiB buffer
    rolled = [store.put_messages([msg(i, size=600_000) for i in range(3)]) for _ in range(2)]  # fills a file
    assert all(r.status is PutMessageStatus.PUT_OK for r in [*small, big, *rolled])
    first, last = store.commit_log.queue.files
    assert first._fd == -1 and last._fd >= 0  # only the file being written keeps a descriptor
    assert store.commit_log.queue.flushed_offset == store.commit_log.max_offset
    wait_dispatched(store)
    assert store.max_offset_in_queue("TopicA", 0) == 40 + 9
    for offset in (0, 39, 40, 42, 45, 48):
        record = decode_record(store.get_message("g", "TopicA", 0, offset, 1).buffers[0])
        size = 900 if offset < 40 else 600_000
        assert record.queue_offset == offset and record.body == msg((offset - 40) % 3 if offset >= 40 else offset % 8,
                                                                    size=size).body


def test_prefault_keeps_pages_ahead_of_the_writer_and_bytes_intact(open_store):
    from broker.store import mapped_file

    store = open_store(mapped_file_size_commit_log=1 << 20)
    prefaulter = store.commit_log.prefaulter
    prefaulter.window, prefaulter.chunk = 64 << 10, 16 << 10
    results = [store.put_messages([msg(i, size=900) for i in range(8)]) for _ in range(20)]
    mf = store.commit_log.queue.files[-1]
    if mapped_file._madvise is not None and prefaulter.supported:
        prefaulter.run_once()
        assert mf.prefaulted_position >= min(mf.wrote_position + prefaulter.window, mf.file_size)
    assert bytes(mf.buffer[mf.wrote_position:mf.prefaulted_position]) == bytes(
        max(mf.prefaulted_position - mf.wrote_position, 0))
    wait_dispatched(store)
    assert store.max_offset_in_queue("TopicA", 0) == 160
    assert results[-1].append.queue_offsets[-1] == 159
    last = decode_record(store.get_message("g", "TopicA", 0, 159, 1).buffers[0])
    assert last.body == msg(7, size=900).body and last.properties["KEYS"] == "key-7"


def test_stored_records_are_encode_record_bytes(open_store, store_config):
    """The batch packer writes exactly what layout.encode_record makes of the same fields: IPv6 born host, a V2
    topic, a prepared transaction (queue offset 0), the producer's own properties bytes, flags and reconsume."""
    from broker.common.message import encode_properties
    from broker.common.record import encode_record

    store = open_store(mapped_file_size_commit_log=1 << 16)
    msgs = [
        StoreMessage("TopicA", 1, b"plain", {"KEYS": "k", "TAGS": "t"}, flag=3, born_timestamp=11),
        StoreMessage("TopicA", 1, b"v6", {}, born_timestamp=12, born_host=pack_host("::2", 7), reconsume_times=2),
        StoreMessage("T" * 200, 0, b"long topic", {"a": "b"}, sys_flag=int(SysFlag.TRANSACTION_PREPARED),
                     prepared_transaction_offset=99),
        StoreMessage("TopicA", 1, b"raw props", {"KEYS": "x"}, encoded_properties=b"KEYS\x01x"),
    ]
    result = store.put_messages(msgs)
    assert result.append.queue_offsets == [0, 1, 0, 2]
    for m, offset, queue_offset in zip(msgs, result.append.record_offsets, result.append.queue_offsets,
                                       strict=True):
        props = m.encoded_properties if m.encoded_properties is not None else encode_properties(
            m.properties).encode()
        born_v6 = SysFlag.BORNHOST_V6 if len(m.born_host) == 20 else 0
        want = encode_record(topic=m.topic.encode(), queue_id=m.queue_id, body=m.body, properties=props,
                             flag=m.flag, sys_flag=m.sys_flag | born_v6, born_timestamp=m.born_timestamp,
                             born_host=m.born_host, store_host=store.commit_log.store_host,
                             store_timestamp=result.append.store_timestamp, queue_offset=queue_offset,
                             commit_log_offset=offset, reconsume_times=m.reconsume_times,
                             prepared_transaction_offset=m.prepared_transaction_offset)
        assert store.select_one_message(offset) == want


class MatchEverything:
    """Passes every message, but not as ``match_all``: the pull goes unit by unit, the reference for the bulk path."""

    match_all = False

    def is_matched_by_consume_queue(self, code: int) -> bool:
        return True

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        return True


def test_bulk_pull_equals_the_unit_by_unit_pull(open_store):
    """Batches to two queues, interleaved, over 4 KiB files: runs of back-to-back records are cut at other queues'
    records and at file ends, and the count and byte limits cut them like the unit-by-unit path does."""
    store = open_store()
    for i in range(30):
        assert store.put_messages([msg(i * 8 + j, queue_id=i % 2, size=90 + 40 * j) for j in range(1 + i % 5)]).ok
    wait_dispatched(store)
    for queue_id in (0, 1):
        max_offset = store.max_offset_in_queue("TopicA", queue_id)
        for offset in range(max_offset):
            for max_nums, max_size in ((1, 10_000), (7, 10_000), (32, 700), (32, 100), (64, 10**6)):
                bulk = store.get_message("g", "TopicA", queue_id, offset, max_nums, max_total_size=max_size)
                one_by_one = store.get_message("g", "TopicA", queue_id, offset, max_nums, max_total_size=max_size,
                                               message_filter=MatchEverything())
                assert (bulk.status, bulk.next_begin_offset, bulk.queue_offsets) == (
                    one_by_one.status, one_by_one.next_begin_offset, one_by_one.queue_offsets)
                assert list(bulk.records()) == list(one_by_one.records()) and bulk.body() == one_by_one.body()
        whole = store.get_message("g", "TopicA", queue_id, 0, 64)
        assert len(whole.buffers) < whole.message_count  # batches came back as runs, not record by record


def test_repository_conf_pull_limits_are_honoured(open_store):
    """conf/broker.conf raises the per-pull caps (Apache's defaults: 32 messages, 256 KiB) so the Spark source's
    pullBatchSize is not cut to 32: a pull answers up to maxTransferCountOnMessageInMemory messages and
    maxTransferBytesOnMessageInMemory bytes."""
    from pathlib import Path

    from broker.server.config import load_broker_config

    broker, conf = load_broker_config(Path(__file__).resolve().parents[3] / "conf" / "broker.conf")
    assert broker.enable_property_filter
    count, size = conf.max_transfer_count_on_message_in_memory, conf.max_transfer_bytes_on_message_in_memory
    assert (count, size) == (1024, 4 * 1024 * 1024)
    store = open_store(mapped_file_size_commit_log=8 * 1024 * 1024, mapped_file_size_consume_queue=4000 * 20,
                       max_transfer_count_on_message_in_memory=count, max_transfer_bytes_on_message_in_memory=size)
    for i in range(count + 100):
        store.put_message(msg(i, "Small"))
    for i in range(600):
        store.put_message(msg(i, "Large", size=8192))
    wait_dispatched(store)
    assert store.get_message("g", "Small", 0, 0, 4096).message_count == count
    large = store.get_message("g", "Large", 0, 0, 4096)
    assert large.buffer_total_size <= size < large.buffer_total_size + 8400


def test_read_views_of_runs_across_files_stop_at_the_first_not_written(open_store):
    """A pull's runs over three 4 KiB files come back as views of the same bytes ``read_view`` gives one by one, up to
    the first run that is not (all) written."""
    store = open_store()
    appends = [store.put_message(msg(i, size=300)).append for i in range(20)]
    runs = [(i, a.wrote_offset, a.wrote_bytes) for i, a in enumerate(appends)]
    log = store.commit_log
    views = log.read_views(runs)
    assert [bytes(v) for v in views] == [log.read(offset, size) for _, offset, size in runs]
    assert len({log.queue.find(offset) for _, offset, _ in runs}) >= 3
    end = log.max_offset
    assert len(log.read_views([*runs[:3], (3, end - 10, 20), *runs[3:]])) == 3
    assert log.read_views([(0, end, 10)]) == []
