"""The CommitLog record's offsets, all derived from one field table (broker/common/record.py), and the copies of
them that broker/_speedups.c must keep (C cannot import the table: its constants are read out of the source here, so
this runs whether or not the extension was built)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from broker.common import record
from broker.common.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    SysFlag,
    offset_msg_id,
    pack_host,
)
from broker.store import layout
from broker.store.commit_log import MAX_TOPIC_FIELD_LENGTH
from broker.store.index_file import INVALID_INDEX

SPEEDUPS_C = Path(record.__file__).resolve().parents[1] / "_speedups.c"
SPEEDUPS_H = SPEEDUPS_C.with_suffix(".h")  # the record layout every part of the module reads or writes
SPEEDUPS_PULL_C = SPEEDUPS_C.with_name("_speedups_pull.c")  # the Spark source's column pass
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


# -- broker/_speedups.c ------------------------------------------------------------------------------------------------


def c_constants(*sources: Path) -> dict[str, int]:
    """Every ``#define NAME <one integer>`` of ``sources`` (the C source and its header by default)."""
    found = {}
    source = "".join(path.read_text() for path in sources or (SPEEDUPS_C, SPEEDUPS_H))
    for name, value in re.findall(r"^#define (\w+) (0x[0-9A-Fa-f]+|\d+)[uUlL]*\b(?!,)", source, re.MULTILINE):
        found[name] = int(value, 0)
    return found


def expected_c_constants() -> dict[str, int]:
    offsets = record.record_field_offsets(0)
    return {
        "TOTALSIZE_POS": offsets["TOTALSIZE"],
        "MAGICCODE_POS": offsets["MAGICCODE"],
        "BODYCRC_POS": offsets["BODYCRC"],
        "QUEUEID_POS": offsets["QUEUEID"],
        "QUEUEOFFSET_POS": offsets["QUEUEOFFSET"],
        "PHYSICALOFFSET_POS": offsets["PHYSICALOFFSET"],
        "SYSFLAG_POS": offsets["SYSFLAG"],
        "STORETIMESTAMP_POS_V4": offsets["STORETIMESTAMP"],
        "PREPARED_OFFSET_POS_V4": offsets["PREPARED TRANSACTION OFFSET"],
        "BODY_LENGTH_POS_V4": offsets["BODY length"],
        "FIXED_SIZE_V4": record.FIXED_SIZE_V4,
        "HOST_V4_LENGTH": record.HOST_V4_LENGTH,
        "HOST_V6_LENGTH": record.HOST_V6_LENGTH,
        "FIXED_WITHOUT_HOSTS": record.FIXED_SIZE_V4 - 2 * record.HOST_V4_LENGTH,
        "MAGIC_V1": record.MESSAGE_MAGIC_V1 & 0xFFFFFFFF,
        "MAGIC_V2": record.MESSAGE_MAGIC_V2 & 0xFFFFFFFF,
        "BLANK_MAGIC": record.BLANK_MAGIC & 0xFFFFFFFF,
        "TOPIC_V1_MAX": 127,  # checked against MessageVersion.for_topic below
        "TOPIC_V2_MAX": MAX_TOPIC_FIELD_LENGTH,
        "MAX_PROPERTIES_LENGTH": record.MAX_PROPERTIES_LENGTH,
        "TX_MASK": TRANSACTION_MASK,
        "TX_PREPARED": TRANSACTION_PREPARED_TYPE,
        "TX_COMMIT": TRANSACTION_COMMIT_TYPE,
        "TX_ROLLBACK": TRANSACTION_ROLLBACK_TYPE,
        "BORNHOST_V6": int(SysFlag.BORNHOST_V6),
        "STOREHOST_V6": int(SysFlag.STOREHOSTADDRESS_V6),
        "BORNTIMESTAMP_POS": offsets["BORNTIMESTAMP"],
        "BORNHOST_POS": offsets["BORNHOST"],
        "STOREHOST_POS_V4": offsets["STOREHOSTADDRESS"],
        "RECONSUMETIMES_POS_V4": offsets["RECONSUMETIMES"],
        "COMPRESSED": int(SysFlag.COMPRESSED),
        "INDEX_HEADER_SIZE": layout.INDEX_HEADER_SIZE,
        "INDEX_SLOT_SIZE": layout.INDEX_SLOT_SIZE,
        "INDEX_ENTRY_SIZE": layout.INDEX_ENTRY_SIZE,
        "INVALID_INDEX": INVALID_INDEX,
    }


# The C sources' own numbers, not a layout's: the CRC folding constants, a cache size, Python's API switch, how many
# fixed-width columns the pull pass writes.
C_ONLY = {"PY_SSIZE_T_CLEAN", "FOLD_64", "NAME_CACHE", "FIXED_COLUMNS"}


def test_c_constants_are_the_layouts() -> None:
    constants = c_constants()
    expected = expected_c_constants()
    assert {name: constants.get(name) for name in expected} == expected
    assert set(constants) - set(expected) <= C_ONLY, "a new constant in _speedups.c: hold it to its Python source here"


def test_the_pull_pass_constants_are_the_layouts() -> None:
    """broker/_speedups_pull.c reads IPv4 records only, with the header's _V4 offsets; its own numbers are text
    sizes."""
    expected = {
        "HOST_TEXT_MAX": len("255.255.255.255:-2147483648") + 1,
        "OFFSET_MSG_ID_LENGTH": len(offset_msg_id(pack_host("1.2.3.4", 5), 6)),
    }
    constants = c_constants(SPEEDUPS_PULL_C)
    assert {name: value for name, value in constants.items() if name not in C_ONLY} == expected


def test_c_host_shift_gives_the_tables_offsets() -> None:
    """The C code reads the fields after a host at their _V4 offset plus the hosts' extra length (host_shift)."""
    c = c_constants()
    for flags in HOST_FLAGS:
        offsets = record.record_field_offsets(flags)
        born = c["HOST_V6_LENGTH"] if flags & SysFlag.BORNHOST_V6 else c["HOST_V4_LENGTH"]
        store = c["HOST_V6_LENGTH"] if flags & SysFlag.STOREHOSTADDRESS_V6 else c["HOST_V4_LENGTH"]
        assert offsets["STORETIMESTAMP"] == c["STORETIMESTAMP_POS_V4"] + born - c["HOST_V4_LENGTH"]
        assert offsets["BODY length"] == c["BODY_LENGTH_POS_V4"] + born + store - 2 * c["HOST_V4_LENGTH"]
        assert record.record_head(flags).size == c["FIXED_WITHOUT_HOSTS"] + born + store


def test_c_topic_limits_are_the_message_versions() -> None:
    assert record.MessageVersion.for_topic(b"t" * 127) is record.MessageVersion.V1
    assert record.MessageVersion.for_topic(b"t" * 128) is record.MessageVersion.V2


def test_c_reads_record_fields_only_through_named_offsets() -> None:
    """No offset typed by hand into a record read: ``get32(r + 36)`` is how the copies drifted before."""
    source = SPEEDUPS_C.read_text()
    assert re.findall(r"get(?:32|64)\((?:r|base \+ pos) \+ \d+\)", source) == []
    assert re.findall(r"get(?:32|64)\(r \+ \d+\)", SPEEDUPS_PULL_C.read_text()) == []
