"""The Python client (broker.client) end to end against real servers: ours (``python -m broker.namesrv`` and
``python -m broker``, started by tests/integration/cluster.py) and, as the reference, Apache RocketMQ's own NameServer
and brokers (tests/apache; marked ``java``). Every test runs against both: a failure on ``rmq`` alone is a broker or
NameServer difference, a failure on both a client bug.

Two brokers (broker-a, broker-b) share one NameServer. The module's topic is auto-created by the first sends (the
default topic TBW102's route), then tests read and write it with the asyncio producer, the lite pull consumer, the
push consumer and the blocking facade, each with its own groups, tags and keys.
"""

from __future__ import annotations

import asyncio
import functools
import io
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker.client import (
    BlockingClient,
    ClientConfig,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    LitePullConfig,
    LitePullConsumer,
    Message,
    MessageExt,
    MessageQueue,
    Producer,
    PullStatus,
    PushConsumer,
    PushConsumerConfig,
    SelectMessageQueueByHash,
    SendStatus,
)
from broker.client.blocking import BlockingRemotingClient, create_topic
from broker.client.message import PullResult, decode_messages
from broker.common.errors import MQClientError
from broker.remoting.admin_bodies import mq_key
from broker.remoting.codes import ResponseCode
from broker.tools.admin import MQAdminExt
from broker.tools.mqadmin import main as mqadmin_main
from tests.apache import ApacheCluster
from tests.helpers import client_config, eventually
from tests.helpers import run as run_bounded
from tests.integration.cluster import Cluster, start_servers

ROUTE_TIMEOUT_S = 40.0  # a broker registers a new topic at once in Java; ours waits for its next period (10 s here)
CONSUME_TIMEOUT_S = 45.0
QUEUES_PER_BROKER = 4


run = functools.partial(run_bounded, timeout=120.0)


@dataclass
class Servers:
    """broker-a and broker-b under one NameServer: ours (``rmq``) or Apache's."""

    kind: str
    cluster: Cluster | ApacheCluster

    @property
    def namesrv_addr(self) -> str:
        return self.cluster.namesrv_addr

    @property
    def brokers(self) -> list[Any]:
        return self.cluster.brokers

    def client_config(self, name: str) -> ClientConfig:
        return client_config(self.namesrv_addr, name)

    def close(self) -> None:
        self.cluster.close()


def start(kind: str, tmp: Path) -> Servers:
    # Ours registers a new topic with the NameServer at its next period (see ROUTE_TIMEOUT_S): 10 s here.
    conf: dict[str, object] = {"registerNameServerPeriod": 10_000} if kind == "rmq" else {}
    return Servers(kind, start_servers(kind, tmp, brokers=2, **conf))


@pytest.fixture(scope="module", params=["rmq", pytest.param("apache", marks=[pytest.mark.java, pytest.mark.slow])])
def servers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    started = start(request.param, tmp_path_factory.mktemp(f"client-{request.param}"))
    yield started
    started.close()


def await_queues(client: BlockingClient, topic: str, brokers: int,
                 timeout: float = ROUTE_TIMEOUT_S) -> list[MessageQueue]:
    """The topic's queues once the NameServer routes it to ``brokers`` brokers."""
    deadline = time.monotonic() + timeout
    seen = "no route"
    while True:
        try:
            route = client.get_route(topic, refresh=True)
            if len(route.broker_datas) >= brokers:
                return client.fetch_message_queues(topic)
            seen = f"brokers {[b.broker_name for b in route.broker_datas]}"
        except MQClientError as err:
            if err.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic} not routed to {brokers} brokers within {timeout}s ({seen})")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def topic(servers: Servers) -> str:
    """A topic auto-created on both brokers by sends through TBW102's route."""
    name = f"PyClient{servers.kind.capitalize()}"
    with BlockingClient(servers.namesrv_addr) as client:
        sent = {client.send(Message(name, b"create")).message_queue.broker_name for _ in range(8)}
        assert sent == {"broker-a", "broker-b"}
        await_queues(client, name, 2)
    return name


def _max_offsets(client: BlockingClient, queues: list[MessageQueue]) -> dict[MessageQueue, int]:
    return {mq: client.get_max_offset(mq) for mq in queues}


# -- NameServer and routes ---------------------------------------------------------------------------------------------


def test_route_lists_both_brokers(servers: Servers, topic: str) -> None:
    with BlockingClient(servers.namesrv_addr) as client:
        queues = client.fetch_message_queues(topic)
        assert queues == sorted(MessageQueue(topic, b, q) for b in ("broker-a", "broker-b")
                                for q in range(QUEUES_PER_BROKER))
        route = client.get_route(topic)
        assert {b.broker_name: b.broker_addrs[0] for b in route.broker_datas} == {
            name: broker.addr for name, broker in zip(("broker-a", "broker-b"), servers.brokers, strict=True)}


