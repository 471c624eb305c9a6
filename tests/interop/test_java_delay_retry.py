"""Delayed delivery, retry and DLQ with the official Java client (tests/java/client/ClientDriver.java) and with our
Python push consumer, against our broker and, as the reference, Apache's: every test runs on both, with the same
assertions, so what passes on both is what Apache does.

Both brokers run with delay levels "1s 5s 1s 1s ...": levels 1 and 2 are the defaults (1 s, 5 s) for the timing
test, and the levels a retry uses (3 + reconsumeTimes) are 1 s, so a message reaches the DLQ in seconds.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.client.blocking import BlockingRemotingClient
from broker.common.fastjson import decode_json
from broker.common.message import PullSysFlag, encode_properties
from broker.common.record import MessageRecord, iter_records
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from broker.remoting.headers import PullMessageRequestHeader, SendMessageRequestHeader
from tests.apache import ApacheClient, DriverSession, apache_client, start_apache_broker, start_apache_namesrv
from tests.helpers import push_until_dlq, run
from tests.integration.cluster import start_broker, start_namesrv, start_servers
from tests.javatools import JavaToolError

pytestmark = [pytest.mark.java, pytest.mark.slow]

DELAY_LEVELS = "1s 5s " + " ".join(["1s"] * 16)
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
DUE_SLACK_MS = 1500  # "within 1 s" of the deliver time, plus what a loaded machine adds
CLOCK_SLACK_MS = 5


@dataclass
class Servers:
    kind: str
    namesrv_addr: str


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> ApacheClient:
    try:
        return apache_client(tmp_path_factory.mktemp("delay-client"))
    except JavaToolError as err:
        pytest.fail(f"cannot build the Apache client driver: {err}", pytrace=False)


@pytest.fixture(scope="module", params=["rmq", "apache"])
def servers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    tmp = tmp_path_factory.mktemp(f"delay-{request.param}")
    with start_servers(request.param, tmp, messageDelayLevel=DELAY_LEVELS) as cluster:
        yield Servers(request.param, cluster.namesrv_addr)


@pytest.fixture
def session(driver: ApacheClient) -> Iterator[DriverSession]:
    with driver.session() as s:
        yield s


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


# -- delayed sends --------------------------------------------------------------------------------------------------


def test_delayed_sends_are_delivered_when_due(servers: Servers, session: DriverSession) -> None:
    ns, topic, group = servers.namesrv_addr, unique("DelayTopic"), unique("delay_group")
    session.call("create-topic", namesrv=ns, topic=topic, queues=2)
    session.call("push-start", namesrv=ns, topic=topic, group=group, name="timer")
    session.call("push-balance", names="timer", topic_queues=2)
    sent = session.call("produce", namesrv=ns, topic=topic, count=3, delay_level=1, keys_prefix="d1-").records
    sent += session.call("produce", namesrv=ns, topic=topic, count=2, delay_level=2, keys_prefix="d2-").records
    # Before delivery: the scheduled record, found by its offsetMsgId and by key under the schedule topic
    scheduled = {}
    for record in sent:
        (parked,) = session.call("query-id", namesrv=ns, topic=topic, offset_id=record["offsetMsgId"]).records
        assert (parked["topic"], parked["queueId"]) == (SCHEDULE_TOPIC, int(record["keys"][1]) - 1)
        assert {k: parked["properties"][k] for k in ("REAL_TOPIC", "REAL_QID", "DELAY")} == {
            "REAL_TOPIC": topic, "REAL_QID": str(record["queueId"]), "DELAY": record["keys"][1]}
        scheduled[record["keys"]] = parked
    (by_key,) = session.call("query-key", namesrv=ns, topic=SCHEDULE_TOPIC, key="d2-1").records
    assert by_key["properties"]["REAL_TOPIC"] == topic
    got = session.call("push-await", names="timer", count=5, timeout_ms=20_000, settle_ms=500).records
    session.call("push-stop", name="timer")
    assert sorted(m["keys"] for m in got) == sorted(scheduled)
    for message in got:
        parked = scheduled[message["keys"]]
        due = parked["storeTimestamp"] + (1000 if message["keys"].startswith("d1") else 5000)
        assert due - CLOCK_SLACK_MS <= message["receivedAtMs"] <= due + DUE_SLACK_MS, (
            servers.kind, message["keys"], message["receivedAtMs"] - due)
        assert message["storeTimestamp"] >= due
        # The delivered copy keeps the scheduled record's properties (DELAY, REAL_TOPIC, REAL_QID included) and
        # is a new record of the real topic; the client adds MIN_OFFSET/MAX_OFFSET/CONSUME_START_TIME.
        client_added = {"MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME"}
        delivered = {k: v for k, v in message["properties"].items() if k not in client_added}
        assert delivered == parked["properties"]
        assert (message["topic"], message["queueId"], message["reconsumeTimes"]) == (
            topic, int(parked["properties"]["REAL_QID"]), 0)
        assert message["offsetMsgId"] != parked["offsetMsgId"] and message["msgId"] == parked["msgId"]
    # After delivery: by key on the real topic too
    (found,) = session.call("query-key", namesrv=ns, topic=topic, key="d1-2").records
    assert found["topic"] == topic


# -- RECONSUME_LATER until the DLQ ---------------------------------------------------------------------------------


def test_java_push_consumer_reconsume_later_until_dlq(servers: Servers, session: DriverSession) -> None:
    ns, topic, group = servers.namesrv_addr, unique("RetryTopic"), unique("retry_group")
    session.call("create-topic", namesrv=ns, topic=topic, queues=1)
    # The group has run before: its retry topic exists, so the consumer pulls it from the start (a brand-new
    # group's Java consumer learns the route of %RETRY% only at its next NameServer poll, 30 s later).
    session.call("create-topic", namesrv=ns, topic=f"%RETRY%{group}", queues=1)
    session.call("push-start", namesrv=ns, topic=topic, group=group, name="failer", listener="reconsume-later",
                 max_reconsume_times=2)
    session.call("push-balance", names="failer", topic_queues=1)
    (sent,) = session.call("produce", namesrv=ns, topic=topic, count=1, keys_prefix="dlq-", tag="TagD").records
    deliveries = session.call("push-await", names="failer", count=3, timeout_ms=30_000, settle_ms=3000).records
    session.call("push-stop", name="failer")
    # The client shows a retried message with its original topic; each retry is a new record
    assert [(m["reconsumeTimes"], m["topic"], m["keys"]) for m in deliveries] == [
        (i, topic, "dlq-0") for i in range(3)]
    assert len({m["offsetMsgId"] for m in deliveries}) == 3
    retried = deliveries[1]["properties"]
    assert (retried["RETRY_TOPIC"], retried["ORIGIN_MESSAGE_ID"], retried["REAL_TOPIC"], retried["DELAY"]) == (
        topic, sent["offsetMsgId"], f"%RETRY%{group}", "3")
    dlq = f"%DLQ%{group}"
    (dead,) = session.call("consume-pull", namesrv=ns, topic=dlq, group=unique("dlq_reader"), max=1,
                           timeout_ms=20_000).records
    props = dead["properties"]
    assert (dead["topic"], dead["reconsumeTimes"], dead["keys"], dead["tags"], dead["msgId"]) == (
        dlq, 3, "dlq-0", "TagD", sent["msgId"])
    assert (props["RETRY_TOPIC"], props["ORIGIN_MESSAGE_ID"], props["DELAY"], props["WAIT"]) == (
        topic, sent["offsetMsgId"], "0", "false")
    (queue,) = session.call("route", namesrv=ns, topic=dlq).records[0]["queueDatas"]
    assert (queue["readQueueNums"], queue["writeQueueNums"], queue["perm"]) == (1, 1, 6)


def test_python_push_consumer_reconsume_later_until_dlq(servers: Servers) -> None:
    """Our PushConsumer on both brokers: it subscribes to %RETRY%group itself and sends every failure back."""
    topic, group = unique("PyRetryTopic"), unique("py_retry_group")
    deliveries, sent, dead = run(push_until_dlq(servers.namesrv_addr, topic, group, keys="pk", settle_s=3.0), 120)
    assert [(times, where) for times, where, _ in deliveries] == [(i, topic) for i in range(3)]
    (msg,) = dead
    assert (msg.topic, msg.reconsume_times, msg.keys, msg.msg_id, msg.body) == (
        f"%DLQ%{group}", 3, "pk", sent.msg_id, b"fail-me")
    assert (msg.properties["RETRY_TOPIC"], msg.properties["ORIGIN_MESSAGE_ID"]) == (topic, sent.offset_msg_id)


# -- one broker parks, the other delivers ---------------------------------------------------------------------------

# Apache refuses CommitLog and ConsumeQueue files of another size than configured: both sides use these.
TAKEOVER_CONF: dict[str, object] = {"mappedFileSizeCommitLog": 32 * 1024, "mappedFileSizeConsumeQueue": 40 * 20,
                                    "maxHashSlotNum": 64, "maxIndexNum": 256, "messageDelayLevel": "1s 15s"}
LATE_DELAY_MS = 15_000  # level 2: still pending when the first broker has stopped (Apache's stop takes 5.5 s)


@contextlib.contextmanager
def _broker(kind: str, tmp: Path, store: Path) -> Iterator[str]:
    """A NameServer and a broker of ``kind`` on ``store``; yields the broker's address; stops both cleanly."""
    with contextlib.ExitStack() as stack:
        if kind == "rmq":
            namesrv = stack.enter_context(start_namesrv(tmp / "namesrv"))
            yield stack.enter_context(start_broker(tmp / "broker", namesrv.addr, store_dir=store,
                                                   **TAKEOVER_CONF)).addr
        else:
            namesrv = stack.enter_context(start_apache_namesrv(tmp / "namesrv"))
            broker = stack.enter_context(start_apache_broker(tmp / "broker", namesrv, store, **TAKEOVER_CONF))
            stack.callback(broker.stop)  # SIGTERM (closing would kill it): Apache persists delayOffset.json
            yield broker.addr


