"""failOnDataLoss: a broker whose retention deletes CommitLog files under a reading query.

The broker runs with 64 KiB CommitLog files, ``fileReservedTime=0`` and every hour in ``deleteWhen``, checked every
200 ms: each full file goes at once, and the ConsumeQueue's min offset moves past the messages it held (as
``tests/unit/store`` tests retention on the store itself). A query asking for offsets below the min offset then
either fails naming topic, broker, queue and offsets, or skips ahead to the min offset and reads the rest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from pyspark.errors import StreamingQueryException

from broker.client import BlockingClient
from broker.client.message import MessageQueue
from broker.common.errors import DataLossError
from connector.offsets import to_json
from connector.options import SourceOptions
from connector.source import QueueRange, read_partition
from tests.connector.conftest import create_topic, produce
from tests.helpers import wait_until
from tests.integration.cluster import Cluster, start_cluster

pytestmark = pytest.mark.slow

PER_QUEUE = 240  # about 4 files of 64 KiB per queue with 1 KB bodies
EVERY_HOUR = ";".join(f"{h:02d}" for h in range(24))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with start_cluster(tmp_path_factory.mktemp("retention"), brokers=1, mappedFileSizeCommitLog=64 * 1024,
                       fileReservedTime=0, deleteWhen=EVERY_HOUR, cleanResourceInterval=200) as c:
        yield c


@pytest.fixture(scope="module")
def trimmed(cluster: Cluster) -> tuple[str, MessageQueue, int, int]:
    """A topic with one queue whose first messages retention has removed: (topic, queue, min offset, max offset)."""
    topic = "RetentionTopic"
    (mq,) = create_topic(cluster.namesrv_addr, topic, 1)
    produce(cluster.namesrv_addr, [mq], PER_QUEUE, body=lambda q, i: f"{i:06d}".encode() + b"x" * 1018, batch=16)
    with BlockingClient(cluster.namesrv_addr) as client:
        wait_until("retention moved the min offset", lambda: client.get_min_offset(mq) > 0, 30)
        low, high = client.get_min_offset(mq), client.get_max_offset(mq)
    assert 0 < low < high == PER_QUEUE
    return topic, mq, low, high


def from_zero(topic: str, mq: MessageQueue) -> str:
    return json.dumps(to_json({mq: 0}))


def test_stream_fails_on_data_loss_naming_the_queue(spark, cluster: Cluster, trimmed, tmp_path) -> None:
    topic, mq, low, _ = trimmed
    query = (spark.readStream.format("rmq")
             .options(namesrvAddr=cluster.namesrv_addr, topic=topic, startingOffsets=from_zero(topic, mq)).load()
             .writeStream.format("noop").trigger(availableNow=True)
             .option("checkpointLocation", str(tmp_path / "cp")).start())
    with pytest.raises(StreamingQueryException) as err:
        query.awaitTermination(120)
    assert re.search(rf"data loss in topic {topic} broker broker-a queue 0: offsets 0 to \d+ are gone "
                     r"\(the queue's min offset is \d+\)", str(err.value)), str(err.value)


def test_stream_skips_lost_data_without_fail_on_data_loss(spark, cluster: Cluster, trimmed, tmp_path) -> None:
    topic, mq, _, high = trimmed
    rows: list = []
    query = (spark.readStream.format("rmq")
             .options(namesrvAddr=cluster.namesrv_addr, topic=topic, startingOffsets=from_zero(topic, mq),
                      failOnDataLoss="false").load()
             .writeStream.foreachBatch(lambda df, _: rows.extend(df.select("queueOffset", "body").collect()))
             .trigger(availableNow=True).option("checkpointLocation", str(tmp_path / "cp")).start())
    assert query.awaitTermination(120)
    assert query.exception() is None
    with BlockingClient(cluster.namesrv_addr) as client:
        low_now = client.get_min_offset(mq)  # retention may have gone on meanwhile; what is left must be read
    offsets = sorted(r.queueOffset for r in rows)
    assert offsets == list(range(offsets[0], high)) and 0 < offsets[0] <= low_now
    assert all(bytes(r.body).startswith(f"{r.queueOffset:06d}".encode()) for r in rows)


def test_executor_detects_loss_found_after_planning(cluster: Cluster, trimmed) -> None:
    """The driver checked the min offset when planning; retention can still run before the pull: read() checks
    each pull's min offset too."""
    topic, mq, low, high = trimmed
    opts = SourceOptions.parse({"namesrvAddr": cluster.namesrv_addr, "topic": topic}, streaming=False)
    with BlockingClient(cluster.namesrv_addr) as client:
        addr = client.broker_addr(mq)

    def part(fail: bool) -> QueueRange:
        return QueueRange(topic, mq.broker_name, mq.queue_id, 0, high, addr, opts.namesrv_addr, "G", None, "TAG",
                          64, 5000, fail)

    with pytest.raises(DataLossError, match=f"data loss in topic {topic} broker broker-a queue 0: offsets 0 to"):
        list(read_partition(part(True)))
    offsets = [o for b in read_partition(part(False)) for o in b.column("queueOffset").to_pylist()]
    assert offsets == list(range(offsets[0], high)) and offsets[0] >= low
