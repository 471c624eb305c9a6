"""rmq's transactional batches: which items a prepared SEND_BATCH_MESSAGE may hold.

A prepared batch (SEND_BATCH_MESSAGE with the TRANSACTION_PREPARED sysFlag, ``rmqTransactionBatchEnable``) stores
each item as its own half message, as if each had been sent alone; END_TRANSACTION_BATCH later names them by
commit log offset, half queue offset and UNIQ_KEY. So every item must be a half message of the request's producer
group, undelayed, with a UNIQ_KEY of its own. The wire form is ``broker.remoting.transaction_batch``; the send
processor stores the batch, ``processors/end_transaction_batch.py`` ends it.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.common.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from broker.common.message_batch import BatchMessage
from broker.server.transaction.bridge import parse_java_long


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
