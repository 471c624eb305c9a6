"""Store takeover: Apache RocketMQ's broker and ours run, one after the other, on the same storePathRootDir.

Each side must recover what the other wrote (commitlog/, consumequeue/, index/, checkpoint and config/*.json)
and serve it: every message by queue offset, by key and by id, the topic as configured (3 queues, not the default
4) and the consumer group with its committed offsets. Both brokers run with the same small file sizes
(``STORE_CONF``) so the CommitLog, the ConsumeQueues and the index files all roll; Apache refuses to load a
CommitLog file whose size differs from its config, so those must match.

* ``test_takeover_both_ways``: ours writes, SIGTERM; Apache recovers it (normal recovery), writes more and moves the
  offsets, SIGTERM; ours recovers Apache's files and everything is checked again, then ours keeps writing.
* ``test_crash_recovery_both_ways``: the same with SYNC_FLUSH and SIGKILL instead of SIGTERM (the abort file
  stays): Apache's crash recovery reads our files, then ours reads Apache's; every acknowledged message is
  served and the offsets persisted before the kill are kept.

Every check runs through both clients: the official Java client (tests/java/client/ClientDriver.java, one JVM
session per test) and ours (broker.client, plus raw QUERY_CONSUMER_OFFSET / VIEW_MESSAGE_BY_ID requests).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker.client import BlockingClient, Message, MessageExt, MessageQueue, SendStatus
from broker.client._blocking import BlockingRemotingClient
from broker.client.message import decode_messages
from broker.client.protocol import query_consumer_offset_request, update_consumer_offset_request
from broker.message import decode_offset_msg_id
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from broker.remoting.headers import OffsetResponseHeader, ViewMessageRequestHeader
from tests.apache import (
    ApacheClient,
    ApacheProcess,
    DriverSession,
    apache_client,
    start_apache_broker,
    start_apache_namesrv,
)
from tests.integration.cluster import ServerProcess, start_broker, start_namesrv
from tests.javatools import JavaToolError

pytestmark = [pytest.mark.java, pytest.mark.slow]

# Same on both sides: Apache will not load a CommitLog (or ConsumeQueue) file of another size than configured.
STORE_CONF: dict[str, object] = {
    "brokerName": "broker-a",
    "mappedFileSizeCommitLog": 32 * 1024,
    "mappedFileSizeConsumeQueue": 40 * 20,  # 40 units a file
    "maxHashSlotNum": 64,
    "maxIndexNum": 256,  # two entries a message (UNIQ_KEY and KEYS): an index file every 128 messages
}
# Nothing is invented on the fly: the topic and the group must come from config/*.json.
STRICT_CONF: dict[str, object] = {"autoCreateSubscriptionGroup": False}
APACHE_CONF: dict[str, object] = {**STORE_CONF, **STRICT_CONF, "autoCreateTopicEnable": False}
TOPIC = "TakeoverTopic"
QUEUES = 3
GROUP = "takeover_group"
# Our broker writes config/consumerOffset.json every flushConsumerOffsetInterval: short, and waited for before a
# SIGKILL, so the offsets committed before it are on disk (as they would be 5 s later by default).
CRASH_CONF: dict[str, object] = {"flushDiskType": "SYNC_FLUSH", "flushConsumerOffsetInterval": 200}
OFFSET_PERSIST_WAIT_S = 0.8
CHECKED_KEYS = 6  # query-key / query-id calls per check: each costs a round trip through the Java client


@dataclass(frozen=True, slots=True)
class Stored:
    """A message as every reader must see it, wherever it is read from."""

    msg_id: str
    queue_id: int
    queue_offset: int
    offset_msg_id: str
    body: bytes
    keys: str | None
    user_property: str | None

    @classmethod
    def from_java(cls, record: dict[str, Any]) -> Stored:
        return cls(record["msgId"], record["queueId"], record["queueOffset"], record["offsetMsgId"],
                   base64.b64decode(record["body"]), record["keys"], record["properties"].get("u"))

    @classmethod
    def from_ext(cls, msg: MessageExt) -> Stored:
        return cls(msg.msg_id, msg.queue_id, msg.queue_offset, msg.offset_msg_id, msg.body, msg.keys,
                   msg.properties.get("u"))


# -- fixtures ---------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> ApacheClient:
    try:
        return apache_client(tmp_path_factory.mktemp("takeover-client"))
    except JavaToolError as err:
        pytest.fail(f"cannot build the Apache client driver: {err}", pytrace=False)


@pytest.fixture
def session(driver: ApacheClient) -> Iterator[DriverSession]:
    with driver.session() as s:
        yield s


@pytest.fixture
def our_namesrv(tmp_path: Path) -> Iterator[ServerProcess]:
    with start_namesrv(tmp_path / "namesrv") as namesrv:
        yield namesrv


@pytest.fixture
def apache_namesrv(tmp_path: Path) -> Iterator[ApacheProcess]:
    try:
        namesrv = start_apache_namesrv(tmp_path / "apache-namesrv")
    except JavaToolError as err:
        pytest.fail(f"cannot start Apache's NameServer: {err}", pytrace=False)
    with namesrv:
        yield namesrv


# -- writing ----------------------------------------------------------------------------------------------------------


def produce_ours(namesrv_addr: str, count: int, prefix: str) -> list[Stored]:
    """``count`` single sends (every 25th body over 4 KiB, so compressed) and a batch of 8 into queue 1."""
    stored: list[Stored] = []
    with BlockingClient(namesrv_addr) as client:
        for i in range(count):
            body = b"%s-%d|" % (prefix.encode(), i) + b"y" * (5000 if i % 25 == 7 else 40)
            msg = Message(TOPIC, body, tags="TagA", keys=f"{prefix}{i}", properties={"u": f"\u00fc-{i}"})
            result = client.send(msg)
            assert result.send_status is SendStatus.SEND_OK
            stored.append(Stored(result.msg_id or "", result.message_queue.queue_id, result.queue_offset,
                                 result.offset_msg_id, body, msg.keys, f"\u00fc-{i}"))
        batch = [Message(TOPIC, b"%s-batch-%d" % (prefix.encode(), j), keys=f"{prefix}b{j}") for j in range(8)]
        result = client.send_batch(batch, MessageQueue(TOPIC, "broker-a", 1))
        ids, offset_ids = (result.msg_id or "").split(","), result.offset_msg_id.split(",")
        for j, msg in enumerate(batch):
            stored.append(Stored(ids[j], 1, result.queue_offset + j, offset_ids[j], msg.body, msg.keys, None))
    return stored


def produce_java(session: DriverSession, namesrv_addr: str, count: int, prefix: str) -> list[Stored]:
    records = session.call("produce", namesrv=namesrv_addr, topic=TOPIC, count=count, keys_prefix=prefix,
                           body_prefix=prefix, size=64, property="u=java").records
    assert [r["sendStatus"] for r in records] == ["SEND_OK"] * count
    return [Stored(r["msgId"], r["queueId"], r["queueOffset"], r["offsetMsgId"], _driver_body(prefix, r["index"]),
                   r["keys"], "java") for r in records]


def _driver_body(prefix: str, index: int) -> bytes:
    head = f"{prefix}-{index}|".encode()
    return (head + b"x" * 64)[:64]


def commit_offsets(broker_addr: str, offsets: dict[int, int]) -> None:
    """UPDATE_CONSUMER_OFFSET per queue, as a consumer's offset store does."""
    with BlockingRemotingClient(broker_addr) as client:
        for queue_id, offset in offsets.items():
            request = update_consumer_offset_request(GROUP, MessageQueue(TOPIC, "broker-a", queue_id), offset)
            response = client.invoke(request, 5000)
            assert response.code == ResponseCode.SUCCESS, (queue_id, response.code, response.remark)


