"""The source over a master and its slave (tests/connector/pair.py): a streaming query whose master is SIGKILLed
during a micro-batch reads on from the slave, and from the master again once it is back; every message is read
exactly once. While the master is away, a batch query's ``startingOffsets`` and the driver's offset questions are
answered by the slave.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.client import BlockingClient, Message
from broker.client.message import MessageQueue
from connector.offsets import OffsetOracle
from connector.options import SourceOptions
from tests.connector.pair import Pair, start_pair
from tests.helpers import wait_until
from tests.integration.replication import runtime

pytestmark = pytest.mark.slow

QUEUES = 2
BEFORE, AFTER = 120, 40  # messages produced before the kill, and after the master is back
PER_TRIGGER = 30  # so the backlog takes several micro-batches


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    pair = start_pair(tmp_path / "pair")
    try:
        yield pair
    finally:
        pair.close()


def produce(pair: Pair, queues: list[MessageQueue], tag: str, count: int) -> list[str]:
    """``count`` messages spread over ``queues``, bodies (the unique keys) "<tag>-<i>"."""
    bodies = [f"{tag}-{i}" for i in range(count)]
    with BlockingClient(pair.namesrv_addr) as client:
        for i, body in enumerate(bodies):
            client.send(Message(queues[0].topic, body.encode()), queues[i % len(queues)])
    return bodies


def test_stream_reads_on_from_the_slave_and_back_from_the_master(spark, pair: Pair, tmp_path: Path) -> None:
    topic = "FailoverSource"
    queues = pair.create_topic(topic, QUEUES)
    before = produce(pair, queues, "before", BEFORE)
    pair.caught_up()

    seen: list[str] = []
    lock = threading.Lock()

    def collect(df, batch_id: int) -> None:
        rows = [r.body.decode() for r in df.select("body").collect()]
        with lock:
            seen.extend(rows)
        if batch_id == 0 and pair.master.alive():
            pair.kill_master()  # during the query: the next batches are planned and read without it

    opts = {"namesrvAddr": pair.namesrv_addr, "topic": topic, "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": str(PER_TRIGGER), "pullTimeoutMs": "3000"}
    query = (spark.readStream.format("rmq").options(**opts).load().writeStream.foreachBatch(collect)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(processingTime="200 milliseconds")
             .start())
    try:
        wait_until("everything produced before the kill is read", lambda: len(seen) >= BEFORE or query.exception(),
                   60)
        assert query.exception() is None, query.exception()
        assert not pair.master.alive()
        slave_gets = int(runtime(pair.slave.addr)["msgGetTotalTodayNow"])
        assert slave_gets >= BEFORE - PER_TRIGGER  # what the batches after the kill read came from the slave

        # With the master away, the driver's questions and a batch query's starting offsets go to the slave.
        oracle = OffsetOracle(SourceOptions.parse({"namesrvAddr": pair.namesrv_addr, "topic": topic},
                                                  streaming=False))
        try:
            assert sum(oracle.max_offsets(queues).values()) == BEFORE
            assert oracle.broker_addr(queues[0]) == pair.slave.addr and oracle.on_slave == {"broker-a"}
        finally:
            oracle.close()
        batch = spark.read.format("rmq").options(namesrvAddr=pair.namesrv_addr, topic=topic).load()
        assert Counter(r.body.decode() for r in batch.select("body").collect()) == Counter(before)

        master = pair.restart_master()
        after = produce(pair, queues, "after", AFTER)
        wait_until("what was produced after the restart is read", lambda: len(seen) >= BEFORE + AFTER
                   or query.exception(), 60)
        assert query.exception() is None, query.exception()
    finally:
        query.stop()
    assert Counter(seen) == Counter(before + after)  # each exactly once
    assert int(runtime(master.addr)["msgGetTotalTodayNow"]) >= AFTER  # read from the master once it was back
