"""The lite pull consumer and the push consumer against the in-process fakes, plus ProcessQueue and the offset
stores on their own."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from broker.client.consumer import LitePullConfig, LitePullConsumer
from broker.client.instance import ClientConfig
from broker.client.message import Message, MessageExt, MessageQueue, PullStatus
from broker.client.offsets import (
    ConsumeFromWhere,
    LocalFileOffsetStore,
    MessageModel,
    ProcessQueue,
    ReadOffsetType,
    compute_pull_from_where,
    parse_consume_timestamp,
)
from broker.client.producer import Producer
from broker.client.push_consumer import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    PushConsumer,
    PushConsumerConfig,
)
from broker.common.errors import MQClientError
from broker.remoting.codes import RequestCode, ResponseCode
from tests.helpers import eventually
from tests.unit.client.fakes import FakeBroker, FakeNamesrv, run

TOPIC = "T"


def _ext(offset: int, body: bytes = b"x") -> MessageExt:
    return MessageExt(TOPIC, body, 0, {}, 0, offset, offset * 100, 0, 0, "1.1.1.1:1", 0, "2.2.2.2:2", 0, 0, 0, 0, "ID")


def _client(namesrv: FakeNamesrv, name: str = "c1") -> ClientConfig:
    return ClientConfig(namesrv_addr=namesrv.addr, client_ip="10.0.0.9", instance_name=name)


async def _fill(broker: FakeBroker, namesrv: FakeNamesrv, per_queue: dict[int, list[Message]]) -> None:
    async with Producer("pg", client_config=_client(namesrv, "producer")) as producer:
        for queue_id, msgs in per_queue.items():
            for msg in msgs:
                await producer.send(msg, MessageQueue(TOPIC, broker.name, queue_id))


# -- ProcessQueue and offset stores ------------------------------------------------------------------------------------


def test_process_queue_commits_the_lowest_unacknowledged_offset() -> None:
    pq = ProcessQueue()
    assert pq.remove_messages([_ext(0)]) == -1
    msgs = [_ext(i, b"abc") for i in range(5, 10)]
    pq.put_messages(msgs)
    assert (pq.msg_count, pq.msg_size, pq.max_span()) == (5, 15, 4)
    assert pq.remove_messages([msgs[1], msgs[2]]) == 5
    assert pq.remove_messages([msgs[0]]) == 8
    assert pq.remove_messages(msgs[3:]) == 10  # all done: one past the highest
    pq.put_messages([_ext(20), _ext(12)])  # out of order after a reset: still lowest first
    assert pq.remove_messages([]) == 12


def test_local_file_offset_store_round_trip(tmp_path: Path) -> None:
    async def scenario() -> None:
        store = LocalFileOffsetStore("10.0.0.9@DEFAULT", "g", tmp_path)
        mq = MessageQueue(TOPIC, "b", 1)
        store.update_offset(mq, 7)
        store.update_offset(mq, 5, increase_only=True)
        await store.persist_all([mq])
        again = LocalFileOffsetStore("10.0.0.9@DEFAULT", "g", tmp_path)
        assert await again.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY) == -1
        assert await again.read_offset(mq, ReadOffsetType.READ_FROM_STORE) == 7
        assert (tmp_path / "10.0.0.9@DEFAULT" / "g" / "offsets.json").exists()

    run(scenario())


def test_consume_timestamp_is_local_yyyymmddhhmmss() -> None:
    assert parse_consume_timestamp("20240102030405") == int(time.mktime((2024, 1, 2, 3, 4, 5, 0, 0, -1)) * 1000)


def test_where_a_new_group_starts() -> None:
    class Store:
        def __init__(self, offset: int) -> None:
            self.offset = offset

        async def read_offset(self, mq: MessageQueue, kind: ReadOffsetType) -> int:
            return self.offset

    class Instance:
        async def get_max_offset(self, mq: MessageQueue) -> int:
            return 100

        async def search_offset(self, mq: MessageQueue, ts: int) -> int:
            return 42

    async def where(offset: int, mode: ConsumeFromWhere, topic: str = TOPIC) -> int:
        return await compute_pull_from_where(Instance(), Store(offset), MessageQueue(topic, "b", 0), mode,
                                             "20240101000000")  # type: ignore[arg-type]

    async def scenario() -> None:
        assert await where(7, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET) == 7
        assert await where(-1, ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET) == 0
        assert await where(-1, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET) == 100
        assert await where(-1, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, "%RETRY%g") == 0
        assert await where(-1, ConsumeFromWhere.CONSUME_FROM_TIMESTAMP) == 42
        assert await where(-1, ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, "%RETRY%g") == 100
        with pytest.raises(MQClientError):
            await where(-2, ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET)

    run(scenario())


# -- lite pull consumer ------------------------------------------------------------------------------------------------


def test_lite_pull_assign_seek_poll_commit() -> None:
    async def scenario() -> None:
        namesrv, broker = await FakeNamesrv().start(), await FakeBroker("broker-a").start()
        namesrv.routes[TOPIC] = [broker]
        try:
            await _fill(broker, namesrv, {0: [Message(TOPIC, b"a%d" % i, tags="A" if i % 2 else "B")
                                              for i in range(6)],
                                          1: [Message(TOPIC, b"b%d" % i, tags="A") for i in range(3)]})
            config = LitePullConfig(auto_commit=False, pull_batch_size=2)
            async with LitePullConsumer("cg", config=config, client_config=_client(namesrv)) as consumer:
                queues = await consumer.fetch_message_queues(TOPIC)
                assert queues == [MessageQueue(TOPIC, "broker-a", i) for i in range(4)]
                assert await consumer.committed(queues[0]) == -1
                consumer.assign(queues[:2], sub_expression="A")
                await consumer.seek_to_begin(queues[0])
                await consumer.seek(queues[1], 1)
                got: list[MessageExt] = []
                while len(got) < 5:
                    got += await consumer.poll(2000)
                assert sorted(m.body for m in got) == [b"a1", b"a3", b"a5", b"b1", b"b2"]
                assert all(m.tags == "A" and m.broker_name == "broker-a" for m in got)
                await consumer.commit()
                assert broker.consumer_offsets[("cg", TOPIC, 0)] == 6
                assert broker.consumer_offsets[("cg", TOPIC, 1)] == 3
                assert await consumer.committed(queues[0]) == 6
                await consumer.seek(queues[1], 0)  # back again: the queue is read anew
                again: list[MessageExt] = []
                while len(again) < 2:
                    again += await consumer.poll(2000)
                assert [m.body for m in again][:2] == [b"b0", b"b1"]
                with pytest.raises(MQClientError, match="Seek offset illegal"):
                    await consumer.seek(queues[0], 99)
                with pytest.raises(MQClientError, match="not in assigned list"):
                    await consumer.seek(queues[3], 0)
                assert await consumer.min_offset(queues[0]) == 0 and await consumer.max_offset(queues[0]) == 6
        finally:
            await broker.stop()
            await namesrv.stop()

    run(scenario())


def test_lite_pull_low_level_pull_gives_raw_and_decoded() -> None:
    async def scenario() -> None:
        namesrv, broker = await FakeNamesrv().start(), await FakeBroker("broker-a").start()
        namesrv.routes[TOPIC] = [broker]
        try:
            await _fill(broker, namesrv, {2: [Message(TOPIC, b"m%d" % i) for i in range(4)]})
            async with LitePullConsumer("cg", client_config=_client(namesrv)) as consumer:
                mq = MessageQueue(TOPIC, "broker-a", 2)
                raw = await consumer.pull(mq, 1, 2, decode=False)
                assert (raw.status, raw.next_begin_offset, raw.max_offset, raw.messages) == (PullStatus.FOUND, 3, 4,
                                                                                              [])
                assert raw.body == b"".join(broker.queues[(TOPIC, 2)][1:3])
                decoded = await consumer.pull(mq, 1, 2)
                assert [m.queue_offset for m in decoded.messages] == [1, 2]
                assert (await consumer.pull(mq, 4, 2)).status is PullStatus.NO_NEW_MSG
                assert (await consumer.pull(mq, 9, 2)).status is PullStatus.OFFSET_ILLEGAL
                with pytest.raises(MQClientError):
                    await consumer.pull(mq, -1, 2)
        finally:
            await broker.stop()
            await namesrv.stop()

    run(scenario())


# -- push consumer -----------------------------------------------------------------------------------------------------


def test_push_consumers_split_the_queues_and_consume_everything() -> None:
    async def scenario() -> None:
        namesrv, broker = await FakeNamesrv().start(), await FakeBroker("broker-a").start()
        namesrv.routes[TOPIC] = [broker]
        seen: dict[str, list[bytes]] = {"c1": [], "c2": []}

        def listener_for(name: str):  # type: ignore[no-untyped-def]
            async def listener(msgs: list[MessageExt], context: ConsumeConcurrentlyContext):
                seen[name] += [m.body for m in msgs]
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS
            return listener

        config = PushConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        consumers = []
        try:
            for name in ("c1", "c2"):
                consumer = PushConsumer("cg", config=config, client_config=_client(namesrv, name))
                consumer.subscribe(TOPIC, "*")
                consumer.register_message_listener(listener_for(name))
                await consumer.start()
                consumers.append(consumer)
            await eventually("two queues each", lambda: sum(len(c.assigned_queues()) for c in consumers) == 4
                             and all(len(c.assigned_queues()) == 2 for c in consumers))
            assert not set(consumers[0].assigned_queues()) & set(consumers[1].assigned_queues())
            await _fill(broker, namesrv, {q: [Message(TOPIC, b"%d-%d" % (q, i)) for i in range(3)] for q in range(4)})
            await eventually("every message consumed", lambda: len(seen["c1"]) + len(seen["c2"]) == 12)
            assert seen["c1"] and seen["c2"]
            await consumers[1].shutdown()  # the survivor takes over every queue
            await eventually("every queue to the survivor", lambda: len(consumers[0].assigned_queues()) == 4)
            await consumers[0].persist_consumer_offset()
            await eventually("the offsets persisted",
                             lambda: all(broker.consumer_offsets.get(("cg", TOPIC, q)) == 3 for q in range(4)))
        finally:
            for consumer in consumers:
                await consumer.shutdown()
            await broker.stop()
            await namesrv.stop()

    run(scenario())


@pytest.mark.parametrize("send_back_code", [ResponseCode.SUCCESS, ResponseCode.REQUEST_CODE_NOT_SUPPORTED])
def test_reconsume_later_sends_back_or_redelivers_locally(send_back_code: int, monkeypatch) -> None:
    monkeypatch.setattr("broker.client.concurrently.RECONSUME_LOCALLY_DELAY_S", 0.1)

    async def scenario() -> None:
        namesrv, broker = await FakeNamesrv().start(), await FakeBroker("broker-a").start()
        broker.send_back_code = send_back_code
        namesrv.routes[TOPIC] = [broker]  # no route for %RETRY%cg: the plain re-send fails too
        calls: list[tuple[bytes, int]] = []

        def listener(msgs: list[MessageExt], context: ConsumeConcurrentlyContext) -> ConsumeConcurrentlyStatus:
            calls.append((msgs[0].body, msgs[0].reconsume_times))  # a plain function: runs in a worker thread
            if len(calls) == 1:
                return ConsumeConcurrentlyStatus.RECONSUME_LATER
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        config = PushConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        consumer = PushConsumer("cg", config=config, client_config=_client(namesrv))
        consumer.subscribe(TOPIC, "*")
        consumer.register_message_listener(listener)
        try:
            await _fill(broker, namesrv, {0: [Message(TOPIC, b"once")]})
            await consumer.start()
            if send_back_code == ResponseCode.SUCCESS:
                await eventually("a send back", lambda: broker.sent_back)
                header = broker.sent_back[0]
                assert (header.group, header.origin_topic, header.max_reconsume_times) == ("cg", TOPIC, 16)
                assert calls == [(b"once", 0)]
            else:
                await eventually("two deliveries", lambda: len(calls) == 2)
                assert calls == [(b"once", 0), (b"once", 1)]
                assert broker.requests_of(RequestCode.CONSUMER_SEND_MSG_BACK)
            await eventually("the offset moved",
                             lambda: consumer.offset_store.offset_table.get(MessageQueue(TOPIC, "broker-a", 0)) == 1)
        finally:
            await consumer.shutdown()
            await broker.stop()
            await namesrv.stop()

    run(scenario())


def test_push_consumer_needs_a_listener_and_broadcasting_keeps_its_instance_name(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR", str(tmp_path))

    async def scenario() -> None:
        consumer = PushConsumer("cg", client_config=ClientConfig(namesrv_addr="127.0.0.1:1", client_ip="10.0.0.9"))
        with pytest.raises(MQClientError, match="messageListener is null"):
            await consumer.start()
        broadcast = PushConsumer("cg", config=PushConsumerConfig(message_model=MessageModel.BROADCASTING),
                                 client_config=ClientConfig(namesrv_addr="127.0.0.1:1", client_ip="10.0.0.9"))
        assert broadcast.instance.client_id == "10.0.0.9@DEFAULT"
        assert isinstance(broadcast.offset_store, LocalFileOffsetStore)
        assert consumer.instance.client_id != "10.0.0.9@DEFAULT"

    run(scenario())
