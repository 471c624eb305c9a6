"""rmq's transactional batches: which items a prepared SEND_BATCH_MESSAGE may hold.

A prepared batch (SEND_BATCH_MESSAGE with the TRANSACTION_PREPARED sysFlag, ``rmqTransactionBatchEnable``) stores
each item as its own half message, as if each had been sent alone; END_TRANSACTION_BATCH later names them by
commit log offset, half queue offset and UNIQ_KEY. So every item must be a half message of the request's producer
group, undelayed, with a UNIQ_KEY of its own. The wire form is ``broker.remoting.transaction_batch``; the send
processor stores the batch, ``processors/end_transaction_batch.py`` ends it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from broker.common.errors import CorruptRecord
from broker.common.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_CLUSTER,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_MSG_REGION,
    PROPERTY_POP_CK,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_SEPARATOR,
    PROPERTY_TRACE_SWITCH,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    decode_properties,
    encode_properties,
)
from broker.common.message_batch import BatchMessage, decode_batch_body
from broker.common.record import set_prepared_offset
from broker.server.transaction.bridge import HALF_QUEUE_ID, HALF_TOPIC, parse_java_long, with_transaction_type
from broker.store.commit_log import StoreMessage, encode_ahead


def delay_level(props: dict[str, str]) -> int:
    """The DELAY property as the schedule service reads it (absent or not a number: 0)."""
    return parse_java_long(props.get(PROPERTY_DELAY_TIME_LEVEL)) or 0


def half_batch_refusal(items: Sequence[BatchMessage], producer_group: str) -> str | None:
    """Why the items of a prepared batch sent by ``producer_group`` cannot be stored as half messages (the remark
    of the MESSAGE_ILLEGAL answer, naming the first bad item), None when they can."""
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        props = item.properties
        prepared = props.get(PROPERTY_TRANSACTION_PREPARED, "")
        group = props.get(PROPERTY_PRODUCER_GROUP)
        if prepared.lower() != "true" or group != producer_group:
            return (f"a batch mixing prepared and plain messages is refused: item {index} has "
                    f"{PROPERTY_TRANSACTION_PREPARED}={prepared or '<none>'} and {PROPERTY_PRODUCER_GROUP}="
                    f"{group or '<none>'}, every item of a prepared batch of group {producer_group} must have "
                    f"{PROPERTY_TRANSACTION_PREPARED}=true and {PROPERTY_PRODUCER_GROUP}={producer_group}")
        if delay_level(props) > 0:
            return (f"item {index} of a prepared batch has delay level {delay_level(props)}: transactional "
                    "messages are never delayed")
        uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if not uniq:
            return (f"item {index} of a prepared batch has no {PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX}: each half "
                    "message is ended by its own")
        if uniq in seen:
            return (f"item {index} of a prepared batch repeats the {PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX} {uniq} "
                    f"of item {seen[uniq]}")
        seen[uniq] = index
    return None


@dataclass(frozen=True, slots=True)
class HalfBatchOrigin:
    """What every item of one prepared batch shares: where it is bound, and what its sender's request says."""

    topic: str
    queue_id: int
    sys_flag: int
    born_timestamp: int
    born_host: bytes
    reconsume_times: int


