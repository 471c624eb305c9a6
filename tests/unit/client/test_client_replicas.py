"""A brokerName with a master and a slave, as the client sees it (in-process fakes): pulls go where the last
response suggested (suggestWhichBrokerId) and fall back to a slave while the master is gone, offsets are committed
and queried where RemoteBrokerOffsetStore sends them, producers skip a brokerName without a master."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broker.client.blocking import BlockingClient
from broker.client.consumer import LitePullConsumer
from broker.client.instance import ClientConfig
from broker.client.message import Message, MessageQueue, PullStatus
from broker.client.offsets import ReadOffsetType
from broker.client.producer import Producer
from broker.client.route import FindBrokerResult, PullFromWhichNode, find_broker_address_in_subscribe
from broker.common.errors import ClientErrorCode, MQClientError
from broker.common.message import PullSysFlag
from broker.remoting.codes import RequestCode
from tests.helpers import LoopThread
from tests.unit.client.fakes import FakeBroker, FakeNamesrv, run

TOPIC = "T"
MQ = MessageQueue(TOPIC, "broker-a", 0)


def _client(namesrv: FakeNamesrv, name: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=namesrv.addr, client_ip="10.0.0.9", instance_name=name)


def _pulls(broker: FakeBroker) -> int:
    return len(broker.requests_of(RequestCode.PULL_MESSAGE))


async def _pair(namesrv: FakeNamesrv) -> tuple[FakeBroker, FakeBroker]:
    """broker-a's master and slave, sharing their queues (the slave holds what the master holds)."""
    master = await FakeBroker("broker-a").start()
    slave = await FakeBroker("broker-a", broker_id=1).start()
    slave.queues = master.queues
    namesrv.routes[TOPIC] = [master, slave]
    return master, slave


async def _fill(namesrv: FakeNamesrv, count: int) -> None:
    async with Producer("pg", client_config=_client(namesrv, "producer")) as producer:
        for i in range(count):
            await producer.send(Message(TOPIC, b"m%d" % i), MQ)


def test_find_broker_address_in_subscribe_as_java() -> None:
    addrs = {0: "m:1", 1: "s1:1", 2: "s2:1"}
    assert find_broker_address_in_subscribe(addrs, 0) == FindBrokerResult("m:1", False)
    assert find_broker_address_in_subscribe(addrs, 2) == FindBrokerResult("s2:1", True)
    assert find_broker_address_in_subscribe({0: "m:1", 2: "s2:1"}, 1) == FindBrokerResult("s2:1", True)  # id + 1
    assert find_broker_address_in_subscribe({0: "m:1"}, 1) == FindBrokerResult("m:1", False)  # the first replica
    assert find_broker_address_in_subscribe({2: "s2:1", 1: "s1:1"}, 0) == FindBrokerResult("s1:1", True)
    assert find_broker_address_in_subscribe({1: "s1:1"}, 0, only_this_broker=True) is None
    assert find_broker_address_in_subscribe({}, 0) is None
    nodes = PullFromWhichNode()
    assert nodes.recalculate(MQ) == 0
    nodes.update(MQ, 1)
    assert nodes.recalculate(MQ) == 1 and nodes.recalculate(MessageQueue(TOPIC, "broker-a", 1)) == 0


def test_pulls_go_where_the_last_response_suggested() -> None:
    async def scenario() -> None:
        namesrv = await FakeNamesrv().start()
        master, slave = await _pair(namesrv)
        await _fill(namesrv, 3)
        master.suggest_which_broker_id = 1
        async with LitePullConsumer("g", client_config=_client(namesrv, "c")) as consumer:
            first = await consumer.pull(MQ, 0, 1)
            assert (_pulls(master), _pulls(slave)) == (1, 0) and first.suggest_which_broker_id == 1
            second = await consumer.pull(MQ, 1, 1)  # the master suggested its slave
            assert (_pulls(master), _pulls(slave)) == (1, 1)
            assert [m.body for m in first.messages + second.messages] == [b"m0", b"m1"]
            await consumer.pull(MQ, 2, 1)  # the slave suggests the master (0)
            await consumer.pull(MQ, 3, 1)
            assert (_pulls(master), _pulls(slave)) == (2, 2)
        for server in (master, slave, namesrv):
            await server.stop()

    run(scenario())


