"""The official Java TransactionMQProducer (ClientDriver ``produce-tx``) against our cluster, and the same scenario
against Apache RocketMQ's, for a differential check: what a consumer sees, what the producer is asked by the check,
and what the broker wrote to its store (half, committed and op records, read back from the CommitLog of each). Our
Python TransactionProducer runs in the same scenario, so it is proven against Apache's broker too.

Three listeners: commit, rollback, and UNKNOW first then COMMIT on the broker's check. Then, on our cluster only, a
broker crash (SIGKILL) with half messages open: after the restart a new producer of the group is asked about exactly
the open ones, and every committed message is seen exactly once.
"""

from __future__ import annotations

import asyncio
import glob
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from broker.client import Message, MessageExt
from broker.client.transaction import TransactionProducer
from broker.client.transaction_protocol import LocalTransactionState
from broker.common.record import MessageRecord, RecordKind, check_record, decode_record
from broker.server.transaction.bridge import HALF_TOPIC, OP_TOPIC, op_offsets
from tests.apache import ApacheClient, DriverSession, apache_client, start_apache_broker, start_apache_namesrv
from tests.helpers import client_config
from tests.integration.cluster import start_broker, start_cluster
from tests.javatools import JavaToolError

pytestmark = [pytest.mark.java, pytest.mark.slow]

MODES = ("commit", "rollback", "unknown-then-commit")
PYTHON_TOPIC = "Tx_python"
COUNT = 3
SIZE = 64  # bytes of each body: "<mode>-<i>|" padded with 'x'
# Short timings for both brokers (the same keys in both configs); Apache writes op records in batches, every
# transactionOpBatchInterval: well under the check interval so neither broker asks about an ended transaction.
BROKER_CONF = {"transactionTimeOut": 1000, "transactionCheckInterval": 300, "transactionCheckMax": 50,
               "transactionOpBatchInterval": 100}
# Values that differ run to run (ids, offsets, the queue the client picked): compared by presence only.
VOLATILE = {"UNIQ_KEY", "__transactionId__", "MIN_OFFSET", "MAX_OFFSET", "REAL_QID"}


def topic_of(mode: str) -> str:
    return f"Tx_{mode.replace('-', '_')}"


@dataclass
class Run:
    """What one broker did with the scenario."""

    kind: str
    sent: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # per mode
    checks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    consumed: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)
    records: list[MessageRecord] = field(default_factory=list)  # the whole CommitLog, after a clean stop
    python_checks: list[tuple[str, str]] = field(default_factory=list)  # our TransactionProducer's


async def python_producer(namesrv: str) -> list[tuple[str, str]]:
    """Our TransactionProducer, UNKNOW then COMMIT on the check: (body, TRANSACTION_CHECK_TIMES) per check."""
    checked: list[tuple[str, str]] = []

    class Listener:
        def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
            return LocalTransactionState.UNKNOW

        def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
            checked.append((msg.body.decode(), msg.properties.get("TRANSACTION_CHECK_TIMES", "")))
            return LocalTransactionState.COMMIT_MESSAGE

    config = client_config(namesrv, f"py-tx-{time.monotonic_ns()}")
    async with TransactionProducer("py_tx_group", listener=Listener(), client_config=config) as producer:
        for i in range(COUNT):
            result = await producer.send_message_in_transaction(Message(PYTHON_TOPIC, f"python-{i}|".encode()))
            assert result.local_transaction_state is LocalTransactionState.UNKNOW
        async with asyncio.timeout(30):
            while len({body for body, _ in checked}) < COUNT:
                await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)  # the END_TRANSACTION answers go out
    return checked


def scenario(session: DriverSession, namesrv: str, run: Run) -> None:
    run.python_checks = asyncio.run(python_producer(namesrv))
    run.consumed["python"] = session.call("consume-pull", namesrv=namesrv, topic=PYTHON_TOPIC, body_format="utf8",
                                          group="cg_python").records
    for mode in MODES:
        out = session.call("produce-tx", namesrv=namesrv, topic=topic_of(mode), count=COUNT, listener=mode,
                           body_prefix=mode, keys_prefix=f"{mode}-k", tag="TagTx", size=SIZE, timeout_ms=30_000)
        run.sent[mode] = [r for r in out.records if "check" not in r]
        run.checks[mode] = [r for r in out.records if "check" in r]
        run.summaries[mode] = out.summary or {}
    for mode in MODES:
        out = session.call("consume-pull", namesrv=namesrv, topic=topic_of(mode), body_format="utf8",
                           group=f"cg_{topic_of(mode)}")
        run.consumed[mode] = out.records


