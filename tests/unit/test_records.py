"""connector/records.py: pull bodies to Arrow, in C (``pull_columns``) and in its Python twin, in bulk and record by
record, against the store's own decoder; the two paths give the same batches."""

from __future__ import annotations

import zlib

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker import _speedups
from broker.common.errors import CorruptRecord
from broker.common.message import SysFlag, decode_properties, format_host, offset_msg_id, pack_host
from broker.common.record import decode_record, encode_record
from connector import records as records_module
from connector.records import ARROW_SCHEMA, _decode_records_py, decode_records

V4_A, V4_B = pack_host("10.0.0.7", 40001), pack_host("127.0.0.1", 256)  # port 256 ends in a zero byte
STORE_V4, STORE_V6 = pack_host("192.168.1.2", 10911), pack_host("::1", 10911)


def record(i: int, *, topic: bytes = b"TopicA", body: bytes | None = None, properties: str | None = None,
           sys_flag: int = 0, born: bytes = V4_A, store: bytes = STORE_V4) -> bytes:
    if properties is None:
        properties = f"KEYS\x01k{i} x{i}\x02TAGS\x01tag{i % 3}\x02UNIQ_KEY\x01U{i:030d}\x02"
    return encode_record(topic=topic, queue_id=i % 4, body=body if body is not None else bytes([i % 251]) * (i * 7),
                         properties=properties.encode(), sys_flag=sys_flag, born_timestamp=1_700_000_000_000 + i,
                         born_host=born, store_host=store, store_timestamp=1_700_000_000_500 + i, queue_offset=100 + i,
                         commit_log_offset=4096 * i, reconsume_times=i % 2)


def expected_rows(records: list[bytes]) -> list[dict]:
    rows = []
    for data in records:
        r = decode_record(data)
        body, sys_flag = r.body, r.sys_flag
        if sys_flag & SysFlag.COMPRESSED:
            body, sys_flag = zlib.decompress(body), sys_flag & ~int(SysFlag.COMPRESSED)
        msg_id = offset_msg_id(r.store_host, r.commit_log_offset)
        rows.append({"topic": "T", "brokerName": "b", "queueId": r.queue_id, "queueOffset": r.queue_offset,
                     "msgId": r.properties.get("UNIQ_KEY", msg_id), "offsetMsgId": msg_id,
                     "keys": r.properties.get("KEYS"), "tags": r.properties.get("TAGS"), "body": body,
                     "properties": sorted(r.properties.items()), "bornTimestamp": r.born_timestamp,
                     "storeTimestamp": r.store_timestamp, "bornHost": format_host(r.born_host),
                     "storeHost": format_host(r.store_host), "reconsumeTimes": r.reconsume_times,
                     "sysFlag": sys_flag})
    return rows


def decoded_rows(batch) -> list[dict]:
    assert batch.schema == ARROW_SCHEMA
    rows = batch.to_pylist()
    for row in rows:
        row["properties"] = sorted(row["properties"])
        row["bornTimestamp"] = int(row["bornTimestamp"].timestamp() * 1000)
        row["storeTimestamp"] = int(row["storeTimestamp"].timestamp() * 1000)
    return rows


@pytest.fixture(params=["c", "python"])
def decode(request, monkeypatch):
    """decode_records as it runs: with the C pass, and with its Python twin only (a build without the extension)."""
    if request.param == "python":
        monkeypatch.setattr(records_module, "pull_columns", None)
    else:
        assert records_module.pull_columns is _speedups.pull_columns
    return decode_records