def test_auto_created_topic_is_routed_at_once(servers: Servers) -> None:
    """Java's broker registers a topic it auto-creates with the NameServers at once (registerBrokerData on
    creation), so a consumer can find it right after the first send."""
    name = f"PyFresh{uuid.uuid4().hex[:8]}"
    with BlockingClient(servers.namesrv_addr) as client:
        client.send(Message(name, b"first"))
        await_queues(client, name, 1, timeout=3.0)


# -- producer and lite pull consumer -----------------------------------------------------------------------------------


def test_send_then_lite_pull_reads_everything_back(servers: Servers, topic: str) -> None:
    async def scenario() -> None:
        with BlockingClient(servers.namesrv_addr) as blocking:
            start = _max_offsets(blocking, blocking.fetch_message_queues(topic))
        tag = f"T{uuid.uuid4().hex[:6]}"
        async with Producer("py_pg_send", client_config=servers.client_config("p1")) as producer:
            sent = []
            for i in range(20):
                msg = Message(topic, b"body-%d" % i, tags=tag, keys=[f"k{i}", "common"])
                result = await producer.send(msg)
                assert result.send_status is SendStatus.SEND_OK and result.msg_id == msg.uniq_id
                sent.append((msg, result))
            assert {r.message_queue.broker_name for _, r in sent} == {"broker-a", "broker-b"}
        config = LitePullConfig(auto_commit=False)
        async with LitePullConsumer("py_cg_lite", config=config, client_config=servers.client_config("c1")) as cons:
            queues = await cons.fetch_message_queues(topic)
            cons.assign(queues, sub_expression=tag)
            for mq in queues:
                await cons.seek(mq, start[mq])
            got: list[MessageExt] = []
            deadline = time.monotonic() + CONSUME_TIMEOUT_S
            while len(got) < len(sent) and time.monotonic() < deadline:
                got += await cons.poll(1000)
            by_id = {m.msg_id: m for m in got}
            assert len(got) == len(sent) == len(by_id)
            for msg, result in sent:
                received = by_id[msg.uniq_id]
                assert (received.body, received.tags, received.keys) == (msg.body, tag, msg.keys)
                assert received.message_queue == result.message_queue
                assert (received.queue_offset, received.offset_msg_id) == (result.queue_offset, result.offset_msg_id)
            await cons.commit()
            for mq in queues:
                sent_here = [r for _, r in sent if r.message_queue == mq]
                if sent_here:
                    assert await cons.committed(mq) == max(r.queue_offset for r in sent_here) + 1

    run(scenario())


async def pull_visible(consumer: LitePullConsumer, mq: MessageQueue, offset: int, count: int) -> PullResult:
    """Pull from ``offset`` until ``count`` messages are there: a send is acknowledged once in the CommitLog and
    becomes visible when dispatch has built its ConsumeQueue unit, a moment later (RocketMQ's reput alike)."""
    deadline = time.monotonic() + CONSUME_TIMEOUT_S
    while True:
        pulled = await consumer.pull(mq, offset, 32)
        if len(pulled.messages) >= count or time.monotonic() > deadline:
            return pulled
        await asyncio.sleep(0.01)


def test_ordered_and_batch_sends(servers: Servers, topic: str) -> None:
    async def scenario() -> None:
        async with Producer("py_pg_order", client_config=servers.client_config("p2")) as producer:
            selector = SelectMessageQueueByHash()
            queues = {(await producer.send(Message(topic, b"o"), selector=selector, arg="order-7")).message_queue
                      for _ in range(5)}
            assert len(queues) == 1
            target = MessageQueue(topic, "broker-b", 1)
            msgs = [Message(topic, b"batch-%d" % i, keys=f"b{i}") for i in range(10)]
            result = await producer.send_batch(msgs, target)
            assert result.message_queue == target and result.msg_id.split(",") == [m.uniq_id for m in msgs]
            async with LitePullConsumer("py_cg_batch", client_config=servers.client_config("c2")) as consumer:
                pulled = await pull_visible(consumer, target, result.queue_offset, 10)
                assert [m.body for m in pulled.messages] == [m.body for m in msgs]
                assert [m.queue_offset for m in pulled.messages] == list(range(result.queue_offset,
                                                                               result.queue_offset + 10))

    run(scenario())