def commit_log_records(store: Path) -> list[MessageRecord]:
    records = []
    for path in sorted(glob.glob(str(store / "commitlog" / "*"))):
        buf = Path(path).read_bytes()
        pos = 0
        while (check := check_record(buf, pos, len(buf))).kind is RecordKind.MESSAGE:
            records.append(decode_record(buf[pos:pos + check.size]))
            pos += check.size
    return records


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> ApacheClient:
    """The official Java client (ClientDriver), built once; a missing JDK or Maven fails with the reason."""
    try:
        return apache_client(tmp_path_factory.mktemp("tx-client"))
    except JavaToolError as err:
        reason = str(err)
    pytest.fail(f"cannot build the Apache client driver: {reason}", pytrace=False)


@pytest.fixture(scope="module")
def rmq_run(tmp_path_factory: pytest.TempPathFactory, driver: ApacheClient) -> Run:
    tmp = tmp_path_factory.mktemp("tx-rmq")
    run = Run("rmq")
    with start_cluster(tmp, **BROKER_CONF) as cluster, driver.session() as session:
        scenario(session, cluster.namesrv_addr, run)
        cluster.brokers[0].stop()
        run.records = commit_log_records(Path(str(cluster.brokers[0].conf["storePathRootDir"])))
    return run


@pytest.fixture(scope="module")
def apache_run(tmp_path_factory: pytest.TempPathFactory, driver: ApacheClient) -> Run:
    tmp = tmp_path_factory.mktemp("tx-apache")
    run = Run("apache")
    with start_apache_namesrv(tmp / "namesrv") as namesrv:
        with start_apache_broker(tmp / "broker", namesrv, tmp / "store", **BROKER_CONF) as broker:
            with driver.session() as session:
                scenario(session, namesrv.addr, run)
            broker.stop()
        run.records = commit_log_records(tmp / "store")
    return run


@pytest.fixture(params=["rmq", "apache"])
def run(request: pytest.FixtureRequest) -> Run:
    return request.getfixturevalue(f"{request.param}_run")


# -- each broker on its own -------------------------------------------------------------------------------------------


def bodies(messages: list[dict[str, Any]]) -> list[str]:
    return sorted(m["body"].split("|")[0] for m in messages)


@pytest.mark.parametrize("mode", MODES)
def test_the_java_transaction_producer(run: Run, mode: str) -> None:
    sent, consumed, checks = run.sent[mode], run.consumed[mode], run.checks[mode]
    assert [r["sendStatus"] for r in sent] == ["SEND_OK"] * COUNT
    expected_state = {"commit": "COMMIT_MESSAGE", "rollback": "ROLLBACK_MESSAGE"}.get(mode, "UNKNOW")
    assert {r["localTransactionState"] for r in sent} == {expected_state}
    assert all(r["transactionId"] == r["msgId"] for r in sent)
    if mode == "rollback":
        assert consumed == []
    else:
        assert bodies(consumed) == [f"{mode}-{i}" for i in range(COUNT)]
        assert {m["msgId"] for m in consumed} == {r["msgId"] for r in sent}
        assert all(m["topic"] == topic_of(mode) and m["tags"] == "TagTx" for m in consumed)
    if mode == "unknown-then-commit":
        assert not run.summaries[mode]["timedOut"]
        assert {c["check"] for c in checks} == {r["transactionId"] for r in sent}
        # Each transaction asked first with one check counted; a check round that comes before the answer landed
        # (300 ms here, a slow client on a busy machine) asks again, counting on, on either broker.
        times: dict[str, list[int]] = defaultdict(list)
        for c in checks:
            times[c["check"]].append(int(c["properties"]["TRANSACTION_CHECK_TIMES"]))
        assert all(sorted(counted) == list(range(1, len(counted) + 1)) for counted in times.values()), times
    else:
        assert checks == []


# -- the differential -------------------------------------------------------------------------------------------------


def masked(props: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, "*" if k in VOLATILE else v) for k, v in props.items()))


def consumer_view(message: dict[str, Any]) -> tuple:
    return (message["topic"], message["body"], message["tags"], message["keys"], message["flag"], message["sysFlag"],
            message["reconsumeTimes"], masked(message["properties"]), message["preparedTransactionOffset"] > 0)


def check_view(check: dict[str, Any]) -> tuple:
    real_qid = check["properties"].get("REAL_QID")
    return (check["topic"], str(check["queueId"]) == real_qid, check["body"], check["sysFlag"], check["answer"],
            masked(check["properties"]))


def test_our_transaction_producer(run: Run) -> None:
    """broker.client.transaction against both brokers: the check reaches it and its COMMIT lands, once each."""
    assert sorted(set(run.python_checks)) == [(f"python-{i}|", "1") for i in range(COUNT)]
    assert bodies(run.consumed["python"]) == [f"python-{i}" for i in range(COUNT)]


def test_consumers_see_what_apaches_consumers_see(rmq_run: Run, apache_run: Run) -> None:
    for mode in (*MODES, "python"):
        ours = sorted(consumer_view(m) for m in rmq_run.consumed[mode])
        theirs = sorted(consumer_view(m) for m in apache_run.consumed[mode])
        assert ours == theirs, mode


