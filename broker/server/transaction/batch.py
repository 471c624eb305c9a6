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

from broker.common.message import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_POP_CK,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_SEPARATOR,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    encode_properties,
)
from broker.common.message_batch import BatchMessage
from broker.server.transaction.bridge import HALF_QUEUE_ID, HALF_TOPIC, parse_java_long, with_transaction_type
from broker.store.commit_log import StoreMessage


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