def test_large_body_is_compressed_and_read_back(servers: Servers, topic: str) -> None:
    async def scenario() -> None:
        body = bytes(range(256)) * 64  # 16 KiB: over compressMsgBodyOverHowmuch
        async with Producer("py_pg_big", client_config=servers.client_config("p3")) as producer:
            result = await producer.send(Message(topic, body))
        async with LitePullConsumer("py_cg_big", client_config=servers.client_config("c3")) as consumer:
            pulled = await pull_visible(consumer, result.message_queue, result.queue_offset, 1)
            assert pulled.messages[0].body == body and pulled.messages[0].msg_id == result.msg_id

    run(scenario())


# -- the blocking facade (the Spark connector's) -----------------------------------------------------------------------


def test_blocking_batch_raw_pull_offsets_and_timestamps(servers: Servers, topic: str) -> None:
    with BlockingClient(servers.namesrv_addr) as client:
        mq = MessageQueue(topic, "broker-a", 2)
        before = client.get_max_offset(mq)
        sent_at = int(time.time() * 1000)
        result = client.send_batch([Message(topic, b"raw-%d" % i, tags="raw") for i in range(5)], mq)
        assert result.queue_offset == before
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while client.get_max_offset(mq) < before + 5 and time.monotonic() < deadline:  # dispatch, a moment later
            time.sleep(0.01)
        assert client.get_max_offset(mq) == before + 5 and client.get_min_offset(mq) == 0
        raw = client.pull(mq, before, 32)
        assert raw.status is PullStatus.FOUND and raw.next_begin_offset == before + 5 and raw.messages == []
        assert [m.body for m in decode_messages(raw.body)] == [b"raw-%d" % i for i in range(5)]
        assert client.pull(mq, before + 5, 32).status is PullStatus.NO_NEW_MSG
        assert client.pull(mq, before + 1000, 32).status is PullStatus.OFFSET_ILLEGAL
        found = client.search_offset(mq, sent_at - 1000)
        assert found <= before
        assert client.search_offset(mq, int(time.time() * 1000) + 60_000) == before + 5


# -- push consumers ----------------------------------------------------------------------------------------------------


def test_push_consumers_share_the_topic_and_rebalance(servers: Servers, topic: str) -> None:
    async def scenario() -> None:
        tag = f"P{uuid.uuid4().hex[:6]}"
        group = f"py_cg_push_{servers.kind}"
        seen: dict[str, list[str]] = {"a": [], "b": []}

        def listener(name: str):  # type: ignore[no-untyped-def]
            async def consume(msgs, context):  # type: ignore[no-untyped-def]
                seen[name] += [m.msg_id for m in msgs]
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS
            return consume

        config = PushConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET)
        consumers = []
        for name in ("a", "b"):
            consumer = PushConsumer(group, config=config, client_config=servers.client_config(f"push-{name}"))
            consumer.subscribe(topic, tag)
            consumer.register_message_listener(listener(name))
            await consumer.start()
            consumers.append(consumer)
        try:
            every = [MessageQueue(topic, b, q) for b in ("broker-a", "broker-b") for q in range(QUEUES_PER_BROKER)]
            await eventually("the queues split between both", lambda: sorted(
                q for c in consumers for q in c.assigned_queues() if q.topic == topic) == every, CONSUME_TIMEOUT_S)
            async with Producer("py_pg_push", client_config=servers.client_config("p4")) as producer:
                ids = [(await producer.send(Message(topic, b"push-%d" % i, tags=tag))).msg_id for i in range(16)]
            await eventually("every message consumed", lambda: sorted(seen["a"] + seen["b"]) == sorted(ids),
                             CONSUME_TIMEOUT_S)
            assert seen["a"] and seen["b"]
            await consumers[1].shutdown()
            await eventually("every queue to the survivor",
                             lambda: len([q for q in consumers[0].assigned_queues() if q.topic == topic]) == 8,
                             CONSUME_TIMEOUT_S)
        finally:
            for consumer in consumers:
                await consumer.shutdown()

    run(scenario())


