"""Stored records of PULL_MESSAGE bodies to Arrow, in bulk: the source's ``read()`` yields these RecordBatches.

Why not ``decode_messages``: a MessageExt per record, a properties dict per record and then Row tuples cost about
ten times what Spark spends on the same row from Parquet. Here a pull body's records become the columns' buffers in
one pass in C (``broker/_speedups_pull.c``: fixed-width values, offsets and bytes of bodies, keys, tags, ids, hosts,
the properties map), which the RecordBatch wraps without a copy.

Its Python twin (``_decode_records_py``, where the extension was not built or a record needs it) works in bulk too:
the only Python loop is the walk from record to record (one ``unpack_from`` of TOTALSIZE each); the fixed parts of
all records are gathered into one numpy array of ``record.record_head_dtype``, and bodies and properties are cut
out of the pull body by Arrow's ``take`` (see ``_slices``). The properties are split into a map column in numpy,
TAGS / KEYS / UNIQ_KEY are lookups in it. Records with IPv6 hosts or compressed bodies (rare) take a per-record path
with the same output.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from broker.client.message import COMPRESSION_TYPE_MASK, COMPRESSION_ZLIB_TYPE
from broker.common.errors import CorruptRecord
from broker.common.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_SEPARATOR,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    SysFlag,
    format_host,
)
from broker.common.record import (
    FIXED_SIZE_V4,
    MESSAGE_MAGIC_V1,
    RECORD_FIELD_INDEX,
    RECORD_FIELDS,
    TOTALSIZE,
    record_head,
    record_head_dtype,
)

try:
    from broker._speedups import pull_columns
except ImportError:  # built without the C extension: _decode_records_py does it all
    pull_columns = None

log = logging.getLogger(__name__)

# The record fields as Arrow types, in SOURCE_SCHEMA's order (connector/datasource.py has the Spark schema, of the
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
_HEAD_V4_DTYPE = record_head_dtype(0)
_HEAD_V4_COLUMNS = np.arange(FIXED_SIZE_V4)
_ZLIB_TYPES = (0, COMPRESSION_ZLIB_TYPE)
# Positions in the unpacked fixed part (broker.common.record's field table).
_TOTALSIZE, _MAGIC, _QUEUEOFFSET, _PHYSICAL, _SYSFLAG, _BODY_LEN = (
    RECORD_FIELD_INDEX[name] for name in ("TOTALSIZE", "MAGICCODE", "QUEUEOFFSET", "PHYSICALOFFSET", "SYSFLAG",
                                          "BODY length"))


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
    """Decoding allocates objects per record (more on the per-record path) and keeps them alive until the batch is
    built: the cyclic collector would walk them again and again (it doubled the cost per record in
    bench/connector_source.py), and turning it back on between pulls starts a collection at once. Nothing made here
    is cyclic, so reference counting frees it all; ``_decode_records_py`` keeps the collector off while it decodes."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def decode_records(body: bytes | memoryview, topic: str, broker_name: str, end_offset: int,
                   tags_filter: Sequence[str] = ()) -> pa.RecordBatch:
    """The records of ``body`` (one or more pull bodies, joined) whose queue offset is below ``end_offset``, as
    one RecordBatch of ARROW_SCHEMA. ``tags_filter``: keep only rows whose tag is one of these (the broker filters
    by the tag's hash code; a colliding tag is dropped here, as Java's PullAPIWrapper does).

    The C pass (``pull_columns``) writes the columns' buffers in one walk; what it leaves (IPv6 hosts, compressed
    bodies, anything malformed) and a build without the extension take ``_decode_records_py``, its twin."""
    columns = pull_columns(body, end_offset) if pull_columns is not None else None
    if columns is None:  # the twin was written for bytes (a view is copied once; bytes are not)
        return _decode_records_py(bytes(body), topic, broker_name, end_offset, tags_filter)
    batch = _from_columns(columns, topic, broker_name)
    if tags_filter:
        batch = _filter_tags(batch, tags_filter)
    return batch


