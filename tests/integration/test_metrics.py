"""Prometheus metrics (metricsExporterType=PROM): an in-process NameServer and broker scraped over HTTP while our
producer sends and a push consumer consumes. The counters move by exactly what was sent and pulled, the lag gauges
show the backlog and then none, and every family that Apache's broker exports too has Apache's type and labels
(tests/integration/data/apache_5_5_0_metrics.txt: what Apache 5.5.0's endpoint printed). Bad settings fail clearly.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import socket
import time
from collections.abc import Iterable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from broker.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    LocalTransactionState,
    Message,
    MessageQueue,
    Producer,
    PushConsumer,
    PushConsumerConfig,
    TransactionProducer,
)
from broker.client.protocol import update_consumer_offset_request
from broker.common.errors import ConfigError
from broker.common.message import decode_offset_msg_id
from broker.metrics import MetricsConfig, MetricsExporterType
from broker.metrics import names as n
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.server import NamesrvController
from broker.remoting.client import RemotingClient
from broker.remoting.codes import ResponseCode
from broker.server.broker_controller import BrokerController
from tests.helpers import client_config
from tests.integration.in_process import HOST, broker_configs, running_controller

APACHE_PAGE = Path(__file__).parent / "data" / "apache_5_5_0_metrics.txt"
PROM = MetricsConfig(MetricsExporterType.PROM, metrics_prom_exporter_port=0, metrics_prom_exporter_host=HOST)
TOPIC, BATCH_TOPIC, TX_TOPIC, GROUP = "MetricsTopic", "MetricsBatchTopic", "MetricsTxTopic", "MetricsGroup"
SENT, BODY = 20, b"m" * 100

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(port: int) -> str:
    """GET /metrics on 127.0.0.1:``port``, as Prometheus asks it; the body."""
    reader, writer = await asyncio.open_connection(HOST, port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
    answer = await reader.read()
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK"), head
    assert b"Content-Type: text/plain; version=0.0.4" in head
    return body.decode()


def samples(page: str) -> Samples:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(page) for s in family.samples}


def value(page: Samples, name: str, **labels: str) -> float:
    """The one sample named ``name`` whose labels include ``labels`` (0 when there is none yet)."""
    found = [v for (sample, got), v in page.items() if sample == name and set(labels.items()) <= got]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else 0.0


def families(page: str) -> dict[str, tuple[str, frozenset[str]]]:
    """Family name -> (type, every label name its series carry, ``le`` aside)."""
    return {family.name: (family.type, frozenset(label for s in family.samples for label in s.labels) - {"le"})
            for family in text_string_to_metric_families(page)}


async def until(check, timeout_s: float = 15.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not await check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


def record_bytes(broker: BrokerController, offset_msg_ids: Iterable[str]) -> int:
    """What the stored records of these sends take in the CommitLog, read back from the store."""
    return sum(len(broker.store.select_one_message(decode_offset_msg_id(msg_id)[1]) or b"")
               for msg_id in offset_msg_ids)


def test_counters_and_lag_follow_what_is_sent_and_consumed(tmp_path: Path) -> None:
    async def scenario() -> None:
        namesrv = NamesrvController(NamesrvConfig(listen_port=0, bind_address=HOST, metrics=PROM,
                                                  kv_config_path=str(tmp_path / "kvConfig.json")))
        await namesrv.start()
        try:
            async with running_controller(tmp_path / "store", namesrv_addr=namesrv.address, metrics=PROM,
                                          default_topic_queue_nums=2) as broker:
                await exchange(namesrv, broker)
        finally:
            await namesrv.stop()

    asyncio.run(scenario())


async def exchange(namesrv: NamesrvController, broker: BrokerController) -> None:
    port = broker.metrics.endpoint.port
    before = samples(await scrape(port))
    async with Producer("MetricsProducer", client_config=client_config(namesrv.address, "mp")) as producer:
        sent = [await producer.send(Message(TOPIC, BODY, keys=f"k{i}")) for i in range(SENT)]
        batch = await producer.send_batch([Message(BATCH_TOPIC, BODY) for _ in range(4)])
    stored = record_bytes(broker, (r.offset_msg_id for r in sent))
    batch_stored = record_bytes(broker, batch.offset_msg_id.split(","))
    labels_in = {"topic": TOPIC, "message_type": "normal", "is_system": "false"}
    after_send = samples(await scrape(port))
    assert value(after_send, "rocketmq_messages_in_total", **labels_in) == SENT
    assert value(after_send, "rocketmq_throughput_in_total", **labels_in) == stored
    assert value(after_send, "rocketmq_message_size_count", **labels_in) == SENT  # one per send: each a request
    assert value(after_send, "rocketmq_message_size_sum", **labels_in) == stored
    assert value(after_send, "rocketmq_message_size_bucket", le="1024.0", **labels_in) == SENT
    batch_in = {**labels_in, "topic": BATCH_TOPIC}  # a batch: its messages, and one size, their average
    assert value(after_send, "rocketmq_messages_in_total", **batch_in) == 4
    assert value(after_send, "rocketmq_throughput_in_total", **batch_in) == batch_stored
    assert value(after_send, "rocketmq_message_size_count", **batch_in) == 1
    assert value(after_send, "rocketmq_message_size_sum", **batch_in) == batch_stored // 4
    sends = {"request_code": "send_message_v2", "response_code": "success", "result": "success"}
    assert (value(after_send, "rocketmq_rpc_latency_milliseconds_count", **sends)
            - value(before, "rocketmq_rpc_latency_milliseconds_count", **sends)) == SENT
    assert value(after_send, "rocketmq_topic_number") >= 1
    assert value(after_send, "rocketmq_producer_connections", language="python") == 0  # the producer is gone

    # a consumer online that takes the messages but holds them; the group's offsets committed at 0 (by a client
    # outside the group: a second member would take queues from it until the broker drops it)
    release = asyncio.Event()
    received: list[int] = []

    async def hold(msgs, context):  # type: ignore[no-untyped-def]
        received.extend(len(m.body) for m in msgs)
        await release.wait()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    config = PushConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    consumer = PushConsumer(GROUP, config=config, client_config=client_config(namesrv.address, "mc"))
    consumer.subscribe(TOPIC)
    consumer.register_message_listener(hold)
    await consumer.start()

    async def group_known() -> bool:
        return broker.subscription_group_manager.contains_subscription_group(GROUP)

    await until(group_known)
    async with RemotingClient() as client:
        for queue_id in range(2):
            request = update_consumer_offset_request(GROUP, MessageQueue(TOPIC, "broker-a", queue_id), 0)
            assert (await client.invoke(broker.broker_addr, request, 5000)).code == ResponseCode.SUCCESS
    try:
        lag = {"consumer_group": GROUP, "topic": TOPIC, "is_retry": "false", "is_system": "false"}
        out = {"consumer_group": GROUP, "topic": TOPIC, "is_system": "false"}

        async def pulled_all() -> bool:
            return value(samples(await scrape(port)), "rocketmq_messages_out_total", **out) == SENT

        await until(pulled_all)
        held = samples(await scrape(port))
        assert value(held, "rocketmq_throughput_out_total", **out) == stored
        assert value(held, "rocketmq_consumer_lag_messages", **lag) == SENT
        assert value(held, "rocketmq_consumer_ready_messages", **lag) == SENT
        assert value(held, "rocketmq_consumer_inflight_messages", **lag) == 0  # Apache's: pop consumers' only
        age_ms = value(held, "rocketmq_consumer_lag_latency_milliseconds", **lag)
        assert 0 < age_ms < 60_000
        assert value(held, "rocketmq_consumer_connections", consumer_group=GROUP, consume_mode="push",
                     language="python") == 1

        release.set()  # consume them all, and commit

        async def committed() -> bool:
            await consumer.persist_consumer_offset()
            offsets = broker.consumer_offset_manager
            return sum(max(offsets.query_offset(GROUP, TOPIC, q), 0) for q in range(2)) == SENT

        await until(committed)
        assert received == [len(BODY)] * SENT
        consumed = samples(await scrape(port))
        assert value(consumed, "rocketmq_consumer_lag_messages", **lag) == 0
        assert value(consumed, "rocketmq_consumer_lag_latency_milliseconds", **lag) == 0
        assert value(consumed, "rocketmq_messages_out_total", **out) == SENT  # nothing pulled twice
        assert value(consumed, "rocketmq_storage_dispatch_behind_bytes") == 0
        assert value(consumed, "rocketmq_storage_size_bytes") > 0
        async with Producer("MetricsProducer", client_config=client_config(namesrv.address, "mp2")) as producer:
            await producer.send(Message(TOPIC, BODY))  # wakes a pull the broker holds

        async def pulled_one_more() -> bool:
            return value(samples(await scrape(port)), "rocketmq_messages_out_total", **out) == SENT + 1

        await until(pulled_one_more)
        page = await scrape(port)
        held_pulls = {"request_code": "pull_message", "response_code": "success", "is_long_polling": "true"}
        assert value(samples(page), "rocketmq_rpc_latency_milliseconds_count", **held_pulls) >= 1
    finally:
        await consumer.shutdown()
    check_apache_shapes(page, 20)
    for labels in (s.labels for family in text_string_to_metric_families(page) for s in family.samples
                   if family.name != "target_info"):
        assert (labels["cluster"], labels["node_type"], labels["node_id"], labels["otel_scope_name"]) == (
            "DefaultCluster", "broker", "broker-a", "broker-meter")

    await transactions(namesrv, port)
    check_apache_shapes(await scrape(port), 17)  # the transaction families too (the consumer's are gone)

    namesrv_page = samples(await scrape(namesrv.metrics.endpoint.port))

    node = {"node_type": "namesrv", "node_id": namesrv.address}
    assert value(namesrv_page, "rocketmq_namesrv_broker_number", cluster="DefaultCluster", **node) == 1
    assert value(namesrv_page, "rocketmq_namesrv_topic_number", **node) >= 1
    assert value(namesrv_page, "rocketmq_rpc_latency_milliseconds_count", request_code="register_broker",
                 response_code="success", **node) >= 1
    assert value(namesrv_page, "rocketmq_rpc_latency_milliseconds_count", request_code="get_routeinfo_by_topic",
                 response_code="success", **node) >= 1


class Decide:
    """Commits the first transaction, rolls back the second."""

    def __init__(self) -> None:
        self.states = [LocalTransactionState.COMMIT_MESSAGE, LocalTransactionState.ROLLBACK_MESSAGE]

    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
        return self.states.pop(0)

    def check_local_transaction(self, msg: object) -> LocalTransactionState:
        return LocalTransactionState.UNKNOW


async def transactions(namesrv: NamesrvController, port: int) -> None:
    """Two half messages, one committed and one rolled back: the halves count in (under the half topic, as a
    transaction, as Apache counts them), the ends per real topic, the commit's latency in seconds."""
    async with TransactionProducer("MetricsTx", listener=Decide(),
                                   client_config=client_config(namesrv.address, "mt")) as producer:
        for _ in range(2):
            await producer.send_message_in_transaction(Message(TX_TOPIC, BODY))

    async def ended() -> bool:  # END_TRANSACTION is oneway
        page = samples(await scrape(port))
        return (value(page, "rocketmq_commit_messages_total", topic=TX_TOPIC),
                value(page, "rocketmq_rollback_messages_total", topic=TX_TOPIC)) == (1, 1)

    await until(ended)
    page = samples(await scrape(port))
    assert value(page, "rocketmq_messages_in_total", topic="RMQ_SYS_TRANS_HALF_TOPIC", message_type="transaction",
                 is_system="true") == 2
    assert value(page, "rocketmq_finish_message_latency_milliseconds_count", topic=TX_TOPIC) == 1
    assert value(page, "rocketmq_finish_message_latency_milliseconds_bucket", topic=TX_TOPIC, le="5.0") == 1


