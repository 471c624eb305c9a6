"""The exactly-once sink over a master and its slave (tests/connector/pair.py), whose master is SIGKILLed:

* during a batch write, and restarted on its port within masterWaitTimeoutMs: the tasks wait for it (halves that
  were in flight, whole prepared batches since our broker takes them, are sent again under a new run, the first
  copies dropped), the write succeeds, and every row is
  visible exactly once (our pull client and the official Java consumer), and every half the master holds (first
  copies included) resolves, by the recorded decision, to each row once;
* between two micro-batches of a streaming query, for longer than masterWaitTimeoutMs: the query fails in about
  that time with an error naming the brokerName (a slave takes no half message); restarted from its checkpoint
  once the master is back, it re-runs the batch, and every row is visible exactly once.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

from broker.client import BlockingClient
from broker.client.blocking import BlockingRemotingClient, pull
from broker.client.message import MessageQueue, PullStatus
from connector.decisions import PROPERTY_SINK_ID, PROPERTY_SINK_RUN, DecisionLog, DecisionState, Resolution
from tests.apache import apache_client
from tests.connector.conftest import SINK_BROKER_CONF, SINK_IMMUNITY_S, read_topic
from tests.connector.pair import BROKER, Pair, start_pair
from tests.helpers import wait_until
from tests.integration.replication import runtime
from tests.javatools import JavaToolError

pytestmark = [pytest.mark.slow, pytest.mark.java]

ROWS = 20_000
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OUTAGE_S = 2.0  # the master is down this long during the batch write


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    pair = start_pair(tmp_path / "pair", **SINK_BROKER_CONF)
    try:
        yield pair
    finally:
        pair.close()


def sink_options(pair: Pair, resolver_dir: Path, topic: str, **extra: object) -> dict[str, str]:
    options = {"namesrvAddr": pair.namesrv_addr, "topic": topic, "checkImmunitySeconds": str(SINK_IMMUNITY_S),
               "resolverDir": str(resolver_dir), "resolverIdleTimeoutSeconds": "120"}
    return options | {k: str(v) for k, v in extra.items()}


def kill_when_writing(pair: Pair, restarted: list[object]) -> None:
    """Kill the master as soon as it has stored the write's first half messages (the write takes well under a second
    on a quiet machine: a later kill can find every half already stored), restart it OUTAGE_S later."""
    wait_until("the write reached the master", lambda: int(runtime(pair.master.addr)["msgPutTotalTodayNow"]) > 0,
               60, interval=0.005)
    pair.master.kill()
    time.sleep(OUTAGE_S)
    restarted.append(pair.restart_master())


def half_messages(pair: Pair, sink_id: str) -> list:
    """Every half message of ``sink_id`` the master stores (RMQ_SYS_TRANS_HALF_TOPIC), committed or not."""
    mq = MessageQueue(HALF_TOPIC, BROKER, 0)
    out = []
    with BlockingRemotingClient(pair.master.addr) as client:
        offset = 0
        while (result := pull(client, "half-reader", mq, offset, 32, decode=True)).status is PullStatus.FOUND:
            out += [m for m in result.messages if m.properties.get(PROPERTY_SINK_ID) == sink_id]
            offset = result.next_begin_offset
    return out


def test_batch_write_waits_for_its_master_and_leaves_each_row_once(spark, pair: Pair, resolver_dir: Path,
                                                                   tmp_path: Path) -> None:
    topic, sink_id = "FailoverSink", "failover_batch"
    pair.create_topic(topic, 2)
    bodies = [f"row-{i}" for i in range(ROWS)]
    df = spark.range(ROWS).selectExpr("concat('row-', cast(id as string)) as body").repartition(2)
    restarted: list[object] = []
    killer = threading.Thread(target=kill_when_writing, args=(pair, restarted), daemon=True)
    killer.start()
    options = sink_options(pair, resolver_dir, topic, sinkId=sink_id, masterWaitTimeoutMs=60_000)
    df.write.format("rmq").options(**options).mode("append").save()
    killer.join(60)
    assert restarted, "the master was not killed and restarted while the job ran"

    # the driver committed every winner itself (young halves); each row is visible once
    wait_until("every row visible", lambda: len(read_topic(pair.namesrv_addr, topic)) >= ROWS, 30, interval=0.5)
    assert Counter(m.body.decode() for m in read_topic(pair.namesrv_addr, topic)) == Counter(bodies)
    try:
        java = apache_client(tmp_path / "java").run("consume-pull", namesrv=pair.namesrv_addr, topic=topic,
                                                     body_format="utf8", timeout_ms=60_000)
    except JavaToolError as err:
        pytest.fail(f"the official Java consumer could not run: {err}", pytrace=False)
    assert Counter(r["body"] for r in java.records) == Counter(bodies)

    # Halves in flight at the kill were sent again under a new run and their first copies dropped; whatever the
    # broker asks the resolver later about any half of the job, the decision commits each row once.
    with BlockingClient(pair.namesrv_addr) as client:
        (decision,) = DecisionLog(client, "RMQ_SINK_DECISIONS", sink_id).refresh().decided.values()
    assert decision.drops and len(decision.winners) > 2, decision
    state = DecisionState(decided={decision.batch: decision})
    halves = half_messages(pair, sink_id)
    assert len(halves) >= ROWS  # the first copies of the halves in flight, when the master had stored them
    committed = [m for m in halves if state.resolve(decision.batch, m.properties[PROPERTY_SINK_RUN],
                                                    m.properties["UNIQ_KEY"]) is Resolution.COMMIT]
    assert Counter(m.body.decode() for m in committed) == Counter(bodies)


def run_stream(spark, pair: Pair, resolver_dir: Path, tmp_path: Path, **extra: object) -> None:
    """One Trigger.AvailableNow run of the JSON files in ``input`` into the sink, from the query's checkpoint."""
    rows = (spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).json(str(tmp_path / "input"))
            .selectExpr("concat('row-', cast(id as string)) as body"))
    query = (rows.writeStream.format("rmq").options(**sink_options(pair, resolver_dir, "FailoverStream", **extra))
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    try:
        query.awaitTermination(120)
    finally:
        query.stop()


def add_input(tmp_path: Path, batch: int, per_batch: int) -> list[str]:
    ids = range(batch * per_batch, (batch + 1) * per_batch)
    (tmp_path / "input").mkdir(exist_ok=True)
    (tmp_path / "input" / f"part-{batch}.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
    return [f"row-{i}" for i in ids]


def test_stream_fails_in_bounded_time_naming_the_broker_then_reruns_exactly_once(spark, pair: Pair,
                                                                                 resolver_dir: Path,
                                                                                 tmp_path: Path) -> None:
    pair.create_topic("FailoverStream", 2)
    bodies = add_input(tmp_path, 0, 50)
    run_stream(spark, pair, resolver_dir, tmp_path)

    pair.kill_master()
    bodies += add_input(tmp_path, 1, 50)
    started = time.monotonic()
    with pytest.raises(StreamingQueryException) as failed:
        run_stream(spark, pair, resolver_dir, tmp_path, masterWaitTimeoutMs=3000)
    elapsed = time.monotonic() - started
    message = str(failed.value)
    assert f"the master of broker {BROKER} did not answer within 3000 ms" in message, message[-2000:]
    assert "masterWaitTimeoutMs" in message and elapsed < 30, elapsed

    pair.restart_master()
    run_stream(spark, pair, resolver_dir, tmp_path)
    wait_until("every row visible", lambda: len(read_topic(pair.namesrv_addr, "FailoverStream")) >= len(bodies), 60)
    assert Counter(m.body.decode() for m in read_topic(pair.namesrv_addr, "FailoverStream")) == Counter(bodies)
