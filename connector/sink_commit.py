"""The sink's driver side: decide a batch, then end its half messages (steps 2 to 4 of the protocol in
connector/sink.py).

``commit_batch`` makes sure the resolver runs, records the decision in the decision log, then sends
END_TRANSACTION COMMIT for the young halves (``end_transactions``); ``abort_batch`` rolls back what it is handed
(and records a batch job as aborted). Both run in a short-lived Python worker on the driver: nothing is kept
between calls.
"""

from __future__ import annotations

import logging
import os
import signal
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from broker.client.blocking import BlockingClient, Pipeline, RequestTemplate
from broker.client.route import MASTER_ID
from broker.client.transaction_protocol import (
    LocalTransactionState,
    end_transaction_batch_body_request,
    end_transaction_template,
    parse_end_transaction_batch_response,
)
from broker.common.errors import ConnectorError, MQClientError, RemotingError
from broker.remoting.codes import ResponseCode
from broker.remoting.command import RemotingCommand
from broker.remoting.transaction_batch import END_TRANSACTION_BATCH_MAX, join_end_batch_body
from connector.decisions import DecisionLog, decision_records
from connector.options import SinkOptions
from connector.sink_send import BATCHES_IN_FLIGHT, supports_batch
from connector.sink_task import BrokerHandles, PlainCommit, TaskCommit

log = logging.getLogger(__name__)


@dataclass(slots=True)
class EndCounts:
    ended: int = 0
    late: int = 0  # past the immunity time: left to the check
    failed: int = 0


def end_transactions(client: BlockingClient, opts: SinkOptions, commits: Sequence[TaskCommit],
                     state: LocalTransactionState) -> EndCounts:
    """END_TRANSACTION ``state`` for every handle of ``commits``, two-way and pipelined per broker: to a broker that
    takes them (asked once per call and master), END_TRANSACTION_BATCH requests of up to END_TRANSACTION_BATCH_MAX
    handles per topic; to others one END_TRANSACTION per handle (framed from a template per topic and broker,
    written a chunk at a time). In order per queue for tasks that used sharding keys (a queue's handles in row
    order, one request of the queue in flight at a time). Failures are counted, not raised: what the driver does
    not end, the check ends (the decision is recorded already). With enableMsgTrace, one EndTransaction record per
    handle sent, as Java's transaction producer writes for each END_TRANSACTION (connector/tracing.py)."""
    ends = _Ends(client, opts, state)
    for commit in commits:
        for handles in commit.brokers:
            ends.add(commit, handles)
    ends.finish()
    if opts.trace_topic is not None:
        from connector.tracing import trace_ends

        trace_ends(opts, commits, state)
    return ends.counts


