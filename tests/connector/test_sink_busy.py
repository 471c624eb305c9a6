"""A broker in flow control answers a send with SYSTEM_BUSY and stores nothing: the sink's task sends the request
again after a pause (as Java's producer retries SYSTEM_BUSY), and gives up with a clear error only after
BUSY_RETRIES tries. Against the in-process fake broker, which can be told to turn sends away; on both ways of
sending half messages (one per row, and prepared batches, here of 4 rows, to a broker that says it takes them)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broker.common.errors import ConnectorError
from broker.remoting.codes import RequestCode
from connector import sink_send, sink_task
from connector.options import SinkOptions
from tests.helpers import LoopThread
from tests.unit.client.fakes import FakeBroker, FakeNamesrv

BATCH_ROWS = 4


@pytest.fixture(params=[False, True], ids=["per-row", "batched"])
def fakes(request, monkeypatch) -> Iterator[tuple[FakeNamesrv, FakeBroker]]:
    monkeypatch.setattr(sink_send, "BUSY_PAUSE_S", 0.01)
    monkeypatch.setattr(sink_send, "BATCH_MAX_ROWS", BATCH_ROWS)
    loop = LoopThread()
    namesrv = loop.run(FakeNamesrv().start())
    broker = loop.run(FakeBroker("broker-a", transaction_batch=request.param).start())
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


def send_code(broker: FakeBroker) -> RequestCode:
    return RequestCode.SEND_BATCH_MESSAGE if broker.transaction_batch else RequestCode.SEND_MESSAGE_V2


def test_half_messages_turned_away_in_flow_control_are_sent_again(fakes):
    namesrv, broker = fakes
    broker.busy_sends = 7  # the first seven sends, spread over the first chunks
    sender = send_rows(namesrv, 20)
    stored = [r for q in range(broker.queue_nums) for r in broker.messages("T", q)]
    assert sorted(r.body for r in stored) == sorted(f"row {i}".encode() for i in range(20))  # each row once
    requests = 20 if not broker.transaction_batch else 20 // BATCH_ROWS
    assert len(broker.requests_of(send_code(broker))) == requests + 7
    assert not broker.requests_of(RequestCode.SEND_MESSAGE_V2 if broker.transaction_batch else
                                  RequestCode.SEND_BATCH_MESSAGE)
    commit = sender.task_commit()
    handles = [h for b in commit.brokers for h in b.halves]
    assert commit.rows == 20 and len(handles) == 20
    assert {h[-1] for h in handles} == {r.properties["UNIQ_KEY"] for r in stored}  # the stored copies' handles
    # each handle names its stored copy: commit log offset and queue offset (consecutive within a batch)
    by_uniq = {r.properties["UNIQ_KEY"]: r for r in stored}
    assert all((by_uniq[u].queue_id, by_uniq[u].commit_log_offset, by_uniq[u].queue_offset) == (q, clo, qo)
               for _, q, clo, qo, u in handles)
    assert all(r.sys_flag & 4 for r in stored)  # TRANSACTION_PREPARED_TYPE


def test_a_broker_busy_for_longer_than_the_retries_fails_the_task(fakes):
    namesrv, broker = fakes
    broker.busy_sends = 1000
    with pytest.raises(ConnectorError, match=r"half messages? to T@broker-a:\d was refused .*CODE: 2 .*flow control"):
        send_rows(namesrv, 3)
    requests = 3 if not broker.transaction_batch else 1
    assert len(broker.requests_of(send_code(broker))) == requests * (sink_send.BUSY_RETRIES + 1)
