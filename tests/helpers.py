"""Small helpers the whole suite shares: a free port, the wall clock in ms, waiting for a condition, a bounded
``asyncio.run`` and an event loop in a thread of its own, our ``mqadmin`` in-process, a client config for 127.0.0.1
topic names no two tests share, and two consumer scenarios (a topic drained from its first offset, a message failed
by our PushConsumer until it is in the DLQ).

One of each, so a test module imports them instead of writing its own. ``free_port`` is the local cluster's (the
ports our servers are started on come from the same place).

Examples:
    >>> wait_until("the topic routed", lambda: routed(topic), 15)  # doctest: +SKIP
    >>> await eventually("every message consumed", lambda: len(seen) == 20, 45)  # doctest: +SKIP
    >>> run(scenario(), 90)  # doctest: +SKIP
    >>> mqadmin_ok("topicList", "-n", namesrv_addr)  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import io
import threading
import time
import zlib
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from broker.tools.local_cluster import free_port

if TYPE_CHECKING:
    import pytest

    from broker.client import ClientConfig, MessageExt, SendResult

__all__ = ["DlqRun", "LoopThread", "MqadminRun", "client_config", "drain_topic", "eventually", "free_port", "mqadmin",
           "mqadmin_ok", "now_ms", "push_until_dlq", "run", "unique_topic", "wait_until"]

T = TypeVar("T")
RUN_TIMEOUT_S = 60.0
WAIT_TIMEOUT_S = 10.0
HOST = "127.0.0.1"
TOPIC_NAME_MAX = 100  # TopicValidator allows 127


def now_ms() -> int:
    """The wall clock in ms, as a broker stamps born and store timestamps."""
    return time.time_ns() // 1_000_000


def run(coro: Coroutine[Any, Any, T], timeout: float = RUN_TIMEOUT_S) -> T:
    """``asyncio.run`` with a ceiling, so a hang fails the test instead of the whole run."""

    async def bounded() -> T:
        async with asyncio.timeout(timeout):
            return await coro

    return asyncio.run(bounded())


class LoopThread:
    """An event loop in a thread of its own: servers and clients on it keep running (heartbeats, long polls) while
    the test's thread blocks, in a blocking client or a Java command. ``run`` hands it one coroutine."""

    def __init__(self, timeout: float = WAIT_TIMEOUT_S, name: str = "test-loop") -> None:
        self.timeout = timeout
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """The coroutine's result, run on the loop with a ceiling of ``timeout`` seconds."""

        async def bounded() -> T:
            async with asyncio.timeout(self.timeout):
                return await coro

        return asyncio.run_coroutine_threadsafe(bounded(), self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


def _holds(condition: Callable[[], object], ignoring: tuple[type[BaseException], ...]) -> bool:
    try:
        return bool(condition())
    except ignoring:
        return False


def wait_until(what: str, condition: Callable[[], object], timeout: float = WAIT_TIMEOUT_S, *,
               interval: float = 0.05, ignoring: tuple[type[BaseException], ...] = ()) -> None:
    """Poll ``condition`` until it is true; AssertionError naming ``what`` after ``timeout`` seconds. Exceptions
    in ``ignoring`` (a NameServer that has no route yet) count as "not yet"."""
    deadline = time.monotonic() + timeout
    while not _holds(condition, ignoring):
        assert time.monotonic() < deadline, f"not true within {timeout}s: {what}"
        time.sleep(interval)


async def eventually(what: str, condition: Callable[[], object], timeout: float = WAIT_TIMEOUT_S, *,
                     interval: float = 0.02) -> None:
    """``wait_until`` inside an event loop: sleeps with ``asyncio.sleep`` so the loop's clients keep running."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not true within {timeout}s: {what}"
        await asyncio.sleep(interval)


class MqadminRun(NamedTuple):
    """One in-process ``mqadmin`` run: its exit code, stdout and stderr."""

    code: int
    out: str
    err: str


def mqadmin(*args: str) -> MqadminRun:
    """Our ``mqadmin`` in-process (``broker.tools.mqadmin.main``), its output captured."""
    from broker.tools.mqadmin import main

    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), out=out, err=err)
    return MqadminRun(code, out.getvalue(), err.getvalue())


def mqadmin_ok(*args: str) -> str:
    """``mqadmin`` that must succeed; its stdout. The assertion shows what it printed."""
    done = mqadmin(*args)
    assert done.code == 0, f"mqadmin {' '.join(args)} exited {done.code}:\n{done.err}{done.out}"
    assert "Traceback" not in done.err
    return done.out


def client_config(namesrv_addr: str, name: str, **options: Any) -> ClientConfig:
    """A client on 127.0.0.1 named ``name`` (its instance name), so several in one process stay apart."""
    from broker.client import ClientConfig

    return ClientConfig(namesrv_addr=namesrv_addr, client_ip=HOST, instance_name=name, **options)


def broker_ids(namesrv_addr: str, broker_name: str) -> dict[int, str]:
    """``broker_name``'s {brokerId: address} in a NameServer's cluster info (what ``mqadmin clusterList`` lists)."""
    from broker.client.blocking_remoting import BlockingRemotingClient
    from broker.client.protocol import cluster_info_request
    from broker.common.fastjson import decode_json

    with BlockingRemotingClient(namesrv_addr) as client:
        response = client.invoke(cluster_info_request(), 2000)
    table = decode_json(response.body.decode())["brokerAddrTable"]
    return {int(k): v for k, v in table.get(broker_name, {}).get("brokerAddrs", {}).items()}


def unique_topic(node: pytest.Item, prefix: str = "T") -> str:
    """A topic name no other test of the session uses, for clusters shared between modules: ``prefix``, the test's
    module and its name, cleaned to TopicValidator's characters; a longer one is cut and ends with a checksum."""
    raw = f"{prefix}_{node.path.stem}_{node.name}"
    name = "".join(c if c.isalnum() or c in "_-" else "_" for c in raw)
    if len(name) > TOPIC_NAME_MAX:
        name = f"{name[:TOPIC_NAME_MAX - 9]}_{zlib.crc32(name.encode()):08x}"
    return name


async def drain_topic(namesrv_addr: str, topic: str, expected: int, timeout_s: float, *,
                      settle_s: float = 1.0) -> list[MessageExt]:
    """Everything in ``topic`` from its first offset, read by a fresh lite pull consumer: until ``expected`` came or
    ``timeout_s`` passed, then ``settle_s`` more (anything beyond ``expected`` would be a duplicate). A topic the
    broker made itself (a DLQ, a retry topic) reaches the NameServer with the broker's next registration, so its
    route is asked for until then."""
    from broker.client import ConsumeFromWhere, LitePullConfig, LitePullConsumer, MQClientError

    deadline = time.monotonic() + timeout_s
    got: list[MessageExt] = []
    config = LitePullConfig(consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET)
    async with LitePullConsumer(f"drain_{time.monotonic_ns()}", config=config,
                                client_config=client_config(namesrv_addr, f"drain-{time.monotonic_ns()}")) as reader:
        while True:
            try:
                reader.assign(await reader.fetch_message_queues(topic))
                break
            except MQClientError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)
        while len(got) < expected and time.monotonic() < deadline:
            got += await reader.poll(500)
        if settle_s:
            await asyncio.sleep(settle_s)
            got += await reader.poll(200)
    return got


