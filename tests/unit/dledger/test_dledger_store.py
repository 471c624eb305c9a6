"""DLedger's log on disk: entries and index units byte for byte, rolls with a pad, recovery as DLedger recovers
(a torn tail cut, a disagreeing index rewritten), truncation, and RocketMQ records inside entries."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.common.errors import ConfigError, DLedgerError, StoreError
from broker.common.message import pack_host
from broker.common.record import BLANK_MAGIC, decode_record, encode_record
from broker.dledger.commit_log import DLedgerCommitLog, DLedgerSetup
from broker.dledger.layout import (
    BODY_OFFSET,
    INDEX_UNIT_SIZE,
    decode_entry_header,
    decode_index_unit,
    encode_entry,
    encode_index_unit,
)
from broker.dledger.member_state import MemberState, Role
from broker.dledger.protocol import DLedgerResponseCode
from broker.dledger.store import DLedgerMmapFileStore
from broker.store.config import MessageStoreConfig, parse_peers
from broker.store.mapped_file import MappedFileQueue

DATA_FILE = 1024
INDEX_FILE = 8 * INDEX_UNIT_SIZE
HOST = pack_host("127.0.0.1", 10911)


def open_store(root: Path, *, leader: bool = True) -> DLedgerMmapFileStore:
    state = MemberState(str(root), "n0")
    state.load()
    if leader:
        state.lead_alone()
    store = DLedgerMmapFileStore(state, str(root / "data"), str(root / "index"), DATA_FILE, INDEX_FILE)
    store.load()
    store.recover()
    return store


def entries_of(store: DLedgerMmapFileStore) -> list[bytes]:
    return [store.get(i).body for i in range(max(store.ledger_begin_index, 0), store.ledger_end_index + 1)]


def test_entry_and_index_unit_layouts() -> None:
    entry = encode_entry(b"abc", index=7, term=3, pos=4096)
    assert len(entry) == BODY_OFFSET + 3 == 51
    assert bytes(entry[:BODY_OFFSET]) == struct.pack(">iiqqqiiii", 1, 51, 7, 3, 4096, 0, 0, 0, 3)
    assert tuple(decode_entry_header(entry)) == (1, 51, 7, 3, 4096, 0, 0, 0, 3)
    unit = encode_index_unit(pos=4096, size=51, index=7, term=3)
    assert unit == struct.pack(">iqiqq", 1, 4096, 51, 7, 3) and len(unit) == INDEX_UNIT_SIZE
    assert tuple(decode_index_unit(unit)) == (1, 4096, 51, 7, 3)


bodies = st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=40)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bodies=bodies)
def test_append_roll_read_and_reopen(tmp_path_factory: pytest.TempPathFactory, bodies: list[bytes]) -> None:
    root = tmp_path_factory.mktemp("log")
    store = open_store(root)
    entries = [store.append_as_leader(body) for body in bodies]
    assert [e.index for e in entries] == list(range(len(bodies)))
    for before, after in zip(entries, entries[1:], strict=False):
        if after.pos != before.pos + before.size:  # rolled: the next file starts at a file boundary
            assert after.pos % DATA_FILE == 0
            pad = store.data.view(before.pos + before.size, 8)
            assert struct.unpack(">ii", pad) == (-1, after.pos - before.pos - before.size)
            assert after.pos - (before.pos + before.size) < after.size + 8
    assert entries_of(store) == bodies
    unit = decode_index_unit(store.index.view(entries[-1].index * INDEX_UNIT_SIZE, INDEX_UNIT_SIZE))
    assert (unit.pos, unit.size, unit.index) == (entries[-1].pos, entries[-1].size, entries[-1].index)
    store.update_committed_index(0, entries[-1].index)
    store.shutdown()
    assert (root / "checkpoint").read_text() == f"committedIndex={len(bodies) - 1}\nendIndex={len(bodies) - 1}\n"
    assert (root / "currterm").read_text() == "voteLeader=n0\ncurrTerm=0\n"

    again = open_store(root)
    assert (again.ledger_begin_index, again.ledger_end_index) == (0, len(bodies) - 1)
    assert again.committed_pos == entries[-1].pos + entries[-1].size
    assert entries_of(again) == bodies
    assert again.append_as_leader(b"next").pos == again.data.max_wrote_position - BODY_OFFSET - 4
    again.shutdown()


def test_a_torn_tail_is_cut_where_dledger_cuts_it(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    kept = [store.append_as_leader(bytes([i]) * 100) for i in range(5)]
    end = kept[-1].pos + kept[-1].size
    # A sixth entry whose header got only as far as its magic and size: its pos field is still zero.
    mf = store.data.files[-1]
    mf.write_at(end - mf.file_from_offset, struct.pack(">ii", 1, 148))
    store.data.flush()
    store.data.close()
    store.index.close()

    again = open_store(tmp_path)
    assert again.ledger_end_index == 4 and entries_of(again) == [bytes([i]) * 100 for i in range(5)]
    assert again.data.max_wrote_position == end
    assert bytes(again.data.files[-1].buffer[end - mf.file_from_offset:][:8]) == bytes(8)  # the torn bytes zeroed
    assert again.index.max_wrote_position == 5 * INDEX_UNIT_SIZE
    assert again.append_as_leader(b"after").pos == end
    again.shutdown()


def test_an_index_that_disagrees_with_the_data_is_rewritten(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    entries = [store.append_as_leader(bytes([i]) * 50) for i in range(6)]
    store.index.files[0].write_at(3 * INDEX_UNIT_SIZE, encode_index_unit(1, 2, 3, 4))  # unit 3 garbled
    store.index.truncate(4 * INDEX_UNIT_SIZE)  # and units 4 and 5 lost
    store.data.close()
    store.index.close()

    again = open_store(tmp_path)
    assert again.ledger_end_index == 5
    assert [again.entry_pos_and_size(i) for i in range(6)] == [(e.pos, e.size) for e in entries]
    again.shutdown()


def test_truncate_after_an_index(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    entries = [store.append_as_leader(bytes([i]) * 200) for i in range(12)]
    store.update_committed_index(0, 11)
    store.truncate_after(6)
    assert store.ledger_end_index == 6 and store.committed_index == 6
    assert store.data.max_wrote_position == entries[6].pos + entries[6].size
    assert store.append_as_leader(b"x").index == 7
    store.truncate_after(-1)
    assert store.ledger_end_index == -1 and store.data.max_wrote_position == 0
    with pytest.raises(StoreError):
        store.get(0)
    store.shutdown()


def test_only_a_leader_appends(tmp_path: Path) -> None:
    store = open_store(tmp_path, leader=False)
    assert store.member_state.role is Role.CANDIDATE
    with pytest.raises(DLedgerError, match="NOT_LEADER .* is CANDIDATE") as refused:
        store.append_as_leader(b"x")
    assert refused.value.code == DLedgerResponseCode.NOT_LEADER


def test_a_data_file_of_another_size_is_refused(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "00000000000000000000").write_bytes(bytes(DATA_FILE // 2))
    with pytest.raises(StoreError, match="file size"):
        open_store(tmp_path)


# -- RocketMQ records in entries ----------------------------------------------------------------------------------


def setup_for(root: Path, **overrides: object) -> DLedgerSetup:
    config = MessageStoreConfig.from_properties({
        "storePathRootDir": str(root), "mappedFileSizeCommitLog": "4096", "enableDLegerCommitLog": "true",
        "dLegerGroup": "broker-a", "dLegerPeers": "n0-127.0.0.1:40911", "dLegerSelfId": "n0",
        **{k: str(v) for k, v in overrides.items()}})
    return DLedgerSetup.from_store_config(config)


def record(i: int) -> bytes:
    return encode_record(topic=b"TopicA", queue_id=i % 2, body=f"message {i}".encode() * 20,
                         properties=f"TAGS\x01t{i % 3}\x02KEYS\x01k{i}\x02".encode(), born_host=HOST, store_host=HOST,
                         queue_offset=i // 2, store_timestamp=1_700_000_000_000 + i)


def test_records_get_their_entry_offset_and_dispatch_from_entries(tmp_path: Path) -> None:
    log = DLedgerCommitLog(setup_for(tmp_path))
    log.open()
    assert log.store.data.queue.directory == str(tmp_path / "dledger-n0" / "data")
    assert (tmp_path / "dledger-n0" / "currterm").read_text() == "voteLeader=n0\ncurrTerm=0\n"  # as Apache's
    results = [log.put_record(record(i)) for i in range(30)]
    assert len(log.store.data.files) > 1  # rolled
    for i, put in enumerate(results):
        assert put.wrote_offset == put.entry.pos + BODY_OFFSET
        stored = decode_record(log.read_record(put.wrote_offset))
        assert stored.commit_log_offset == put.wrote_offset and stored.body == f"message {i}".encode() * 20
    requests, offset = log.dispatch_from(log.min_offset, 1000)
    assert offset == log.max_offset
    assert [(r.commit_log_offset, r.msg_size, r.consume_queue_offset, r.keys) for r in requests] == \
        [(p.wrote_offset, p.size, i // 2, [f"k{i}"]) for i, p in enumerate(results)]
    first, middle = log.dispatch_from(log.min_offset, 7)
    assert len(first) == 7 and log.dispatch_from(middle, 1000)[0] == requests[7:]
    log.shutdown()
    index_files = list((tmp_path / "dledger-n0" / "index").iterdir())
    assert [(f.name, f.stat().st_size) for f in index_files] == [("00000000000000000000", 32 * 5 * 1024 * 1024)]


def test_dledger_data_begins_after_the_old_commit_log(tmp_path: Path) -> None:
    old = MappedFileQueue(str(tmp_path / "commitlog"), 4096)
    old.last_file_for_write().append(record(0))
    old.last_file_for_write()
    log = DLedgerCommitLog(setup_for(tmp_path))
    log.open(old_commit_log=old)
    assert log.divided_commit_log_offset == 4096
    size = len(record(0))
    assert struct.unpack_from(">ii", old.files[0].buffer, size) == (4096 - size, BLANK_MAGIC)
    put = log.put_record(record(1))
    assert put.wrote_offset == 4096 + BODY_OFFSET
    assert os.listdir(tmp_path / "dledger-n0" / "data") == ["00000000000000004096"]
    log.shutdown()
    old.close()

    again = DLedgerCommitLog(setup_for(tmp_path))
    again.open()
    assert again.divided_commit_log_offset == 4096
    assert decode_record(again.read_record(4096 + BODY_OFFSET)).queue_id == 1
    again.shutdown()


def test_dledger_keys() -> None:
    assert parse_peers("n0-127.0.0.1:40911;n1-host-b:40912;") == {"n0": "127.0.0.1:40911", "n1": "host-b:40912"}
    for bad in ("n0:40911", "n0-host", "n0-a:1;n0-b:2"):
        with pytest.raises(ConfigError, match="dLegerPeers"):
            parse_peers(bad)
    with pytest.raises(StoreError, match="dLegerSelfId"):
        setup_for(Path("/nonexistent"), dLegerSelfId="n9")
    setup = setup_for(Path("/r"), storePathDLedgerCommitLog="/elsewhere")
    assert (setup.data_dir, setup.data_file_size, setup.group) == ("/elsewhere", 4096, "broker-a")



@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(1, 200), min_size=1, max_size=20), cut=st.floats(0, 1))
def test_recovery_keeps_exactly_the_entries_whose_headers_survived(tmp_path_factory: pytest.TempPathFactory,
                                                                   sizes: list[int], cut: float) -> None:
    """A crash mid-write leaves the data zeroed from some byte on. DLedger keeps every entry up to the first whose
    48-byte header lost a byte (a zero where there was none); a torn body goes unnoticed, as DLedger never fills
    in bodyCrc."""
    root = tmp_path_factory.mktemp("torn")
    store = open_store(root)
    entries = [store.append_as_leader(bytes([n % 251 + 1]) * n) for n in sizes]
    torn_at = int(cut * store.data.max_wrote_position)
    headers = [bytes(store.data.view(e.pos, BODY_OFFSET)) for e in entries]
    for mf in store.data.files:
        mf.zero_tail(max(torn_at - mf.file_from_offset, 0))
    store.data.close()
    store.index.close()

    def survives(i: int) -> bool:
        start = max(torn_at - entries[i].pos, 0)
        return start >= BODY_OFFSET or headers[i][start:] == bytes(BODY_OFFSET - start)

    kept = 0
    while kept < len(entries) and survives(kept):
        kept += 1
    end = entries[kept - 1].pos + entries[kept - 1].size if kept else 0
    if kept < len(entries) and entries[kept].pos != end and torn_at >= end + 4:  # the pad after it kept its magic
        end = entries[kept].pos
    if entries[-1].pos - entries[-1].pos % DATA_FILE - end > DATA_FILE:
        with pytest.raises(StoreError, match="check the folder by hand"):  # DLedger exits rather than lose files
            open_store(root)
        return
    again = open_store(root)
    assert again.ledger_end_index == kept - 1
    bodies = [bytes([n % 251 + 1]) * n for n in sizes[:kept]]
    torn = [body[:max(torn_at - e.body_pos, 0)].ljust(len(body), b"\0")
            for body, e in zip(bodies, entries, strict=False)]
    assert entries_of(again) == torn  # the body of the last entry kept may be torn
    assert again.data.max_wrote_position == end
    assert again.append_as_leader(b"on").index == kept
    again.shutdown()