def test_bulk_decoding_equals_the_store_decoder(decode):
    records = [record(i, born=V4_B if i % 2 else V4_A) for i in range(40)]
    records.append(record(40, topic=b"T" * 200))  # V2 magic: 2-byte topic length
    records.append(record(41, properties=""))  # no properties: msgId falls back to the offsetMsgId
    records.append(record(42, properties="a\x01b\x02\x01x\x02k\x01\x02p\x01q\x01r\x02"))  # decode_properties' rules
    assert decoded_rows(decode(b"".join(records), "T", "b", 10**9)) == expected_rows(records)
    # a pull's body as the blocking client's receive() hands it out: a view of the buffer its frame was read into
    assert decoded_rows(decode(memoryview(bytearray(b"".join(records))), "T", "b", 10**9)) == expected_rows(records)
    assert decode_properties("a\x01b\x02\x01x\x02k\x01\x02p\x01q\x01r\x02") == {"a": "b", "p": "q\x01r"}


def test_tags_keys_and_msg_id_are_the_last_entry_of_their_key_as_arrows_map_lookup(decode):
    """The lookups compare only keys of the name's length: a repeated key gives its last value, a key of the same
    length that differs (TAGX) or a prefix (TAG) is not it, rows without the key get null."""
    import pyarrow.compute as pc

    odd = ["TAGS\x01first\x02TAGX\x01no\x02TAGS\x01last\x02UNIQ_KEY\x01u1\x02KEYS\x01a b",
           "TAG\x01no\x02KEYS\x01\x02UNIQ_KEY\x01u2\x02UNIQ_KEY\x01u3", "", "TAGS\x01only"]
    batch = decode(b"".join(record(i, properties=odd[i % 4]) for i in range(9)), "T", "b", 10**9)
    properties = batch.column("properties")
    assert batch.column("tags") == pc.map_lookup(properties, "TAGS", "last")
    assert batch.column("keys") == pc.map_lookup(properties, "KEYS", "last")
    assert batch.column("msgId") == pc.coalesce(pc.map_lookup(properties, "UNIQ_KEY", "last"),
                                                batch.column("offsetMsgId"))
    assert batch.column("tags").to_pylist()[:4] == ["last", None, None, "only"]
    assert batch.column("msgId").to_pylist()[:2] == ["u1", "u3"]


@pytest.mark.parametrize("odd", ["born_v6", "store_v6", "compressed"])
def test_ipv6_hosts_and_compressed_bodies_decode_record_by_record_alike(odd, decode):
    special = {"born_v6": {"sys_flag": int(SysFlag.BORNHOST_V6), "born": pack_host("fe80::2", 5)},
               "store_v6": {"sys_flag": int(SysFlag.STOREHOSTADDRESS_V6), "store": STORE_V6},
               "compressed": {"sys_flag": int(SysFlag.COMPRESSED), "body": zlib.compress(b"z" * 5000)}}[odd]
    records = [record(0), record(1, **special), record(2)]
    assert decoded_rows(decode(b"".join(records), "T", "b", 10**9)) == expected_rows(records)
    assert decoded_rows(decode(memoryview(bytearray(b"".join(records))), "T", "b", 10**9)) == expected_rows(records)


def test_records_without_properties_or_bodies(decode):
    records = [record(i, properties="", body=b"") for i in range(3)]
    assert decoded_rows(decode(b"".join(records), "T", "b", 10**9)) == expected_rows(records)


def test_records_at_or_past_the_end_offset_and_other_tags_are_left_out(decode):
    records = [record(i) for i in range(10)]  # queue offsets 100..109, tags tag0..tag2
    body = b"".join(records)
    assert decode(body, "T", "b", 105).column("queueOffset").to_pylist() == [100, 101, 102, 103, 104]
    assert decode(body, "T", "b", 100).num_rows == 0
    kept = decode(body, "T", "b", 10**9, ("tag1",))
    assert kept.column("queueOffset").to_pylist() == [101, 104, 107]
    assert decode(b"", "T", "b", 10**9).num_rows == 0


def test_a_torn_body_is_an_error_not_rows(decode):
    body = b"".join(record(i) for i in range(3))
    with pytest.raises(CorruptRecord):
        decode(body[:-5], "T", "b", 10**9)
    with pytest.raises(CorruptRecord):
        decode(b"\x00\x00\x00\x00" + body, "T", "b", 10**9)