def _from_columns(columns: tuple, topic: str, broker_name: str) -> pa.RecordBatch:
    """ARROW_SCHEMA's RecordBatch over ``pull_columns``' buffers, none of them copied."""
    (n, queue_id, queue_offset, sys_flag, born, store, reconsume, msg_id, offset_msg_id, keys, tags, body,
     born_host, store_host, map_offsets, names, values) = columns
    entries = len(names[0]) // 4 - 1
    properties = pa.MapArray.from_buffers(
        ARROW_SCHEMA.field("properties").type, n, [None, pa.py_buffer(map_offsets)],
        children=[pa.StructArray.from_arrays([_texts(entries, names), _texts(entries, values)], ["key", "value"])])
    arrays = [
        _repeated(topic, n),
        _repeated(broker_name, n),
        _fixed(pa.int32(), n, queue_id),
        _fixed(pa.int64(), n, queue_offset),
        _texts(n, msg_id),
        _texts(n, offset_msg_id),
        _texts(n, keys),
        _texts(n, tags),
        _texts(n, body, pa.binary()),
        properties,
        _fixed(_TIMESTAMP, n, born),
        _fixed(_TIMESTAMP, n, store),
        _texts(n, born_host),
        _texts(n, store_host),
        _fixed(pa.int32(), n, reconsume),
        _fixed(pa.int32(), n, sys_flag),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)


_TIMESTAMP = pa.timestamp("us", tz="UTC")
_STRING = pa.string()


def _fixed(type_: pa.DataType, n: int, data: bytes) -> pa.Array:
    return pa.Array.from_buffers(type_, n, [None, pa.py_buffer(data)], null_count=0)


def _texts(n: int, column: tuple[bytes, bytes, bytes | None, int], type_: pa.DataType = _STRING) -> pa.Array:
    """A string (or binary) array over ``pull_columns``' (offsets, data, validity or None, null count)."""
    offsets, data, valid, nulls = column
    return pa.Array.from_buffers(type_, n, [valid and pa.py_buffer(valid), pa.py_buffer(offsets),
                                            pa.py_buffer(data)], null_count=nulls)


def _filter_tags(batch: pa.RecordBatch, tags_filter: Sequence[str]) -> pa.RecordBatch:
    tags = batch.column("tags")
    return batch.filter(pc.fill_null(pc.is_in(tags, pa.array(list(tags_filter), pa.string())), False))


def _decode_records_py(body: bytes, topic: str, broker_name: str, end_offset: int,
                       tags_filter: Sequence[str] = ()) -> pa.RecordBatch:
    """``decode_records`` with numpy and Arrow kernels over all the records at once (the only Python loop is the
    walk from record to record), and record by record where a host is IPv6 or a body compressed."""
    with no_cyclic_gc():
        starts = _record_starts(body)
        if not len(starts):
            return empty_batch()
        data = np.frombuffer(body, dtype=np.uint8)
        heads = data[starts[:, None] + _HEAD_V4_COLUMNS].view(_HEAD_V4_DTYPE)[:, 0]
        if (heads["SYSFLAG"] & (_HOST_V6 | _COMPRESSED)).any():
            return _decode_one_by_one(body, topic, broker_name, end_offset, tags_filter)
        beyond = np.flatnonzero(heads["QUEUEOFFSET"] >= end_offset)  # they rise in a body: the first one ends it
        count = int(beyond[0]) if len(beyond) else len(starts)
        if count == 0:
            return empty_batch()
        if count < len(starts):
            starts, heads = starts[:count], heads[:count]
        body_starts = starts + FIXED_SIZE_V4
        body_lengths = heads["BODY length"].astype(np.int64)
        topic_at = body_starts + body_lengths
        v1 = heads["MAGICCODE"] == MESSAGE_MAGIC_V1
        topic_lengths = np.where(v1, data[topic_at], (data[topic_at].astype(np.int64) << 8) | data[topic_at + 1])
        props_at = topic_at + np.where(v1, 1, 2) + topic_lengths
        props_lengths = (data[props_at].astype(np.int64) << 8) | data[props_at + 1]
        buffer = pa.py_buffer(body)
        store_hosts = _packed_hosts(heads["STOREHOSTADDRESS"])
        columns = {name: heads[field] for name, field in _NUMERIC_FIELDS}
        return _batch(topic, broker_name, columns, _host_strings(_packed_hosts(heads["BORNHOST"])),
                      _host_strings(store_hosts), _offset_msg_ids_bulk(store_hosts, heads["PHYSICALOFFSET"]),
                      _slices(buffer, body_starts, body_lengths, pa.binary()),
                      _slices(buffer, props_at + 2, props_lengths, pa.string()), tags_filter)


# ARROW_SCHEMA's numeric columns and the record fields they come from.
_NUMERIC_FIELDS = (("queueId", "QUEUEID"), ("queueOffset", "QUEUEOFFSET"), ("sysFlag", "SYSFLAG"),
                   ("bornTimestamp", "BORNTIMESTAMP"), ("storeTimestamp", "STORETIMESTAMP"),
                   ("reconsumeTimes", "RECONSUMETIMES"))