def test_the_check_asks_what_apaches_check_asks(rmq_run: Run, apache_run: Run) -> None:
    """The first check of each transaction, compared (a second one depends on how fast the answer landed)."""
    mode = "unknown-then-commit"

    def first_checks(run: Run) -> set[tuple]:
        return {check_view(c) for c in run.checks[mode] if c["properties"]["TRANSACTION_CHECK_TIMES"] == "1"}

    assert first_checks(rmq_run) == first_checks(apache_run)


def record_shape(record: MessageRecord) -> tuple:
    """A record with what varies run to run masked, and its property names in stored order (the byte layout)."""
    return (record.topic if not record.topic.startswith("Tx_") else "Tx_*", record.sys_flag, record.flag,
            record.body if record.topic != OP_TOPIC else None, tuple(record.properties),
            masked(record.properties))


def ended_bodies(records: list[MessageRecord]) -> Counter:
    """Which half messages (by body) the op records end: Apache batches several offsets into one op record, we
    write one per end, so the records differ but the messages they name must not (nor how often: once each; which
    re-put copy is ended depends on how many check rounds came before the answer)."""
    halves = {r.queue_offset: r for r in records if r.topic == HALF_TOPIC}
    return Counter(halves[o].body for r in records if r.topic == OP_TOPIC for o in op_offsets(r))


def test_the_store_holds_what_apaches_store_holds(rmq_run: Run, apache_run: Run) -> None:
    def shapes(run: Run, topic_test) -> Counter:
        return Counter(record_shape(r) for r in run.records if topic_test(r.topic))

    # Half records as a set, up to their first check: a check round that comes before an answer landed re-puts once
    # more, counting on, on either broker.
    def first_halves(run: Run) -> set[tuple]:
        return {record_shape(r) for r in run.records if r.topic == HALF_TOPIC
                and r.properties.get("TRANSACTION_CHECK_TIMES") in (None, "1")}

    def is_committed(topic: str) -> bool:
        return topic.startswith("Tx_")

    assert first_halves(rmq_run) == first_halves(apache_run)
    assert shapes(rmq_run, is_committed) == shapes(apache_run, is_committed)
    assert ended_bodies(rmq_run.records) == ended_bodies(apache_run.records)
    ours_op = {(tuple(r.properties.items()), r.sys_flag) for r in rmq_run.records if r.topic == OP_TOPIC}
    theirs_op = {(tuple(r.properties.items()), r.sys_flag) for r in apache_run.records if r.topic == OP_TOPIC}
    assert ours_op == theirs_op


# -- a broker crash with half messages open (ours) -----------------------------------------------------------------


@pytest.fixture
def rmq_cluster(tmp_path: Path) -> Iterator[Any]:
    with start_cluster(tmp_path, **BROKER_CONF) as cluster:
        yield cluster


def test_a_broker_crash_loses_no_half_message_and_commits_none_twice(
        rmq_cluster: Any, driver: ApacheClient) -> None:
    topic, group = "TxCrash", "tx_crash_group"
    namesrv = rmq_cluster.namesrv_addr
    with driver.session() as session:
        for mode, prefix in (("commit", "committed"), ("rollback", "rolled-back"), ("unknown", "open")):
            session.call("produce-tx", namesrv=namesrv, topic=topic, group=group, count=COUNT, listener=mode,
                         body_prefix=prefix, size=SIZE)
        broker = rmq_cluster.brokers[0]
        broker.kill()
        conf = {k: v for k, v in broker.conf.items()
                if k not in ("listenPort", "namesrvAddr", "storePathRootDir")}
        restarted = start_broker(broker.home, namesrv, store_dir=Path(str(broker.conf["storePathRootDir"])), **conf)
        rmq_cluster.brokers[0] = restarted
        start = time.monotonic()
        # A new producer of the group that commits whatever it is asked about. It sends one transactional message
        # of its own: a 5.x Java producer heartbeats only brokers it has a route to, so one that never sent is
        # never asked (4.x kept TBW102's route for that).
        out = session.call("produce-tx", namesrv=namesrv, topic=topic, group=group, count=1, body_prefix="answer",
                           size=SIZE, listener="unknown-then-commit", await_checks=COUNT + 1, settle_ms=1500,
                           timeout_ms=30_000)
        assert not out.summary["timedOut"], f"asked about {out.summary['checked']} of {COUNT + 1} in 30 s"
        asked = bodies([r for r in out.records if "check" in r])
        assert sorted(set(asked)) == ["answer-0"] + [f"open-{i}" for i in range(COUNT)], (
            "asked about a transaction that ended before the crash")
        consumed = session.call("consume-pull", namesrv=namesrv, topic=topic, body_format="utf8").records
        expected = ["answer-0"] + [f"committed-{i}" for i in range(COUNT)] + [f"open-{i}" for i in range(COUNT)]
        assert bodies(consumed) == sorted(expected), "lost or committed twice"
        print(f"after the crash, the {COUNT} open transactions were asked and committed in "
              f"{time.monotonic() - start:.1f} s")