def test_reconsume_later_redelivers(servers: Servers, topic: str) -> None:
    async def scenario() -> None:
        tag = f"R{uuid.uuid4().hex[:6]}"
        deliveries: list[int] = []

        async def consume(msgs, context):  # type: ignore[no-untyped-def]
            deliveries.append(msgs[0].reconsume_times)
            context.delay_level_when_next_consume = 1  # 1 s on Apache's broker
            return (ConsumeConcurrentlyStatus.RECONSUME_LATER if len(deliveries) == 1
                    else ConsumeConcurrentlyStatus.CONSUME_SUCCESS)

        consumer = PushConsumer(f"py_cg_retry_{servers.kind}", client_config=servers.client_config("retry"))
        consumer.subscribe(topic, tag)
        consumer.register_message_listener(consume)
        await consumer.start()
        try:
            await eventually("every queue assigned",
                             lambda: len([q for q in consumer.assigned_queues() if q.topic == topic]) == 8,
                             CONSUME_TIMEOUT_S)
            async with Producer("py_pg_retry", client_config=servers.client_config("p5")) as producer:
                await producer.send(Message(topic, b"retry-me", tags=tag))
            await eventually("the redelivery", lambda: len(deliveries) >= 2, CONSUME_TIMEOUT_S + 30)
            assert deliveries[:2] == [0, 1]
        finally:
            await consumer.shutdown()

    run(scenario(), timeout=180)


