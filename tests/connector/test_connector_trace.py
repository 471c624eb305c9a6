"""The connector's message trace (``enableMsgTrace``) on our broker with ``traceTopicEnable=true`` (the trace
cluster the trace interop test shares): an exactly-once batch write and a batch read, both traced; for one row's
message id, our ``mqadmin queryMsgTraceById`` prints the sink's Pub and the source's Sub, Apache's prints the same,
and the trace topic holds the Pub (a half message), the driver's EndTransaction (COMMIT) and the SubBefore."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from broker.client.trace import MessageType, TraceType
from tests.connector.conftest import create_topic
from tests.interop.test_java_trace import _trace_records, official_table, rows, trace_table
from tests.interop.test_official_mqadmin import build_mqadmin

pytestmark = [pytest.mark.java, pytest.mark.slow]

TOPIC = "SparkTraceTopic"
GROUP = "SparkTraceCG"


def test_traced_exactly_once_write_and_read(spark, clusters, resolver_dir: Path, tmp_path: Path) -> None:
    ns = clusters.shared(traceTopicEnable=True).namesrv_addr
    create_topic(ns, TOPIC, 2)
    sink_id = f"trace-{uuid.uuid4().hex[:12]}"
    data = [(f"row-{i}", f"tk-{i}", "TagS") for i in range(8)]
    (spark.createDataFrame(data, "body string, keys string, tags string").repartition(2)
     .write.format("rmq").mode("append").option("namesrvAddr", ns).option("topic", TOPIC).option("sinkId", sink_id)
     .option("resolverDir", str(resolver_dir)).option("enableMsgTrace", "true").save())

    read = (spark.read.format("rmq").option("namesrvAddr", ns).option("topic", TOPIC)
            .option("consumerGroup", GROUP).option("enableMsgTrace", "true").load())
    ids = {r["keys"]: r["msgId"] for r in read.select("keys", "msgId").collect()}
    assert sorted(ids) == sorted(k for _, k, _ in data)

    msg_id = ids["tk-3"]
    ours = trace_table(ns, msg_id, lambda out: "Pub " in out and "Sub " in out)
    assert [(r[0], r[1], r[-1]) for r in rows(ours)] == [("Pub", f"RMQ_SINK_{sink_id}", "success"),
                                                         ("Sub", GROUP, "success")]
    assert official_table(build_mqadmin(tmp_path / "mqadmin"), ns, msg_id) == ours

    records = {c.trace_type: c for c in asyncio.run(_trace_records(ns, msg_id))}
    assert set(records) == {TraceType.Pub, TraceType.EndTransaction, TraceType.SubBefore, TraceType.SubAfter}
    pub, end = records[TraceType.Pub].beans[0], records[TraceType.EndTransaction].beans[0]
    assert (pub.topic, pub.tags, pub.keys, pub.msg_type) == (TOPIC, "TagS", "tk-3", MessageType.Trans_Msg_Half)
    assert (records[TraceType.EndTransaction].group_name, end.transaction_state, end.transaction_id, end.keys,
            end.from_transaction_check) == (f"RMQ_SINK_{sink_id}", "COMMIT_MESSAGE", msg_id, "tk-3", False)
    assert records[TraceType.SubBefore].group_name == GROUP
