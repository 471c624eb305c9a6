"""What the transaction service keeps across a restart (tests/integration/transactions.py): the CID_RMQ_SYS_TRANS
offsets of the half and op topics, as Java means them, the op records of Java 4 and 5, and the progress over done
offsets.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker.client import Message
from broker.client.transaction_protocol import LocalTransactionState
from broker.common.fastjson import decode_json, encode_json
from broker.common.message import (
    TRANSACTION_ROLLBACK_TYPE,
    encode_properties,
    pack_host,
)
from broker.common.record import MessageRecord, decode_record, encode_record
from broker.server.metadata.paths import consumer_offset_path
from broker.server.transaction.bridge import HALF_TOPIC, OP_TOPIC, TRANS_GROUP
from tests.helpers import eventually, run
from tests.integration.transactions import (
    INTERVAL_MS,
    TOPIC,
    Listener,
    body_of,
    cluster,
    end_transaction,
)


def forget_transaction_offsets(tmp: Path) -> None:
    """A crash before consumerOffset.json was written: the CID_RMQ_SYS_TRANS offsets are gone."""
    path = Path(consumer_offset_path(str(tmp / "store")))
    data = decode_json(path.read_text())
    table = data["offsetTable"]
    for key in [k for k in table if k.endswith(f"@{TRANS_GROUP}")]:
        del table[key]
    path.write_text(encode_json(data))


@pytest.mark.parametrize("offsets", ["kept", "lost"])
def test_a_restart_loses_no_half_message_and_commits_none_twice(tmp_path, offsets):
    async def scenario() -> None:
        async with cluster(tmp_path, transaction_time_out=600, transaction_check_interval=200) as c:
            # Before the restart: one committed, one rolled back, two open (one of them checked once already).
            answers = {b"committed": LocalTransactionState.COMMIT_MESSAGE,
                       b"rolled-back": LocalTransactionState.ROLLBACK_MESSAGE}
            listener = Listener(LocalTransactionState.UNKNOW, check=lambda m: LocalTransactionState.UNKNOW)
            async with c.producer(listener, "before") as producer:
                for body, state in answers.items():
                    listener.execute = state
                    await producer.send_message_in_transaction(Message(TOPIC, body))
                listener.execute = LocalTransactionState.UNKNOW
                await producer.send_message_in_transaction(Message(TOPIC, b"open-checked"))
                await eventually("a first check", lambda: listener.checked)
                await producer.send_message_in_transaction(Message(TOPIC, b"open-new"))
                assert len(c.broker.transactional_message_service.open) == 2
            assert [body_of(r) for r in await c.records(TOPIC)] == [b"committed"]

            await c.restart(before_start=(lambda: forget_transaction_offsets(tmp_path)) if offsets == "lost"
                            else (lambda: None))
            reopened = c.broker.transactional_message_service.open.values()
            assert sorted(body_of(c.store.lookup_message(e.commit_log_offset)) for e in reopened) == [
                b"open-checked", b"open-new"]

            # After it, a producer that commits whatever it is asked about: only the open ones may be asked.
            after = Listener(LocalTransactionState.COMMIT_MESSAGE)
            async with c.producer(after, "after"):
                await eventually("commits on check", lambda: c.broker.transactional_message_service.open == {})
                await asyncio.sleep(5 * INTERVAL_MS / 1000)
            assert sorted(m.body for _, m in after.checked) == [b"open-checked", b"open-new"]
            assert sorted(body_of(r) for r in await c.records(TOPIC)) == [b"committed", b"open-checked", b"open-new"]

            await c.restart()  # and once everything ended, a restart has nothing to reopen
            assert c.broker.transactional_message_service.open == {}

    run(scenario())


def test_transaction_offsets_follow_javas_meaning(tmp_path):
    """CID_RMQ_SYS_TRANS offsets: every half offset below the half one is ended or superseded, every op record below
    the op one names only such offsets; an open transaction holds both back."""
    async def scenario() -> None:
        async with cluster(tmp_path, transaction_time_out=60_000) as c:
            listener = Listener(LocalTransactionState.UNKNOW, check=lambda m: LocalTransactionState.UNKNOW)
            async with c.producer(listener) as producer:
                first = await producer.send_message_in_transaction(Message(TOPIC, b"open"))
                listener.execute = LocalTransactionState.COMMIT_MESSAGE
                for i in range(3):
                    await producer.send_message_in_transaction(Message(TOPIC, b"c%d" % i))
                await eventually("commits", lambda: len(c.broker.transactional_message_service.open) == 1)
                offsets = c.broker.consumer_offset_manager
                service = c.broker.transactional_message_service
                assert (service.half.offset, service.op.offset) == (first.queue_offset, 0) == (0, 0)
                # Nothing moved yet, so nothing is committed (as in Java: no CID_RMQ_SYS_TRANS entry at all).
                assert offsets.query_offset(TRANS_GROUP, HALF_TOPIC, 0) == -1
                assert offsets.query_offset(TRANS_GROUP, OP_TOPIC, 0) == -1
                await end_transaction(c, first, TRANSACTION_ROLLBACK_TYPE)
                await eventually("rollback", lambda: not c.broker.transactional_message_service.open)
                await c.dispatched()
                assert offsets.query_offset(TRANS_GROUP, HALF_TOPIC, 0) == c.store.max_offset_in_queue(HALF_TOPIC, 0)
                assert offsets.query_offset(TRANS_GROUP, OP_TOPIC, 0) == c.store.max_offset_in_queue(OP_TOPIC, 0)

    run(scenario())


def test_consumer_offsets_file_names_the_transaction_group(tmp_path):
    async def scenario() -> None:
        async with cluster(tmp_path) as c:
            async with c.producer(Listener(LocalTransactionState.COMMIT_MESSAGE)) as producer:
                await producer.send_message_in_transaction(Message(TOPIC, b"x"))
                await eventually("commit", lambda: c.broker.transactional_message_service.open == {})
        table = decode_json(Path(consumer_offset_path(str(tmp_path / "store"))).read_text())["offsetTable"]
        assert table[f"{HALF_TOPIC}@{TRANS_GROUP}"] == {"0": 1}
        assert table[f"{OP_TOPIC}@{TRANS_GROUP}"] == {"0": 1}

    run(scenario())


def test_op_records_of_java_4_and_5_are_read():
    from broker.server.transaction.bridge import op_message, op_messages, op_offsets

    host = pack_host("127.0.0.1", 1)

    def op(body: bytes, tags: str = "d") -> MessageRecord:
        props = encode_properties({"WAIT": "true", "TAGS": tags}).encode()
        return decode_record(encode_record(topic=OP_TOPIC.encode(), queue_id=0, body=body, properties=props,
                                           born_host=host, store_host=host))

    assert op_offsets(op(b"3,4,")) == [3, 4]  # 5.x: batched, each offset followed by ","
    assert op_offsets(op(b"7")) == [7]  # 4.x: one offset, no separator
    assert op_offsets(op(b"7", tags="x")) == []  # not a remove record
    assert op_offsets(op(b"x,9,")) == [9]
    assert op_message([5, 6], host, 0).body == b"5,6,"
    # Cut as Java's op batches: an entry is added while the body is shorter than the bound (here 5 bytes).
    grouped = op_messages([1, 22, 333, 4444, 5], host, 0, max_size=5)
    assert [(op.body, named) for op, named in grouped] == [(b"1,22,", [1, 22]), (b"333,4444,", [333, 4444]),
                                                           (b"5,", [5])]
    assert all(op.properties == op_message([1], host, 0).properties for op, _ in grouped)


def test_queue_progress_moves_over_done_offsets_only():
    from broker.server.transaction.state import QueueProgress

    progress = QueueProgress(3)
    assert not progress.done(5) and progress.offset == 3
    assert not progress.done(1)  # below: nothing to do
    assert progress.done(3) and progress.offset == 4
    assert progress.done(4) and progress.offset == 6
    # Many at once (the ends of one put): the same consume offset as one at a time.
    assert not progress.done_many([]) and not progress.done_many([8, 9]) and progress.offset == 6
    assert progress.done_many([2, 7, 6]) and progress.offset == 10  # a run from the consume offset: one step
    assert progress.done_many([12, 10]) and progress.offset == 11  # a gap at 11 stops it
    assert progress.done_many([11]) and progress.offset == 13