class DlqRun(NamedTuple):
    deliveries: list[tuple[int, str, int]]  # (reconsume times, topic, ms received) of each delivery
    sent: SendResult
    dead: list[MessageExt]  # what %DLQ%group holds afterwards


async def push_until_dlq(namesrv_addr: str, topic: str, group: str, *, keys: str, max_reconsume_times: int = 2,
                         settle_s: float = 2.0, timeout_s: float = 40) -> DlqRun:
    """One message sent to ``topic``, and our PushConsumer answering RECONSUME_LATER to every delivery: it
    subscribes to %RETRY%group itself and sends each failure back, so the message should come max+1 times and then
    be in %DLQ%group. ``settle_s`` after the expected deliveries, a further one would have shown."""
    from broker.client import (
        ConsumeConcurrentlyStatus,
        ConsumeFromWhere,
        Message,
        Producer,
        PushConsumer,
        PushConsumerConfig,
    )

    deliveries: list[tuple[int, str, int]] = []

    async def listener(msgs, context):  # type: ignore[no-untyped-def]
        deliveries.extend((m.reconsume_times, m.topic, now_ms()) for m in msgs)
        return ConsumeConcurrentlyStatus.RECONSUME_LATER

    async with Producer(f"{group}_producer", client_config=client_config(namesrv_addr, f"{group}-p")) as producer:
        sent = await producer.send(Message(topic, b"fail-me", keys=keys))
    consumer = PushConsumer(group, config=PushConsumerConfig(
        consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, max_reconsume_times=max_reconsume_times),
        client_config=client_config(namesrv_addr, f"{group}-push"))
    consumer.subscribe(topic)
    consumer.register_message_listener(listener)
    await consumer.start()
    try:
        deadline = time.monotonic() + timeout_s
        while len(deliveries) <= max_reconsume_times and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        await asyncio.sleep(settle_s)
    finally:
        await consumer.shutdown()
    dead = await drain_topic(namesrv_addr, f"%DLQ%{group}", 1, 20)
    return DlqRun(deliveries, sent, dead)