def half_batch_messages(items: Sequence[BatchMessage], origin: HalfBatchOrigin,
                        added: Mapping[str, str]) -> tuple[list[StoreMessage], list[StoreMessage]]:
    """The half message of each item and, beside it, the committed message END_TRANSACTION_BATCH will store (its
    prepared transaction offset set once the half is stored). As bridge.half_message and bridge.committed_message
    make them from a single send, with the broker's ``added`` properties (MSG_REGION, TRACE_ON, CLUSTER), but
    without decoding and re-encoding each item's properties: the producer's bytes are kept and the added entries
    appended, so the properties are in the producer's order followed by the broker's (nothing of Apache writes these
    records, so there is no Java order to follow). An item already holding a name the broker sets (or POP_CK, which
    it drops) is encoded from its merged properties instead."""
    added_bytes = encode_properties(added).encode()
    real = {PROPERTY_REAL_TOPIC: origin.topic, PROPERTY_REAL_QUEUE_ID: str(origin.queue_id)}
    real_bytes = encode_properties(real).encode()
    reserved = {*added, *real, PROPERTY_TRANSACTION_ID, PROPERTY_POP_CK}
    half_flag = with_transaction_type(origin.sys_flag, TRANSACTION_NOT_TYPE)
    commit_flag = with_transaction_type(origin.sys_flag, TRANSACTION_COMMIT_TYPE)
    halves: list[StoreMessage] = []
    commits: list[StoreMessage] = []
    topic, queue_id, born, host, reconsume = (origin.topic, origin.queue_id, origin.born_timestamp, origin.born_host,
                                              origin.reconsume_times)
    tx_entry = (PROPERTY_TRANSACTION_ID + NAME_VALUE_SEPARATOR).encode()
    entry_end = PROPERTY_SEPARATOR.encode()
    for item in items:
        props = item.properties
        uniq = props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]  # half_batch_refusal made sure each item has one
        committed = props.copy()
        committed.update(added)
        committed[PROPERTY_TRANSACTION_ID] = uniq
        encoded = item.encoded_properties
        if encoded.endswith(entry_end) and reserved.isdisjoint(props):
            commit_bytes = b"".join((encoded, added_bytes, tx_entry, uniq.encode(), entry_end))
        else:
            for name in (PROPERTY_POP_CK, *real):
                committed.pop(name, None)
            commit_bytes = encode_properties(committed).encode()
        half_props = committed.copy()
        half_props.update(real)
        body, flag = item.body, item.flag
        halves.append(StoreMessage(HALF_TOPIC, HALF_QUEUE_ID, body, half_props, flag, half_flag, born, host, reconsume,
                                   0, commit_bytes + real_bytes))
        commits.append(StoreMessage(topic, queue_id, body, committed, flag, commit_flag, born, host, reconsume, 0,
                                    commit_bytes))
    return halves, commits


# -- a prepared batch encoded ahead -----------------------------------------------------------------------------------
# The common prepared batch (every item a plain half message of the group: what the sink sends) is turned into its
# records in one call into C (``broker/_speedups_batch.c``), bytes ready for the CommitLog: the half records now, the
# committed records for END_TRANSACTION_BATCH, the same bytes half_batch_messages' messages are stored as. Any other
# batch (and one that breaks a rule, which the general path then names) takes the general path.

READ_NAMES = (PROPERTY_TRANSACTION_PREPARED, PROPERTY_PRODUCER_GROUP, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
              PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)  # read once each from an item of the common shape
# Names that send an item to the general path: the broker sets them, or they change what the half message is.
GENERAL_NAMES = frozenset({PROPERTY_DELAY_TIME_LEVEL, PROPERTY_TRANSACTION_CHECK_TIMES, PROPERTY_REAL_TOPIC,
                           PROPERTY_REAL_QUEUE_ID, PROPERTY_TRANSACTION_ID, PROPERTY_POP_CK, PROPERTY_MSG_REGION,
                           PROPERTY_TRACE_SWITCH, PROPERTY_CLUSTER})
TRANSACTION_ID_ENTRY = (PROPERTY_TRANSACTION_ID + NAME_VALUE_SEPARATOR).encode()


@dataclass(frozen=True, slots=True)
class HalfBatch:
    """A prepared batch encoded ahead: per item its half record (stored now), its committed record (a bytearray: its
    PREPAREDTRANSACTIONOFFSET is set once the half is stored), its UNIQ_KEY and its CHECK_IMMUNITY_TIME_IN_SECONDS.
    The records' queue offset, physical offset and store timestamp are written by their put."""

    halves: list[bytes]
    commits: list[bytearray]
    transaction_ids: list[str]
    immunities: list[str | None]


@dataclass(frozen=True, slots=True)
class RecordLimits:
    """What the CommitLog stores at most: a body of ``max_body`` bytes, a record of ``max_record``."""

    store_host: bytes
    max_body: int
    max_record: int


def half_batch_records(body: bytes, origin: HalfBatchOrigin, producer_group: str, added: Mapping[str, str],
                       limits: RecordLimits) -> HalfBatch | None:
    """The records of a prepared batch of the common shape, None for any other (see _half_batch_records_py)."""
    found = _half_batch_records(*_record_args(body, origin, producer_group, added, limits))
    return None if found is None else HalfBatch(*found)


