"""The Python client against a master and its slave, as real processes: when the master dies, consumers read from
the slave and commit their offsets there, producers move to the topic's other brokerNames; when it is back,
consumers return to it and commit there again (Java's PullAPIWrapper, findBrokerAddressInSubscribe,
RemoteBrokerOffsetStore and topicRouteData2TopicPublishInfo).

Our NameServer drops a broker the moment its connection closes (a SIGKILLed broker's socket is closed by the
kernel); the clients poll routes every 500 ms (pollNameServerInterval) so they see it at once.
"""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from pathlib import Path

from broker.client import (
    ClientConfig,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    LitePullConfig,
    LitePullConsumer,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    PushConsumer,
    PushConsumerConfig,
    SendStatus,
)
from broker.client.instance import MQClientInstance
from broker.common.errors import ClientErrorCode, MQClientError
from broker.remoting.codes import RequestCode
from broker.remoting.command import RemotingCommand
from tests.helpers import client_config, eventually, run
from tests.integration.cluster import ServerProcess, start_broker, start_namesrv
from tests.integration.replication import (
    consumed_to_the_end,
    create_topic_on,
    ha_address,
    has_topic,
    max_offsets,
)

TOPIC = "HaClientTopic"
QUEUES = 2
# slaveSynchronizeInterval (ours): the slave has the topic, its group and offsets within seconds, not a minute
PAIR_CONF: dict[str, object] = {"slaveSynchronizeInterval": 2000}
SLAVE_CONF: dict[str, object] = {"brokerId": 1, "brokerRole": "SLAVE", "slaveReadEnable": True}
CLIENT: dict[str, int] = {"poll_name_server_interval": 500, "heartbeat_broker_interval": 1000,
                          "persist_consumer_offset_interval": 500}
WAIT_S = 30.0


def _config(namesrv: ServerProcess, name: str) -> ClientConfig:
    return client_config(namesrv.addr, name, **CLIENT)


def _start_slave(home: Path, namesrv: ServerProcess, master: ServerProcess) -> ServerProcess:
    return start_broker(home, namesrv.addr, haMasterAddress=ha_address(master), **(PAIR_CONF | SLAVE_CONF))


def _record_pulls(instance: MQClientInstance) -> list[str]:
    """The address of each PULL_MESSAGE the instance sends, in order."""
    pulls: list[str] = []
    invoke = instance.invoke

    async def recording(addr: str, request: RemotingCommand, timeout_ms: float | None = None) -> RemotingCommand:
        if request.code == RequestCode.PULL_MESSAGE:
            pulls.append(addr)
        return await invoke(addr, request, timeout_ms)

    instance.invoke = recording  # type: ignore[method-assign]
    return pulls


async def _offsets_on(addr: str, groups: list[str], mqs: list[MessageQueue]) -> None:
    """Wait until every group's committed offsets on ``addr`` are the queues' max offsets there."""
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while not await asyncio.to_thread(consumed_to_the_end, addr, groups, mqs):
        assert asyncio.get_running_loop().time() < deadline, f"offsets of {groups} never reached the end on {addr}"
        await asyncio.sleep(0.2)


def test_consumers_read_from_the_slave_while_the_master_is_down(tmp_path: Path) -> None:
    with start_namesrv(tmp_path / "namesrv") as namesrv:
        master = start_broker(tmp_path / "master", namesrv.addr, **PAIR_CONF)
        slave = _start_slave(tmp_path / "slave", namesrv, master)
        try:
            run(_failover(tmp_path, namesrv, master, slave), timeout=150)
        finally:
            slave.close()


