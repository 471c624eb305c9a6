"""Stored records of a PULL_MESSAGE body to Arrow, in bulk: the source's ``read()`` yields these RecordBatches.

Why not ``decode_messages``: a MessageExt per record, a properties dict per record and then Row tuples cost about
ten times what Spark spends on the same row from Parquet. Here each record costs one ``struct.unpack_from`` of its
fixed part (the layout is ``broker/store/layout.py``'s) and a few list appends; everything else is columnar:
bodies and properties strings are joined into one buffer each and wrapped as Arrow arrays without copying again,
the properties are split into a map column by Arrow kernels, and TAGS / KEYS / UNIQ_KEY are map lookups.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import zlib
from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from broker.client.message import COMPRESSION_TYPE_MASK, COMPRESSION_ZLIB_TYPE
from broker.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    SysFlag,
    format_host,
)
from broker.store.layout import MESSAGE_MAGIC_V1, record_head

log = logging.getLogger(__name__)

# The record fields as Arrow types, in SOURCE_SCHEMA's order (connector/source.py builds the Spark schema from the
# same names).
ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()),
    ("brokerName", pa.string()),
    ("queueId", pa.int32()),
    ("queueOffset", pa.int64()),
    ("msgId", pa.string()),
    ("offsetMsgId", pa.string()),
    ("keys", pa.string()),
    ("tags", pa.string()),
    ("body", pa.binary()),
    ("properties", pa.map_(pa.string(), pa.string())),
    ("bornTimestamp", pa.timestamp("us", tz="UTC")),
    ("storeTimestamp", pa.timestamp("us", tz="UTC")),
    ("bornHost", pa.string()),
    ("storeHost", pa.string()),
    ("reconsumeTimes", pa.int32()),
    ("sysFlag", pa.int32()),
])

_HOST_V6 = int(SysFlag.BORNHOST_V6 | SysFlag.STOREHOSTADDRESS_V6)
_COMPRESSED = int(SysFlag.COMPRESSED)
_HEAD_V4 = record_head(0)  # both hosts IPv4: nearly every record; other host flags pick their own struct
_ZLIB_TYPES = (0, COMPRESSION_ZLIB_TYPE)
# Positions in the unpacked fixed part (layout.py's field table).
_MAGIC, _QUEUEOFFSET, _PHYSICAL, _SYSFLAG, _BODY_LEN = 1, 5, 6, 7, 14


class _Hosts(dict):
    """Packed host bytes -> "ip:port", remembered: a pull holds one store host and few born hosts. Emptied when
    it grows past CACHE_LIMIT (born hosts carry the producers' ephemeral ports, and a Python worker lives long)."""

    def __missing__(self, packed: bytes) -> str:
        if len(self) >= CACHE_LIMIT:
            self.clear()
        text = self[packed] = format_host(packed)
        return text


class _MsgIdPrefixes(dict):
    """Packed store host -> the hex prefix of its offsetMsgIds (the commit log offset follows as 16 hex digits)."""

    def __missing__(self, packed: bytes) -> str:
        text = self[packed] = bytes(packed).hex().upper()
        return text


CACHE_LIMIT = 10_000
_HOSTS = _Hosts()
_PREFIXES = _MsgIdPrefixes()


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Decoding allocates a tuple per record and keeps thousands alive until ``to_batch``: the cyclic collector
    would walk them again and again (it doubled the cost per record in bench/connector_source.py), and turning it
    back on between pulls starts a collection at once. Nothing made here is cyclic, so reference counting frees it
    all; ``read_partition`` keeps the collector off while it reads."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class RecordColumns:
    """Records collected from pull bodies; ``to_batch`` turns them into one RecordBatch. Per record: the unpacked
    fixed part (one tuple), a view of its body and one of its properties."""

    __slots__ = ("topic", "broker_name", "heads", "bodies", "props", "inflated")

    def __init__(self, topic: str, broker_name: str) -> None:
        self.topic, self.broker_name = topic, broker_name
        self.heads: list[tuple] = []
        self.bodies: list[memoryview | bytes] = []
        self.props: list[memoryview] = []
        self.inflated: dict[int, int] = {}  # row -> sysFlag without COMPRESSED, for bodies inflated here

    def __len__(self) -> int:
        return len(self.heads)

    def add_body(self, body: bytes | memoryview, end_offset: int) -> int:
        """Append the records of one pull body whose queue offset is below ``end_offset``; returns how many. The
        body stays referenced (memoryviews) until ``to_batch``."""
        with no_cyclic_gc():
            return self._add_body(memoryview(body), end_offset)

    def _add_body(self, buf: memoryview, end_offset: int) -> int:
        pos, size_all, added = 0, len(buf), 0
        head, head_size = _HEAD_V4, _HEAD_V4.size
        append_head, append_body, append_props = self.heads.append, self.bodies.append, self.props.append
        while pos < size_all:
            rec = head.unpack_from(buf, pos)
            sys_flag = rec[_SYSFLAG]
            if sys_flag & _HOST_V6:
                fixed = record_head(sys_flag)
                rec = fixed.unpack_from(buf, pos)
                cur = pos + fixed.size
            else:
                cur = pos + head_size
            if rec[_QUEUEOFFSET] >= end_offset:
                break
            body_len = rec[_BODY_LEN]
            if sys_flag & _COMPRESSED:
                append_body(self._inflate(buf[cur:cur + body_len], sys_flag, rec[_PHYSICAL]))
            else:
                append_body(buf[cur:cur + body_len])
            cur += body_len
            if rec[_MAGIC] == MESSAGE_MAGIC_V1:
                cur += 1 + buf[cur]
            else:
                cur += 2 + ((buf[cur] << 8) | buf[cur + 1])
            append_props(buf[cur + 2:cur + 2 + ((buf[cur] << 8) | buf[cur + 1])])
            append_head(rec)
            pos += rec[0]
            added += 1
        return added

    def _inflate(self, body: memoryview, sys_flag: int, phys: int) -> bytes | memoryview:
        """As the client's MessageDecoder: ZLIB bodies are inflated and lose the flag; others stay as stored."""
        if sys_flag & COMPRESSION_TYPE_MASK not in _ZLIB_TYPES:
            return body
        try:
            inflated = zlib.decompress(body)
        except zlib.error as err:
            log.warning("record at commit log offset %s is flagged compressed but does not inflate: %s", phys, err)
            return body
        self.inflated[len(self.heads)] = sys_flag & ~_COMPRESSED
        return inflated

    def to_batch(self, tags_filter: Sequence[str] = ()) -> pa.RecordBatch:
        """The collected records as one RecordBatch of ARROW_SCHEMA. ``tags_filter``: keep only rows whose tag is
        one of these (the broker filters by the tag's hash code; a colliding tag is dropped here, as Java's
        PullAPIWrapper does)."""
        with no_cyclic_gc():
            return self._to_batch(tags_filter)

    def _to_batch(self, tags_filter: Sequence[str]) -> pa.RecordBatch:
        n = len(self.heads)
        if n == 0:
            return empty_batch()
        (_, _, _, queue_ids, _, queue_offsets, phys, sys_flags, born_ts, born_hosts, store_ts, store_hosts,
         reconsume, _, _) = zip(*self.heads, strict=True)
        if self.inflated:
            sys_flags = list(sys_flags)
            for row, flag in self.inflated.items():
                sys_flags[row] = flag
        properties = _properties_map(self.props)
        msg_ids = _offset_msg_ids(store_hosts, phys)
        tags = pc.map_lookup(properties, PROPERTY_TAGS, "last")
        hosts = _HOSTS
        columns = [
            pa.array([self.topic] * n, pa.string()),
            pa.array([self.broker_name] * n, pa.string()),
            pa.array(queue_ids, pa.int32()),
            pa.array(queue_offsets, pa.int64()),
            pc.coalesce(pc.map_lookup(properties, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "last"), msg_ids),
            msg_ids,
            pc.map_lookup(properties, PROPERTY_KEYS, "last"),
            tags,
            _binary(self.bodies),
            properties,
            _timestamps(born_ts),
            _timestamps(store_ts),
            pa.array([hosts[h] for h in born_hosts], pa.string()),
            pa.array([hosts[h] for h in store_hosts], pa.string()),
            pa.array(reconsume, pa.int32()),
            pa.array(sys_flags, pa.int32()),
        ]
        batch = pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
        if tags_filter:
            batch = batch.filter(pc.fill_null(pc.is_in(tags, pa.array(list(tags_filter), pa.string())), False))
        return batch


_HEX_DIGITS = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
_NIBBLE_SHIFTS = np.arange(60, -4, -4, dtype=np.int64)  # the 16 hex digits of a commit log offset, high first


def _offset_msg_ids(store_hosts: Sequence[bytes], phys: Sequence[int]) -> pa.Array:
    """offsetMsgId = hex(store host) + hex(commit log offset, 16 digits). A pull's records share one store host:
    then the ids are built as one uint8 matrix (prefix columns, then the offset's nibbles as digits) that is the
    string array's value buffer, every id the same width."""
    n = len(phys)
    if store_hosts.count(store_hosts[0]) != n:
        return pa.array([f"{_PREFIXES[h]}{p:016X}" for h, p in zip(store_hosts, phys, strict=True)], pa.string())
    prefix = np.frombuffer(_PREFIXES[store_hosts[0]].encode(), dtype=np.uint8)
    width = len(prefix) + 16
    ids = np.empty((n, width), dtype=np.uint8)
    ids[:, :len(prefix)] = prefix
    ids[:, len(prefix):] = _HEX_DIGITS[(np.asarray(phys, dtype=np.int64)[:, None] >> _NIBBLE_SHIFTS) & 0xF]
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(ids)])


