"""Exactly once across failures, with a killable driver (tests/connector/sink_driver.py, a subprocess with its own
SparkSession, master local[2,2] so a failed task is retried):

Our broker takes transactional batches, so the tasks send prepared batches and the driver ends them with
END_TRANSACTION_BATCH: each failure below comes in the middle of a batched write.

* batch 0: the first attempt of partition 0 fails after storing 150 half messages (prepared batches, one per
  queue its sharding keys pick); the retry wins, the lost attempt's halves are rolled back when the broker checks
  them;
* batch 1: the driver (its whole process group) is killed right after the decision is recorded, before any
  END_TRANSACTION; the query is restarted from its checkpoint, Spark re-runs batch 1, the re-run is rolled back and
  the decided attempt is committed by the resolver (which outlived the driver) when the broker asks;
* batch 2 runs after the restart.

Every row is then seen exactly once by our pull client, by the official Java consumer and by our source. The
query's resolver exits once the query stopped and nothing is left to answer. The restarted driver then runs a batch
job whose first attempt of partition 0 fails after 3 half messages: its resolver stays until it has rolled those
back on the broker's check, then exits; each row of the job is committed once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from broker.client import BlockingClient
from connector.decisions import DecisionLog
from tests.apache import apache_client
from tests.connector.conftest import SINK_CHECK_IMMUNITY_S, read_topic, resolver_gone, takes_transaction_batches
from tests.helpers import wait_until
from tests.integration.cluster import Cluster
from tests.javatools import JavaToolError

pytestmark = [pytest.mark.slow, pytest.mark.java]

REPO = Path(__file__).resolve().parents[2]
BATCHES, PER_BATCH = 3, 400
DRIVER_TIMEOUT_S = 240


def run_driver(config: dict, log: Path) -> int:
    with log.open("ab") as out:
        script = str(REPO / "tests" / "connector" / "sink_driver.py")
        done = subprocess.run([sys.executable, script, json.dumps(config)],
                              stdout=out, stderr=subprocess.STDOUT, timeout=DRIVER_TIMEOUT_S, cwd=REPO,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    return done.returncode


def write_inputs(directory: Path) -> list[str]:
    directory.mkdir()
    bodies = []
    for batch in range(BATCHES):
        ids = range(batch * PER_BATCH, (batch + 1) * PER_BATCH)
        part = directory / f"part-{batch}.json"
        part.write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
        os.utime(part, (1_700_000_000 + batch, 1_700_000_000 + batch))  # the file source takes older files first
        bodies += [f"row-{i}" for i in ids]
    return bodies


def resolver_answers(resolver_dir: Path, sink_id: str) -> list[tuple[str, str, str]]:
    """(batch, run, answer) of every check the resolver answered (its log)."""
    log = resolver_dir / f"{sink_id}.log"
    out = []
    for line in log.read_text(errors="replace").splitlines() if log.exists() else ():
        if " check " in line and " batch " in line:
            tail = line.split(" batch ", 1)[1]
            batch, _, rest = tail.partition(" run ")
            run, _, answer = rest.partition(": ")
            out.append((batch, run, answer.strip()))
    return out


def test_task_failure_and_driver_killed_after_decision(spark, sink_cluster: Cluster, resolver_dir: Path,
                                                       tmp_path: Path, topic_name: str) -> None:
    assert takes_transaction_batches(sink_cluster)
    bodies = write_inputs(tmp_path / "input")
    sink_id = "recovery_" + topic_name[-40:].replace("-", "_")
    config = {
        "namesrv": sink_cluster.namesrv_addr, "topic": topic_name, "input": str(tmp_path / "input"),
        "checkpoint": str(tmp_path / "checkpoint"), "master": "local[2,2]",
        "options": {"namesrvAddr": sink_cluster.namesrv_addr, "sinkId": sink_id, "resolverDir": str(resolver_dir),
                    "checkImmunitySeconds": str(SINK_CHECK_IMMUNITY_S), "resolverIdleTimeoutSeconds": "120",
                    "faultInjection": json.dumps({"failTask": {"partition": 0, "batch": "0", "afterRows": 150}})},
    }
    log = tmp_path / "driver.log"
    code = run_driver({**config, "kill_after_decision": 1}, log)
    assert code == -9, f"the driver should have been killed after deciding batch 1, exited {code}:\n" \
                       f"{log.read_text(errors='replace')[-3000:]}"
    del config["options"]["faultInjection"]
    batch_topic, batch_sink = f"{topic_name}_job", "retried_" + topic_name[-40:].replace("-", "_")
    job_options = {"namesrvAddr": sink_cluster.namesrv_addr, "topic": batch_topic, "sinkId": batch_sink,
                   "resolverDir": str(resolver_dir), "checkImmunitySeconds": str(SINK_CHECK_IMMUNITY_S),
                   "faultInjection": json.dumps({"failTask": {"partition": 0, "afterRows": 3}})}
    code = run_driver({**config, "batch": {"rows": PER_BATCH, "options": job_options}}, log)
    assert code == 0, f"restarted driver exited {code}:\n{log.read_text(errors='replace')[-3000:]}"

    wait_until("every row committed", lambda: len(read_topic(sink_cluster.namesrv_addr, topic_name)) >= len(bodies),
               timeout=120)
    with BlockingClient(sink_cluster.namesrv_addr) as client:
        state = DecisionLog(client, "RMQ_SINK_DECISIONS", sink_id).refresh()
    assert sorted(state.decided) == ["0", "1", "2"]
    assert all(state.decided[b].rows == PER_BATCH for b in state.decided)
    # the lost attempt of batch 0 (150+ halves) was rolled back by the check; no winner was ever rolled back
    wait_until("the failed attempt's halves rolled back by the check",
               lambda: sum(1 for b, r, a in resolver_answers(resolver_dir, sink_id)
                           if b == "0" and a == "ROLLBACK" and r not in state.decided["0"].winners) >= 150,
               timeout=90)
    answers = resolver_answers(resolver_dir, sink_id)
    assert not [x for x in answers if x[2] == "ROLLBACK" and x[1] in state.decided[x[0]].winners]
    # batch 1 was finished by the resolver: its winners were committed on the broker's check
    assert any(b == "1" and a == "COMMIT" for b, _, a in answers)

    seen = read_topic(sink_cluster.namesrv_addr, topic_name)
    assert Counter(m.body.decode() for m in seen) == Counter(bodies)

    try:
        java = apache_client(tmp_path / "java").run("consume-pull", namesrv=sink_cluster.namesrv_addr,
                                                     topic=topic_name, body_format="utf8", timeout_ms=60_000)
    except JavaToolError as err:
        pytest.fail(f"the official Java consumer could not run: {err}", pytrace=False)
    assert Counter(r["body"] for r in java.records) == Counter(bodies)

    read = spark.read.format("rmq").option("namesrvAddr", sink_cluster.namesrv_addr).option("topic", topic_name).load()
    assert Counter(r.body.decode() for r in read.select("body").collect()) == Counter(bodies)
    wait_until("the query's resolver gone", lambda: resolver_gone(resolver_dir, sink_id), timeout=60)

    # the batch job: the retry's commit message does not show the failed attempt, so the driver does not record the
    # job ended; the resolver answers the failed attempt's halves ROLLBACK on the check, then exits
    job_rows = Counter(f"batch-{i}" for i in range(PER_BATCH))
    wait_until("every row of the job committed",
               lambda: len(read_topic(sink_cluster.namesrv_addr, batch_topic)) >= PER_BATCH, timeout=120)
    with BlockingClient(sink_cluster.namesrv_addr) as client:
        job = DecisionLog(client, "RMQ_SINK_DECISIONS", batch_sink).refresh()
    (decision,) = job.decided.values()
    assert decision.rows == PER_BATCH and not job.ended
    wait_until("the job's resolver gone", lambda: resolver_gone(resolver_dir, batch_sink), timeout=60)
    lines = (resolver_dir / f"{batch_sink}.log").read_text().splitlines()
    lost = [i for i, line in enumerate(lines) if line.endswith(": ROLLBACK") and " check " in line
            and not any(f" run {run}:" in line for run in decision.winners)]
    assert len(lost) >= 3 and lost[-1] < next(i for i, line in enumerate(lines) if "resolver settled" in line)
    assert not [x for x in resolver_answers(resolver_dir, batch_sink) if x[2] == "ROLLBACK" and x[1] in
                decision.winners]
    assert Counter(m.body.decode() for m in read_topic(sink_cluster.namesrv_addr, batch_topic)) == job_rows
