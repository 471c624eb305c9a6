"""END_TRANSACTION as the broker answers it (tests/integration/transactions.py): Java's codes and remarks, concurrent
ends, the half records kept for it, a committed message with a delay level, and prepared sends refused.
"""

from __future__ import annotations

import asyncio

import pytest

from broker.client import Message
from broker.client.transaction_protocol import LocalTransactionState
from broker.common.errors import RequestTimeout
from broker.common.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    decode_offset_msg_id,
    encode_properties,
    transaction_type,
)
from broker.common.record import MessageRecord
from broker.remoting.client import RemotingClient
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from broker.remoting.headers import EndTransactionRequestHeader, SendMessageRequestHeader
from broker.server.schedule import SCHEDULE_TOPIC
from broker.server.transaction.bridge import HALF_TOPIC, OP_TOPIC
from tests.helpers import eventually, now_ms, run
from tests.integration.transactions import (
    GROUP,
    TOPIC,
    Listener,
    body_of,
    cluster,
    end_transaction,
)


def test_end_transaction_codes_and_remarks(tmp_path):
    async def scenario() -> None:
        async with cluster(tmp_path, transaction_time_out=60_000) as c:  # no check while we talk
            async with c.producer(Listener(LocalTransactionState.UNKNOW)) as producer:
                result = await producer.send_message_in_transaction(Message(TOPIC, b"x"))
            commit = TRANSACTION_COMMIT_TYPE

            async def remark_of(kind: int = commit, **overrides: object) -> tuple[int, str | None]:
                response = await end_transaction(c, result, kind, oneway=False, **overrides)
                return response.code, response.remark

            assert await remark_of(producer_group="other") == (ResponseCode.SYSTEM_ERROR, "The producer group wrong")
            assert await remark_of(tran_state_table_offset=99) == (
                ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong")
            assert await remark_of(commit_log_offset=10**9) == (
                ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
            code, remark = await remark_of(kind=5)
            assert code == ResponseCode.SYSTEM_ERROR and "commitOrRollback field wrong" in remark
            with pytest.raises(RequestTimeout):  # a pending state is not answered at all
                await end_transaction(c, result, TRANSACTION_NOT_TYPE, oneway=False)
            assert c.broker.transactional_message_service.open, "a refused end ended the transaction"
            assert await remark_of() == (ResponseCode.SUCCESS, None)
            assert await remark_of() == (ResponseCode.SUCCESS, None)  # ended before: nothing written again
            assert await remark_of(kind=TRANSACTION_ROLLBACK_TYPE) == (ResponseCode.SUCCESS, None)
            assert [body_of(r) for r in await c.records(TOPIC)] == [b"x"]
            assert len(await c.records(OP_TOPIC)) == 1

    run(scenario())


def test_concurrent_ends_of_one_transaction_commit_it_once(tmp_path):
    async def scenario() -> None:
        async with cluster(tmp_path, transaction_time_out=60_000) as c:
            async with c.producer(Listener(LocalTransactionState.UNKNOW)) as producer:
                result = await producer.send_message_in_transaction(Message(TOPIC, b"once"))
            await asyncio.gather(*(end_transaction(c, result, TRANSACTION_COMMIT_TYPE) for _ in range(5)))
            await eventually("commit", lambda: c.broker.transactional_message_service.open == {})
            await asyncio.sleep(0.2)
            assert [body_of(r) for r in await c.records(TOPIC)] == [b"once"]

    run(scenario())


def test_a_kept_half_record_is_the_stored_one_and_is_ended_as_one_read_from_the_store(tmp_path):
    """The records kept for END_TRANSACTION (half_records) are what lookup_message decodes, field for field, and a
    kept half and one read back from the store end alike; ended halves are not kept."""
    async def scenario() -> None:
        async with cluster(tmp_path, transaction_time_out=60_000) as c:
            service = c.broker.transactional_message_service
            async with c.producer(Listener(LocalTransactionState.UNKNOW)) as producer:
                sent = [await producer.send_message_in_transaction(
                    Message(TOPIC, body, tags="TagA", keys=f"k{i} k", flag=3, properties={"user": "é"}))
                    for i, body in enumerate([b"kept", b"read", b"x" * 5000])]
            offsets = [decode_offset_msg_id(r.offset_msg_id)[1] for r in sent]
            for offset in offsets:
                kept = service.half_records.get(offset)
                assert kept is not None and kept == c.store.lookup_message(offset)
            service.half_records.discard(offsets[1])  # as if the bound had pushed it out: read from the store
            for r in sent:
                assert (await end_transaction(c, r, TRANSACTION_COMMIT_TYPE, oneway=False)).code == ResponseCode.SUCCESS
            assert service.open == {} and len(service.half_records) == 0 and service.half_records.bytes == 0
            committed = sorted(await c.records(TOPIC), key=lambda r: r.prepared_transaction_offset)
            assert [r.prepared_transaction_offset for r in committed] == offsets
            kept, read, big = committed
            differs = {"store_size", "body_crc", "queue_id", "queue_offset", "commit_log_offset", "born_timestamp",
                       "store_timestamp", "prepared_transaction_offset", "body", "properties"}
            for field_ in set(MessageRecord.__slots__) - differs:
                assert getattr(kept, field_) == getattr(read, field_), field_
            ids = (PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, PROPERTY_TRANSACTION_ID, "KEYS")
            assert [(k, v if k not in ids else k) for k, v in kept.properties.items()] == [
                (k, v if k not in ids else k) for k, v in read.properties.items()]
            assert (body_of(kept), body_of(read), big.body == c.store.lookup_message(offsets[2]).body) == (
                b"kept", b"read", True)

    run(scenario())


def test_kept_half_records_stay_within_their_bound():
    from broker.server.transaction.state import RECORD_OVERHEAD, KeptByOffset

    records: KeptByOffset[str] = KeptByOffset(max_bytes=3 * (100 + RECORD_OVERHEAD))
    for offset in range(0, 1000, 100):
        records.add(offset, f"r{offset}", 100)
        assert records.bytes <= records.max_bytes
    assert len(records) == 3 and [records.get(o) for o in (600, 700, 800, 900)] == [None, "r700", "r800", "r900"]
    records.add(900, "again", 200)  # the same offset again replaces it
    assert len(records) == 2 and records.bytes == 100 + 200 + 2 * RECORD_OVERHEAD and records.get(900) == "again"
    records.add(1000, "huge", 10 * records.max_bytes)  # bigger than the bound: not kept at all
    assert len(records) == 0 and records.bytes == 0
    records.discard(12345)  # not there: nothing happens


def test_kept_values_added_many_at_once_count_as_added_one_by_one():
    """add_many takes new offsets in one step and replaces known ones as add does; the bound applies after."""
    from broker.server.transaction.state import KeptByOffset

    one, many = KeptByOffset(max_bytes=1000, overhead=10), KeptByOffset(max_bytes=1000, overhead=10)
    for batch in ([(0, "a", 100), (100, "b", 100)], [(200, "c", 100), (300, "d", 100)],
                  [(300, "d2", 50), (400, "e", 100)], [(500, "f", 600)]):
        for offset, value, size in batch:
            one.add(offset, value, size)
        many.add_many(*map(list, zip(*batch, strict=True)))
        assert (many.bytes, len(many)) == (one.bytes, len(one)) and many.bytes <= many.max_bytes
        assert many.get_many(range(0, 600, 100)) == one.get_many(range(0, 600, 100))
    assert many.get_many([300, 400, 500]) == ["d2", "e", "f"] and many.get(0) is None
    with pytest.raises(ValueError, match="2 offsets, 1 values and 2 sizes"):
        many.add_many([600, 700], ["g"], [1, 1])
    assert many.get(600) is None and (many.bytes, len(many)) == (one.bytes, len(one))


def test_a_committed_message_with_a_delay_level_is_delivered_after_its_delay(tmp_path):
    """Official clients clear DELAY from transactional sends, so they never see this case. Apache's broker parks
    such a half message at prepare time, and its commit then goes to the half topic (REAL_TOPIC); ours keeps the half
    in the half topic and parks the committed message, as its store hook does for any committed message."""
    async def scenario() -> None:
        async with cluster(tmp_path, transaction_time_out=60_000) as c, RemotingClient() as client:
            props = {PROPERTY_TRANSACTION_PREPARED: "true", PROPERTY_PRODUCER_GROUP: GROUP,
                     PROPERTY_DELAY_TIME_LEVEL: "1", PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "AC110001000078308DB1"}
            header = SendMessageRequestHeader(
                producer_group=GROUP, topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=4, queue_id=0,
                sys_flag=TRANSACTION_PREPARED_TYPE, born_timestamp=now_ms(), flag=0,
                properties=encode_properties(props))
            sent = await client.invoke(c.broker.broker_addr,
                                       create_request(RequestCode.SEND_MESSAGE, header.to_ext(), b"later"), 2000)
            assert sent.code == ResponseCode.SUCCESS
            _, offset = decode_offset_msg_id(sent.ext_fields["msgId"])
            end = EndTransactionRequestHeader(
                producer_group=GROUP, tran_state_table_offset=int(sent.ext_fields["queueOffset"]),
                commit_log_offset=offset, commit_or_rollback=TRANSACTION_COMMIT_TYPE,
                msg_id="AC110001000078308DB1", topic=TOPIC)
            committed_at = now_ms()
            response = await client.invoke(c.broker.broker_addr,
                                           create_request(RequestCode.END_TRANSACTION, end.to_ext()), 2000)
            assert response.code == ResponseCode.SUCCESS
            [parked] = await c.records(SCHEDULE_TOPIC)
            assert parked.properties[PROPERTY_REAL_TOPIC] == TOPIC
            assert transaction_type(parked.sys_flag) == TRANSACTION_COMMIT_TYPE
            assert await c.records(TOPIC) == [], "delivered before its delay"
            await eventually("delayed delivery", lambda: c.store.max_offset_in_queue(TOPIC, 0) > 0)
            [delivered] = await c.records(TOPIC)
            assert body_of(delivered) == b"later"
            assert delivered.store_timestamp - committed_at >= 900  # level 1 is 1 s

    run(scenario())


def test_prepared_sends_are_refused_when_reject_transaction_message(tmp_path):
    async def scenario() -> None:
        async with cluster(tmp_path, reject_transaction_message=True) as c, RemotingClient() as client:
            header = SendMessageRequestHeader(
                producer_group=GROUP, topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=4, queue_id=0,
                sys_flag=TRANSACTION_PREPARED_TYPE, born_timestamp=now_ms(), flag=0,
                properties=encode_properties({PROPERTY_TRANSACTION_PREPARED: "true", PROPERTY_PRODUCER_GROUP: GROUP}))
            response = await client.invoke(c.broker.broker_addr,
                                           create_request(RequestCode.SEND_MESSAGE, header.to_ext(), b"x"), 2000)
            assert response.code == ResponseCode.NO_PERMISSION
            assert response.remark == "the broker[127.0.0.1] sending transaction message is forbidden"
            assert await c.records(HALF_TOPIC) == []

    run(scenario())
