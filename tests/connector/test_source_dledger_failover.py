"""The source over a DLedger group of ours (tests/integration/dledger_processes.py: three members on short DLedger
timings; slaves serve reads, as tests/connector/pair.py's): a streaming query whose master is SIGKILLed during a
micro-batch reads on from a slave and from the member elected next, and what is produced after the failover too;
every message is read exactly once.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest

from broker.client import BlockingClient, Message
from broker.client.message import MessageQueue
from tests.helpers import wait_until
from tests.integration.dledger_processes import GROUP, QUEUES, dledger_group

pytestmark = pytest.mark.slow

TOPIC = "DLedgerSource"
BEFORE, AFTER = 120, 40  # messages produced before the kill, and once another member is master
PER_TRIGGER = 30  # so the backlog takes several micro-batches


def produce(namesrv_addr: str, tag: str, count: int) -> list[str]:
    """``count`` messages over the queues, bodies "<tag>-<i>"; a send the failover refuses is sent again."""
    bodies = [f"{tag}-{i}" for i in range(count)]
    with BlockingClient(namesrv_addr, route_ttl_s=0.2) as client:
        for i, body in enumerate(bodies):
            mq = MessageQueue(TOPIC, GROUP, i % QUEUES)
            wait_until(f"{body} is sent", lambda mq=mq, body=body: client.send(Message(TOPIC, body.encode()), mq),
                       timeout=20, ignoring=(Exception,))
    return bodies


def test_stream_reads_on_from_the_next_master(spark, tmp_path: Path) -> None:
    with dledger_group(tmp_path / "group", TOPIC, slaveReadEnable=True) as group:  # as a master/slave pair reads
        master = group.master()
        before = ["first", *produce(group.namesrv.addr, "before", BEFORE)]  # "first": dledger_group's
        seen: list[str] = []
        lock = threading.Lock()

        def collect(df, batch_id: int) -> None:
            rows = [r.body.decode() for r in df.select("body").collect()]
            with lock:
                seen.extend(rows)
            if batch_id == 0 and group.procs[master].alive():
                group.procs[master].kill()  # during the query: the next batches are planned and read without it

        opts = {"namesrvAddr": group.namesrv.addr, "topic": TOPIC, "startingOffsets": "earliest",
                "maxOffsetsPerTrigger": str(PER_TRIGGER), "pullTimeoutMs": "3000"}
        query = (spark.readStream.format("rmq").options(**opts).load().writeStream.foreachBatch(collect)
                 .option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(processingTime="200 milliseconds").start())
        try:
            wait_until("everything produced before the kill is read",
                       lambda: len(seen) >= len(before) or query.exception(), 90)
            assert query.exception() is None, query.exception()
            assert not group.procs[master].alive()
            wait_until("another member is master", lambda: group.ids().get(0, group.procs[master].addr)
                       != group.procs[master].addr, 15)
            after = produce(group.namesrv.addr, "after", AFTER)
            wait_until("what was produced after the failover is read",
                       lambda: len(seen) >= len(before) + AFTER or query.exception(), 60)
            assert query.exception() is None, query.exception()
        finally:
            query.stop()
        assert Counter(seen) == Counter(before + after)  # each exactly once
