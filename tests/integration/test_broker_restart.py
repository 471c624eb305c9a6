"""Our broker process restarted on its own store: after SIGTERM, and after SIGKILL under SYNC_FLUSH.

* SIGTERM is a clean stop: exit code 0, the abort file gone, and after the restart a consumer group resumes exactly
  at its committed offsets: every message is consumed once across the restart, none lost, none repeated.
* SIGKILL while producers send with flushDiskType=SYNC_FLUSH: every message acknowledged with SEND_OK before the
  kill is served after the restart (crash recovery), byte for byte, at the queue offset the ack named; messages
  still in flight may or may not be there, but whatever is there is a message that was sent.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.client import (
    BlockingClient,
    ClientConfig,
    ConsumeFromWhere,
    LitePullConfig,
    LitePullConsumer,
    Message,
    MessageExt,
    MessageQueue,
    SendResult,
    SendStatus,
)
from broker.common.errors import RmqError
from tests.integration.cluster import ServerProcess, start_broker, start_namesrv

TOPIC = "RestartTopic"
GROUP = "restart_group"
QUEUES = 4
CONSUME_TIMEOUT_S = 30.0
QUIET_S = 1.0  # after the last expected message, how long a consumer keeps polling to catch repeats
STORE_CONF: dict[str, object] = {
    "mappedFileSizeCommitLog": 64 * 1024,  # rolls several times in the crash test
    "mappedFileSizeConsumeQueue": 100 * 20,
    "flushConsumerOffsetInterval": 200,
}


@dataclass(frozen=True, slots=True)
class Sent:
    """An acknowledged message: where the broker said it put it and what it was."""

    msg_id: str
    queue_id: int
    queue_offset: int
    body: bytes


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[ServerProcess]:
    with start_namesrv(tmp_path / "namesrv") as proc:
        yield proc


def start(tmp: Path, namesrv: ServerProcess, name: str, **conf: object) -> ServerProcess:
    return start_broker(tmp / name, namesrv.addr, store_dir=tmp / "store", **STORE_CONF, **conf)


def send(client: BlockingClient, body: bytes) -> Sent:
    result: SendResult = client.send(Message(TOPIC, body, keys=body.decode().split("|")[0]))
    assert result.send_status is SendStatus.SEND_OK
    return Sent(result.msg_id or "", result.message_queue.queue_id, result.queue_offset, body)


def produce(namesrv_addr: str, prefix: str, count: int) -> list[Sent]:
    with BlockingClient(namesrv_addr) as client:
        return [send(client, b"%s-%d|payload" % (prefix.encode(), i)) for i in range(count)]


def read_all(namesrv_addr: str) -> list[MessageExt]:
    """Every message of the topic, queue by queue from offset 0 (no group involved)."""
    got: list[MessageExt] = []
    with BlockingClient(namesrv_addr) as client:
        for mq in client.fetch_message_queues(TOPIC):
            offset, end = 0, client.get_max_offset(mq)
            while offset < end:
                result = client.pull(mq, offset, 32, decode=True)
                got += result.messages
                offset = result.next_begin_offset
    return got


def stored_as_sent(msg: MessageExt) -> Sent:
    return Sent(msg.msg_id, msg.queue_id, msg.queue_offset, msg.body)


# -- SIGTERM -----------------------------------------------------------------------------------------------------------


async def consume(namesrv_addr: str, want: int, *, commit: bool) -> list[MessageExt]:
    """A lite pull consumer of GROUP on every queue, polling until it has ``want`` messages (then ``QUIET_S`` more,
    when it is to drain, so repeats would show); ``commit`` commits what it polled before closing."""
    config = LitePullConfig(auto_commit=False, consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                            pull_batch_size=8)
    client_config = ClientConfig(namesrv_addr=namesrv_addr, client_ip="127.0.0.1", instance_name=f"c{want}")
    got: list[MessageExt] = []
    async with LitePullConsumer(GROUP, config=config, client_config=client_config) as consumer:
        consumer.assign(await consumer.fetch_message_queues(TOPIC))
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while len(got) < want and time.monotonic() < deadline:
            got += await consumer.poll(500)
        if commit:
            await consumer.commit()
        else:
            quiet_until = time.monotonic() + QUIET_S
            while time.monotonic() < quiet_until:
                got += await consumer.poll(200)
    return got


def test_sigterm_restart_resumes_at_committed_offsets(tmp_path: Path, namesrv: ServerProcess) -> None:
    store = tmp_path / "store"
    broker = start(tmp_path, namesrv, "first")
    with broker:
        assert (store / "abort").exists(), "a running store keeps an abort file"
        first = produce(namesrv.addr, "before", 60)
        consumed = asyncio.run(consume(namesrv.addr, 25, commit=True))
        assert 25 <= len(consumed) < 60
        second = produce(namesrv.addr, "unread", 20)  # written after the commit, before the stop
        with BlockingClient(namesrv.addr, consumer_group=GROUP) as client:
            queues = client.fetch_message_queues(TOPIC)
            ends = {mq.queue_id: client.get_max_offset(mq) for mq in queues}
        assert broker.stop() == 0, broker.console()[-3000:]
        assert not (store / "abort").exists(), "a clean stop removes the abort file"

    with start(tmp_path, namesrv, "second") as broker:
        with BlockingClient(namesrv.addr) as client:
            assert {mq.queue_id: client.get_max_offset(mq) for mq in queues} == ends
        third = produce(namesrv.addr, "after", 15)
        everything = first + second + third
        rest = asyncio.run(consume(namesrv.addr, len(everything) - len(consumed), commit=False))
        ids = [m.msg_id for m in consumed + rest]
        assert len(ids) == len(set(ids)), "a message was consumed twice across the restart"
        assert {stored_as_sent(m) for m in consumed + rest} == set(everything)
        assert broker.stop() == 0


def test_sigterm_while_producing_loses_no_acknowledged_message(tmp_path: Path, namesrv: ServerProcess) -> None:
    """A clean stop with sends in flight: what was acknowledged survives (an ASYNC_FLUSH broker flushes on stop)."""
    broker = start(tmp_path, namesrv, "first")
    with broker:
        producers = Producers(namesrv.addr, threads=2)
        with producers:
            producers.wait_for(150)
            assert broker.stop() == 0
    assert not (tmp_path / "store" / "abort").exists()
    with start(tmp_path, namesrv, "second"):
        check_acknowledged(namesrv.addr, producers)


# -- SIGKILL -----------------------------------------------------------------------------------------------------------


class Producers:
    """Threads sending with BlockingClient (no retries: a retry could duplicate) until the broker is gone or the
    ``with`` block ends; ``acked`` keeps every SEND_OK, ``attempted`` every body sent."""

    def __init__(self, namesrv_addr: str, threads: int) -> None:
        self.namesrv_addr = namesrv_addr
        self.acked: list[Sent] = []
        self.attempted: set[bytes] = set()
        self.errors: list[Exception] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(threads)]

    def __enter__(self) -> Producers:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def _run(self, index: int) -> None:
        with BlockingClient(self.namesrv_addr, retry_times_when_send_failed=0, timeout_ms=5000) as client:
            i = 0
            while not self._stop.is_set():
                body = b"t%d-%d|%s" % (index, i, b"z" * (i % 300))
                i += 1
                with self._lock:
                    self.attempted.add(body)
                try:
                    result = client.send(Message(TOPIC, body))
                except RmqError as err:  # the broker died under us
                    with self._lock:
                        self.errors.append(err)
                    return
                if result.send_status is not SendStatus.SEND_OK:  # FLUSH_DISK_TIMEOUT: stored, but no promise
                    continue
                with self._lock:
                    self.acked.append(Sent(result.msg_id or "", result.message_queue.queue_id, result.queue_offset,
                                           body))

    def wait_for(self, acks: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < acks:
            assert time.monotonic() < deadline, f"only {len(self.acked)} acks in {timeout}s: {self.errors}"
            assert not self.errors, self.errors
            time.sleep(0.01)


def check_acknowledged(namesrv_addr: str, producers: Producers) -> None:
    stored = read_all(namesrv_addr)
    by_place = {(m.queue_id, m.queue_offset): stored_as_sent(m) for m in stored}
    missing = [s for s in producers.acked if by_place.get((s.queue_id, s.queue_offset)) != s]
    assert not missing, f"{len(missing)} of {len(producers.acked)} acknowledged messages lost, e.g. {missing[:3]}"
    assert {m.body for m in stored} <= producers.attempted, "the store serves a message nobody sent"


def test_sigkill_with_sync_flush_loses_no_acknowledged_message(tmp_path: Path, namesrv: ServerProcess) -> None:
    broker = start(tmp_path, namesrv, "first", flushDiskType="SYNC_FLUSH")
    producers = Producers(namesrv.addr, threads=3)
    with broker, producers:
        producers.wait_for(300)
        broker.kill()
    assert (tmp_path / "store" / "abort").exists()
    assert len(list((tmp_path / "store" / "commitlog").iterdir())) > 1, "the test wants a rolled CommitLog"
    with start(tmp_path, namesrv, "second", flushDiskType="SYNC_FLUSH"):
        check_acknowledged(namesrv.addr, producers)
        # The recovered store takes new messages after the recovered ones.
        ends = {mq.queue_id: off for mq, off in _max_offsets(namesrv.addr).items()}
        more = produce(namesrv.addr, "resumed", 8)
        assert all(s.queue_offset >= ends[s.queue_id] for s in more)
        assert set(more) <= {stored_as_sent(m) for m in read_all(namesrv.addr)}


def _max_offsets(namesrv_addr: str) -> dict[MessageQueue, int]:
    with BlockingClient(namesrv_addr) as client:
        return {mq: client.get_max_offset(mq) for mq in client.fetch_message_queues(TOPIC)}