# -- checking ---------------------------------------------------------------------------------------------------------


def expected_offsets(stored: Iterable[Stored]) -> dict[int, int]:
    """Each queue's max offset: one past its last message."""
    ends = dict.fromkeys(range(QUEUES), 0)
    for s in stored:
        ends[s.queue_id] = max(ends[s.queue_id], s.queue_offset + 1)
    return ends


def check_with_java(session: DriverSession, namesrv_addr: str, stored: list[Stored],
                    committed: dict[int, int]) -> None:
    """The official client reads it all: the route, the queues' offset ranges (topic stats), every message from the
    first offset, samples by key and by id, and the group's committed offsets (a consumer starting from them gets
    exactly the rest)."""
    route = session.call("route", namesrv=namesrv_addr, topic=TOPIC).records[0]
    assert [(q["readQueueNums"], q["writeQueueNums"]) for q in route["queueDatas"]] == [(QUEUES, QUEUES)]
    ranges = session.call("offsets", namesrv=namesrv_addr, topic=TOPIC).records
    assert {r["queueId"]: (r["minOffset"], r["maxOffset"]) for r in ranges} == {
        queue_id: (0, end) for queue_id, end in expected_offsets(stored).items()}
    pulled = session.call("consume-pull", namesrv=namesrv_addr, topic=TOPIC, group=GROUP, timeout_ms=20_000)
    assert pulled.summary is not None and not pulled.summary["timedOut"]
    got = [Stored.from_java(r) for r in pulled.records]
    assert len(got) == len(set(got)) and set(got) == set(stored)
    for s in _samples(stored):
        by_key = session.call("query-key", namesrv=namesrv_addr, topic=TOPIC, key=s.keys).records
        assert [Stored.from_java(r) for r in by_key] == [s], s.keys
        by_id = session.call("query-id", namesrv=namesrv_addr, topic=TOPIC, id=s.msg_id).records
        assert [Stored.from_java(r) for r in by_id] == [s], s.msg_id
    rest = {s for s in stored if s.queue_offset >= committed.get(s.queue_id, 0)}
    resumed = session.call("consume-pull", namesrv=namesrv_addr, topic=TOPIC, group=GROUP, max=len(rest),
                           timeout_ms=20_000, **{"from": "committed"})
    assert {Stored.from_java(r) for r in resumed.records} == rest


