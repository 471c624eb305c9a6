"""Producer against the in-process fakes: routes, the TBW102 stand-in, retries on another broker, fault avoidance,
batches, ordered sends, compression, heartbeats and unregistering."""

from __future__ import annotations

import asyncio
import zlib

import pytest

from broker.client.instance import ClientConfig
from broker.client.message import Message, MessageQueue, SendStatus
from broker.client.producer import Producer, ProducerConfig
from broker.client.selector import SelectMessageQueueByHash
from broker.common.errors import ClientErrorCode, MQBrokerError, MQClientError
from broker.common.message import SysFlag
from broker.remoting.codes import RequestCode, ResponseCode
from tests.unit.client.fakes import FakeBroker, FakeNamesrv, run


async def _cluster(*names: str) -> tuple[FakeNamesrv, list[FakeBroker]]:
    namesrv = await FakeNamesrv().start()
    brokers = [await FakeBroker(name).start() for name in names]
    return namesrv, brokers


async def _stop(namesrv: FakeNamesrv, brokers: list[FakeBroker]) -> None:
    for broker in brokers:
        await broker.stop()
    await namesrv.stop()


def _producer(namesrv: FakeNamesrv, **config: object) -> Producer:
    client = ClientConfig(namesrv_addr=namesrv.addr, client_ip="10.0.0.9", instance_name="test")
    return Producer("pg", config=ProducerConfig(**config), client_config=client)


def test_send_stores_the_message_with_its_uniq_key() -> None:
    async def scenario() -> None:
        namesrv, (broker,) = await _cluster("broker-a")
        namesrv.routes["T"] = [broker]
        try:
            async with _producer(namesrv) as producer:
                msg = Message("T", b"hello", tags="A", keys="k")
                result = await producer.send(msg)
                assert result.send_status is SendStatus.SEND_OK and result.msg_id == msg.uniq_id
                (record,) = broker.messages("T", result.message_queue.queue_id)
                assert record.body == b"hello" and record.properties["UNIQ_KEY"] == msg.uniq_id
                assert record.properties["TAGS"] == "A" and result.offset_msg_id == record.msg_id
                assert len(broker.requests_of(RequestCode.SEND_MESSAGE_V2)) == 1
                assert broker.heartbeats and broker.heartbeats[0]["producerDataSet"] == [{"groupName": "pg"}]
                assert broker.heartbeats[0]["clientID"] == "10.0.0.9@test"
            assert broker.requests_of(RequestCode.UNREGISTER_CLIENT)
        finally:
            await _stop(namesrv, [broker])

    run(scenario())


def test_unknown_topic_uses_the_default_topic_route() -> None:
    async def scenario() -> None:
        namesrv, (broker,) = await _cluster("broker-a")
        namesrv.routes["TBW102"] = [broker]
        try:
            async with _producer(namesrv, default_topic_queue_nums=2) as producer:
                result = await producer.send(Message("NewTopic", b"x"))
                assert result.message_queue.queue_id in (0, 1)
                assert await producer.fetch_publish_message_queues("NewTopic") == [
                    MessageQueue("NewTopic", "broker-a", 0), MessageQueue("NewTopic", "broker-a", 1)]
                header = broker.requests_of(RequestCode.SEND_MESSAGE_V2)[-1].ext_fields
                assert header["c"] == "TBW102" and header["d"] == "2"
        finally:
            await _stop(namesrv, [broker])

    run(scenario())


def test_no_route_at_all_is_a_client_error() -> None:
    async def scenario() -> None:
        namesrv, brokers = await _cluster()
        try:
            async with _producer(namesrv) as producer:
                with pytest.raises(MQClientError) as info:
                    await producer.send(Message("Nowhere", b"x"))
                assert info.value.code == ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION
                assert "No route info of this topic: Nowhere" in str(info.value)
        finally:
            await _stop(namesrv, brokers)

    run(scenario())


def test_a_failing_broker_is_retried_elsewhere_and_then_avoided() -> None:
    async def scenario() -> None:
        namesrv, (bad, good) = await _cluster("broker-a", "broker-b")
        bad.fail_sends = ResponseCode.SYSTEM_BUSY
        namesrv.routes["T"] = [bad, good]
        try:
            async with _producer(namesrv) as producer:
                for i in range(8):
                    result = await producer.send(Message("T", b"%d" % i))
                    assert result.message_queue.broker_name == "broker-b"
                assert len(bad.requests_of(RequestCode.SEND_MESSAGE_V2)) == 1  # isolated after the first failure
                assert not producer.fault_strategy.fault_tolerance.is_available("broker-a")
        finally:
            await _stop(namesrv, [bad, good])

    run(scenario())


def test_non_retriable_broker_error_is_raised_at_once() -> None:
    async def scenario() -> None:
        namesrv, (broker,) = await _cluster("broker-a")
        broker.fail_sends = ResponseCode.MESSAGE_ILLEGAL
        namesrv.routes["T"] = [broker]
        try:
            async with _producer(namesrv) as producer:
                with pytest.raises(MQBrokerError) as info:
                    await producer.send(Message("T", b"x"))
                assert info.value.code == ResponseCode.MESSAGE_ILLEGAL and not info.value.retriable
                assert len(broker.requests_of(RequestCode.SEND_MESSAGE_V2)) == 1
        finally:
            await _stop(namesrv, [broker])

    run(scenario())


