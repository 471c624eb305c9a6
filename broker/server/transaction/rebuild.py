"""Which transactions are open, read back from the store at start: the half and op topics from the CID_RMQ_SYS_TRANS
consume offsets on (fetchConsumeOffset: the committed offset, else the queue's minimum).

A half record is open unless an op record ends one of the half offsets of its transaction id (every re-put of a
transaction shares its id, so an op record for any of them ends all); the newest half record of an open transaction
is the one kept, the older ones are superseded. What this reads only; ``service.TransactionalMessageService.rebuild``
takes it over.

Examples:
    >>> stored = read_transactions(controller.store, controller.consumer_offset_manager)  # doctest: +SKIP
    >>> len(stored.open), stored.half.offset, stored.op.offset  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.common.record import MessageRecord, decode_record
from broker.server.transaction import bridge
from broker.server.transaction.bridge import HALF_QUEUE_ID, HALF_TOPIC, OP_TOPIC, TRANS_GROUP
from broker.server.transaction.state import HalfMessage, QueueProgress
from broker.store.results import GetMessageStatus

if TYPE_CHECKING:
    from broker.server.metadata.offsets import ConsumerOffsetManager
    from broker.store.message_store import MessageStore

REBUILD_BATCH = 256  # records read per get_message while rebuilding


@dataclass(slots=True)
class StoredTransactions:
    """What the store says: the open transactions by id, how far each queue is done (superseded half offsets
    marked), per op record not yet done the highest half offset it names, and the consume offsets read first."""

    open: dict[str, HalfMessage]
    half: QueueProgress
    op: QueueProgress
    op_refs: dict[int, int]
    read_from: dict[str, int]


def read_transactions(store: MessageStore, offsets: ConsumerOffsetManager) -> StoredTransactions:
    """Half records from the half consume offset on, minus those an op record from the op consume offset on ends,
    one (the newest) per transaction id."""
    half = QueueProgress(_consume_offset(store, offsets, HALF_TOPIC))
    op = QueueProgress(_consume_offset(store, offsets, OP_TOPIC))
    stored = StoredTransactions({}, half, op, {}, {HALF_TOPIC: half.offset, OP_TOPIC: op.offset})
    ended: set[int] = set()
    for op_offset, record in _scan(store, OP_TOPIC, op.offset, body=True):
        named = bridge.op_offsets(record)
        ended.update(named)
        stored.op_refs[op_offset] = max(named, default=-1)
    chains: dict[str, list[int]] = {}
    newest: dict[str, HalfMessage] = {}
    for queue_offset, record in _scan(store, HALF_TOPIC, half.offset, body=False):
        entry = HalfMessage.from_record(record, queue_offset)
        chains.setdefault(entry.transaction_id, []).append(queue_offset)
        newest[entry.transaction_id] = entry
    for tx, chain in chains.items():
        if ended.isdisjoint(chain):
            stored.open[tx] = newest[tx]
            chain = chain[:-1]
        for offset in chain:
            half.done(offset)
    return stored


def _consume_offset(store: MessageStore, offsets: ConsumerOffsetManager, topic: str) -> int:
    """fetchConsumeOffset: the committed offset, else the queue's minimum (never below it)."""
    committed = offsets.query_offset(TRANS_GROUP, topic, HALF_QUEUE_ID)
    return max(committed, store.min_offset_in_queue(topic, HALF_QUEUE_ID))


def _scan(store: MessageStore, topic: str, offset: int, *, body: bool) -> Iterator[tuple[int, MessageRecord]]:
    """(queue offset, record) of ``topic`` queue 0 from ``offset`` to its end."""
    while True:
        result = store.get_message(TRANS_GROUP, topic, HALF_QUEUE_ID, offset, REBUILD_BATCH)
        for queue_offset, data in zip(result.queue_offsets, result.records(), strict=True):
            yield queue_offset, decode_record(data, body=body)
        if result.status not in (GetMessageStatus.FOUND, GetMessageStatus.NO_MATCHED_MESSAGE,
                                 GetMessageStatus.MESSAGE_WAS_REMOVING, GetMessageStatus.OFFSET_TOO_SMALL):
            return
        if result.next_begin_offset <= offset:
            return
        offset = result.next_begin_offset