def _record_starts(body: bytes) -> np.ndarray:
    """Where each record of ``body`` starts: the one walk that cannot be done in bulk (each TOTALSIZE says where
    the next record is)."""
    starts: list[int] = []
    append, unpack, pos, end = starts.append, TOTALSIZE.unpack_from, 0, len(body)
    while pos < end:
        append(pos)
        (size,) = unpack(body, pos)
        if size < FIXED_SIZE_V4 or pos + size > end:
            raise CorruptRecord(pos, f"a pull body of {end} bytes holds a record of {size} bytes here")
        pos += size
    return np.array(starts, dtype=np.int64)


def _slices(buffer: pa.Buffer | None, starts: np.ndarray, lengths: np.ndarray, type_: pa.DataType) -> pa.Array:
    """``buffer[start:start + length]`` for each pair, as one compact array: ``buffer`` is read as an array whose
    even elements are the slices and odd ones the gaps between them, and ``take`` of the even ones copies the
    slices out in C."""
    n = len(starts)
    if n == 0 or buffer is None:
        return pa.array([""] * n, type_)  # no slices, or every one empty (a values buffer of no bytes)
    offsets = np.empty(2 * n + 1, dtype=np.int32)
    offsets[0:2 * n:2] = starts
    offsets[1:2 * n:2] = starts + lengths
    offsets[2 * n] = offsets[2 * n - 1]
    interleaved = pa.Array.from_buffers(type_, 2 * n, [None, pa.py_buffer(offsets), buffer])
    return interleaved.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))


def _packed_hosts(field: np.ndarray) -> np.ndarray:
    """IPv4 hosts (ip 4 + port 4) as one big-endian uint64 each: numpy's S8 would drop trailing zero bytes."""
    return np.ascontiguousarray(field).view(">u8")


def _host_strings(hosts: np.ndarray) -> pa.Array:
    """"ip:port" per record: formatted once per distinct host (a pull holds one store host and few born hosts,
    often one: no sort then)."""
    if (hosts == hosts[0]).all():
        return _repeated(_HOSTS[int(hosts[0]).to_bytes(8, "big")], len(hosts))
    distinct, rows = np.unique(hosts, return_inverse=True)
    texts = [_HOSTS[int(h).to_bytes(8, "big")] for h in distinct]
    return pa.array(texts, pa.string()).take(pa.array(rows.astype(np.int32)))


def _repeated(text: str, n: int) -> pa.Array:
    """``n`` times ``text`` as a string array, its buffers built at once (no list of ``n`` str objects)."""
    encoded = text.encode()
    offsets = np.arange(0, (n + 1) * len(encoded), len(encoded), dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(encoded * n)])


def _offset_msg_ids_bulk(store_hosts: np.ndarray, phys: np.ndarray) -> pa.Array:
    if (store_hosts == store_hosts[0]).all():
        return _offset_msg_ids_one_host(int(store_hosts[0]).to_bytes(8, "big"), phys)
    return pa.array([f"{_PREFIXES[int(h).to_bytes(8, 'big')]}{int(p):016X}" for h, p in zip(store_hosts, phys,
                                                                                            strict=True)],
                    pa.string())