def test_push_consumer_answers_its_running_info(servers: Servers, topic: str) -> None:
    """GET_CONSUMER_RUNNING_INFO from an admin, passed on by the broker to the consumer's connection: its settings,
    subscriptions (the group's retry topic too) and the queues it holds, each at the offset it consumed to."""
    async def scenario() -> None:
        tag = f"I{uuid.uuid4().hex[:6]}"
        group = f"py_cg_info_{servers.kind}"
        consumed: list[str] = []

        async def consume(msgs, context):  # type: ignore[no-untyped-def]
            consumed.extend(m.msg_id for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = PushConsumer(group, client_config=servers.client_config("info"))
        consumer.subscribe(topic, tag)
        consumer.register_message_listener(consume)
        await consumer.start()
        try:
            queues = [MessageQueue(topic, b, q) for b in ("broker-a", "broker-b") for q in range(QUEUES_PER_BROKER)]
            await eventually("the queues assigned",
                             lambda: [q for q in consumer.assigned_queues() if q.topic == topic] == queues,
                             CONSUME_TIMEOUT_S)
            async with Producer("py_pg_info", client_config=servers.client_config("p6")) as producer:
                ids = [(await producer.send(Message(topic, b"info-%d" % i, tags=tag))).msg_id for i in range(8)]
            await eventually("every message consumed", lambda: sorted(consumed) == sorted(ids), CONSUME_TIMEOUT_S)
            with BlockingClient(servers.namesrv_addr) as client:
                ends = _max_offsets(client, queues)
            async with MQAdminExt(servers.namesrv_addr) as admin:
                info = await _running_info(admin, group, consumer.instance.client_id, ends)
            out = io.StringIO()  # consumerProgress -s true: who holds each queue, from the running info
            args = ["consumerProgress", "-n", servers.namesrv_addr, "-g", group, "-t", topic, "-s", "true"]
            assert await asyncio.to_thread(mqadmin_main, args, out, io.StringIO()) == 0
        finally:
            await consumer.shutdown()
        props = info["properties"]
        assert {k: props[k] for k in ("PROP_CONSUME_TYPE", "PROP_CLIENT_VERSION", "PROP_CONSUMEORDERLY",
                                      "PROP_THREADPOOL_CORE_SIZE", "PROP_NAMESERVER_ADDR", "consumerGroup",
                                      "messageModel", "consumeFromWhere", "clientIP", "instanceName")} == {
            "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY", "PROP_CLIENT_VERSION": "V5_5_1", "PROP_CONSUMEORDERLY": "false",
            "PROP_THREADPOOL_CORE_SIZE": "20", "PROP_NAMESERVER_ADDR": f"{servers.namesrv_addr};",
            "consumerGroup": group, "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
            "clientIP": "127.0.0.1", "instanceName": consumer.instance.config.instance_name}
        assert props["PROP_CONSUMER_START_TIMESTAMP"] == str(consumer.consumer_start_timestamp)
        assert [(s["topic"], s["subString"]) for s in info["subscriptionSet"]] == [(f"%RETRY%{group}", "*"),
                                                                                     (topic, tag)]
        table = {mq_key(k): v for k, v in info["mqTable"].items()}
        assert [mq for mq in table if mq.topic == topic] == queues
        assert {mq: table[mq]["commitOffset"] for mq in queues} == ends
        assert all(not table[mq]["droped"] and table[mq]["cachedMsgCount"] == 0 for mq in queues)
        assert "TID: " in info["jstack"] and f"pull-{queues[0]}" in info["jstack"]
        rows = [line.split() for line in out.getvalue().splitlines() if line.startswith(topic)]
        assert [(r[1], int(r[2]), r[5]) for r in rows] == [(mq.broker_name, mq.queue_id, "127.0.0.1") for mq in queues]

    run(scenario())


@pytest.mark.java
@pytest.mark.slow
def test_apache_mqadmin_consumer_status_reads_a_python_consumer(servers: Servers, topic: str, tmp_path: Path) -> None:
    """Apache's ``mqadmin consumerStatus -i <client> -s`` decodes what our client answers (fastjson: MessageQueue map
    keys, Properties, SubscriptionData) and prints it."""
    from tests.apache import apache_mqadmin

    tool, ns = apache_mqadmin(tmp_path), servers.namesrv_addr
    group = f"py_cg_status_{servers.kind}"
    queues = [MessageQueue(topic, b, q) for b in ("broker-a", "broker-b") for q in range(QUEUES_PER_BROKER)]

    async def consume(msgs, context):  # type: ignore[no-untyped-def]
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def scenario() -> tuple[str, str, str]:
        consumer = PushConsumer(group, client_config=servers.client_config("status"))
        consumer.subscribe(topic, "TagS")
        consumer.register_message_listener(consume)
        await consumer.start()
        client_id = consumer.instance.client_id
        try:
            await eventually("the queues assigned",
                             lambda: [q for q in consumer.assigned_queues() if q.topic == topic] == queues,
                             CONSUME_TIMEOUT_S)
            async with MQAdminExt(ns) as admin:
                await _running_info(admin, group, client_id, {})  # once the route of the retry topic is known
            done = await asyncio.to_thread(tool.run, "consumerStatus", "-n", ns, "-g", group, "-i", client_id, "-s",
                                           check=False, timeout=120, cwd=tmp_path)
        finally:
            await consumer.shutdown()
        return client_id, done.stdout.decode(), done.stderr.decode()

    client_id, out, err = run(scenario(), timeout=180)
    shown = f"--- stdout\n{out}\n--- stderr\n{err[-3000:]}"
    assert out.startswith("#Consumer Properties#\n"), shown
    assert re.search(r"^PROP_CONSUME_TYPE +: CONSUME_PASSIVELY$", out, re.M), shown
    assert re.search(rf"^consumerGroup +: {group}$", out, re.M), shown
    assert f"001 Topic: {'%RETRY%' + group:<40} ClassFilter: {'false':<8} SubExpression: *\n" in out, shown
    assert f"002 Topic: {topic:<40} ClassFilter: {'false':<8} SubExpression: TagS\n" in out, shown
    for mq in queues:
        assert re.search(rf"^{mq.topic} +{mq.broker_name} +{mq.queue_id} +-?\d+ *$", out, re.M), shown
    assert "#Consumer jstack#" in out and f"pull-{queues[0]}" in out.split("#Consumer jstack#")[1], shown


async def _running_info(admin: MQAdminExt, group: str, client_id: str, ends: dict[MessageQueue, int]) -> dict:
    """The client's running info once it shows every queue consumed to ``ends`` (the listener returns before the
    offset moves); the group's retry topic, which the route lookup needs, may reach the NameServer late."""
    deadline = time.monotonic() + ROUTE_TIMEOUT_S
    while True:
        try:
            info = await admin.get_consumer_running_info(group, client_id, jstack=True)
            offsets = {mq_key(k): v["commitOffset"] for k, v in info["mqTable"].items()}
            if all(offsets.get(mq) == end for mq, end in ends.items()) or time.monotonic() > deadline:
                return info
        except MQClientError as err:
            if err.code != ResponseCode.TOPIC_NOT_EXIST or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.2)


# -- failover (its own servers: it kills a broker) ---------------------------------------------------------------------


def test_producer_fails_over_when_a_broker_dies(tmp_path: Path) -> None:
    servers = start("rmq", tmp_path)
    try:
        # The topic on both brokers before the producer starts: this test is about failover, not about auto-creation
        # racing the producer's first route update.
        for broker in servers.brokers:
            with BlockingRemotingClient(broker.addr) as remote:
                create_topic(remote, "PyFailover", queue_nums=4)
        with BlockingClient(servers.namesrv_addr) as client:
            await_queues(client, "PyFailover", 2)

        async def scenario() -> None:
            async with Producer("py_pg_failover", client_config=servers.client_config("fo")) as producer:
                brokers = {(await producer.send(Message("PyFailover", b"x"))).message_queue.broker_name
                           for _ in range(8)}
                assert brokers == {"broker-a", "broker-b"}
                servers.brokers[0].kill()
                results = [await producer.send(Message("PyFailover", b"after")) for _ in range(8)]
                assert {r.message_queue.broker_name for r in results} == {"broker-b"}

        run(scenario())
    finally:
        servers.close()