def check_apache_shapes(page: str, at_least: int) -> None:
    """Every family Apache's broker exports and ours does is of Apache's type with Apache's label names; ours that
    Apache's lacks are the ones names.py declares as rmq's own."""
    apache, ours = families(APACHE_PAGE.read_text()), families(page)
    shared = sorted(set(apache) & set(ours))
    assert len(shared) >= at_least, shared
    assert {name: ours[name] for name in shared} == {name: apache[name] for name in shared}
    assert set(ours) - set(apache) <= {n.REPLICATION_LAG.name}


def test_a_taken_metrics_port_stops_the_start_and_says_so(tmp_path: Path) -> None:
    async def scenario() -> None:
        with socket.socket() as taken:
            taken.bind((HOST, 0))
            taken.listen()
            port = taken.getsockname()[1]
            config = dataclasses.replace(PROM, metrics_prom_exporter_port=port)
            broker = BrokerController(*broker_configs(tmp_path / "store", metrics=config), bind_host=HOST)
            with pytest.raises(ConfigError, match=f"metricsPromExporterPort {port} on metricsPromExporterHost "
                                                  f"{HOST} cannot be bound") as raised:
                await broker.start()
            assert isinstance(raised.value.__cause__, OSError)
            assert raised.value.__cause__.errno == errno.EADDRINUSE
            assert not (tmp_path / "store" / "abort").exists(), "the store is closed as a clean stop closes it"
            namesrv = NamesrvController(NamesrvConfig(listen_port=0, bind_address=HOST, metrics=config,
                                                      kv_config_path=str(tmp_path / "kv.json")))
            with pytest.raises(ConfigError, match=f"metricsPromExporterPort {port}"):
                await namesrv.start()

    asyncio.run(scenario())