async def _failover(tmp_path: Path, namesrv: ServerProcess, master: ServerProcess, slave: ServerProcess) -> None:
    await asyncio.to_thread(create_topic_on, master.addr, TOPIC, QUEUES)
    mqs = [MessageQueue(TOPIC, "broker-a", i) for i in range(QUEUES)]
    gate = asyncio.Event()
    pushed: Counter[bytes] = Counter()
    polled: Counter[bytes] = Counter()

    async def listener(msgs: list[MessageExt], _context: object) -> ConsumeConcurrentlyStatus:
        await gate.wait()
        pushed.update(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    # Small pulls and a small cache: with the listener held and nobody polling, each consumer has fetched at most
    # 8 messages a queue when the master dies; the rest must come from the slave.
    push = PushConsumer("ha_push", config=PushConsumerConfig(
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, pull_batch_size=4, pull_threshold_for_queue=5),
        client_config=_config(namesrv, "push"))
    push.subscribe(TOPIC)
    push.register_message_listener(listener)
    lite = LitePullConsumer("ha_lite", config=LitePullConfig(
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, pull_batch_size=4, pull_threshold_for_queue=5,
        auto_commit_interval_millis=500), client_config=_config(namesrv, "lite"))

    async def poll_forever() -> None:
        while True:
            polled.update(m.body for m in await lite.poll(100))  # each poll also auto-commits

    def start_polling() -> asyncio.Task[None]:
        return asyncio.get_running_loop().create_task(poll_forever())

    producer = Producer("ha_producer", client_config=_config(namesrv, "producer"))
    await producer.start()
    await push.start()
    lite.assign(mqs)
    await lite.start()
    push_pulls, lite_pulls = _record_pulls(push.instance), _record_pulls(lite.instance)
    poller = start_polling()
    sent: list[bytes] = []

    async def send(count: int) -> None:
        for _ in range(count):
            body = b"m-%d" % len(sent)
            assert (await producer.send(Message(TOPIC, body))).send_status is SendStatus.SEND_OK
            sent.append(body)

    def all_consumed() -> bool:
        return set(pushed) == set(polled) == set(sent)

    try:
        gate.set()
        await send(20)
        await eventually("the first messages consumed from the master", all_consumed, WAIT_S)
        assert set(push_pulls) == set(lite_pulls) == {master.addr}

        gate.clear()
        poller.cancel()  # cancelled while it waits in poll(): what is fetched stays fetched, for the next poll
        await send(60)
        await eventually("the slave has the topic", lambda: has_topic(slave.addr, TOPIC), WAIT_S)
        await eventually("the slave holds every message", lambda: max_offsets(slave.addr, mqs)
                         == max_offsets(master.addr, mqs), WAIT_S)
        assert sum(pushed.values()) == sum(polled.values()) == 20
        port = master.port
        await asyncio.to_thread(master.kill)
        pulls_at_kill = len(push_pulls), len(lite_pulls)
        gate.set()
        poller = start_polling()
        await eventually("every message consumed with the master down", all_consumed, WAIT_S)
        assert slave.addr in push_pulls[pulls_at_kill[0]:] and slave.addr in lite_pulls[pulls_at_kill[1]:]
        await _offsets_on(slave.addr, ["ha_push", "ha_lite"], mqs)

        master = await asyncio.to_thread(functools.partial(start_broker, tmp_path / "master", namesrv.addr,
                                                           port=port, **PAIR_CONF))
        pulls_at_restart = len(push_pulls), len(lite_pulls)
        await send(20)  # the producer finds the master in the route again
        await eventually("every message consumed after the master came back", all_consumed, WAIT_S)
        # Committed where the consumers left off on the slave, not where the master's own file stood at the kill:
        # the clients commit their in-memory offsets to the master again.
        await _offsets_on(master.addr, ["ha_push", "ha_lite"], mqs)
        # The clients go back to the master at their next route poll: their pulls end up there.
        await eventually("both consumers pull from the master again",
                         lambda: push_pulls[-1] == lite_pulls[-1] == master.addr, WAIT_S)
        assert master.addr in push_pulls[pulls_at_restart[0]:] and master.addr in lite_pulls[pulls_at_restart[1]:]
        # at-least-once: nothing lost; and here nothing was delivered twice (no queue changed hands)
        assert set(pushed) == set(polled) == set(sent) and len(sent) == 100
        assert max(pushed.values()) == max(polled.values()) == 1
    finally:
        gate.set()  # the listener calls still held must end before the push consumer can stop
        poller.cancel()
        await asyncio.gather(poller, return_exceptions=True)
        for client in (lite, push, producer):
            await client.shutdown()
        await asyncio.to_thread(master.close)


def test_producer_moves_to_the_other_broker_name_when_a_master_dies(tmp_path: Path) -> None:
    with (start_namesrv(tmp_path / "namesrv") as namesrv,
          start_broker(tmp_path / "b", namesrv.addr, brokerName="broker-b") as broker_b):
        master = start_broker(tmp_path / "master", namesrv.addr, **PAIR_CONF)
        try:
            with _start_slave(tmp_path / "slave", namesrv, master):
                for addr in (master.addr, broker_b.addr):
                    create_topic_on(addr, TOPIC, QUEUES)
                create_topic_on(master.addr, "HaOnlyA", QUEUES)
                run(_sends_after_kill(namesrv, master), timeout=90)
        finally:
            master.close()


async def _sends_after_kill(namesrv: ServerProcess, master: ServerProcess) -> None:
    async with Producer("ha_producer", client_config=_config(namesrv, "producer")) as producer:
        queues = await producer.fetch_publish_message_queues(TOPIC)
        assert {q.broker_name for q in queues} == {"broker-a", "broker-b"}
        assert (await producer.send(Message("HaOnlyA", b"before"))).send_status is SendStatus.SEND_OK
        await asyncio.to_thread(master.kill)
        # Until the route drops broker-a, a send that picks it fails over to broker-b (the retry avoids the last
        # broker); after, broker-a has no master and gets no queue at all.
        results = [await producer.send(Message(TOPIC, b"after-%d" % i)) for i in range(20)]
        assert {r.send_status for r in results} == {SendStatus.SEND_OK}
        assert {r.message_queue.broker_name for r in results} == {"broker-b"}
        await eventually("broker-a leaves the publish queues", lambda: {
            q.broker_name for q in producer.topic_publish_info[TOPIC].message_queues} == {"broker-b"}, WAIT_S)
        await eventually("HaOnlyA has no master", lambda: not producer.topic_publish_info["HaOnlyA"].ok()
                         if "HaOnlyA" in producer.topic_publish_info else False, WAIT_S)
        try:
            await producer.send(Message("HaOnlyA", b"nowhere"))
        except MQClientError as err:
            assert err.code == ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION
            assert err.remark == ("No route info of this topic: HaOnlyA\n"
                                  "See https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.")
        else:
            raise AssertionError("a send to a topic whose only brokerName has no master succeeded")