def check_with_python(namesrv_addr: str, broker_addr: str, stored: list[Stored], committed: dict[int, int]) -> None:
    """Our client reads it all too: every queue from offset 0, each message by its offsetMsgId (the commit log
    offset, VIEW_MESSAGE_BY_ID) and the group's offsets (QUERY_CONSUMER_OFFSET)."""
    with BlockingClient(namesrv_addr, consumer_group=GROUP) as client:
        queues = client.fetch_message_queues(TOPIC)
        assert [mq.queue_id for mq in queues] == list(range(QUEUES))
        assert {mq.queue_id: client.get_max_offset(mq) for mq in queues} == expected_offsets(stored)
        got: list[Stored] = []
        for mq in queues:
            offset = 0
            while offset < client.get_max_offset(mq):
                result = client.pull(mq, offset, 32, decode=True)
                got += [Stored.from_ext(m) for m in result.messages]
                offset = result.next_begin_offset
        assert len(got) == len(set(got)) and set(got) == set(stored)
    with BlockingRemotingClient(broker_addr) as broker:
        for s in stored:
            _, physical = decode_offset_msg_id(s.offset_msg_id)
            view = create_request(RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(physical, TOPIC).to_ext())
            response = broker.invoke(view, 5000)
            assert response.code == ResponseCode.SUCCESS, (s, response.remark)
            assert [Stored.from_ext(m) for m in decode_messages(response.body)] == [s]
        assert query_offsets(broker, committed) == committed


def query_offsets(broker: BlockingRemotingClient, queues: Iterable[int]) -> dict[int, int]:
    found = {}
    for queue_id in queues:
        response = broker.invoke(query_consumer_offset_request(GROUP, MessageQueue(TOPIC, "broker-a", queue_id)))
        assert response.code == ResponseCode.SUCCESS, (queue_id, response.code, response.remark)
        found[queue_id] = OffsetResponseHeader.from_ext(dict(response.ext_fields)).offset
    return found