class _Ends:
    """The END_TRANSACTIONs of one ``end_transactions`` call, per broker address."""

    def __init__(self, client: BlockingClient, opts: SinkOptions, state: LocalTransactionState) -> None:
        self.client, self.opts, self.state = client, opts, state
        self.counts = EndCounts()
        self.chunk = max(1, opts.max_in_flight // 4)
        self.pipes: dict[str, Pipeline] = {}
        self.batched: dict[str, bool] = {}
        self.names: dict[str, str] = {}  # brokerName by address
        self.outs: dict[str, list[tuple[int, bytes, int]]] = {}
        self.templates: dict[tuple[str, str], RequestTemplate] = {}
        # batched brokers: the runs of handles not sent yet, by (address, topic, queue id or None when unordered)
        self.groups: dict[tuple[str, str, int | None], _Group] = {}

    def add(self, commit: TaskCommit, handles: BrokerHandles) -> None:
        address = handles.address
        if address not in self.pipes:
            self.batched[address] = supports_batch(self.client, address, self.opts)
            window = min(self.opts.max_in_flight, BATCHES_IN_FLIGHT) if self.batched[address] else \
                self.opts.max_in_flight
            self.pipes[address] = Pipeline(self.client.client(address), window=window,
                                           timeout_ms=self.opts.send_timeout_ms)
            self.outs[address] = []
            self.names[address] = handles.broker_name
        if self.batched[address]:
            self._add_batched(commit, handles)
        else:
            self._add_rows(commit, handles)

    def _add_batched(self, commit: TaskCommit, handles: BrokerHandles) -> None:
        """The task's runs of handles joined into requests of at most END_TRANSACTION_BATCH_MAX (a run, at most a
        prepared batch, is never split: a request closes before the run that would overflow it)."""
        for run in handles.runs:
            key = (handles.address, commit.topics[run.topic_index], run.queue_id if commit.ordered else None)
            group = self.groups.get(key)
            if group is not None and group.count + run.count > END_TRANSACTION_BATCH_MAX:
                self._send_group(key)
                group = None
            if group is None:
                group = self.groups[key] = _Group()
            group.count += run.count
            group.entries.append(run.entries)
            if group.count >= END_TRANSACTION_BATCH_MAX:
                self._send_group(key)

    def _send_group(self, key: tuple[str, str, int | None]) -> None:
        address, topic, queue_id = key
        group = self.groups.pop(key)
        request = end_transaction_batch_body_request(self.opts.producer_group, topic, self.names[address],
                                                     self.state, join_end_batch_body(group.count, group.entries))
        order_key = None if queue_id is None else (topic, queue_id)
        try:
            self._tally(self.pipes[address].submit(request, group, order_key))
        except RemotingError as err:
            self._lost(address, group.count, err)

    def _add_rows(self, commit: TaskCommit, handles: BrokerHandles) -> None:
        address = handles.address
        pipe, out = self.pipes[address], self.outs[address]
        by_topic = []
        for topic in commit.topics:
            template = self.templates.get((topic, handles.broker_name))
            if template is None:
                template = self.templates[topic, handles.broker_name] = end_transaction_template(
                    self.opts.producer_group, topic, handles.broker_name, self.state, self.opts.credentials)
            by_topic.append(template)
        for topic_index, queue_id, commit_log_offset, queue_offset, uniq in handles.halves:
            opaque, frame = by_topic[topic_index].frame((str(queue_offset), str(commit_log_offset), uniq, uniq))
            if not commit.ordered:
                out.append((opaque, frame, 1))
                if len(out) >= self.chunk:
                    self._send_out(address)
                continue
            try:
                self._tally(pipe.submit_frame(opaque, frame, 1, (commit.topics[topic_index], queue_id)))
            except RemotingError as err:
                self._lost(address, 1, err)

    def _send_out(self, address: str) -> None:
        out = self.outs[address]
        try:
            self._tally(self.pipes[address].submit_frames(out))
        except RemotingError as err:
            self._lost(address, len(out), err)
        out.clear()

    def finish(self) -> None:
        for key in list(self.groups):
            self._send_group(key)
        for address, pipe in self.pipes.items():
            if self.outs[address]:
                self._send_out(address)
            try:
                self._tally(pipe.drain())
            except RemotingError as err:
                self.counts.failed += pipe.in_flight
                log.warning("rmq sink %s: END_TRANSACTION responses from %s lost: %s", self.opts.sink_id, address,
                            err)

    def _tally(self, done: list[tuple[object, RemotingCommand]]) -> None:
        """A request's context is 1 (an END_TRANSACTION) or the ``_Group`` of an END_TRANSACTION_BATCH, which is
        ended or refused whole (handles a check ended first, after the broker validated the batch, count as ended:
        they are)."""
        counts = self.counts
        for context, response in done:
            handles = context if isinstance(context, int) else context.count
            if response.code == ResponseCode.SUCCESS:
                if not isinstance(context, int):
                    result = parse_end_transaction_batch_response(response)
                    if result.ended + result.already_ended != handles:
                        log.warning("rmq sink %s: END_TRANSACTION_BATCH of %d half messages answered ended=%d, "
                                    "alreadyEnded=%d", self.opts.sink_id, handles, result.ended,
                                    result.already_ended)
                counts.ended += handles
            elif response.code == ResponseCode.ILLEGAL_OPERATION:
                counts.late += handles
            else:
                counts.failed += handles
                log.warning("rmq sink %s: END_TRANSACTION %s of %d half message(s) answered %s %s",
                            self.opts.sink_id, self.state.value, handles, response.code, response.remark)

    def _lost(self, address: str, handles: int, err: RemotingError) -> None:
        self.counts.failed += handles
        log.warning("rmq sink %s: END_TRANSACTION to %s failed: %s", self.opts.sink_id, address, err)


@dataclass(slots=True)
class _Group:
    """An END_TRANSACTION_BATCH being gathered: its handle count and their bytes, a task's run at a time."""

    count: int = 0
    entries: list[bytes] = field(default_factory=list)


def _task_commits(opts: SinkOptions, messages: Sequence[object | None], batch: str) -> list[TaskCommit]:
    commits = [m for m in messages if m is not None]
    for m in commits:
        if not isinstance(m, TaskCommit) or m.sink_id != opts.sink_id or m.batch != batch:
            raise ConnectorError(f"rmq sink {opts.sink_id}: commit of batch {batch} got a commit message of "
                                 f"another sink or batch: {m!r}"[:500])
    return commits


def _brokers(commits: Sequence[TaskCommit]) -> dict[str, str]:
    return {h.broker_name: h.address for c in commits for h in c.brokers}


def commit_batch(opts: SinkOptions, messages: Sequence[object | None], batch: str) -> None:
    """Step 2 of the module docstring. What needs the decision topic's master (reading and appending the log)
    waits for it up to masterWaitTimeoutMs; END_TRANSACTIONs that find no master are left to the check."""
    from connector.resolver import ensure_resolver, settle_commit

    if not opts.exactly_once:
        log.info("rmq sink %s: batch %s sent %d rows at least once", opts.sink_id, batch,
                 sum(m.rows for m in messages if isinstance(m, PlainCommit)))
        return  # the rows are visible already: nothing to decide
    commits = _task_commits(opts, messages, batch)
    if not any(c.rows for c in commits):
        return  # nothing was sent: nothing to decide
    with BlockingClient(opts.namesrv_addr, timeout_ms=opts.send_timeout_ms, producer_group=opts.producer_group,
                        credentials=opts.credentials) as client:
        decisions = DecisionLog(client, opts.decision_topic, opts.sink_id)
        decisions.ensure_topic(_brokers(commits), master_wait_ms=opts.master_wait_ms)
        ensure_resolver(opts, sorted({t for c in commits for t in c.topics}))
        decided = decisions.refresh(master_wait_ms=opts.master_wait_ms).decided.get(batch)
        if decided is not None:
            losers = [c for c in commits if not decided.winners.keys() & c.runs.keys()]
            counts = end_transactions(client, opts, losers, LocalTransactionState.ROLLBACK_MESSAGE)
            log.warning("rmq sink %s: batch %s was decided before (commit %s, %d rows); this re-run's %d rows are "
                        "rolled back (%d ended), the decided ones are committed by the resolver", opts.sink_id,
                        batch, decided.commit, decided.rows, sum(c.rows for c in losers), counts.ended)
            return
        winners = {run: rows for c in commits for run, rows in c.runs.items()}
        drops = {run: keys for c in commits for run, keys in c.drops.items()}
        try:
            decisions.append(decision_records(batch, uuid.uuid4().hex, winners, drops,
                                              immunity_s=opts.check_immunity_s), master_wait_ms=opts.master_wait_ms)
        except ConnectorError as err:
            raise ConnectorError(f"{err}. Whether batch {batch} of sink {opts.sink_id} was decided is known once "
                                 "that master is back: a streaming query restarted from its checkpoint settles it "
                                 "(each row once); a batch job's abort says so if it can read the log") from err
        _decision_fault(opts, batch)
        cutoff_ms = int(time.time() * 1000) - opts.check_immunity_s * 500
        direct = [c for c in commits if c.first_born_ms >= cutoff_ms]
        counts = end_transactions(client, opts, direct, LocalTransactionState.COMMIT_MESSAGE)
        left = sum(c.rows for c in commits) - counts.ended
        if left:
            log.warning("rmq sink %s: batch %s decided; %d of its rows are left to the broker's check (late: %d, "
                        "failed: %d, older than half the immunity time: %d)", opts.sink_id, batch, left, counts.late,
                        counts.failed, sum(c.rows for c in commits if c not in direct))
        settle_commit(decisions, opts, batch, commits, counts.ended)


def _decision_fault(opts: SinkOptions, batch: str) -> None:
    """faultInjection {"killAfterDecision": {"batch": "b", "pgid": n}}: kill process group n (the driver) and this
    worker right after the decision of batch b is recorded, before any END_TRANSACTION."""
    spec = (opts.fault or {}).get("killAfterDecision")
    if not spec or str(spec.get("batch")) != batch:
        return
    pgid = int(spec["pgid"])
    log.warning("rmq sink %s: faultInjection kills process group %d after deciding batch %s", opts.sink_id, pgid,
                batch)
    try:
        os.killpg(pgid, signal.SIGKILL)
    finally:
        os._exit(137)


def abort_batch(opts: SinkOptions, messages: Sequence[object | None], batch: str, *, record: bool) -> None:
    """Step 4 of the module docstring. The abort of a batch job is recorded even when no task returned a commit
    message (all failed or were cancelled): their half messages exist all the same, and the resolver rolls them
    back on the broker's check only once the log says the job was aborted. A job whose commit failed after its
    decision may have been recorded (its master went away meanwhile) is not recorded aborted when the log shows
    it decided: its rows are committed, and the error says so."""
    if not opts.exactly_once:
        log.warning("rmq sink %s: batch %s aborted; the rows its tasks sent (at least once) stay visible",
                    opts.sink_id, batch)
        return
    commits = [m for m in messages if isinstance(m, TaskCommit) and m.sink_id == opts.sink_id]
    if not commits and not record:
        return
    with BlockingClient(opts.namesrv_addr, timeout_ms=opts.send_timeout_ms, producer_group=opts.producer_group,
                        credentials=opts.credentials) as client:
        if record:
            _record_abort(client, opts, commits, batch)
        if commits:
            counts = end_transactions(client, opts, commits, LocalTransactionState.ROLLBACK_MESSAGE)
            log.warning("rmq sink %s: batch %s aborted; %d half messages rolled back", opts.sink_id, batch,
                        counts.ended)


def _record_abort(client: BlockingClient, opts: SinkOptions, commits: Sequence[TaskCommit], batch: str) -> None:
    from connector.resolver import ensure_resolver

    topics = sorted({t for c in commits for t in c.topics} | ({opts.topic} if opts.topic else set()))
    brokers = _brokers(commits) or _master_brokers(client, topics)
    decisions = DecisionLog(client, opts.decision_topic, opts.sink_id)
    if brokers:
        decisions.ensure_topic(brokers, master_wait_ms=opts.master_wait_ms)
    if not decisions.queues():
        log.warning("rmq sink %s: batch %s aborted before any task reported where it wrote; its half messages end "
                    "when the broker stops checking them", opts.sink_id, batch)
        return
    ensure_resolver(opts, topics)
    decided = decisions.refresh(master_wait_ms=opts.master_wait_ms).decided.get(batch)
    if decided is not None:
        raise ConnectorError(f"rmq sink {opts.sink_id}: batch job {batch} failed after its decision was recorded: "
                             f"its {decided.rows} rows are committed (by the resolver when the broker checks them); "
                             "do not run the job again for them")
    decisions.append([{"kind": "aborted", "batch": batch}], master_wait_ms=opts.master_wait_ms)


def _master_brokers(client: BlockingClient, topics: Sequence[str]) -> dict[str, str]:
    """{brokerName: master address} of the brokers that hold ``topics`` (those without a route are skipped)."""
    brokers: dict[str, str] = {}
    for topic in topics:
        try:
            route = client.get_route(topic)
        except (MQClientError, RemotingError):
            continue
        brokers.update({b.broker_name: b.broker_addrs[MASTER_ID] for b in route.broker_datas
                        if MASTER_ID in b.broker_addrs})
    return brokers
