"""Transactional (half) messages end to end, in one process (tests/integration/transactions.py): the three outcomes
of a local transaction (commit, rollback, unknown and then checked), the check's limits and its immunity time.
"""

from __future__ import annotations

import asyncio

from broker.client import Message
from broker.client.transaction_protocol import LocalTransactionState
from broker.common.message import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    transaction_type,
)
from broker.remoting.codes import ResponseCode
from broker.server.transaction.bridge import CHECK_MAX_TIME_TOPIC, HALF_TOPIC, OP_TOPIC, TRANS_GROUP
from tests.helpers import eventually, now_ms, run
from tests.integration.transactions import (
    GROUP,
    INTERVAL_MS,
    TIMEOUT_MS,
    TOPIC,
    Listener,
    body_of,
    cluster,
    end_transaction,
)


def test_commit_writes_the_message_to_its_real_topic_and_an_op_record(tmp_path):
    async def scenario() -> None:
        async with cluster(tmp_path) as c:
            listener = Listener(LocalTransactionState.COMMIT_MESSAGE)
            async with c.producer(listener) as producer:
                msg = Message(TOPIC, b"paid", tags="TagA", keys="order-1", flag=7)
                result = await producer.send_message_in_transaction(msg, arg="order-1")
                assert result.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
                assert result.transaction_id == result.msg_id
                await eventually("commit", lambda: c.broker.transactional_message_service.open == {})
            [half] = await c.records(HALF_TOPIC)
            [op] = await c.records(OP_TOPIC)
            [committed] = await c.records(TOPIC)
            uniq = result.msg_id
            # The half message: in queue 0 of the half topic, not a transaction type, destination kept.
            assert transaction_type(half.sys_flag) == TRANSACTION_NOT_TYPE
            assert half.queue_id == 0 and half.queue_offset == result.queue_offset
            assert half.properties[PROPERTY_REAL_TOPIC] == TOPIC
            assert half.properties[PROPERTY_REAL_QUEUE_ID] == str(result.message_queue.queue_id)
            assert half.properties[PROPERTY_TRANSACTION_ID] == uniq
            assert half.properties[PROPERTY_PRODUCER_GROUP] == GROUP
            # The committed message: real topic and queue, commit type, the half record's properties but its
            # destination (as Apache 5.5 writes it: TRAN_MSG stays).
            assert (committed.topic, committed.queue_id) == (TOPIC, result.message_queue.queue_id)
            assert transaction_type(committed.sys_flag) == TRANSACTION_COMMIT_TYPE
            assert committed.prepared_transaction_offset == half.commit_log_offset
            assert body_of(committed) == b"paid" and committed.flag == 7
            destination = (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID)
            assert list(committed.properties.items()) == [(k, val) for k, val in half.properties.items()
                                                          if k not in destination]
            assert committed.properties[PROPERTY_TRANSACTION_PREPARED] == "true"
            assert committed.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == uniq
            assert committed.properties["KEYS"] == "order-1" and committed.properties["TAGS"] == "TagA"
            assert committed.born_timestamp == half.born_timestamp
            # The op record: tag "d", body the half queue offset and a comma, as Java 5 writes it.
            assert list(op.properties.items()) == [("WAIT", "true"), ("TAGS", "d")]  # Java's HashMap order
            assert body_of(op) == f"{half.queue_offset},".encode()
            assert listener.executed[0].properties[PROPERTY_TRANSACTION_PREPARED] == "true"
            assert listener.checked == []
            offsets = c.broker.consumer_offset_manager
            assert offsets.query_offset(TRANS_GROUP, HALF_TOPIC, 0) == 1
            assert offsets.query_offset(TRANS_GROUP, OP_TOPIC, 0) == 1

    run(scenario())


def test_rollback_leaves_nothing_visible_but_writes_the_op_record(tmp_path):
    async def scenario() -> None:
        async with cluster(tmp_path) as c:
            async with c.producer(Listener(LocalTransactionState.ROLLBACK_MESSAGE)) as producer:
                result = await producer.send_message_in_transaction(Message(TOPIC, b"cancelled"))
                assert result.local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE
                await eventually("rollback", lambda: c.broker.transactional_message_service.open == {})
            assert await c.records(TOPIC) == []
            [op] = await c.records(OP_TOPIC)
            assert body_of(op) == f"{result.queue_offset},".encode()

    run(scenario())


