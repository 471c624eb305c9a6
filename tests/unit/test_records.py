"""connector/records.py: pull bodies to Arrow, in bulk and record by record, against the store's own decoder."""

from __future__ import annotations

import zlib

import pytest

from broker.common.errors import CorruptRecord
from broker.common.message import SysFlag, decode_properties, format_host, offset_msg_id, pack_host
from broker.common.record import decode_record, encode_record
from connector.records import ARROW_SCHEMA, decode_records

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


def test_bulk_decoding_equals_the_store_decoder():
    records = [record(i, born=V4_B if i % 2 else V4_A) for i in range(40)]
    records.append(record(40, topic=b"T" * 200))  # V2 magic: 2-byte topic length
    records.append(record(41, properties=""))  # no properties: msgId falls back to the offsetMsgId
    records.append(record(42, properties="a\x01b\x02\x01x\x02k\x01\x02p\x01q\x01r\x02"))  # decode_properties' rules
    assert decoded_rows(decode_records(b"".join(records), "T", "b", 10**9)) == expected_rows(records)
    assert decode_properties("a\x01b\x02\x01x\x02k\x01\x02p\x01q\x01r\x02") == {"a": "b", "p": "q\x01r"}


def test_tags_keys_and_msg_id_are_the_last_entry_of_their_key_as_arrows_map_lookup():
    """The lookups compare only keys of the name's length: a repeated key gives its last value, a key of the same
    length that differs (TAGX) or a prefix (TAG) is not it, rows without the key get null."""
    import pyarrow.compute as pc

    odd = ["TAGS\x01first\x02TAGX\x01no\x02TAGS\x01last\x02UNIQ_KEY\x01u1\x02KEYS\x01a b",
           "TAG\x01no\x02KEYS\x01\x02UNIQ_KEY\x01u2\x02UNIQ_KEY\x01u3", "", "TAGS\x01only"]
    batch = decode_records(b"".join(record(i, properties=odd[i % 4]) for i in range(9)), "T", "b", 10**9)
    properties = batch.column("properties")
    assert batch.column("tags") == pc.map_lookup(properties, "TAGS", "last")
    assert batch.column("keys") == pc.map_lookup(properties, "KEYS", "last")
    assert batch.column("msgId") == pc.coalesce(pc.map_lookup(properties, "UNIQ_KEY", "last"),
                                                batch.column("offsetMsgId"))
    assert batch.column("tags").to_pylist()[:4] == ["last", None, None, "only"]
    assert batch.column("msgId").to_pylist()[:2] == ["u1", "u3"]


@pytest.mark.parametrize("odd", ["born_v6", "store_v6", "compressed"])
def test_ipv6_hosts_and_compressed_bodies_decode_record_by_record_alike(odd):
    special = {"born_v6": {"sys_flag": int(SysFlag.BORNHOST_V6), "born": pack_host("fe80::2", 5)},
               "store_v6": {"sys_flag": int(SysFlag.STOREHOSTADDRESS_V6), "store": STORE_V6},
               "compressed": {"sys_flag": int(SysFlag.COMPRESSED), "body": zlib.compress(b"z" * 5000)}}[odd]
    records = [record(0), record(1, **special), record(2)]
    assert decoded_rows(decode_records(b"".join(records), "T", "b", 10**9)) == expected_rows(records)


def test_records_without_properties_or_bodies():
    records = [record(i, properties="", body=b"") for i in range(3)]
    assert decoded_rows(decode_records(b"".join(records), "T", "b", 10**9)) == expected_rows(records)


def test_records_at_or_past_the_end_offset_and_other_tags_are_left_out():
    records = [record(i) for i in range(10)]  # queue offsets 100..109, tags tag0..tag2
    body = b"".join(records)
    assert decode_records(body, "T", "b", 105).column("queueOffset").to_pylist() == [100, 101, 102, 103, 104]
    assert decode_records(body, "T", "b", 100).num_rows == 0
    kept = decode_records(body, "T", "b", 10**9, ("tag1",))
    assert kept.column("queueOffset").to_pylist() == [101, 104, 107]
    assert decode_records(b"", "T", "b", 10**9).num_rows == 0


def test_a_torn_body_is_an_error_not_rows():
    body = b"".join(record(i) for i in range(3))
    with pytest.raises(CorruptRecord):
        decode_records(body[:-5], "T", "b", 10**9)
    with pytest.raises(CorruptRecord):
        decode_records(b"\x00\x00\x00\x00" + body, "T", "b", 10**9)