def _batch(topic: str, broker_name: str, columns: dict[str, np.ndarray], born_hosts: pa.Array, store_hosts: pa.Array,
           msg_ids: pa.Array, bodies: pa.Array, raw_properties: pa.Array, tags_filter: Sequence[str]
           ) -> pa.RecordBatch:
    """One RecordBatch of ARROW_SCHEMA from the decoded columns (both decoding paths end here)."""
    n = len(bodies)
    raw_properties.validate(full=True)  # the broker stores what producers sent: reject bytes that are not UTF-8 here
    entries = _Entries.of(raw_properties)
    tags = entries.lookup(PROPERTY_TAGS)
    uniq_keys = entries.lookup(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    arrays = [
        _repeated(topic, n),
        _repeated(broker_name, n),
        pa.array(np.asarray(columns["queueId"], dtype=np.int32), pa.int32()),
        pa.array(np.asarray(columns["queueOffset"], dtype=np.int64), pa.int64()),
        uniq_keys if uniq_keys.null_count == 0 else pc.coalesce(uniq_keys, msg_ids),
        msg_ids,
        entries.lookup(PROPERTY_KEYS),
        tags,
        bodies,
        entries.map(),
        _timestamps(columns["bornTimestamp"]),
        _timestamps(columns["storeTimestamp"]),
        born_hosts,
        store_hosts,
        pa.array(np.asarray(columns["reconsumeTimes"], dtype=np.int32), pa.int32()),
        pa.array(np.asarray(columns["sysFlag"], dtype=np.int32), pa.int32()),
    ]
    batch = pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
    if tags_filter:
        batch = _filter_tags(batch, tags_filter)
    return batch


# -- the per-record path: IPv6 hosts and compressed bodies ------------------------------------------------------------


def _decode_one_by_one(body: bytes, topic: str, broker_name: str, end_offset: int,
                       tags_filter: Sequence[str]) -> pa.RecordBatch:
    buf = memoryview(body)
    pos, size_all = 0, len(buf)
    heads: list[tuple] = []
    bodies: list[memoryview | bytes] = []
    props: list[memoryview] = []
    while pos < size_all:
        fixed = _HEAD_V4
        rec = list(fixed.unpack_from(buf, pos))
        if rec[_SYSFLAG] & _HOST_V6:
            fixed = record_head(rec[_SYSFLAG])
            rec = list(fixed.unpack_from(buf, pos))
        if rec[_QUEUEOFFSET] >= end_offset:
            break
        cur = pos + fixed.size
        body_len = rec[_BODY_LEN]
        sys_flag = rec[_SYSFLAG]
        if sys_flag & _COMPRESSED:
            inflated = _inflate(buf[cur:cur + body_len], sys_flag, rec[_PHYSICAL])
            if inflated is not None:
                bodies.append(inflated)
                rec[_SYSFLAG] = sys_flag & ~_COMPRESSED
            else:
                bodies.append(buf[cur:cur + body_len])
        else:
            bodies.append(buf[cur:cur + body_len])
        cur += body_len
        if rec[_MAGIC] == MESSAGE_MAGIC_V1:
            cur += 1 + buf[cur]
        else:
            cur += 2 + ((buf[cur] << 8) | buf[cur + 1])
        props.append(buf[cur + 2:cur + 2 + ((buf[cur] << 8) | buf[cur + 1])])
        heads.append(rec)
        pos += rec[_TOTALSIZE]
    if not heads:
        return empty_batch()
    fields = dict(zip(RECORD_FIELDS, zip(*heads, strict=True), strict=True))
    columns = {name: np.asarray(fields[field], dtype=np.int64) for name, field in _NUMERIC_FIELDS}
    born = [_HOSTS[h] for h in fields["BORNHOST"]]
    store = fields["STOREHOSTADDRESS"]
    msg_ids = pa.array([f"{_PREFIXES[h]}{p:016X}" for h, p in zip(store, fields["PHYSICALOFFSET"], strict=True)],
                       pa.string())
    return _batch(topic, broker_name, columns, pa.array(born, pa.string()),
                  pa.array([_HOSTS[h] for h in store], pa.string()), msg_ids, _joined(bodies, pa.binary()),
                  _joined(props, pa.string()), tags_filter)


def _inflate(body: memoryview, sys_flag: int, phys: int) -> bytes | None:
    """As the client's MessageDecoder: ZLIB bodies are inflated (and lose the flag); None leaves it as stored."""
    if sys_flag & COMPRESSION_TYPE_MASK not in _ZLIB_TYPES:
        return None
    try:
        return zlib.decompress(body)
    except zlib.error as err:
        log.warning("record at commit log offset %s is flagged compressed but does not inflate: %s", phys, err)
        return None


_HEX_DIGITS = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8)
_NIBBLE_SHIFTS = np.arange(60, -4, -4, dtype=np.int64)  # the 16 hex digits of a commit log offset, high first


def _offset_msg_ids_one_host(store_host: bytes, phys: np.ndarray) -> pa.Array:
    """offsetMsgId = hex(store host) + hex(commit log offset, 16 digits), for records of one store host (a pull's
    records share one): one uint8 matrix (prefix columns, then the offset's nibbles as digits) that is the string
    array's value buffer, every id the same width."""
    n = len(phys)
    prefix = np.frombuffer(_PREFIXES[store_host].encode(), dtype=np.uint8)
    width = len(prefix) + 16
    ids = np.empty((n, width), dtype=np.uint8)
    ids[:, :len(prefix)] = prefix
    ids[:, len(prefix):] = _HEX_DIGITS[(np.asarray(phys, dtype=np.int64)[:, None] >> _NIBBLE_SHIFTS) & 0xF]
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(ids)])


def _joined(parts: list[memoryview | bytes], type_: pa.DataType) -> pa.Array:
    """One copy: the parts joined into the values buffer, their lengths as the offsets."""
    lengths = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    offsets = np.zeros(len(parts) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(type_, len(parts), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(parts))])


def _timestamps(millis: np.ndarray) -> pa.Array:
    return pa.array(np.asarray(millis, dtype=np.int64) * 1000, pa.timestamp("us", tz="UTC"))


