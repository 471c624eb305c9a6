"""Message trace against Apache's own code, on our broker and on Apache's 5.5.0 broker, each started with
``traceTopicEnable=true``.

Two scenarios, one test each, run on both brokers (a shared cluster of each kind):

- Apache's Java 5.5.0 producer and push consumer with trace on (ClientDriver ``--trace true``): our ``mqadmin
  queryMsgTraceById`` prints exactly what Apache's prints for the same message.
- Our producer (sync, async and batch sends), transaction producer, push consumer and lite pull consumer with
  ``enable_msg_trace``: Apache's ``queryMsgTraceById`` reads their records (a Pub, one Sub per consumer group) and
  prints what ours prints; the EndTransaction record is read back from the trace topic.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from broker.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    LitePullConfig,
    LitePullConsumer,
    Message,
    MessageExt,
    Producer,
    ProducerConfig,
    PushConsumer,
    PushConsumerConfig,
)
from broker.client.trace import MessageType, TraceType, decode_trace_data
from broker.client.transaction import TransactionProducer
from broker.client.transaction_protocol import LocalTransactionState
from broker.common.validation import RMQ_SYS_TRACE_TOPIC
from broker.tools.admin import JAVA_LONG_MAX, MQAdminExt
from tests.apache import ApacheClient, apache_client
from tests.helpers import client_config, eventually, mqadmin, mqadmin_ok, wait_until
from tests.integration.cluster import DEFAULT_CLUSTER
from tests.interop.test_official_mqadmin import Mqadmin, build_mqadmin
from tests.javatools import JavaToolError

pytestmark = [pytest.mark.java, pytest.mark.slow]

WAIT_S = 30.0


@pytest.fixture(scope="module", params=["rmq", "apache"])
def namesrv(clusters, request: pytest.FixtureRequest) -> str:
    return clusters.shared(request.param, traceTopicEnable=True).namesrv_addr


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> ApacheClient:
    try:
        return apache_client(tmp_path_factory.mktemp("trace-client"))
    except JavaToolError as err:
        pytest.fail(f"cannot build the Apache client driver: {err}", pytrace=False)


@pytest.fixture(scope="module")
def official(tmp_path_factory: pytest.TempPathFactory) -> Mqadmin:
    return build_mqadmin(tmp_path_factory.mktemp("trace-mqadmin"))


def create_topic(namesrv: str, topic: str) -> None:
    mqadmin_ok("updateTopic", "-n", namesrv, "-c", DEFAULT_CLUSTER, "-t", topic, "-r", "2", "-w", "2")


def trace_table(namesrv: str, msg_id: str, ready: Callable[[str], bool]) -> str:
    """Our queryMsgTraceById once ``ready`` holds for its output: trace messages are sent in the background, and
    until one of ``msg_id`` is indexed the key query finds nothing (the command fails)."""
    outputs: list[str] = []

    def query() -> bool:
        run = mqadmin("queryMsgTraceById", "-n", namesrv, "-i", msg_id)
        outputs.append(run.out if run.code == 0 else run.err)
        return ready(outputs[-1])

    try:
        wait_until(f"the trace of {msg_id}", query, WAIT_S, interval=0.5)
    except AssertionError as err:
        raise AssertionError(f"{err}; queryMsgTraceById said last:\n{outputs[-1] if outputs else ''}") from None
    return outputs[-1]


def rows(table: str) -> list[list[str]]:
    return [line.split() for line in table.splitlines() if line and not line.startswith("#")]


def official_table(official: Mqadmin, namesrv: str, msg_id: str) -> str:
    run = official.run("queryMsgTraceById", "-n", namesrv, "-i", msg_id)
    assert run.code == 0, run.err
    return run.out


def test_java_client_traces_read_by_both_mqadmins(namesrv: str, java: ApacheClient, official: Mqadmin) -> None:
    topic = "TraceJavaTopic"
    create_topic(namesrv, topic)
    sent = java.run("produce", namesrv=namesrv, topic=topic, count=3, tag="TagA", keys_prefix="jk",
                    group="TraceJavaPG", trace=True).records
    consumed = java.run("consume-push", namesrv=namesrv, topic=topic, group="TraceJavaCG", max=3, trace=True)
    assert consumed.summary and consumed.summary["count"] == 3
    msg_id = sent[1]["msgId"]
    ours = trace_table(namesrv, msg_id, lambda out: "Pub " in out and "Sub " in out)
    assert [(r[0], r[1], r[2], r[-1]) for r in rows(ours)] == [("Pub", "TraceJavaPG", "127.0.0.1", "success"),
                                                              ("Sub", "TraceJavaCG", "127.0.0.1", "success")]
    assert official_table(official, namesrv, msg_id) == ours


def test_python_client_traces_read_by_apache_mqadmin(namesrv: str, official: Mqadmin) -> None:
    topic = "TracePyTopic"
    create_topic(namesrv, topic)
    create_topic(namesrv, f"{topic}Batch")
    sent = asyncio.run(_python_scenario(namesrv, topic))
    batch_id = sent.pop("batch")
    for what, msg_id in sent.items():
        ours = trace_table(namesrv, msg_id, lambda out: out.count("Sub ") == 2)
        table = rows(ours)
        assert [(r[0], r[1], r[-1]) for r in table[:1]] == [("Pub", "TracePyPG" if what != "transaction"
                                                              else "TracePyTx", "success")], (what, ours)
        assert sorted((r[0], r[1], r[-1]) for r in table[1:]) == [
            ("Sub", "TracePyLite", "success"), ("Sub", "TracePyPush", "success")], (what, ours)
        assert official_table(official, namesrv, msg_id) == ours, what
    (batch,) = asyncio.run(_trace_records(namesrv, batch_id))  # one Pub, its msgId the batch's ids joined by commas
    assert (batch.trace_type, batch.beans[0].topic, batch.beans[0].msg_id.count(",")) == (TraceType.Pub,
                                                                                           f"{topic}Batch", 1)
    records = asyncio.run(_trace_records(namesrv, sent["transaction"]))
    kinds = {(c.trace_type, c.beans[0].msg_type) for c in records}
    assert (TraceType.Pub, MessageType.Trans_Msg_Half) in kinds
    (end,) = [c for c in records if c.trace_type is TraceType.EndTransaction]
    assert (end.group_name, end.beans[0].transaction_state, end.beans[0].from_transaction_check) == (
        "TracePyTx", "COMMIT_MESSAGE", False)


async def _python_scenario(namesrv: str, topic: str) -> dict[str, str]:
    """Sends (sync, async, a batch, a transaction), consumed by a push and a lite pull consumer, all traced; the
    message id of each kind of send."""
    traced = ProducerConfig(enable_msg_trace=True)
    async with Producer("TracePyPG", config=traced, client_config=client_config(namesrv, "trace-pg")) as producer:
        sync = await producer.send(Message(topic, b"sync", tags="TagA", keys="pk-1"))
        later = await producer.send_async(Message(topic, b"async", keys="pk-2"))
        # Apache's broker stamps no MSG_REGION on batched messages, and a consumed batch whose last message lacks
        # it is not traced (as in Java): the batch goes to a topic of its own, which nobody consumes
        batch = await producer.send_batch([Message(f"{topic}Batch", b"b1", keys="pk-3"),
                                           Message(f"{topic}Batch", b"b2")])

    class Commit:
        def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
            return LocalTransactionState.COMMIT_MESSAGE

        def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            return LocalTransactionState.COMMIT_MESSAGE

    async with TransactionProducer("TracePyTx", listener=Commit(), config=traced,
                                   client_config=client_config(namesrv, "trace-tx")) as tx:
        committed = await tx.send_message_in_transaction(Message(topic, b"tx", keys="pk-tx"))
    await _consume(namesrv, topic, 3)
    return {"sync": sync.msg_id or "", "async": later.msg_id or "", "transaction": committed.msg_id or "",
            "batch": batch.msg_id or ""}


async def _consume(namesrv: str, topic: str, count: int) -> None:
    got: set[str] = set()

    async def listener(msgs: list[MessageExt], context: object) -> ConsumeConcurrentlyStatus:
        got.update(m.msg_id for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    push = PushConsumer("TracePyPush", config=PushConsumerConfig(
        enable_msg_trace=True, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET),
        client_config=client_config(namesrv, "trace-push"))
    push.subscribe(topic)
    push.register_message_listener(listener)
    lite = LitePullConsumer("TracePyLite", config=LitePullConfig(enable_msg_trace=True),
                            client_config=client_config(namesrv, "trace-lite"))
    polled: list[MessageExt] = []
    async with push, lite:
        queues = await lite.fetch_message_queues(topic)
        lite.assign(queues)
        for mq in queues:
            await lite.seek_to_begin(mq)
        for _ in range(int(WAIT_S)):
            if len(polled) >= count:
                break
            polled.extend(await lite.poll(timeout_ms=1000))
        assert len(polled) == count
        await eventually("the push consumer consumed every message", lambda: len(got) >= count, WAIT_S)


async def _trace_records(namesrv: str, msg_id: str) -> list:
    async with MQAdminExt(namesrv) as admin:
        result = await admin.query_message(RMQ_SYS_TRACE_TOPIC, msg_id, 64, 0, JAVA_LONG_MAX)
    return [c for m in result.messages for c in decode_trace_data(m.body.decode()) if c.beans[0].msg_id == msg_id]
