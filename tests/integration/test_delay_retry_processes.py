"""Delayed delivery and retries with the broker and NameServer as processes: a SIGKILL with delayed messages
pending, and our push consumer through retries to the DLQ and receiving delayed messages when due.

What is stored for each (the scheduled record, delayOffset.json, the retry and DLQ copies) is test_delay_retry.py's,
on a broker in-process.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from broker.client import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    Producer,
    PushConsumer,
    PushConsumerConfig,
)
from broker.client.blocking import BlockingRemotingClient
from broker.common.message import decode_offset_msg_id, format_host
from broker.common.record import decode_record
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from broker.remoting.headers import ViewMessageRequestHeader
from broker.server.metadata.paths import delay_offset_path
from tests.helpers import client_config, drain_topic, now_ms, push_until_dlq
from tests.integration.cluster import ClusterPool, start_broker, start_namesrv
from tests.integration.test_delay_retry import CLOCK_SLACK_MS, DUE_SLACK_MS, run

# The push consumer tests' broker: levels 1 and 2 as Apache's default (1 s, 5 s), the retries' levels 3 and up 1 s.
PUSH_DELAY_LEVELS = " ".join(["1s", "5s"] + ["1s"] * 16)


@pytest.mark.slow
def test_broker_killed_with_delayed_messages_pending_loses_none_and_repeats_none(tmp_path):
    """SIGKILL after some deliveries (delayOffset.json not yet written: the persist interval is a minute), with
    others still pending: after the restart every message is in its topic exactly once."""
    conf = {"messageDelayLevel": "1s 4s", "flushDelayOffsetInterval": 60_000}
    store = tmp_path / "store"
    with start_namesrv(tmp_path / "ns") as namesrv:
        broker = start_broker(tmp_path / "b1", namesrv.addr, store_dir=store, **conf)
        try:
            async def before() -> None:
                async with Producer("pg_crash", client_config=client_config(namesrv.addr, "p1")) as producer:
                    for i in range(10):
                        msg = Message("TopicKill", b"m%d" % i, keys=f"k{i}")
                        msg.delay_time_level = 1 if i < 5 else 2
                        await producer.send(msg)
                early = await drain_topic(namesrv.addr, "TopicKill", 5, 15)
                assert len(early) == 5

            run(before(), timeout=60)
        finally:
            broker.kill()
        assert not os.path.exists(delay_offset_path(str(store)))
        with start_broker(tmp_path / "b2", namesrv.addr, store_dir=store, **conf):
            got = run(drain_topic(namesrv.addr, "TopicKill", 10, 20), timeout=60)
    assert sorted(m.keys for m in got) == sorted(f"k{i}" for i in range(10))


def store_time(offset_msg_id: str) -> int:
    """The store time of a record, read by its offsetMsgId (VIEW_MESSAGE_BY_ID)."""
    host, offset = decode_offset_msg_id(offset_msg_id)
    with BlockingRemotingClient(format_host(host)) as client:
        response = client.invoke(create_request(RequestCode.VIEW_MESSAGE_BY_ID,
                                                ViewMessageRequestHeader(offset=offset).to_ext()))
    assert response.code == ResponseCode.SUCCESS, response.remark
    return decode_record(response.body, body=False).store_timestamp


@pytest.fixture
def push_namesrv(clusters: ClusterPool) -> str:
    """The NameServer of the push consumer tests' shared cluster (PUSH_DELAY_LEVELS); each names its own topic and
    groups."""
    return clusters.shared(messageDelayLevel=PUSH_DELAY_LEVELS).namesrv_addr


@pytest.mark.slow
def test_python_push_consumer_reconsumes_until_the_dlq(push_namesrv: str):
    """Our PushConsumer subscribes to %RETRY%group itself, answers RECONSUME_LATER every time, and sends each
    failure back: deliveries with reconsume times 0, 1, 2 (maxReconsumeTimes 2), then the message is in %DLQ%."""
    deliveries, sent, dead = run(push_until_dlq(push_namesrv, "TopicPyRetry", "py_dlq_group", keys="kpy"))
    assert [(times, topic) for times, topic, _ in deliveries] == [(i, "TopicPyRetry") for i in range(3)]
    gaps = [b - a for (_, _, a), (_, _, b) in zip(deliveries, deliveries[1:], strict=False)]
    assert all(900 <= gap <= 1000 + DUE_SLACK_MS + 1000 for gap in gaps), gaps  # level 3/4: 1 s here
    (msg,) = dead
    assert (msg.body, msg.reconsume_times, msg.keys) == (b"fail-me", 3, "kpy")
    assert (msg.properties["RETRY_TOPIC"], msg.msg_id) == ("TopicPyRetry", sent.msg_id)


@pytest.mark.slow
def test_python_push_consumer_receives_delayed_messages_when_due(push_namesrv: str):
    async def scenario() -> None:
        received: dict[str, int] = {}

        async def listener(msgs, context):  # type: ignore[no-untyped-def]
            received.update((m.keys, now_ms()) for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        config = PushConsumerConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
        consumer = PushConsumer("py_delay_group", config=config,
                                client_config=client_config(push_namesrv, "push-delay"))
        consumer.subscribe("TopicPyDelay")
        consumer.register_message_listener(listener)
        async with Producer("pg_py_delay", client_config=client_config(push_namesrv, "p")) as producer:
            await producer.send(Message("TopicPyDelay", b"warm-up", keys="warm"))
            await consumer.start()
            try:
                deadline = time.monotonic() + 30
                while "warm" not in received and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                stored_at = {}
                for level in (1, 2):
                    msg = Message("TopicPyDelay", b"x", keys=f"level{level}")
                    msg.delay_time_level = level
                    sent = await producer.send(msg)
                    stored_at[f"level{level}"] = await asyncio.to_thread(store_time, sent.offset_msg_id)
                deadline = time.monotonic() + 15
                while len(received) < 3 and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
            finally:
                await consumer.shutdown()
        for key, delay_ms in (("level1", 1000), ("level2", 5000)):
            lag = received[key] - (stored_at[key] + delay_ms)
            assert -CLOCK_SLACK_MS <= lag <= DUE_SLACK_MS, (key, lag)

    run(scenario())
