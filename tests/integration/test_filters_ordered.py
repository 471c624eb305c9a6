"""SQL92 filters, batch-send rules and orderly consumption (issue 4) against our broker.

The first tests drive a BrokerController in-process with raw requests: which records a SQL92 pull returns, Java's
codes and remarks for expressions that do not compile (pull, CHECK_CLIENT_CONFIG, heartbeat filter data), the
broker with enablePropertyFilter off, and the batch rules. The rest run the Python client against real servers
(``python -m broker.namesrv`` and ``python -m broker`` with enablePropertyFilter=true): a push consumer selecting by
SQL92 and by tag, and orderly push consumers that must see every queue strictly in order while a second consumer
joins midway and the first one restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker.client import (
    ClientConfig,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageQueue,
    Producer,
    PushConsumer,
    PushConsumerConfig,
    SelectMessageQueueByHash,
)
from broker.client.message import MessageBatch, MessageExt
from broker.client.orderly import ConsumeOrderlyContext, ConsumeOrderlyStatus
from broker.common.errors import MQClientError
from broker.common.message import PullSysFlag, encode_properties
from broker.common.message_batch import BatchMessage, encode_batch_body
from broker.common.record import iter_records
from broker.remoting.client import RemotingClient
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.headers import PullMessageRequestHeader, SendMessageRequestHeader
from broker.server.broker_controller import BrokerController
from tests.helpers import client_config, eventually
from tests.helpers import run as run_bounded
from tests.integration.cluster import ClusterPool
from tests.integration.in_process import dispatched, running_controller

TOO_BIG = ("java.lang.RuntimeException: message body size exceeded, "
           "org.apache.rocketmq.store.MessageExtEncoder.encode(MessageExtEncoder.java:290)")
ILLEGAL = ("the message is illegal, maybe msg body or properties length not matched. msg body length limit 8192B, msg "
           "properties length limit 32KB.")
NOT_COMPARABLE = "java.lang.RuntimeException: Value ''x'' cannot be compared."
WAIT_S = 45.0  # for push consumers to rebalance and consume


run = functools.partial(run_bounded, timeout=180.0)


# -- an in-process broker, raw requests ------------------------------------------------------------------------------


@dataclass
class Broker:
    client: RemotingClient
    controller: BrokerController

    async def invoke(self, code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
        return await self.client.invoke(self.controller.broker_addr, create_request(code, ext, body), 5000)

    async def send(self, topic: str, body: bytes, properties: dict[str, str], *, batch: bool = False,
                   sys_flag: int = 0) -> RemotingCommand:
        header = SendMessageRequestHeader(
            producer_group="PG", topic=topic, default_topic="TBW102", default_topic_queue_nums=4, queue_id=0,
            sys_flag=sys_flag, born_timestamp=int(time.time() * 1000), flag=0,
            properties=encode_properties(properties), batch=batch or None)
        code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
        return await self.invoke(code, header.to_ext(SendMessageRequestHeader.V2_WIRE), body)

    async def pull(self, topic: str, expression: str | None, *, offset: int = 0, sub_version: int = 0,
                   group: str = "CG_SQL") -> RemotingCommand:
        """A pull carrying its SQL92 expression, or (``expression`` None) relying on the group's heartbeat."""
        header = PullMessageRequestHeader(
            consumer_group=group, topic=topic, queue_id=0, queue_offset=offset, max_msg_nums=32,
            sys_flag=int(PullSysFlag.SUBSCRIPTION) if expression is not None else 0, commit_offset=0,
            suspend_timeout_millis=0, sub_version=sub_version, subscription=expression,
            expression_type="SQL92" if expression is not None else None)
        return await self.invoke(RequestCode.PULL_MESSAGE, header.to_ext())

    async def heartbeat(self, group: str, topic: str, expression: str, sub_version: int) -> RemotingCommand:
        sub = {"topic": topic, "subString": expression, "expressionType": "SQL92", "subVersion": sub_version,
               "tagsSet": [], "codeSet": [], "classFilterMode": False}
        body = {"clientID": "127.0.0.1@sql", "producerDataSet": [], "consumerDataSet": [{
            "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "subscriptionDataSet": [sub], "unitMode": False}]}
        return await self.invoke(RequestCode.HEART_BEAT, body=json.dumps(body).encode())

    async def check_client_config(self, expression: str) -> RemotingCommand:
        body = {"clientId": "127.0.0.1@sql", "group": "CG_SQL", "subscriptionData": {
            "topic": "TopicSql", "subString": expression, "expressionType": "SQL92", "subVersion": 1}}
        return await self.invoke(RequestCode.CHECK_CLIENT_CONFIG, body=json.dumps(body).encode())

    async def dispatched(self) -> None:
        await dispatched(self.controller.store)


@contextlib.asynccontextmanager
async def running_broker(tmp_path: Path, **broker_fields: Any) -> AsyncIterator[Broker]:
    """A fresh in-process broker (tests/integration/in_process.py) with 8 KiB messages at most, and a client."""
    async with running_controller(tmp_path / "store", store={"max_message_size": 8192}, **broker_fields) as controller:
        client = RemotingClient()
        try:
            yield Broker(client, controller)
        finally:
            await client.close()


def _bodies(response: RemotingCommand) -> list[bytes]:
    return [record.body or b"" for record in iter_records(response.body)] if response.body else []


async def _send_priced(b: Broker, topic: str, count: int) -> None:
    for i in range(count):
        props = {"price": str(i), "TAGS": "TagA" if i % 2 == 0 else "TagB", "KEYS": f"k{i}"}
        if i == count - 1:
            props = {"TAGS": "TagA"}  # no price at all: NULL, never selected
        assert (await b.send(topic, f"m{i}".encode(), props)).code == ResponseCode.SUCCESS
    await b.dispatched()


def test_sql92_pull_selects_by_properties(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, enable_property_filter=True) as b:
            await _send_priced(b, "TopicSql", 12)
            found = await b.pull("TopicSql", "price BETWEEN 3 AND 8 AND TAGS = 'TagA'")
            assert found.code == ResponseCode.SUCCESS and _bodies(found) == [b"m4", b"m6", b"m8"]
            assert found.ext_fields["nextBeginOffset"] == "12"  # the whole queue was scanned
            unparsable = await b.pull("TopicSql", "KEYS > 5")  # "k1" is no number: Java throws, nothing selected
            assert unparsable.code == ResponseCode.PULL_RETRY_IMMEDIATELY and unparsable.remark == "NO_MATCHED_MESSAGE"
            missing = await b.pull("TopicSql", "price IS NULL")
            assert _bodies(missing) == [b"m11"]
            refused = await b.pull("TopicSql", "price > 'x'")
            assert (refused.code, refused.remark) == (ResponseCode.SUBSCRIPTION_PARSE_FAILED, NOT_COMPARABLE)

    run(scenario())


def test_sql92_from_the_heartbeat_and_check_client_config(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, enable_property_filter=True) as b:
            await _send_priced(b, "TopicSql", 6)
            checked = await b.check_client_config("price > 'x'")
            assert (checked.code, checked.remark) == (ResponseCode.SUBSCRIPTION_PARSE_FAILED, NOT_COMPARABLE)
            assert (await b.check_client_config("price > 1")).code == ResponseCode.SUCCESS
            assert (await b.heartbeat("CG_SQL", "TopicSql", "price >= 4", 1000)).code == ResponseCode.SUCCESS
            found = await b.pull("TopicSql", None, sub_version=1000)
            assert found.code == ResponseCode.SUCCESS and _bodies(found) == [b"m4"]
            stale = await b.pull("TopicSql", None, sub_version=1001)  # the client has a newer subscription
            assert stale.code == ResponseCode.SUBSCRIPTION_NOT_LATEST
            assert (await b.heartbeat("CG_SQL", "TopicSql", "price >", 2000)).code == ResponseCode.SUCCESS
            gone = await b.pull("TopicSql", None, sub_version=2000)
            assert (gone.code, gone.remark) == (ResponseCode.FILTER_DATA_NOT_EXIST, "The broker's consumer filter "
                                                                                   "data is not exist!Your expression "
                                                                                   "may be wrong!")

    run(scenario())


def test_sql92_without_the_property_filter(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, enable_property_filter=False) as b:
            await _send_priced(b, "TopicSql", 2)
            expected = (ResponseCode.SYSTEM_ERROR, "The broker does not support consumer to filter message by SQL92")
            refused = await b.pull("TopicSql", "price > 'x'")
            assert (refused.code, refused.remark) == expected
            checked = await b.check_client_config("price > 1")
            assert (checked.code, checked.remark) == expected

    run(scenario())


def test_batch_rules(tmp_path: Path) -> None:
    """As Apache's 5.5.0 broker answers raw SEND_BATCH_MESSAGE requests (checked against it by hand: the oversize
    remark names the line of MessageExtEncoder that throws)."""
    async def scenario() -> None:
        async with running_broker(tmp_path) as b:
            two = encode_batch_body([BatchMessage(b"a", {"UNIQ_KEY": "U1"}), BatchMessage(b"b", {"UNIQ_KEY": "U2"})])
            retry = await b.send("%RETRY%CG", two, {}, batch=True)
            assert (retry.code, retry.remark) == (ResponseCode.MESSAGE_ILLEGAL,
                                                  "batch request does not support retry group %RETRY%CG")
            delayed = await b.send("TopicBatch", two, {"DELAY": "3"}, batch=True)
            assert (delayed.code, delayed.remark) == (ResponseCode.MESSAGE_ILLEGAL, ILLEGAL)
            # A prepared batch is rmq's transactional batch (rmqTransactionBatchEnable): these items are not half
            # messages, so it is refused all the same; with the key off the answer is Apache's ILLEGAL
            # (tests/integration/test_transaction_batch.py checks both against Apache's broker).
            prepared = await b.send("TopicBatch", two, {"TRAN_MSG": "true"}, batch=True, sys_flag=0x4)
            assert prepared.code == ResponseCode.MESSAGE_ILLEGAL
            assert (prepared.remark or "").startswith("a batch mixing prepared and plain messages is refused: item 0")
            big = encode_batch_body([BatchMessage(b"x" * 5000, {}), BatchMessage(b"y" * 5000, {})])
            too_big = await b.send("TopicBatch", big, {}, batch=True)
            assert (too_big.code, too_big.remark) == (ResponseCode.SYSTEM_ERROR, TOO_BIG)
            fits = encode_batch_body([BatchMessage(b"x" * 4000, {}), BatchMessage(b"y" * 4000, {})])
            assert len(fits) <= 8192 and (await b.send("TopicBatch", fits, {}, batch=True)).code == ResponseCode.SUCCESS

    run(scenario())


def test_client_side_batch_rules() -> None:
    """MessageBatch.generateFromList and Validators, before anything is sent."""
    ok = MessageBatch([Message("T", b"a"), Message("T", b"b")])
    assert ok.topic == "T" and len(ok.messages) == 2
    delayed = Message("T", b"b")
    delayed.delay_time_level = 2
    cases = [
        ([Message("T", b"a"), delayed], "TimeDelayLevel is not supported for batching"),
        ([Message("%RETRY%G", b"a")], "Retry Group is not supported for batching"),
        ([Message("T", b"a"), Message("U", b"b")], "The topic of the messages in one batch should be the same"),
    ]
    for messages, reason in cases:
        with pytest.raises(MQClientError, match=reason):
            MessageBatch(messages)
    with pytest.raises(MQClientError, match="the message body size over max value, MAX: 4194304"):
        MessageBatch([Message("T", b"x" * (4 * 1024 * 1024 + 1))])


def test_orderly_process_queue_hands_out_in_offset_order() -> None:
    """take_messages, commit, make_message_to_consume_again and rollback (ProcessQueue's orderly methods)."""
    from broker.client.offsets import OrderlyProcessQueue

    def msg(offset: int) -> MessageExt:
        return MessageExt(topic="T", body=b"x" * 10, flag=0, properties={}, queue_id=0, queue_offset=offset,
                          commit_log_offset=0, sys_flag=0, born_timestamp=0, born_host="", store_timestamp=0,
                          store_host="", reconsume_times=0, prepared_transaction_offset=0, body_crc=0, store_size=0,
                          offset_msg_id=str(offset))

    pq = OrderlyProcessQueue()
    pq.put_messages([msg(5), msg(6), msg(7)])
    assert pq.claim() and not pq.claim()  # one consume task owns the queue
    first = pq.take_messages(2)
    assert [m.queue_offset for m in first] == [5, 6] and pq.msg_count == 3
    pq.make_message_to_consume_again(first[1:])  # suspended: 6 comes back before 7
    assert pq.commit() == 6 and pq.msg_count == 2
    assert [m.queue_offset for m in pq.take_messages(5)] == [6, 7]
    pq.rollback()
    assert [m.queue_offset for m in pq.take_messages(1)] == [6]
    assert pq.commit() == 7 and pq.commit() == -1
    assert [m.queue_offset for m in pq.take_messages(1)] == [7] and pq.commit() == 8
    assert pq.take_messages(1) == [] and not pq.consuming and pq.msg_count == 0 and pq.max_span() == 0


# -- the Python client against real servers --------------------------------------------------------------------------


@dataclass
class Servers:
    namesrv_addr: str

    def client_config(self, name: str) -> ClientConfig:
        return client_config(self.namesrv_addr, name)


@pytest.fixture(scope="module")
def servers(clusters: ClusterPool) -> Servers:
    """The suite's shared cluster with SQL92 filters on (one broker, broker-a); topics here carry a random suffix."""
    return Servers(clusters.shared(enablePropertyFilter=True).namesrv_addr)


def test_python_push_consumers_select_by_sql92_and_by_tag(servers: Servers) -> None:
    topic = f"TopicSel{uuid.uuid4().hex[:6]}"

    async def scenario() -> None:
        async with Producer("py_pg_sel", client_config=servers.client_config("sel-p")) as producer:
            await producer.send(Message(topic, b"create", tags="Init"))  # creates the topic (4 queues)
            got: dict[str, list[str]] = {"sql": [], "tag": []}

            def collect(name: str):  # type: ignore[no-untyped-def]
                async def consume(msgs: list[MessageExt], context: object) -> ConsumeConcurrentlyStatus:
                    got[name] += [m.body.decode() for m in msgs]
                    return ConsumeConcurrentlyStatus.CONSUME_SUCCESS
                return consume

            config = PushConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
            sql = PushConsumer("py_cg_sql", config=config, client_config=servers.client_config("sel-sql"))
            sql.subscribe_sql(topic, "price BETWEEN 10 AND 19 AND (color = 'red' OR color IS NULL)")
            sql.register_message_listener(collect("sql"))
            tag = PushConsumer("py_cg_tag", config=config, client_config=servers.client_config("sel-tag"))
            tag.subscribe(topic, "TagA || TagC")
            tag.register_message_listener(collect("tag"))
            await sql.start()
            await tag.start()
            try:
                for i in range(30):
                    props = {"price": str(i)} | ({"color": "red" if i % 3 else "blue"} if i % 5 else {})
                    tags = f"Tag{'ABC'[i % 3]}"
                    await producer.send(Message(topic, f"m{i}".encode(), tags=tags, properties=props))
                want_sql = [f"m{i}" for i in range(10, 20) if i % 5 == 0 or i % 3]
                want_tag = [f"m{i}" for i in range(30) if i % 3 != 1]
                await eventually(f"sql {got['sql']}", lambda: sorted(got["sql"]) == sorted(want_sql), WAIT_S)
                await eventually(f"tag {got['tag']}", lambda: sorted(got["tag"]) == sorted(want_tag), WAIT_S)
                await asyncio.sleep(1.0)  # nothing else arrives
                assert sorted(got["sql"]) == sorted(want_sql) and sorted(got["tag"]) == sorted(want_tag)
            finally:
                await sql.shutdown()
                await tag.shutdown()

    run(scenario())


def test_python_push_consumer_with_a_bad_selector_does_not_start(servers: Servers) -> None:
    topic = f"TopicBad{uuid.uuid4().hex[:6]}"

    async def scenario() -> None:
        async with Producer("py_pg_bad", client_config=servers.client_config("bad-p")) as producer:
            await producer.send(Message(topic, b"create"))
        consumer = PushConsumer("py_cg_bad", client_config=servers.client_config("bad-c"))
        consumer.subscribe_sql(topic, "price > 'x'")
        consumer.register_message_listener(lambda msgs, context: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
        with pytest.raises(MQClientError) as caught:
            await consumer.start()
        assert caught.value.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and NOT_COMPARABLE in str(caught.value)

    run(scenario())


class OrderLog:
    """Every delivery of an orderly test, in the order the listeners saw them (one global sequence)."""

    def __init__(self) -> None:
        self.deliveries: list[tuple[str, int, int, str]] = []  # (consumer, queue id, queue offset, key:seq)
        self.busy: set[int] = set()
        self.overlaps = 0

    def listener(self, name: str, *, suspend_every: int = 0) -> Callable[..., Any]:
        suspended: set[str] = set()

        async def consume(msgs: list[MessageExt], context: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
            queue = context.message_queue.queue_id
            if queue in self.busy:  # two consumers in one queue at once: exactly what must never happen
                self.overlaps += 1
            self.busy.add(queue)
            try:
                await asyncio.sleep(0.004)
                body = msgs[0].body.decode()
                if suspend_every and int(body.split(":")[1]) % suspend_every == 0 and body not in suspended:
                    suspended.add(body)
                    return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
                self.deliveries += [(name, m.queue_id, m.queue_offset, m.body.decode()) for m in msgs]
                return ConsumeOrderlyStatus.SUCCESS
            finally:
                self.busy.discard(queue)

        return consume

    def assert_strictly_in_order(self, sent: dict[str, list[int]]) -> None:
        """Each queue delivered exactly once, offset after offset; each key's sequence in the order sent."""
        assert self.overlaps == 0
        by_queue: dict[int, list[int]] = defaultdict(list)
        by_key: dict[str, list[int]] = defaultdict(list)
        for _, queue, offset, body in self.deliveries:
            by_queue[queue].append(offset)
            key, seq = body.split(":")
            by_key[key].append(int(seq))
        for queue, offsets in by_queue.items():
            assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), (queue, offsets)
        assert dict(by_key) == sent


def test_python_orderly_consumers_keep_order_across_a_rebalance_and_a_restart(servers: Servers) -> None:
    topic = f"TopicOrd{uuid.uuid4().hex[:6]}"
    keys = [f"order{k}" for k in range(8)]

    async def scenario() -> None:
        log = OrderLog()
        sent: dict[str, list[int]] = defaultdict(list)
        config = PushConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)

        def orderly(name: str, instance: str, **kwargs: Any) -> PushConsumer:
            consumer = PushConsumer("py_cg_orderly", config=config, client_config=servers.client_config(instance))
            consumer.subscribe(topic, "*")
            consumer.register_message_listener_orderly(log.listener(name, **kwargs))
            return consumer

        async with Producer("py_pg_orderly", client_config=servers.client_config("ord-p")) as producer:
            counter = itertools.count()

            async def produce(count: int) -> None:
                for _ in range(count):
                    i = next(counter)
                    key = keys[i % len(keys)]
                    sent[key].append(i)
                    await producer.send(Message(topic, f"{key}:{i}".encode(), keys=key),
                                        selector=SelectMessageQueueByHash(), arg=key)

            await produce(40)  # creates the topic; the first consumer starts from offset 0
            first = orderly("a", "ord-a", suspend_every=7)
            await first.start()
            second = orderly("b", "ord-b")
            restarted: PushConsumer | None = None
            try:
                await eventually("the first deliveries", lambda: len(log.deliveries) >= 20, WAIT_S)
                producing = asyncio.ensure_future(produce(160))
                await second.start()  # joins midway: two of the four queues move to it
                await eventually("the rebalance",  # 2 of the topic's queues plus the retry topic's one
                                 lambda: len(second.assigned_queues()) >= 2 and len(first.assigned_queues()) == 3,
                                 WAIT_S)
                await producing
                await eventually("more deliveries", lambda: len(log.deliveries) >= 120, WAIT_S)
                await first.shutdown()  # a consumer restart: its queues go to "b", then come back
                restarted = orderly("a2", "ord-a2")
                await restarted.start()
                await produce(40)
                await eventually("240 deliveries", lambda: len(log.deliveries) >= 240, 90.0)
                await asyncio.sleep(1.0)
                assert len(log.deliveries) == 240
                log.assert_strictly_in_order(dict(sent))
                assert {name for name, *_ in log.deliveries} >= {"a", "b", "a2"}
            finally:
                for consumer in (first, second, restarted):
                    if consumer is not None:
                        await consumer.shutdown()

    run(scenario(), timeout=240.0)


def test_orderly_queue_locks_at_the_broker(servers: Servers) -> None:
    """Two consumers of a group cannot both hold a queue; the lock moves on once its holder gives it up."""
    topic = f"TopicLock{uuid.uuid4().hex[:6]}"

    async def scenario() -> None:
        async with Producer("py_pg_lock", client_config=servers.client_config("lock-p")) as producer:
            await producer.send(Message(topic, b"create"))
        queues = [MessageQueue(topic, "broker-a", q) for q in range(4)]
        consumers = []
        for name in ("lock-a", "lock-b"):
            consumer = PushConsumer("py_cg_lock", client_config=servers.client_config(name))
            consumer.subscribe(topic, "*")
            consumer.register_message_listener_orderly(lambda msgs, context: ConsumeOrderlyStatus.SUCCESS)
            consumers.append(consumer)
        await consumers[0].start()
        await consumers[1].start()
        try:
            a, b = (c._orderly for c in consumers)  # noqa: SLF001 - the services under test
            assert a is not None and b is not None
            await eventually("both consumers own queues",
                             lambda: len(consumers[0].assigned_queues()) + len(consumers[1].assigned_queues()) >= 5,
                             WAIT_S)
            owned_by_a = [q for q in queues if q in consumers[0].assigned_queues()]
            assert owned_by_a and not await b.lock(owned_by_a[0])
            await consumers[0].shutdown()  # unlocks everything it held
            assert await b.lock(owned_by_a[0])
        finally:
            for consumer in consumers:
                await consumer.shutdown()

    run(scenario())
