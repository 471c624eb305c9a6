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
* ``test_torn_tails_both_ways``: SIGKILL while a producer sends, so a CommitLog may end inside a record: each
  side's crash recovery cuts the other's torn tail and keeps every message acknowledged before the kill.

Every check runs through both clients: the official Java client (tests/java/client/ClientDriver.java, one JVM
session per test) and ours (broker.client, plus raw QUERY_CONSUMER_OFFSET / VIEW_MESSAGE_BY_ID requests).
"""

from __future__ import annotations

import base64
import itertools
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from broker.client import BlockingClient, Message, MessageExt, MessageQueue, SendStatus
from broker.client.blocking import BlockingRemotingClient, get_max_offset
from broker.client.message import decode_messages
from broker.client.protocol import query_consumer_offset_request, update_consumer_offset_request
from broker.common.errors import RmqError
from broker.common.fastjson import decode_json, encode_json
from broker.common.message import decode_offset_msg_id
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from broker.remoting.headers import OffsetResponseHeader, QueryMessageRequestHeader, ViewMessageRequestHeader
from tests.apache import (
    ApacheClient,
    ApacheProcess,
    DriverOutput,
    DriverSession,
    apache_client,
    driver_body,
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
TAG = "TagA"  # our client's messages; the Java client's carry TagJ, the batches none
QUEUES = 3
GROUP = "takeover_group"
GROUP_CONFIG = {"groupName": GROUP, "retryMaxTimes": 7, "consumeTimeoutMinute": 21, "consumeBroadcastEnable": False}
TOPIC_FIELDS = ("topicName", "readQueueNums", "writeQueueNums", "perm", "topicFilterType", "topicSysFlag", "order")
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
    tags: str | None
    user_property: str | None

    @classmethod
    def from_java(cls, record: dict[str, Any]) -> Stored:
        return cls(record["msgId"], record["queueId"], record["queueOffset"], record["offsetMsgId"],
                   base64.b64decode(record["body"]), record["keys"], record["tags"], record["properties"].get("u"))

    @classmethod
    def from_ext(cls, msg: MessageExt) -> Stored:
        return cls(msg.msg_id, msg.queue_id, msg.queue_offset, msg.offset_msg_id, msg.body, msg.keys, msg.tags,
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
            msg = Message(TOPIC, body, tags=TAG, keys=f"{prefix}{i}", properties={"u": f"\u00fc-{i}"})
            result = client.send(msg)
            assert result.send_status is SendStatus.SEND_OK
            stored.append(Stored(result.msg_id or "", result.message_queue.queue_id, result.queue_offset,
                                 result.offset_msg_id, body, msg.keys, TAG, f"\u00fc-{i}"))
        batch = [Message(TOPIC, b"%s-batch-%d" % (prefix.encode(), j), keys=f"{prefix}b{j}") for j in range(8)]
        result = client.send_batch(batch, MessageQueue(TOPIC, "broker-a", 1))
        ids, offset_ids = (result.msg_id or "").split(","), result.offset_msg_id.split(",")
        for j, msg in enumerate(batch):
            stored.append(Stored(ids[j], 1, result.queue_offset + j, offset_ids[j], msg.body, msg.keys, None, None))
    return stored


def produce_java(session: DriverSession, namesrv_addr: str, count: int, prefix: str) -> list[Stored]:
    records = session.call("produce", namesrv=namesrv_addr, topic=TOPIC, count=count, keys_prefix=prefix,
                           body_prefix=prefix, size=64, tag="TagJ", property="u=java").records
    assert [r["sendStatus"] for r in records] == ["SEND_OK"] * count
    return [Stored(r["msgId"], r["queueId"], r["queueOffset"], r["offsetMsgId"], driver_body(r["index"], 64, prefix),
                   r["keys"], "TagJ", "java") for r in records]


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
    """Our client reads it all too: every queue from offset 0 (all tags, then TAG only), each message by its
    offsetMsgId (the commit log offset, VIEW_MESSAGE_BY_ID), samples by key within a time window, the group's
    offsets (QUERY_CONSUMER_OFFSET), the topic's and the group's configs (GET_TOPIC_CONFIG,
    GET_SUBSCRIPTIONGROUP_CONFIG)."""
    with BlockingClient(namesrv_addr, consumer_group=GROUP) as client:
        queues = client.fetch_message_queues(TOPIC)
        assert [mq.queue_id for mq in queues] == list(range(QUEUES))
        assert {mq.queue_id: client.get_max_offset(mq) for mq in queues} == expected_offsets(stored)
        got = pull_all(client, queues)
        assert len(got) == len(set(got)) and set(got) == set(stored)
        assert set(pull_all(client, queues, TAG)) == {s for s in stored if s.tags == TAG}  # ConsumeQueue tag codes
    with BlockingRemotingClient(broker_addr) as broker:
        store_times = {}
        for s in stored:
            _, physical = decode_offset_msg_id(s.offset_msg_id)
            view = create_request(RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(physical, TOPIC).to_ext())
            response = broker.invoke(view, 5000)
            assert response.code == ResponseCode.SUCCESS, (s, response.remark)
            (msg,) = decode_messages(response.body)
            assert Stored.from_ext(msg) == s
            store_times[s] = msg.store_timestamp
        for s in _samples(stored):
            assert query_key(broker, s.keys or "", store_times[s]) == [s]
        assert query_offsets(broker, committed) == committed
        check_metadata(broker)


def pull_all(client: BlockingClient, queues: list[MessageQueue], sub_expression: str = "*") -> list[Stored]:
    got: list[Stored] = []
    for mq in queues:
        offset = 0
        while offset < client.get_max_offset(mq):
            result = client.pull(mq, offset, 32, sub_expression=sub_expression, decode=True)
            got += [Stored.from_ext(m) for m in result.messages]
            offset = result.next_begin_offset
    return got


def query_key(broker: BlockingRemotingClient, key: str, store_time: int) -> list[Stored]:
    """QUERY_MESSAGE within a second of the message's store time: the index files' time range and each entry's
    time difference must be right, not just the hash slots (the Java client's query-key asks for all time)."""
    header = QueryMessageRequestHeader(TOPIC, key, 32, store_time - 1000, store_time + 1000)
    response = broker.invoke(create_request(RequestCode.QUERY_MESSAGE, header.to_ext()), 5000)
    assert response.code == ResponseCode.SUCCESS, (key, response.code, response.remark)
    return [Stored.from_ext(m) for m in decode_messages(response.body) if key in (m.keys or "").split()]


def check_metadata(broker: BlockingRemotingClient) -> None:
    """config/topics.json and config/subscriptionGroup.json were read field by field, not just by name."""
    response = broker.invoke(create_request(RequestCode.GET_TOPIC_CONFIG, {"topic": TOPIC}), 5000)
    assert response.code == ResponseCode.SUCCESS, response.remark
    topic = decode_json(response.body.decode())
    assert {name: topic.get(name) for name in TOPIC_FIELDS} == {
        "topicName": TOPIC, "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6,
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}
    response = broker.invoke(create_request(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": GROUP}), 5000)
    assert response.code == ResponseCode.SUCCESS, response.remark
    group = decode_json(response.body.decode())
    assert {name: group.get(name) for name in GROUP_CONFIG} == GROUP_CONFIG


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
    client, creates the group (not with the defaults) and commits its offsets."""
    session.call("create-topic", namesrv=namesrv.addr, topic=TOPIC, queues=QUEUES)
    stored = produce_ours(namesrv.addr, count, "ours")
    with BlockingRemotingClient(broker.addr) as client:
        body = encode_json(GROUP_CONFIG).encode()
        response = client.invoke(create_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body), 5000)
        assert response.code == ResponseCode.SUCCESS, response.remark
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


# -- torn tails: killed while sending ---------------------------------------------------------------------------------


class Sender(threading.Thread):
    """Our client sending to TOPIC without retries (a retry could store twice) until the broker is gone."""

    def __init__(self, namesrv_addr: str, prefix: str) -> None:
        super().__init__(name=f"sender-{prefix}", daemon=True)
        self.namesrv_addr, self.prefix = namesrv_addr, prefix
        self.acked: list[Stored] = []
        self.attempted: set[bytes] = set()

    def run(self) -> None:
        with BlockingClient(self.namesrv_addr, retry_times_when_send_failed=0, timeout_ms=3000) as client:
            for i in itertools.count():
                body = b"%s-%d|%s" % (self.prefix.encode(), i, b"t" * (i % 200))
                self.attempted.add(body)
                try:
                    result = client.send(Message(TOPIC, body, keys=f"{self.prefix}{i}"))
                except RmqError:
                    return
                if result.send_status is SendStatus.SEND_OK:  # not FLUSH_DISK_TIMEOUT: that promises nothing
                    self.acked.append(Stored(result.msg_id or "", result.message_queue.queue_id,
                                             result.queue_offset, result.offset_msg_id, body, f"{self.prefix}{i}",
                                             None, None))

    def wait_for(self, acks: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < acks:
            assert self.is_alive() and time.monotonic() < deadline, f"only {len(self.acked)} acks"
            time.sleep(0.01)


def max_offsets(broker_addr: str) -> int:
    """The sum of TOPIC's queues' max offsets on one broker."""
    with BlockingRemotingClient(broker_addr) as broker:
        return sum(get_max_offset(broker, MessageQueue(TOPIC, "broker-a", q)) for q in range(QUEUES))


def assert_acknowledged_kept(read: list[Stored], acked: list[Stored], was_sent: Callable[[bytes], bool]) -> None:
    """Every acknowledged message is where its ack said, once; whatever else is there was sent by someone."""
    by_place = {(s.queue_id, s.queue_offset): s for s in read}
    assert len(by_place) == len(read), "two messages at one queue offset"
    lost = [s for s in acked if (found := by_place.get((s.queue_id, s.queue_offset))) is None
            or (found.msg_id, found.body) != (s.msg_id, s.body)]
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged messages lost, e.g. {lost[:2]}"
    strangers = [s for s in read if not was_sent(s.body)]
    assert not strangers, f"messages nobody sent are served: {strangers[:2]}"


def sent_by_driver(prefix: str, size: int) -> Callable[[bytes], bool]:
    """Whether a body is one the Java driver's produce builds: driver_body(i, size, prefix) for some i."""
    def check(body: bytes) -> bool:
        head, sep, _ = body.partition(b"|")
        index = head.removeprefix(f"{prefix}-".encode())
        return bool(sep) and index.isdigit() and driver_body(int(index), size, prefix) == body

    return check


def produce_until_killed(driver: ApacheClient, apache: ApacheProcess, namesrv_addr: str, count: int) -> list[Stored]:
    """The Java driver produces (its own JVM, no retries) until Apache took ``count`` more messages, then Apache
    is killed under it; returns the messages it got SEND_OK for."""
    start = max_offsets(apache.addr)
    produced: list[DriverOutput] = []
    producer = threading.Thread(target=lambda: produced.append(driver.run(
        "produce", namesrv=namesrv_addr, topic=TOPIC, count=100_000, keys_prefix="apache", body_prefix="apache",
        size=64, retries=0, timeout_ms=3000, check=False)), daemon=True)
    producer.start()
    deadline = time.monotonic() + 60
    while max_offsets(apache.addr) < start + count:
        assert producer.is_alive() and time.monotonic() < deadline, "Apache took too few messages"
        time.sleep(0.01)
    apache.kill()
    producer.join(60)
    assert produced and produced[0].error is not None, "the producer should have failed with the broker gone"
    return [Stored(r["msgId"], r["queueId"], r["queueOffset"], r["offsetMsgId"], driver_body(r["index"], 64, "apache"),
                   r["keys"], None, None) for r in produced[0].records if r["sendStatus"] == "SEND_OK"]


def test_torn_tails_both_ways(tmp_path: Path, our_namesrv: ServerProcess, apache_namesrv: ApacheProcess,
                              driver: ApacheClient, session: DriverSession) -> None:
    """SIGKILL while a producer sends (SYNC_FLUSH): the CommitLog may end inside a record. Apache's crash recovery
    must cut our torn tail and keep every acknowledged message, then ours must do the same with Apache's."""
    store = tmp_path / "store"
    with start_ours(tmp_path / "ours-1", our_namesrv, store, **CRASH_CONF) as ours:
        session.call("create-topic", namesrv=our_namesrv.addr, topic=TOPIC, queues=QUEUES)
        sender = Sender(our_namesrv.addr, "ours")
        sender.start()
        sender.wait_for(150)
        ours.kill()
        sender.join(30)
    acked, attempted = list(sender.acked), set(sender.attempted)

    apache = start_apache_broker(tmp_path / "apache", apache_namesrv, store, autoCreateTopicEnable=False,
                                 **STORE_CONF, **CRASH_CONF)
    with apache:
        pulled = session.call("consume-pull", namesrv=apache_namesrv.addr, topic=TOPIC, timeout_ms=20_000)
        first = [Stored.from_java(r) for r in pulled.records]
        assert_acknowledged_kept(first, acked, attempted.__contains__)
        java_acked = produce_until_killed(driver, apache, apache_namesrv.addr, 150)
    assert len(java_acked) >= 100, "the kill came before Apache acknowledged much"

    with start_ours(tmp_path / "ours-2", our_namesrv, store, **CRASH_CONF) as ours:
        with BlockingClient(our_namesrv.addr, consumer_group=GROUP) as client:
            read = pull_all(client, client.fetch_message_queues(TOPIC))
        java_sent = sent_by_driver("apache", 64)
        assert_acknowledged_kept(read, first + java_acked, lambda body: body in attempted or java_sent(body))
        assert_clean_stop(ours.stop(), store, 0)
