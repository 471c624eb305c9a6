"""A broker in flow control answers a half message with SYSTEM_BUSY and stores nothing: the sink's task sends it
again after a pause (as Java's producer retries SYSTEM_BUSY), and gives up with a clear error only after
BUSY_RETRIES tries. Against the in-process fake broker, which can be told to turn sends away."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broker.common.errors import ConnectorError
from broker.remoting.codes import RequestCode
from connector import sink_task
from connector.options import SinkOptions
from tests.helpers import LoopThread
from tests.unit.client.fakes import FakeBroker, FakeNamesrv


@pytest.fixture
def fakes(monkeypatch) -> Iterator[tuple[FakeNamesrv, FakeBroker]]:
    monkeypatch.setattr(sink_task, "BUSY_PAUSE_S", 0.01)
    loop = LoopThread()
    namesrv = loop.run(FakeNamesrv().start())
    broker = loop.run(FakeBroker("broker-a").start())
    namesrv.routes["T"] = [broker]
    yield namesrv, broker
    for server in (broker, namesrv):
        loop.run(server.stop())
    loop.close()


def send_rows(namesrv: FakeNamesrv, rows: int) -> sink_task.HalfSender:
    opts = SinkOptions.parse({"namesrvAddr": namesrv.addr, "topic": "T", "maxInFlight": "8"}, streaming=False)
    sender = sink_task.HalfSender(opts, "batch-0", "run-0")
    try:
        for i in range(rows):
            sender.send("T", f"row {i}".encode(), None, None, None, None)
        sender.flush()
    finally:
        sender.close()
    return sender


def test_half_messages_turned_away_in_flow_control_are_sent_again(fakes):
    namesrv, broker = fakes
    broker.busy_sends = 7  # the first seven sends, spread over the first chunks
    sender = send_rows(namesrv, 20)
    stored = [r for q in range(broker.queue_nums) for r in broker.messages("T", q)]
    assert sorted(r.body for r in stored) == sorted(f"row {i}".encode() for i in range(20))  # each row once
    assert len(broker.requests_of(RequestCode.SEND_MESSAGE_V2)) == 27
    commit = sender.task_commit()
    handles = [h for b in commit.brokers for h in b.halves]
    assert commit.rows == 20 and len(handles) == 20
    assert {h[-1] for h in handles} == {r.properties["UNIQ_KEY"] for r in stored}  # the stored copies' handles


def test_a_broker_busy_for_longer_than_the_retries_fails_the_task(fakes):
    namesrv, broker = fakes
    broker.busy_sends = 1000
    with pytest.raises(ConnectorError, match=r"half message to T@broker-a:\d was refused .*CODE: 2 .*flow control"):
        send_rows(namesrv, 3)
    assert len(broker.requests_of(RequestCode.SEND_MESSAGE_V2)) == 3 * (sink_task.BUSY_RETRIES + 1)
