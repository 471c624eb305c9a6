"""Message trace of the Spark source and sink (option ``enableMsgTrace``), as Apache's clients trace: imported only
when the option is on, so an untraced query loads none of it.

- **Sink tasks** (``SinkTracer``): a Pub record per stored row, as Java's producer writes one per message sent:
  group = the sink's producer group ``RMQ_SINK_<sinkId>``, msgId = the row's UNIQ_KEY, offsetMsgId, tags, keys,
  storeHost = the master's address, msgType ``Trans_Msg_Half`` (exactly-once: the row is a half message) or
  ``Normal_Msg`` (at-least-once), costTime = the request's time to its answer. Rows that went in one batch request
  are traced one by one, as if each had been sent alone, so every message's trace is found by its own id.
- **Sink driver** (``trace_ends``): an EndTransaction record per half message it commits or rolls back, as
  EndTransactionTraceHookImpl writes for each END_TRANSACTION of a transaction producer (msgId and transactionId
  the UNIQ_KEY, the state's name, fromTransactionCheck false). Halves the broker's check ends are traced by the
  resolver that answers the check (connector/resolver_service.py: its producers run with enable_msg_trace, and
  the client's check answer writes the EndTransaction with fromTransactionCheck true).
- **Source tasks** (``traced_batches``): SubBefore when a batch is handed to Spark and SubAfter when Spark asks
  for the next (success, SUCCESS) or stops reading it (failed, EXCEPTION), one requestId per at most
  CONSUME_BATCH messages (a push consumer's pullBatchSize, which keeps each trace message's KEYS short); messages
  stored with TRACE_ON=false are left out. The group is the source's ``consumerGroup``, else the group its pulls
  name (DEFAULT_CONSUMER).

Records are sent by a ``BlockingTraceDispatcher`` per task (and per driver commit) with the query's accessKey and
secretKey; a task or commit ends once its records are sent. Pipelined sends outrun one trace sender, so the
connector waits for room in the dispatcher's queue rather than dropping records as a Java client would.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from broker.client.blocking_trace import BlockingTraceDispatcher
from broker.client.message import Message
from broker.client.trace import DEFAULT_REGION_ID, ConsumeReturnType, MessageType, TraceBean, TraceContext, TraceType
from broker.client.trace_batch import TraceDispatcherType
from broker.client.transaction_protocol import LocalTransactionState
from broker.common.message import PROPERTY_MSG_REGION, PROPERTY_TRACE_SWITCH
from broker.remoting.codes import ResponseCode
from broker.remoting.command import RemotingCommand
from connector.options import SinkOptions
from connector.sink_send import Request
from connector.sink_task import TaskCommit
from connector.source import QueueRange

CONSUME_BATCH = 32  # DefaultMQPushConsumer.pullBatchSize: messages per SubBefore/SubAfter pair at most


class SinkTracer:
    """A sink task's Pub records: ``note_rows`` learns each Arrow batch's rows before they are sent, ``stored``
    traces the rows of each answered request, ``close`` sends what is left."""

    def __init__(self, opts: SinkOptions, *, half: bool) -> None:
        self.group = opts.producer_group
        self.msg_type = MessageType.Trans_Msg_Half if half else MessageType.Normal_Msg
        self.dispatcher = BlockingTraceDispatcher(self.group, TraceDispatcherType.PRODUCE, opts.trace_topic,
                                                  opts.namesrv_addr, credentials=opts.credentials,
                                                  wait_for_room=True).start()
        self._rows: dict[int, tuple[str, str | None, str | None, int]] = {}  # row -> (topic, tags, keys, length)
        self.stored_rows: dict[str, tuple[str | None, str | None]] = {}  # UNIQ_KEY -> (tags, keys): for the driver

    def note_rows(self, first: int, topics: Sequence[str | None], tags: Sequence[str | None],
                  keys: Sequence[str | None], bodies: Sequence[bytes | str | None]) -> None:
        for i, body in enumerate(bodies):
            length = len(body.encode() if isinstance(body, str) else body) if body is not None else 0
            self._rows[first + i] = (topics[i] or "", tags[i] or None, keys[i] or None, length)

    def stored(self, addr: str, request: Request, offset_msg_ids: list[str], response: RemotingCommand) -> None:
        """The Pub records of a request's rows: none when the broker has trace off (TRACE_ON=false)."""
        ext = response.ext_fields
        traced = ext.get(PROPERTY_TRACE_SWITCH) != "false"
        region = ext.get(PROPERTY_MSG_REGION) or DEFAULT_REGION_ID
        success = response.code == ResponseCode.SUCCESS
        for seq, uniq, offset_msg_id in zip(request.seqs, request.uniqs, offset_msg_ids, strict=True):
            topic, tags, keys, length = self._rows.pop(seq)
            if not traced or topic.startswith(self.dispatcher.trace_topic):
                continue
            self.stored_rows[uniq] = (tags, keys)
            bean = TraceBean(topic=topic, tags=tags, keys=keys, store_host=addr, body_length=length,
                             msg_type=self.msg_type)
            ctx = TraceContext(TraceType.Pub, time_stamp=request.born, group_name=self.group, beans=[bean])
            self.dispatcher.sent(ctx, uniq, offset_msg_id, region, success=success)

    def close(self) -> None:
        self.dispatcher.shutdown()