def _send_delayed(addr: str, topic: str, key: str, level: int) -> int:
    """Send one delayed message; returns the time just before the send (its store time cannot be earlier)."""
    before = int(time.time() * 1000)
    header = SendMessageRequestHeader(
        producer_group="PG", topic=topic, default_topic="TBW102", default_topic_queue_nums=1, queue_id=0, sys_flag=0,
        born_timestamp=int(time.time() * 1000), flag=0,
        properties=encode_properties({"DELAY": str(level), "KEYS": key, "UNIQ_KEY": f"U-{key}"}))
    with BlockingRemotingClient(addr) as client:
        response = client.invoke(create_request(RequestCode.SEND_MESSAGE, header.to_ext(), b"body-" + key.encode()))
    assert response.code == ResponseCode.SUCCESS, response.remark
    return before


def _pull_all(addr: str, topic: str, count: int, timeout_s: float) -> list[MessageRecord]:
    """Everything in queue 0 of ``topic`` once ``count`` messages are there (then one more look for extras)."""
    got: list[MessageRecord] = []
    deadline = time.monotonic() + timeout_s
    with BlockingRemotingClient(addr) as client:
        while True:
            header = PullMessageRequestHeader(
                consumer_group="takeover_reader", topic=topic, queue_id=0, queue_offset=len(got), max_msg_nums=32,
                sys_flag=int(PullSysFlag.SUBSCRIPTION), commit_offset=0, suspend_timeout_millis=0, sub_version=0,
                subscription="*", expression_type="TAG")
            response = client.invoke(create_request(RequestCode.PULL_MESSAGE, header.to_ext()))
            if response.code == ResponseCode.SUCCESS:
                got += iter_records(response.body)
            elif len(got) >= count or time.monotonic() > deadline:
                return got
            else:
                time.sleep(0.2)


