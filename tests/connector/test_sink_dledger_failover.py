"""The exactly-once sink over a DLedger group of ours (tests/integration/dledger_processes.py: three members, the
sink tests' short transaction timings, 500 ms DLedger heartbeats): a streaming query's master is SIGKILLed while a
micro-batch is written and never restarted. Another member is elected master within about 2 s; the sink's tasks,
whose master moved to another address, fail (as they do when a slave is promoted), and so does the query, naming the
move. Restarted from its checkpoint, the query writes the batch again under a new run, through the new master, and
every row is visible exactly once, also after the new master's transaction checks have asked about the first run's
halves (written through the old master, kept by the group's log). The first batch's halves are left to those checks
(older than half the immunity time at its commit): the resolver must read the decision log from the new master
(its cached route named the killed one, and it answered UNKNOWN until the check budget ran out).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from pyspark.errors import StreamingQueryException

from broker.common.errors import MQClientError
from tests.connector.conftest import SINK_BROKER_CONF, SINK_CHECK_IMMUNITY_S, read_topic
from tests.helpers import wait_until
from tests.integration.dledger_processes import GROUP, Group, dledger_group
from tests.integration.replication import runtime

pytestmark = pytest.mark.slow

TOPIC = "DLedgerSink"
PER_BATCH = 3_000
# Spark's tasks and three brokers on two cores: 100 ms heartbeats lose their quorum under the write's load and the
# leader steps down with nobody killed; 500 ms hold (a failover takes about 2 s). Entries pushed one a request
# (enableBatchPush=false) missed the 2.5 s quorum wait under the sink's bursts on a loaded machine: batched here.
HEART_BEAT_MS = 500
# The new master checks the first batch's 3,000 halves, each answered by the resolver and ended through the group's
# quorum: 10 s on a quiet machine, 40 s in a loaded CI run (about 80 a second).
CHECKS_S = 120


def add_input(tmp_path: Path, batch: int) -> list[str]:
    ids = range(batch * PER_BATCH, (batch + 1) * PER_BATCH)
    (tmp_path / "input").mkdir(exist_ok=True)
    (tmp_path / "input" / f"part-{batch}.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
    return [f"row-{i}" for i in ids]


def run_stream(spark, group: Group, resolver_dir: Path, tmp_path: Path) -> None:
    """One Trigger.AvailableNow run of the JSON files in ``input`` into the sink, from the query's checkpoint."""
    options = {"namesrvAddr": group.namesrv.addr, "topic": TOPIC, "sinkId": "dledger_stream",
               "checkImmunitySeconds": str(SINK_CHECK_IMMUNITY_S), "resolverDir": str(resolver_dir),
               "resolverIdleTimeoutSeconds": "120", "masterWaitTimeoutMs": "20000"}
    rows = (spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).json(str(tmp_path / "input"))
            .selectExpr("concat('row-', cast(id as string)) as body"))
    query = (rows.writeStream.format("rmq").options(**options)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    try:
        query.awaitTermination(120)
    finally:
        query.stop()


def test_stream_fails_over_a_master_kill_and_reruns_exactly_once(spark, resolver_dir: Path, tmp_path: Path) -> None:
    with dledger_group(tmp_path / "group", TOPIC, slaveReadEnable=True, dLegerHeartBeatTimeIntervalMs=HEART_BEAT_MS,
                       enableBatchPush=True, **SINK_BROKER_CONF) as group:
        bodies = add_input(tmp_path, 0)
        run_stream(spark, group, resolver_dir, tmp_path)
        master = group.procs[group.master()]
        stored = int(runtime(master.addr)["msgPutTotalTodayNow"])
        killed: list[float] = []

        def kill_when_writing() -> None:
            wait_until("the second batch reached the master",
                       lambda: int(runtime(master.addr)["msgPutTotalTodayNow"]) > stored + 300, 60, interval=0.02)
            master.kill()
            killed.append(time.monotonic())

        killer = threading.Thread(target=kill_when_writing, daemon=True)
        killer.start()
        bodies += add_input(tmp_path, 1)
        try:  # a task with requests in flight at the kill fails; one past its sends commits through the new master
            run_stream(spark, group, resolver_dir, tmp_path)
        except StreamingQueryException as failed:
            assert f"the master of broker {GROUP} moved from {master.addr}" in str(failed), str(failed)[-2000:]
        killer.join(60)
        assert killed, "the master was not killed while the batch was written"

        run_stream(spark, group, resolver_dir, tmp_path)  # from the checkpoint: a failed batch again, under a new run
        assert group.ids()[0] != master.addr

        def visible() -> Counter:
            return Counter(m.body.decode() for m in read_topic(group.namesrv.addr, TOPIC)) - Counter(["first"])

        try:
            wait_until("every row visible", lambda: sum(visible().values()) >= len(bodies), CHECKS_S, interval=0.5,
                       ignoring=(MQClientError,))  # no master in the route for a moment: an election under load
        except AssertionError:
            seen = visible()
            missing = sorted(set(bodies) - set(seen), key=lambda b: int(b[4:]))
            raise AssertionError(f"visible {sum(seen.values())} ({len(seen)} distinct); {len(missing)} missing: "
                                 f"{missing[:3]} .. {missing[-3:]}") from None
        time.sleep(SINK_CHECK_IMMUNITY_S + 2)  # the new master's checks of the first run's halves have come and gone
        wait_until("broker-a has a master", lambda: 0 in group.ids(), 15)
        assert visible() == Counter(bodies)
