"""The connector's message trace (``enableMsgTrace``) on our broker with ``traceTopicEnable=true`` (the trace
cluster the trace interop test shares): an exactly-once batch write and a batch read, both traced; for one row's
message id, our ``mqadmin queryMsgTraceById`` prints the sink's Pub and the source's Sub, Apache's prints the same,
and the trace topic holds the Pub (a half message), the driver's EndTransaction (COMMIT) and the SubBefore. A write
whose driver dies right after its decision leaves its halves open: the resolver the sink starts commits them on the
broker's check and traces each answer, an EndTransaction with fromTransactionCheck true, to the write's
customizedTraceTopic."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from broker.client import BlockingClient, Message
from broker.client.trace import MessageType, TraceType, decode_trace_data
from broker.common.errors import MQClientError
from broker.common.message import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
)
from broker.tools.admin import MQAdminExt
from connector.decisions import (
    PROPERTY_SINK_BATCH,
    PROPERTY_SINK_ID,
    PROPERTY_SINK_RUN,
    DecisionLog,
    decision_records,
)
from connector.options import SinkOptions
from connector.resolver import ensure_resolver
from tests.connector.conftest import SINK_CHECK_IMMUNITY_S, create_topic, read_topic
from tests.helpers import wait_until
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


async def _records_in(namesrv: str, trace_topic: str, msg_id: str) -> list:
    async with MQAdminExt(namesrv) as admin:
        result = await admin.query_message(trace_topic, msg_id, 64, 0, 2**63 - 1)
    return [c for m in result.messages for c in decode_trace_data(m.body.decode()) if c.beans[0].msg_id == msg_id]


def test_the_resolver_traces_its_answers_to_checks(sink_cluster, resolver_dir: Path, topic_name: str) -> None:
    """A writer that dies between its decision and its END_TRANSACTION (driven here without Spark: a half message
    of the sink's group with the sink's properties, left open, then the decision that makes its run the winner)."""
    ns = sink_cluster.namesrv_addr
    trace_topic = f"{topic_name[-40:]}_trace".replace("-", "_")
    mq = create_topic(ns, topic_name, 1)[0]
    create_topic(ns, trace_topic, 1)
    sink_id = "traced_" + topic_name[-40:].replace("-", "_")
    opts = SinkOptions.parse({"namesrvAddr": ns, "topic": topic_name, "sinkId": sink_id, "resolverDir": str(
        resolver_dir), "checkImmunitySeconds": str(SINK_CHECK_IMMUNITY_S), "enableMsgTrace": "true",
        "customizedTraceTopic": trace_topic}, streaming=False)
    batch, run = "job-traced", "run-0"
    with BlockingClient(ns, producer_group=opts.producer_group) as client:
        half = Message(topic_name, b"left open", keys="traced-key")
        half.properties.update({PROPERTY_TRANSACTION_PREPARED: "true", PROPERTY_PRODUCER_GROUP: opts.producer_group,
                                PROPERTY_SINK_ID: sink_id, PROPERTY_SINK_BATCH: batch, PROPERTY_SINK_RUN: run,
                                PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: str(SINK_CHECK_IMMUNITY_S)})
        msg_id = client.send(half, mq).msg_id  # the writer dies here: no END_TRANSACTION
        decisions = DecisionLog(client, opts.decision_topic, sink_id)
        decisions.ensure_topic({mq.broker_name: client.broker_addr(mq)})
        decisions.append(decision_records(batch, "commit-0", {run: 1}))
    ensure_resolver(opts, [topic_name])  # as the sink's commit starts it: with --trace-topic

    wait_until("the half committed by the resolver", lambda: [m.msg_id for m in read_topic(ns, topic_name)] == [msg_id],
               timeout=60)

    def ends() -> list:
        records = asyncio.run(_records_in(ns, trace_topic, msg_id))
        return [c for c in records if c.trace_type is TraceType.EndTransaction]

    wait_until("the resolver's answer traced", ends, timeout=60, ignoring=(MQClientError,))  # NO_MESSAGE: not yet
    (end,) = ends()
    bean = end.beans[0]
    assert (end.group_name, bean.topic, bean.keys, bean.transaction_state, bean.from_transaction_check) == (
        f"RMQ_SINK_{sink_id}", topic_name, "traced-key", "COMMIT_MESSAGE", True)