@dataclass(frozen=True, slots=True)
class _Entries:
    """The property entries of a batch's rows: entry ``i`` of row ``rows[i]`` has its key at
    ``data[starts[i]:split[i]]`` and its value at ``data[split[i] + 1:ends[i]]``; rows in order."""

    n: int
    buffer: pa.Buffer | None
    data: np.ndarray
    starts: np.ndarray
    split: np.ndarray
    ends: np.ndarray
    rows: np.ndarray

    @classmethod
    def of(cls, raw: pa.Array) -> _Entries:
        """"k\\x01v\\x02k\\x01v\\x02" per row, with decode_properties' rules: an entry splits at its first \\x01 and
        is kept only when key and value are both non-empty.

        In bulk over the rows' joined bytes: the entries end at each \\x02 and at each row's end (merged in order, a
        row's end before a \\x02 that starts the next row), the first \\x01 of an entry is a binary search."""
        n = len(raw)
        _, offsets_buffer, data_buffer = raw.buffers()
        offsets = np.frombuffer(offsets_buffer, dtype=np.int32, count=n + 1, offset=raw.offset * 4).astype(np.int64)
        data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
        first, last = int(offsets[0]), int(offsets[-1])
        chunk = data[first:last]
        separators = np.flatnonzero(chunk == _ENTRY_SEPARATOR) + first
        name_ends = np.flatnonzero(chunk == _NAME_VALUE_SEPARATOR) + first
        at = np.searchsorted(separators, offsets[1:], side="left")
        ends = np.insert(separators, at, offsets[1:])
        row_end = np.insert(np.zeros(len(separators), dtype=bool), at, True)
        starts = np.empty_like(ends)
        starts[:1] = first
        starts[1:] = ends[:-1] + ~row_end[:-1]  # after a \x02, or where the next row begins
        rows = np.cumsum(row_end) - row_end
        found = np.searchsorted(name_ends, starts)
        split = name_ends[np.minimum(found, max(len(name_ends) - 1, 0))] if len(name_ends) else starts
        keep = (found < len(name_ends)) & (split > starts) & (split + 1 < ends)
        return cls(n, data_buffer, data, starts[keep], split[keep], ends[keep], rows[keep])

    def map(self) -> pa.MapArray:
        """map<string,string>: keys and values cut out with ``_slices``."""
        keys = _slices(self.buffer, self.starts, self.split - self.starts, pa.string())
        values = _slices(self.buffer, self.split + 1, self.ends - self.split - 1, pa.string())
        map_offsets = np.zeros(self.n + 1, dtype=np.int32)
        np.cumsum(np.bincount(self.rows, minlength=self.n), out=map_offsets[1:])
        return pa.MapArray.from_arrays(pa.array(map_offsets, pa.int32()), keys, values)

    def lookup(self, name: str) -> pa.Array:
        """Each row's value of key ``name`` (its last entry of that key; null without one), as Arrow's
        ``map_lookup(map, name, "last")`` of ``map()``: only the keys of ``name``'s length are compared, in one
        gather, and only the values found are cut out."""
        key = np.frombuffer(name.encode(), dtype=np.uint8)
        found = np.flatnonzero(self.split - self.starts == len(key))
        if len(found):
            found = found[(self.data[self.starts[found, None] + np.arange(len(key))] == key).all(axis=1)]
        if not len(found):
            return pa.nulls(self.n, pa.string())
        rows = self.rows[found]
        last = np.ones(len(found), dtype=bool)
        last[:-1] = rows[1:] != rows[:-1]  # rows ascend: a row's last entry of the key is where its row changes
        found, rows = found[last], rows[last]
        values = _slices(self.buffer, self.split[found] + 1, self.ends[found] - self.split[found] - 1, pa.string())
        if len(found) == self.n:
            return values
        lengths = np.zeros(self.n, dtype=np.int32)
        lengths[rows] = self.ends[found] - self.split[found] - 1
        offsets = np.zeros(self.n + 1, dtype=np.int32)
        np.cumsum(lengths, out=offsets[1:])
        valid = np.zeros(self.n, dtype=bool)
        valid[rows] = True
        return pa.Array.from_buffers(pa.string(), self.n, [pa.py_buffer(np.packbits(valid, bitorder="little")),
                                                            pa.py_buffer(offsets), values.buffers()[2]],
                                     null_count=self.n - len(found))


_ENTRY_SEPARATOR = ord(PROPERTY_SEPARATOR)
_NAME_VALUE_SEPARATOR = ord(NAME_VALUE_SEPARATOR)


def empty_batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], ARROW_SCHEMA)