def test_properties_that_are_not_utf8_are_refused_on_both_paths(decode):
    body = record(0) + encode_record(topic=b"T", queue_id=0, body=b"x", properties=b"TAGS\x01\xff\xfe",
                                     born_host=V4_A, store_host=STORE_V4, queue_offset=101)
    assert _speedups.pull_columns(body, 10**9) is None  # left to the twin, which names the fault
    with pytest.raises(pa.ArrowInvalid):
        decode(body, "T", "b", 10**9)


# -- the C pass against its twin ----------------------------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_characters="\x01\x02"), max_size=6)
_entry = st.one_of(st.tuples(st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "TAG", "TAGX", "", "k"]), _text),
                   st.tuples(_text, _text))
_properties = st.one_of(
    st.lists(_entry, max_size=6).map(lambda items: "".join(f"{k}\x01{v}\x02" for k, v in items)),
    st.text(st.sampled_from("\x01\x02ab"), max_size=12))  # separators anywhere: decode_properties' rules
_record = st.fixed_dictionaries({
    "properties": _properties, "body": st.binary(max_size=300), "topic": st.sampled_from([b"T", b"t" * 130]),
    "born": st.sampled_from([V4_A, V4_B, pack_host("255.255.255.255", 2**31 - 1)]),
    "store": st.sampled_from([STORE_V4, pack_host("0.0.0.0", 0)]), "reconsume": st.integers(0, 2**31 - 1),
    "timestamp": st.integers(0, 2**41), "physical": st.integers(0, 2**63 - 1)})


@settings(max_examples=200, deadline=None)
@given(specs=st.lists(_record, max_size=12), cut=st.integers(0, 12), tags=st.lists(_text, max_size=2))
def test_pull_columns_gives_the_twins_batches(specs, cut, tags):
    """Random records (properties with any arrangement of separators, repeated and near-miss keys, V1 and V2
    topics, extreme hosts and numbers), any end offset and tag filter: the C pass and the twin give equal batches."""
    body = b"".join(encode_record(topic=spec["topic"], queue_id=i % 3, body=spec["body"],
                                  properties=spec["properties"].encode(), born_timestamp=spec["timestamp"],
                                  born_host=spec["born"], store_host=spec["store"],
                                  store_timestamp=spec["timestamp"] + i, queue_offset=i,
                                  commit_log_offset=spec["physical"],
                                  reconsume_times=spec["reconsume"]) for i, spec in enumerate(specs))
    assert _speedups.pull_columns(body, cut) is not None
    c_batch = decode_records(body, "T", "b", cut, tuple(tags))
    c_batch.validate(full=True)
    assert c_batch.equals(_decode_records_py(body, "T", "b", cut, tuple(tags)))


@settings(max_examples=300, deadline=None)
@given(count=st.integers(1, 6), cut=st.integers(0, 2000), flips=st.lists(st.tuples(st.integers(0, 2000),
                                                                                   st.integers(1, 255)), max_size=4))
def test_pull_columns_on_damaged_bodies_gives_what_the_twin_gives(count, cut, flips):
    """Cut short or with flipped bytes (sizes, lengths, magic codes, flags, UTF-8): the C pass either gives the
    twin's batch or leaves the body to it, so the caller sees the same rows or the same error."""
    body = bytearray(b"".join(record(i) for i in range(count)))
    for at, xor in flips:
        body[at % len(body)] ^= xor
    body = bytes(body[:max(1, len(body) - cut % len(body))])

    def outcome(decode_body):
        try:
            return decode_body(body, "T", "b", 10**9)
        except Exception as err:  # noqa: BLE001 - the same error type is the expectation
            return type(err)

    c_result, twin_result = outcome(decode_records), outcome(_decode_records_py)
    if isinstance(twin_result, pa.RecordBatch) and isinstance(c_result, pa.RecordBatch):
        assert c_result.equals(twin_result)
    else:
        assert c_result == twin_result