def test_master_gone_reads_and_offsets_on_the_slave_then_back_on_the_master() -> None:
    async def scenario() -> None:
        namesrv = await FakeNamesrv().start()
        master, slave = await _pair(namesrv)
        await _fill(namesrv, 4)
        async with LitePullConsumer("g", client_config=_client(namesrv, "c")) as consumer:
            instance = consumer.instance
            await consumer.pull(MQ, 0, 1)
            namesrv.routes[TOPIC] = [slave]  # the master's connection to the NameServer closed
            await instance.update_topic_route(TOPIC)
            result = await instance.pull_message("g", MQ, 1, 1, subscription=None, commit_offset=1, timeout_ms=3000)
            assert result.status is PullStatus.FOUND and _pulls(slave) == 1
            # pullKernelImpl clears the commit offset flag for a slave: only a master stores it
            assert not int(slave.requests_of(RequestCode.PULL_MESSAGE)[-1].ext_fields["sysFlag"]) & \
                PullSysFlag.COMMIT_OFFSET
            consumer.offset_store.update_offset(MQ, 2)
            await consumer.offset_store.persist(MQ, oneway=False)
            assert slave.consumer_offsets[("g", TOPIC, 0)] == 2 and ("g", TOPIC, 0) not in master.consumer_offsets
            assert await consumer.offset_store.read_offset(MQ, ReadOffsetType.READ_FROM_STORE) == 2  # the slave's

            namesrv.routes[TOPIC] = [master, slave]  # the master is back: it gets the offset from memory again
            await instance.update_topic_route(TOPIC)
            await consumer.offset_store.persist(MQ, oneway=False)
            assert master.consumer_offsets[("g", TOPIC, 0)] == 2
            await instance.pull_message("g", MQ, 2, 1, subscription=None, commit_offset=2, timeout_ms=3000)
            assert _pulls(master) == 2
            assert int(master.requests_of(RequestCode.PULL_MESSAGE)[-1].ext_fields["sysFlag"]) & \
                PullSysFlag.COMMIT_OFFSET
            del master.consumer_offsets[("g", TOPIC, 0)]  # a query asks the master only while there is one
            assert await consumer.offset_store.read_offset(MQ, ReadOffsetType.READ_FROM_STORE) == -1
        for server in (master, slave, namesrv):
            await server.stop()

    run(scenario())


def test_producer_skips_a_broker_name_without_master() -> None:
    async def scenario() -> None:
        namesrv = await FakeNamesrv().start()
        slave = await FakeBroker("broker-a", broker_id=1).start()
        other = await FakeBroker("broker-b").start()
        namesrv.routes[TOPIC] = [slave, other]
        namesrv.routes["Solo"] = [slave]
        async with Producer("pg", client_config=_client(namesrv, "producer")) as producer:
            queues = await producer.fetch_publish_message_queues(TOPIC)
            assert {q.broker_name for q in queues} == {"broker-b"}
            results = [await producer.send(Message(TOPIC, b"x")) for _ in range(6)]
            assert {r.message_queue.broker_name for r in results} == {"broker-b"}
            with pytest.raises(MQClientError) as info:
                await producer.send(Message("Solo", b"x"))
            assert info.value.code == ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION
            assert info.value.remark == ("No route info of this topic: Solo\n"
                                         "See https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.")
            assert not slave.requests_of(RequestCode.SEND_MESSAGE_V2)
        for server in (slave, other, namesrv):
            await server.stop()

    run(scenario())


@pytest.fixture
def loop() -> Iterator[LoopThread]:
    loop = LoopThread()
    yield loop
    loop.close()


def test_blocking_pull_follows_the_suggestion_and_the_route(loop: LoopThread) -> None:
    namesrv = loop.run(FakeNamesrv().start())
    master, slave = loop.run(_pair(namesrv))
    loop.run(_fill(namesrv, 4))
    master.suggest_which_broker_id = 1
    with BlockingClient(namesrv.addr, route_ttl_s=0) as client:
        client.pull(MQ, 0, 1)
        client.pull(MQ, 1, 1, group="other")  # another group: its own table, the master first
        assert (_pulls(master), _pulls(slave)) == (2, 0)
        client.pull(MQ, 1, 1)
        assert (_pulls(master), _pulls(slave)) == (2, 1)
        namesrv.routes[TOPIC] = [slave]
        client.get_route(TOPIC, refresh=True)
        assert client.pull(MQ, 2, 1, group="other").status is PullStatus.FOUND  # suggested 1, and only 1 is left
        assert (_pulls(master), _pulls(slave)) == (2, 2)
        with pytest.raises(MQClientError, match="not exist"):
            client.broker_addr(MQ)  # writes and offset queries want the master
    for server in (master, slave, namesrv):
        loop.run(server.stop())