def _samples(stored: list[Stored]) -> list[Stored]:
    """First, last and a few between, so the first and the last index file are both searched."""
    step = max(1, (len(stored) - 1) // (CHECKED_KEYS - 1))
    return sorted({stored[i] for i in [*range(0, len(stored), step), len(stored) - 1]}, key=stored.index)


def assert_clean_stop(code: int, store: Path, expected: int) -> None:
    assert code == expected
    assert not (store / "abort").exists(), "a clean shutdown removes the abort file"


# -- the tests --------------------------------------------------------------------------------------------------------


def start_ours(home: Path, namesrv: ServerProcess, store: Path, **conf: object) -> ServerProcess:
    return start_broker(home, namesrv.addr, store_dir=store, **STORE_CONF, **conf)


def write_with_ours(broker: ServerProcess, namesrv: ServerProcess, session: DriverSession,
                    count: int) -> tuple[list[Stored], dict[int, int]]:
    """Ours creates the topic (3 queues) through the Java admin client, takes ``count`` + 8 messages from our
    client, creates the group with a pull and commits its offsets."""
    session.call("create-topic", namesrv=namesrv.addr, topic=TOPIC, queues=QUEUES)
    stored = produce_ours(namesrv.addr, count, "ours")
    with BlockingClient(namesrv.addr, consumer_group=GROUP) as client:
        client.pull(MessageQueue(TOPIC, "broker-a", 0), 0, 1)  # creates the group
    ends = expected_offsets(stored)
    committed = {0: 3, 1: ends[1], 2: 1}
    commit_offsets(broker.addr, committed)
    return stored, committed


def test_takeover_both_ways(tmp_path: Path, our_namesrv: ServerProcess, apache_namesrv: ApacheProcess,
                            session: DriverSession) -> None:
    store = tmp_path / "store"
    with start_ours(tmp_path / "ours-1", our_namesrv, store) as ours:
        stored, committed = write_with_ours(ours, our_namesrv, session, 120)
        assert_clean_stop(ours.stop(), store, 0)
    assert len(list((store / "commitlog").iterdir())) > 1, "the test wants a rolled CommitLog"

    apache = start_apache_broker(tmp_path / "apache", apache_namesrv, store, **APACHE_CONF)
    with apache:
        check_with_java(session, apache_namesrv.addr, stored, committed)
        check_with_python(apache_namesrv.addr, apache.addr, stored, committed)
        stored += produce_java(session, apache_namesrv.addr, 40, "apache")
        committed = {0: expected_offsets(stored)[0] - 2, 1: 5, 2: 1}
        commit_offsets(apache.addr, committed)
        assert_clean_stop(apache.stop(), store, 143)

    ours = start_ours(tmp_path / "ours-2", our_namesrv, store, **STRICT_CONF)
    with ours:
        check_with_python(our_namesrv.addr, ours.addr, stored, committed)
        check_with_java(session, our_namesrv.addr, stored, committed)
        more = produce_ours(our_namesrv.addr, 10, "again")
        before = expected_offsets(stored)
        for s in more[:-8]:
            assert s.queue_offset >= before[s.queue_id]  # the queues go on where Apache left them
        assert min(decode_offset_msg_id(s.offset_msg_id)[1] for s in more) >= _log_end(stored)
        check_with_python(our_namesrv.addr, ours.addr, stored + more, committed)
        assert_clean_stop(ours.stop(), store, 0)


def _log_end(stored: list[Stored]) -> int:
    """A lower bound of where the CommitLog ended: past the last record read back (its offset plus one byte)."""
    return max(decode_offset_msg_id(s.offset_msg_id)[1] for s in stored) + 1


def test_crash_recovery_both_ways(tmp_path: Path, our_namesrv: ServerProcess, apache_namesrv: ApacheProcess,
                                  session: DriverSession) -> None:
    """SYNC_FLUSH on both sides and SIGKILL instead of SIGTERM: each recovers the other's store as after a crash
    (abort file present, ConsumeQueues and index rebuilt from the CommitLog past the checkpoint)."""
    store = tmp_path / "store"
    with start_ours(tmp_path / "ours-1", our_namesrv, store, **CRASH_CONF) as ours:
        stored, committed = write_with_ours(ours, our_namesrv, session, 60)
        time.sleep(OFFSET_PERSIST_WAIT_S)
        ours.kill()
    assert (store / "abort").exists(), "SIGKILL leaves the abort file: the next start recovers as after a crash"

    apache = start_apache_broker(tmp_path / "apache", apache_namesrv, store, **APACHE_CONF, **CRASH_CONF)
    with apache:
        check_with_java(session, apache_namesrv.addr, stored, committed)
        check_with_python(apache_namesrv.addr, apache.addr, stored, committed)
        # Apache first persists consumer offsets 10 s after its start (then every flushConsumerOffsetInterval):
        # offsets committed here could be lost to the kill, so the ones committed with ours are the ones checked.
        stored += produce_java(session, apache_namesrv.addr, 60, "crash")
        apache.kill()
    assert (store / "abort").exists()

    with start_ours(tmp_path / "ours-2", our_namesrv, store, **STRICT_CONF) as ours:
        check_with_python(our_namesrv.addr, ours.addr, stored, committed)
        check_with_java(session, our_namesrv.addr, stored, committed)
        more = produce_ours(our_namesrv.addr, 5, "after")
        check_with_python(our_namesrv.addr, ours.addr, stored + more, committed)
        assert_clean_stop(ours.stop(), store, 0)
