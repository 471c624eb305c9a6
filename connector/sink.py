"""The exactly-once sink: ``df.writeStream.format("rmq")`` and ``df.write.format("rmq")``.

Protocol (one micro-batch, or one batch job, is one unit of all-or-nothing):

1. **Tasks** (executors) send every row as a half message of the sink's producer group ``RMQ_SINK_<sinkId>``
   (TRAN_MSG=true, PGROUP; invisible to consumers), pipelined per broker connection: in prepared batches to a broker
   that says it takes them (rmq's extension), else one request per row, up to ``maxInFlight`` (RocketMQ's own broker
   refuses transactional batches; connector/sink_send.py). Each half carries RMQ_SINK_ID, RMQ_SINK_BATCH and
   RMQ_SINK_RUN: the sink, the batch (streaming: Spark's ``streaming.sql.batchId`` local property; batch jobs: a
   fresh "job-<uuid>") and a task-run id, fresh for every ``write()`` call, so a retried or speculative attempt has
   its own. Halves carry CHECK_IMMUNITY_TIME_IN_SECONDS (``checkImmunitySeconds``, default 120): the broker does not
   check them earlier, and refuses the producer's own END_TRANSACTION later. A task returns a TaskCommit: its run
   id(s), row count, and the handles END_TRANSACTION needs (broker, commit log offset, half queue offset, UNIQ_KEY;
   kept per stored request as END_TRANSACTION_BATCH's per-handle bytes, which the driver joins into its requests).
   A task whose master is not routed, or whose connection to it breaks, waits for it (``masterWaitTimeoutMs``);
   halves that were in flight then are sent again under a new run id, and the first copies are listed as dropped
   (run, UNIQ_KEY).
2. **commit(messages, batchId)** on the driver, in a short-lived Python worker (PySpark re-creates the writer for
   each call, so nothing lives in the driver's memory between calls):

   a. make sure the **resolver** of this sink runs on this host (connector/resolver.py: a detached process, one per
      sinkId and host, holding a lock file; it heartbeats as a producer of the sink's group, so the broker sends it
      the CHECK_TRANSACTION_STATE of the sink's half messages, and answers them from the decision log; a batch job
      with the topic option starts it when Spark plans the job, so its start-up overlaps the tasks);
   b. read the **decision log** (connector/decisions.py, a topic in the same cluster). If the batch is already
      decided (Spark re-runs a batch after a driver restart), the decided attempt wins: the new attempt's halves are
      rolled back at once, the decided ones are left to the resolver (see 3), and commit returns;
   c. else record the decision durably first (the winning run ids, then a "decided" record; acknowledged sends);
   d. then END_TRANSACTION COMMIT (two-way, pipelined, in order per queue when rows had a shardingKey; up to 1024
      handles per END_TRANSACTION_BATCH to a broker that takes batches) for the handles of tasks whose first half is
      younger than half the immunity time. Older ones are left to the check;
   e. a batch job whose every half the driver ended, all sent by first task attempts, is recorded "ended", so its
      resolver exits at once; otherwise the driver makes sure a resolver is ready for what it left (when the
      resolver exits: connector/settle.py).
3. **The check finishes what the driver did not**: halves of a lost attempt (a failed or speculative task, a
   re-run) and dropped first copies are answered ROLLBACK once their batch is decided; the decided winners are
   answered COMMIT. A driver
   that dies after 2c loses nothing: the resolver (detached, it outlives the driver) commits the winners when the
   broker asks, however long the driver stays down, and a restarted query rolls its re-run back (2b).
4. **abort(messages[, batchId])** rolls back the handles it gets. A batch job also records "aborted" (its id is never
   reused), so the resolver rolls back the halves of failed tasks too; a streaming abort records nothing: the
   batch is re-run after the restart and decided then, and its old halves lose.

Why the driver never re-sends COMMIT for a decided batch it did not commit itself: Apache's EndTransactionProcessor
does not look for an earlier end of the same half, so a second COMMIT stores the message twice. Exactly one COMMIT
reaches each winner: the driver's (only within half the immunity time, before the broker may check it) or the
resolver's (only when the broker asks, which it does only after the immunity time and only for halves without an
op record). See README "Exactly-once sink" for the guarantee and its limits.

Rows: ``body`` (binary or string, required), ``topic`` (used when the ``topic`` option is not set: the option
overrides the column, as in Spark's Kafka sink), ``tags``, ``keys`` (space-separated), ``properties``
(map<string,string>; the system properties a send sets itself are dropped), ``shardingKey`` (same key, same queue:
SelectMessageQueueByHash over the topic's write queues; in order), ``delayLevel`` (RocketMQ cannot delay a
transactional message: a row with a level > 0 fails the task with an error saying so; null or 0 is accepted). The
columns only a read has (brokerName, queueOffset, msgId, storeTimestamp...) are ignored, so a DataFrame read with
``format("rmq")`` can be written as it is (connector/columns.py).

Modules: ``connector.sink_task`` is step 1 (``HalfSender``, ``write_task``, the ``TaskCommit`` a task returns),
``connector.sink_send`` how rows become requests (also the at-least-once sink's plain batches, which skip steps 2
to 4), ``connector.sink_commit`` steps 2 to 4 (``commit_batch``, ``abort_batch``, ``end_transactions``); this one holds
the Spark writers that call them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from broker.common.errors import ConnectorError
from connector.access import check_publish
from connector.options import SinkOptions
from connector.sink_commit import abort_batch, commit_batch
from connector.sink_task import PlainCommit, TaskCommit, write_task

# -- the Spark writers -----------------------------------------------------------------------------------------------


class RmqStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("rmq")``: one decision per micro-batch under the query's sinkId."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def write(self, iterator: Iterator[object]) -> TaskCommit | PlainCommit:
        from pyspark import TaskContext

        context = TaskContext.get()
        batch = context.getLocalProperty("streaming.sql.batchId") if context is not None else None
        if batch is None:
            raise ConnectorError("rmq sink: the streaming batch id (local property streaming.sql.batchId) is not "
                                 "set in this task")
        return write_task(self.opts, iterator, str(batch))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 (Spark's name)
        commit_batch(self.opts, messages, str(batchId))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        abort_batch(self.opts, messages, str(batchId), record=False)


class RmqBatchWriter(DataSourceArrowWriter):
    """``write.format("rmq")``: the whole job is one batch with an id of its own (made here: Spark pickles this
    object to the tasks and to the commit), under the sinkId option or a fresh sink id per job; decided once. On
    abort the job is recorded aborted, so no half of it is ever committed."""

    def __init__(self, opts: SinkOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self.batch = f"job-{uuid.uuid4().hex}"
        if opts.topic is not None:  # before any task sends and before the resolver starts: a refusal ends it here
            check_publish(opts, opts.topic)
        if opts.topic is not None and opts.exactly_once:  # the option overrides a topic column: every row goes there
            # the sink id is fresh per job by default: its resolver starts now, while the tasks run (commit waits)
            from connector.resolver import start_resolver

            start_resolver(opts, [opts.topic])

    def write(self, iterator: Iterator[object]) -> TaskCommit | PlainCommit:
        return write_task(self.opts, iterator, self.batch)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        commit_batch(self.opts, messages, self.batch)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        abort_batch(self.opts, messages, self.batch, record=True)