def test_every_attempt_failing_gives_the_last_code() -> None:
    async def scenario() -> None:
        namesrv, (a, b) = await _cluster("broker-a", "broker-b")
        a.fail_sends = b.fail_sends = ResponseCode.SYSTEM_ERROR
        namesrv.routes["T"] = [a, b]
        try:
            async with _producer(namesrv) as producer:
                with pytest.raises(MQClientError) as info:
                    await producer.send(Message("T", b"x"))
                assert info.value.code == ResponseCode.SYSTEM_ERROR
                assert "Send [3] times, still failed" in str(info.value)
        finally:
            await _stop(namesrv, [a, b])

    run(scenario())


def test_a_dead_broker_is_a_transport_failure_and_retried() -> None:
    async def scenario() -> None:
        namesrv, (dead, good) = await _cluster("broker-a", "broker-b")
        namesrv.routes["T"] = [dead, good]
        route_addr = dead.addr
        await dead.stop()
        try:
            async with _producer(namesrv) as producer:
                await producer.instance.update_topic_route("T")
                assert producer.instance.route_table.find_broker_address_in_publish("broker-a") == route_addr
                results = [await producer.send(Message("T", b"x")) for _ in range(4)]
                assert {r.message_queue.broker_name for r in results} == {"broker-b"}
        finally:
            await _stop(namesrv, [good])

    run(scenario())


def test_batch_lands_in_one_queue_with_consecutive_offsets() -> None:
    async def scenario() -> None:
        namesrv, (broker,) = await _cluster("broker-a")
        namesrv.routes["T"] = [broker]
        try:
            async with _producer(namesrv) as producer:
                msgs = [Message("T", b"m%d" % i, keys=f"k{i}") for i in range(5)]
                result = await producer.send_batch(msgs, MessageQueue("T", "broker-a", 3))
                assert result.message_queue.queue_id == 3 and result.queue_offset == 0
                assert result.msg_id == ",".join(m.uniq_id for m in msgs)
                assert len(broker.requests_of(RequestCode.SEND_BATCH_MESSAGE)) == 1
                assert [r.body for r in broker.messages("T", 3)] == [m.body for m in msgs]
                assert [r.properties["UNIQ_KEY"] for r in broker.messages("T", 3)] == [m.uniq_id for m in msgs]
        finally:
            await _stop(namesrv, [broker])

    run(scenario())


def test_ordered_sends_keep_one_queue_per_key() -> None:
    async def scenario() -> None:
        namesrv, (broker,) = await _cluster("broker-a")
        namesrv.routes["T"] = [broker]
        try:
            async with _producer(namesrv) as producer:
                selector = SelectMessageQueueByHash()
                queues = {(await producer.send(Message("T", b"x"), selector=selector, arg="order-1")).message_queue
                          for _ in range(5)}
                assert queues == {MessageQueue("T", "broker-a", 2)}  # Java's choice for "order-1" of 4 queues
        finally:
            await _stop(namesrv, [broker])

    run(scenario())


def test_large_bodies_are_compressed_and_oneway_and_async_sends_work() -> None:
    async def scenario() -> None:
        namesrv, (broker,) = await _cluster("broker-a")
        namesrv.routes["T"] = [broker]
        try:
            async with _producer(namesrv) as producer:
                big = b"y" * 5000
                result = await producer.send(Message("T", big))
                (record,) = broker.messages("T", result.message_queue.queue_id)
                assert record.sys_flag & SysFlag.COMPRESSED and zlib.decompress(record.body) == big
                await producer.send_oneway(Message("T", b"oneway"), MessageQueue("T", "broker-a", 0))
                task = producer.send_async(Message("T", b"async"))
                assert (await task).send_status is SendStatus.SEND_OK
                for _ in range(50):
                    if any(r.body == b"oneway" for r in broker.messages("T", 0)):
                        break
                    await asyncio.sleep(0.02)
                assert any(r.body == b"oneway" for r in broker.messages("T", 0))
        finally:
            await _stop(namesrv, [broker])

    run(scenario())


def test_send_before_start_and_invalid_messages_are_refused() -> None:
    async def scenario() -> None:
        namesrv, brokers = await _cluster()
        try:
            producer = _producer(namesrv)
            with pytest.raises(MQClientError, match="service state not OK"):
                await producer.send(Message("T", b"x"))
            async with producer:
                with pytest.raises(MQClientError, match="body length is zero"):
                    await producer.send(Message("T", b""))
                with pytest.raises(MQClientError, match="mq's topic"):
                    await producer.send(Message("T", b"x"), MessageQueue("U", "b", 0))
        finally:
            await _stop(namesrv, brokers)

    run(scenario())


def test_no_namesrv_configured() -> None:
    async def scenario() -> None:
        producer = Producer("pg", client_config=ClientConfig(namesrv_addr="", client_ip="10.0.0.9"))
        async with producer:
            with pytest.raises(MQClientError) as info:
                await producer.send(Message("T", b"x"))
            assert info.value.code == ClientErrorCode.NO_NAME_SERVER_EXCEPTION

    run(scenario())