def trace_ends(opts: SinkOptions, commits: Sequence[TaskCommit], state: LocalTransactionState) -> None:
    """The EndTransaction records of the halves of ``commits`` the driver ended with ``state``; returns once they
    are sent."""
    dispatcher = BlockingTraceDispatcher(opts.producer_group, TraceDispatcherType.PRODUCE, opts.trace_topic,
                                         opts.namesrv_addr, credentials=opts.credentials, wait_for_room=True).start()
    try:
        for commit in commits:
            rows = commit.traced or {}
            for handles in commit.brokers:
                for topic_index, _, _, _, uniq in handles.halves:
                    tags, keys = rows.get(uniq, (None, None))
                    msg = Message(commit.topics[topic_index], b"", tags=tags, keys=keys)
                    dispatcher.end_transaction(opts.producer_group, msg, uniq, handles.address, state.value, uniq,
                                               from_check=False)
    finally:
        dispatcher.shutdown()


def traced_batches(part: QueueRange, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``batches`` handed on unchanged, each between its SubBefore and SubAfter records (module docstring)."""
    dispatcher = BlockingTraceDispatcher(part.group, TraceDispatcherType.CONSUME, part.trace_topic,
                                         part.namesrv_addr, credentials=part.credentials, wait_for_room=True).start()
    befores: list[TraceContext] = []
    try:
        for batch in batches:
            befores = [ctx for beans, region in _consumed(batch)
                       if (ctx := dispatcher.consume_beans_before(part.group, beans, region)) is not None]
            yield batch
            for before in befores:
                dispatcher.consume_after(before, len(before.beans), True, ConsumeReturnType.SUCCESS)
            befores = []
    finally:
        for before in befores:  # Spark stopped reading in the middle of this batch
            dispatcher.consume_after(before, len(before.beans), False, ConsumeReturnType.EXCEPTION)
        dispatcher.shutdown()


def _consumed(batch: pa.RecordBatch) -> Iterator[tuple[list[TraceBean], str | None]]:
    """The batch's messages stored with trace on, as beans, CONSUME_BATCH at a time, each group with the MSG_REGION
    of its last message."""
    properties = batch.column("properties")
    switch = pc.map_lookup(properties, PROPERTY_TRACE_SWITCH, "first").to_pylist()
    regions = pc.map_lookup(properties, PROPERTY_MSG_REGION, "first").to_pylist()
    columns = zip(batch.column("topic").to_pylist(), batch.column("msgId").to_pylist(),
                  batch.column("tags").to_pylist(), batch.column("keys").to_pylist(),
                  batch.column("reconsumeTimes").to_pylist(), switch, regions, strict=True)
    beans: list[TraceBean] = []
    region = None
    for topic, msg_id, tags, keys, retry_times, trace_on, msg_region in columns:
        if trace_on == "false":
            continue
        beans.append(TraceBean(topic=topic, msg_id=msg_id, tags=tags, keys=keys, retry_times=retry_times))
        region = msg_region
        if len(beans) == CONSUME_BATCH:
            yield beans, region
            beans = []
    if beans:
        yield beans, region