def _record_args(body: bytes, origin: HalfBatchOrigin, producer_group: str, added: Mapping[str, str],
                 limits: RecordLimits) -> tuple:
    real = {PROPERTY_REAL_TOPIC: origin.topic, PROPERTY_REAL_QUEUE_ID: str(origin.queue_id)}
    return (body, producer_group.encode(), origin.topic.encode(), origin.queue_id, HALF_TOPIC.encode(), HALF_QUEUE_ID,
            origin.sys_flag, origin.born_timestamp, origin.born_host, origin.reconsume_times, limits.store_host,
            encode_properties(added).encode(), encode_properties(real).encode(), TRANSACTION_ID_ENTRY,
            limits.max_body, limits.max_record)


def _common_shape(encoded: bytes) -> bool:
    """Whether an item's PROPERTIES are of the common shape: every entry "name\x01value\x02" with both non-empty, no
    name of READ_NAMES twice, none of GENERAL_NAMES."""
    text = encoded.decode()
    if not text.endswith(PROPERTY_SEPARATOR):
        return False
    seen: set[str] = set()
    for entry in text[:-1].split(PROPERTY_SEPARATOR):
        name, sep, value = entry.partition(NAME_VALUE_SEPARATOR)
        if not (sep and name and value) or name in GENERAL_NAMES or name in seen:
            return False
        if name in READ_NAMES:
            seen.add(name)
    return True


def _half_batch_records_py(body: bytes, group: bytes, topic: bytes, queue_id: int, half_topic: bytes,
                           half_queue_id: int, sys_flag: int, born_timestamp: int, born_host: bytes,
                           reconsume_times: int, store_host: bytes, added: bytes, real: bytes,
                           transaction_id_entry: bytes, max_body: int, max_record: int) -> tuple | None:
    """The Python twin of ``_speedups.half_batch_records``: half_batch_messages' messages encoded, for a batch that
    decodes, passes half_batch_refusal, has items of the common shape and fits the limits; else None."""
    if (half_topic, half_queue_id, transaction_id_entry) != (HALF_TOPIC.encode(), HALF_QUEUE_ID, TRANSACTION_ID_ENTRY):
        raise ValueError("the half topic, queue and transaction id name are batch.py's")
    try:
        items = decode_batch_body(body)
    except CorruptRecord:
        return None
    if (not items or half_batch_refusal(items, group.decode()) is not None
            or not all(_common_shape(item.encoded_properties or b"") for item in items)):
        return None
    origin = HalfBatchOrigin(topic.decode(), queue_id, sys_flag, born_timestamp, born_host, reconsume_times)
    if encode_properties({PROPERTY_REAL_TOPIC: origin.topic, PROPERTY_REAL_QUEUE_ID: str(queue_id)}).encode() != real:
        raise ValueError("real must be the REAL_TOPIC and REAL_QID entries of topic and queue_id")
    halves, commits = half_batch_messages(items, origin, decode_properties(added.decode()))
    try:
        encoded = [(bytes(encode_ahead(h, store_host, max_body, max_record)),
                    encode_ahead(c, store_host, max_body, max_record)) for h, c in zip(halves, commits, strict=True)]
    except ValueError:
        return None
    ids = [item.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] for item in items]
    immunities = [item.properties.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS) for item in items]
    return [h for h, _ in encoded], [c for _, c in encoded], ids, immunities


def _set_prepared_offsets_py(records: list[bytearray], offsets: list[int]) -> None:
    """The Python twin of ``_speedups.set_prepared_offsets``."""
    if len(records) != len(offsets):
        raise ValueError("records and offsets differ in length")
    for record, offset in zip(records, offsets, strict=True):
        set_prepared_offset(record, offset)


try:
    from broker._speedups import half_batch_records as _half_batch_records
    from broker._speedups import set_prepared_offsets
except ImportError:  # built without a C compiler: the same records, slower
    _half_batch_records = _half_batch_records_py
    set_prepared_offsets = _set_prepared_offsets_py
