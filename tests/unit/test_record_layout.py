"""The CommitLog record's offsets, all derived from one field table (broker/common/record.py)."""

from __future__ import annotations

import pytest

from broker.common import record
from broker.common.message import SysFlag, pack_host

HOST_FLAGS = [0, int(SysFlag.BORNHOST_V6), int(SysFlag.STOREHOSTADDRESS_V6),
              int(SysFlag.BORNHOST_V6 | SysFlag.STOREHOSTADDRESS_V6)]

# The offsets the module docstring's table gives (MessageDecoder's positions), for each host length.
DOCUMENTED = {"TOTALSIZE": 0, "MAGICCODE": 4, "BODYCRC": 8, "QUEUEID": 12, "FLAG": 16, "QUEUEOFFSET": 20,
              "PHYSICALOFFSET": 28, "SYSFLAG": 36, "BORNTIMESTAMP": 40, "BORNHOST": 48}


def after_hosts(born: int, store: int) -> dict[str, int]:
    return {"STORETIMESTAMP": 48 + born, "STOREHOSTADDRESS": 56 + born, "RECONSUMETIMES": 56 + born + store,
            "PREPARED TRANSACTION OFFSET": 60 + born + store, "BODY length": 68 + born + store}


@pytest.mark.parametrize("flags", HOST_FLAGS)
def test_offsets_follow_the_table(flags: int) -> None:
    born = 20 if flags & SysFlag.BORNHOST_V6 else 8
    store = 20 if flags & SysFlag.STOREHOSTADDRESS_V6 else 8
    offsets = record.record_field_offsets(flags | int(SysFlag.TRANSACTION_PREPARED))  # other bits do not matter
    assert dict(offsets) == DOCUMENTED | after_hosts(born, store)
    assert list(offsets) == list(record.RECORD_FIELDS)
    assert record.record_head(flags).size == offsets["BODY length"] + 4
    assert record.store_timestamp_pos(flags) == offsets["STORETIMESTAMP"]
    names = record.record_head_dtype(flags).names
    assert names == record.RECORD_FIELDS
    assert all(record.RECORD_FIELD_INDEX[name] == i for i, name in enumerate(names))


def test_named_offsets_are_the_tables() -> None:
    offsets = record.record_field_offsets(0)
    assert (record.TOTALSIZE_POS, record.MAGIC_POS, record.BODYCRC_POS, record.QUEUEID_POS, record.FLAG_POS,
            record.QUEUEOFFSET_POS, record.PHYSICALOFFSET_POS, record.SYSFLAG_POS, record.BORNTIMESTAMP_POS,
            record.BORNHOST_POS) == tuple(offsets[name] for name in DOCUMENTED)
    assert record.FIXED_SIZE_V4 == 88


@pytest.mark.parametrize("flags", HOST_FLAGS)
def test_fields_read_at_the_offsets_are_the_decoded_ones(flags: int) -> None:
    born = pack_host("::7", 1) if flags & SysFlag.BORNHOST_V6 else pack_host("10.0.0.7", 1)
    store = pack_host("::1", 10911) if flags & SysFlag.STOREHOSTADDRESS_V6 else pack_host("127.0.0.1", 10911)
    data = record.encode_record(topic=b"T", queue_id=3, body=b"body", properties=b"a\x01b\x02", flag=-5,
                                sys_flag=flags, born_timestamp=11, born_host=born, store_host=store,
                                store_timestamp=1_700_000_000_123, queue_offset=42, commit_log_offset=4096,
                                reconsume_times=2, prepared_transaction_offset=77)
    decoded = record.decode_record(data)
    head = record.record_head(flags).unpack_from(data)
    index = record.RECORD_FIELD_INDEX
    assert head[index["QUEUEOFFSET"]] == decoded.queue_offset == 42
    assert head[index["STORETIMESTAMP"]] == decoded.store_timestamp
    assert head[index["BODY length"]] == len(decoded.body)
    offsets = record.record_field_offsets(flags)
    assert data[offsets["BORNHOST"]:offsets["STORETIMESTAMP"]] == born
    assert data[offsets["STOREHOSTADDRESS"]:offsets["RECONSUMETIMES"]] == store
    assert int.from_bytes(data[offsets["PHYSICALOFFSET"]:offsets["SYSFLAG"]], "big") == 4096
    assert record.store_timestamp_of(data[:128]) == 1_700_000_000_123
    assert record.record_size(data) == len(data)