def _offsets(lengths: np.ndarray) -> pa.Buffer:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.py_buffer(offsets)


def _binary(parts: list[memoryview | bytes]) -> pa.Array:
    """One copy: the parts joined into the values buffer, their lengths as the offsets."""
    lengths = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    return pa.Array.from_buffers(pa.binary(), len(parts), [None, _offsets(lengths), pa.py_buffer(b"".join(parts))])


def _strings(parts: list[memoryview | bytes]) -> pa.Array:
    lengths = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    array = pa.Array.from_buffers(pa.string(), len(parts), [None, _offsets(lengths), pa.py_buffer(b"".join(parts))])
    array.validate(full=True)  # the broker stores what producers sent: reject bytes that are not UTF-8 here
    return array


def _timestamps(millis: Sequence[int]) -> pa.Array:
    return pa.array(np.asarray(millis, dtype=np.int64) * 1000, pa.timestamp("us", tz="UTC"))


def _properties_map(raw: list[memoryview]) -> pa.MapArray:
    """"k\\x01v\\x02k\\x01v\\x02" per row to map<string,string>, with decode_properties' rules: an entry splits at
    its first \\x01 and is kept only when key and value are both non-empty."""
    n = len(raw)
    items = pc.split_pattern(_strings(raw), PROPERTY_SEPARATOR)
    parents = pc.list_parent_indices(items)
    pairs = pc.split_pattern(pc.list_flatten(items), NAME_VALUE_SEPARATOR, max_splits=1)
    keep = pc.equal(pc.list_value_length(pairs), 2)
    pairs, parents = pairs.filter(keep), parents.filter(keep)
    keys, values = pc.list_element(pairs, 0), pc.list_element(pairs, 1)
    keep = pc.and_(pc.greater(pc.utf8_length(keys), 0), pc.greater(pc.utf8_length(values), 0))
    keys, values, parents = keys.filter(keep), values.filter(keep), parents.filter(keep)
    counts = np.bincount(parents.to_numpy(zero_copy_only=False), minlength=n) if n else np.zeros(0, np.int64)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), keys, values)


def empty_batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], ARROW_SCHEMA)
