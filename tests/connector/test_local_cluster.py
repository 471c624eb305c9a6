"""Source and sink with executors in separate processes (``local-cluster[2,1,1024]``): a driver script streams one
topic into another through format("rmq") and reads the result back; every message arrives once, with its keys, tags
and user properties. Nothing may depend on objects living in the driver's memory (offsets, handles, decisions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.connector.conftest import create_topic, produce, read_topic
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PER_QUEUE = 30
DRIVER_TIMEOUT_S = 420


def test_stream_topic_to_topic_on_a_local_cluster(sink_cluster: Cluster, resolver_dir: Path, tmp_path: Path) -> None:
    namesrv = sink_cluster.namesrv_addr
    queues = create_topic(namesrv, "LcSource", 4)
    create_topic(namesrv, "LcTarget", 4)
    produce(namesrv, queues, PER_QUEUE, tags=lambda mq, i: f"tag{i % 3}",
            properties=lambda mq, i: {"origin": f"{mq.queue_id}"})
    output = tmp_path / "read-back.jsonl"
    config = {"namesrv": namesrv, "source": "LcSource", "target": "LcTarget", "output": str(output),
              "checkpoint": str(tmp_path / "checkpoint"),
              "sink": {"sinkId": "local-cluster", "resolverDir": str(resolver_dir)}}
    log = tmp_path / "driver.log"
    with log.open("wb") as out:
        done = subprocess.run([sys.executable, str(REPO / "tests" / "connector" / "cluster_driver.py"),
                               json.dumps(config)], stdout=out, stderr=subprocess.STDOUT, cwd=REPO,
                              timeout=DRIVER_TIMEOUT_S, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, log.read_text(errors="replace")[-4000:]

    header, *rows = [json.loads(line) for line in output.read_text().splitlines()]
    expected = Counter(f"LcSource/{mq.broker_name}/{mq.queue_id}/{i}" for mq in queues for i in range(PER_QUEUE))
    assert header["batches"] >= 3, "maxOffsetsPerTrigger=40 over 120 messages needs several micro-batches"
    assert Counter(row["body"] for row in rows) == expected  # the executors' source read of the target
    delivered = read_topic(namesrv, "LcTarget")  # and our pull client, past Spark altogether
    assert Counter(m.body.decode() for m in delivered) == expected
    for msg in delivered:
        index = int(msg.body.decode().rsplit("/", 1)[1])
        origin = msg.body.decode().split("/")[2]
        assert (msg.keys, msg.tags, msg.properties["origin"]) == (f"k{index}", f"tag{index % 3}", origin)
