"""A sink task whose master goes away (connector/sink_task.py), against the in-process fake broker and NameServer:

* the connection breaks (or a send on it times out) with half messages in flight and the master answers again:
  the task sends those halves again under a new run and drops the first copies, so that, whichever copies were
  stored, the decision commits each row exactly once (checked by resolving every stored half as the driver and the
  resolver would);
* the master does not answer again within masterWaitTimeoutMs: the task fails naming the brokerName, in time;
* no master is routed when the task starts: it waits, and sends once one is.

Each on both ways of sending half messages: one per row, and prepared batches (here of 4 rows) to a broker that says
it takes them, where a batch in flight is dropped and sent again whole.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from broker.common.errors import ConnectorError
from broker.remoting.codes import RequestCode
from broker.remoting.command import RemotingCommand
from broker.remoting.connection import RemotingConnection
from connector import sink_send, sink_task
from connector.decisions import DecisionState, Resolution, decision_records
from connector.options import SinkOptions
from tests.helpers import LoopThread
from tests.unit.client.fakes import FakeBroker, FakeNamesrv

ROWS = 60
BATCH_ROWS = 4
SENDS = (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE)


@dataclass
class GoingBroker(FakeBroker):
    """A fake master that, at its ``crash_at``-th send (a half message or a batch of them), stores it, answers
    nothing more on that connection and closes it (what the client sees of a master killed right after storing).
    Its ``broker_id`` is what the NameServer announces it with: 1 routes only a slave of broker-a."""

    crash_at: int = 0
    stop_at_crash: bool = False
    stall_at_crash: bool = False  # keep the connection open, answering nothing on it (a stalled master)
    sends: int = 0
    gone: set[RemotingConnection] = field(default_factory=set)

    async def _process(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        if request.code not in SENDS:
            return await super()._process(conn, request)
        if conn in self.gone:
            await super()._process(conn, request)  # stored, never answered
            return None
        self.sends += 1
        if self.sends != self.crash_at:
            return await super()._process(conn, request)
        await super()._process(conn, request)
        self.gone.add(conn)
        if self.stall_at_crash:
            return None
        loop = asyncio.get_running_loop()
        loop.create_task(self.server.stop() if self.stop_at_crash else conn.close())
        return None


@pytest.fixture(params=[False, True], ids=["per-row", "batched"])
def fakes(request, monkeypatch) -> Iterator[tuple[LoopThread, FakeNamesrv, GoingBroker]]:
    monkeypatch.setattr(sink_send, "BATCH_MAX_ROWS", BATCH_ROWS)
    loop = LoopThread()
    namesrv = loop.run(FakeNamesrv().start())
    broker = loop.run(GoingBroker("broker-a", transaction_batch=request.param).start())
    namesrv.routes["T"] = [broker]
    yield loop, namesrv, broker
    for server in (broker, namesrv):
        loop.run(server.stop())
    loop.close()


def send_rows(namesrv: FakeNamesrv, **options: str) -> sink_task.TaskCommit:
    opts = SinkOptions.parse({"namesrvAddr": namesrv.addr, "topic": "T", "maxInFlight": "8", **options},
                             streaming=False)
    sender = sink_task.HalfSender(opts, "0", uuid.uuid4().hex)
    try:
        for i in range(ROWS):
            sender.send("T", f"row {i}".encode(), None, None, None, None)
        sender.flush()
        return sender.task_commit()
    finally:
        sender.close()


@pytest.mark.parametrize("stall", [False, True], ids=["closed", "timed-out"])
def test_halves_in_flight_are_sent_again_under_a_new_run_and_committed_once(fakes, stall: bool) -> None:
    """The connection closed by the master, or still open and silent until the send times out (a loaded
    machine): the task reconnects either way and sends what was in flight again."""
    _, namesrv, broker = fakes
    broker.crash_at = 20 if not broker.transaction_batch else 4
    broker.stall_at_crash = stall
    commit = send_rows(namesrv, **({"sendTimeoutMs": "1000"} if stall else {}))
    stored = [r for q in range(broker.queue_nums) for r in broker.messages("T", q)]
    assert len(stored) > ROWS  # the lost connection's halves were stored, and sent again
    assert len(commit.runs) == 2 and sum(commit.runs.values()) == commit.rows == ROWS
    (first_run,) = commit.drops
    assert first_run in commit.runs and commit.drops[first_run]
    if broker.transaction_batch:  # whole batches were in flight, dropped and sent again
        assert len(commit.drops[first_run]) % BATCH_ROWS == 0
        assert not broker.requests_of(RequestCode.SEND_MESSAGE_V2)

    state = DecisionState()
    for record in decision_records("0", "c", commit.runs, commit.drops):
        state.apply(record)
    committed = [r for r in stored if state.resolve("0", r.properties["RMQ_SINK_RUN"], r.properties["UNIQ_KEY"])
                 is Resolution.COMMIT]
    assert Counter(r.body for r in committed) == Counter(f"row {i}".encode() for i in range(ROWS))
    # what the driver ends directly (the handles) is among what the resolver would commit
    handles = {h[-1] for b in commit.brokers for h in b.halves}
    assert len(handles) == ROWS and handles == {r.properties["UNIQ_KEY"] for r in committed}


def test_a_master_away_longer_than_the_wait_fails_the_task_naming_the_broker(fakes) -> None:
    _, namesrv, broker = fakes
    broker.crash_at, broker.stop_at_crash = 20 if not broker.transaction_batch else 4, True
    started = time.monotonic()
    with pytest.raises(ConnectorError, match=r"master of broker broker-a did not answer within 1500 ms "
                                             r"\(option masterWaitTimeoutMs"):
        send_rows(namesrv, masterWaitTimeoutMs="1500")
    assert 1.0 < time.monotonic() - started < 6


def test_a_task_waits_for_a_master_to_be_routed(fakes) -> None:
    loop, namesrv, broker = fakes
    broker.broker_id = 1  # only a slave of broker-a is routed

    async def master_back() -> None:
        await asyncio.sleep(1.0)
        broker.broker_id = 0

    loop.loop.call_soon_threadsafe(lambda: asyncio.ensure_future(master_back()))
    started = time.monotonic()
    commit = send_rows(namesrv, masterWaitTimeoutMs="10000")
    assert time.monotonic() - started > 0.9 and commit.rows == ROWS and len(commit.runs) == 1

    broker.broker_id = 1
    with pytest.raises(ConnectorError, match=r"sending the rows of topic T: the master of broker broker-a did not "
                                             r"answer within 1000 ms"):
        send_rows(namesrv, masterWaitTimeoutMs="1000")