def test_unknown_stays_invisible_until_the_check_commits_it(tmp_path):
    async def scenario() -> None:
        async with cluster(tmp_path) as c:
            listener = Listener(LocalTransactionState.UNKNOW)
            async with c.producer(listener) as producer:
                sent_at = now_ms()
                result = await producer.send_message_in_transaction(Message(TOPIC, b"later", keys="k"))
                assert result.local_transaction_state is LocalTransactionState.UNKNOW
                await asyncio.sleep(TIMEOUT_MS / 2000)
                # Only the check commits it: whatever the timing on a busy machine, visible means checked already.
                assert await c.records(TOPIC) == [] or listener.checked, "visible before anyone committed it"
                await eventually("a check", lambda: listener.checked)
                await eventually("commit on check", lambda: c.broker.transactional_message_service.open == {})
            checked_at, checked = listener.checked[0]
            assert len(listener.checked) == 1
            assert checked_at - sent_at >= TIMEOUT_MS, "checked before transactionTimeOut"
            # What the producer is asked about: the message as sent, in its real topic, one check counted.
            assert checked.topic == TOPIC and checked.body == b"later" and checked.keys == "k"
            assert checked.msg_id == result.msg_id
            assert checked.properties[PROPERTY_TRANSACTION_CHECK_TIMES] == "1"
            halves = await c.records(HALF_TOPIC)
            assert [h.properties.get(PROPERTY_TRANSACTION_CHECK_TIMES) for h in halves] == [None, "1"]
            [committed] = await c.records(TOPIC)
            assert committed.prepared_transaction_offset == halves[1].commit_log_offset
            assert body_of(committed) == b"later"
            [op] = await c.records(OP_TOPIC)
            assert body_of(op) == f"{halves[1].queue_offset},".encode()

    run(scenario())


def test_the_check_can_roll_back_and_an_unanswered_transaction_is_discarded_after_check_max(tmp_path):
    async def scenario() -> None:
        async with cluster(tmp_path, transaction_check_max=2) as c:
            answers = {"rollback": LocalTransactionState.ROLLBACK_MESSAGE, "never": LocalTransactionState.UNKNOW}
            listener = Listener(LocalTransactionState.UNKNOW, check=lambda m: answers[m.body.decode()])
            async with c.producer(listener) as producer:
                sent = {body: await producer.send_message_in_transaction(Message(TOPIC, body.encode()))
                        for body in answers}
                await eventually("all ended", lambda: c.broker.transactional_message_service.open == {})
                await asyncio.sleep(5 * INTERVAL_MS / 1000)
            asked = [m.body for _, m in listener.checked]
            assert asked.count(b"rollback") == 1
            assert asked.count(b"never") == 2, "asked other than transactionCheckMax times"
            assert await c.records(TOPIC) == []
            [discarded] = await c.records(CHECK_MAX_TIME_TOPIC)
            assert body_of(discarded) == b"never"
            assert discarded.properties[PROPERTY_TRANSACTION_CHECK_TIMES] == "2"
            assert c.broker.topic_config_manager.select_topic_config(CHECK_MAX_TIME_TOPIC) is not None
            # A commit that comes after the discard still commits, as Java's does; a rolled-back one stays so.
            for body in answers:
                response = await end_transaction(c, sent[body], TRANSACTION_COMMIT_TYPE, oneway=False)
                assert response.code == ResponseCode.SUCCESS
            assert [body_of(r) for r in await c.records(TOPIC)] == [b"never"]

    run(scenario())


def test_check_immunity_time_delays_the_check_and_a_late_end_is_refused(tmp_path):
    async def scenario() -> None:
        async with cluster(tmp_path) as c:
            listener = Listener(LocalTransactionState.UNKNOW)
            async with c.producer(listener) as producer:
                msg = Message(TOPIC, b"immune", properties={PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: "1"})
                sent_at = now_ms()
                result = await producer.send_message_in_transaction(msg)
                await asyncio.sleep(0.2)
                # The producer's own commit within the immunity time is fine...
                early = await end_transaction(c, result, TRANSACTION_COMMIT_TYPE, oneway=False)
                assert early.code == ResponseCode.SUCCESS
                late_msg = Message(TOPIC, b"late", properties={PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: "1"})
                late = await producer.send_message_in_transaction(late_msg)
                await eventually("a check", lambda: listener.checked)
                assert listener.checked[0][0] - sent_at >= 1000, "checked within CHECK_IMMUNITY_TIME_IN_SECONDS"
                # ...after it, only an answer to a check may end it.
                response = await end_transaction(c, late, TRANSACTION_COMMIT_TYPE, oneway=False)
                assert response.code == ResponseCode.ILLEGAL_OPERATION
            await eventually("commit on check", lambda: c.broker.transactional_message_service.open == {})
            assert sorted(body_of(r) for r in await c.records(TOPIC)) == [b"immune", b"late"]

    run(scenario())


def test_immunity_times_as_java_reads_them():
    from broker.server.transaction.bridge import check_immunity_ms, end_immunity_ms

    assert check_immunity_ms("2", 6000) == 2000  # the check honours a shorter one (TransactionalMessageServiceImpl)
    assert check_immunity_ms("ten", 6000) == 6000
    assert end_immunity_ms("2", 6000) == 6000  # ending refuses only after at least transactionTimeOut
    assert end_immunity_ms("10", 6000) == 10_000