@pytest.mark.parametrize(("first", "second"), [("rmq", "apache"), ("apache", "rmq")])
def test_pending_delayed_messages_are_delivered_by_the_broker_that_takes_over(tmp_path: Path, first: str,
                                                                                 second: str) -> None:
    """The first broker parks five messages and delivers the two due in 1 s, then stops (SIGTERM) with three
    pending; the second broker, on the same store, reads the first one's delayOffset.json and schedule queue
    (tagsCode = deliver time) and delivers the three when due: every message once, none early."""
    store, topic = tmp_path / "store", "TakeoverDelay"
    with _broker(first, tmp_path / first, store) as addr:
        for i in range(2):
            _send_delayed(addr, topic, f"early{i}", 1)
        sent_late_at = {f"late{i}": _send_delayed(addr, topic, f"late{i}", 2) for i in range(3)}
        assert sorted(r.properties["KEYS"] for r in _pull_all(addr, topic, 2, 10)) == ["early0", "early1"]
    offsets = decode_json((store / "config" / "delayOffset.json").read_text())["offsetTable"]
    assert offsets == {"1": 2, "2": 0}  # level 2 waits at its first unit
    with _broker(second, tmp_path / second, store) as addr:
        got = _pull_all(addr, topic, 5, LATE_DELAY_MS / 1000 + 20)
    assert sorted(r.properties["KEYS"] for r in got) == ["early0", "early1", "late0", "late1", "late2"]
    for record in got[2:]:
        assert record.store_timestamp >= sent_late_at[record.properties["KEYS"]] + LATE_DELAY_MS - CLOCK_SLACK_MS
        assert record.properties["REAL_TOPIC"] == topic and record.body == b"body-" + record.properties["KEYS"].encode()
