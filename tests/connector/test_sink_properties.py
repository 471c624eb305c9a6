"""The PROPERTIES string of the sink's half messages, byte for byte: the row's KEYS and TAGS, WAIT, the row's user
properties (the system properties a send sets itself are dropped: connector/columns.py), the half-message and sink
properties, a fresh UNIQ_KEY, in that order; the same in each item of a prepared batch as in the header of a
half message sent alone. Against the in-process fake broker, which keeps every request it gets."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from broker.common.message_batch import decode_batch_body
from broker.remoting.codes import RequestCode
from broker.remoting.headers import SendMessageRequestHeader
from connector import sink_task
from connector.options import SinkOptions
from tests.helpers import LoopThread
from tests.unit.client.fakes import FakeBroker, FakeNamesrv


@pytest.fixture(params=[False, True], ids=["per-row", "batched"])
def fakes(request) -> Iterator[tuple[FakeNamesrv, FakeBroker]]:
    loop = LoopThread()
    namesrv = loop.run(FakeNamesrv().start())
    broker = loop.run(FakeBroker("broker-a", transaction_batch=request.param).start())
    namesrv.routes["T"] = [broker]
    yield namesrv, broker
    for server in (broker, namesrv):
        loop.run(server.stop())
    loop.close()


# (tags, keys, the row's properties), and what the row's part of the string is: before the half-message part.
ROWS = [
    (None, None, None, "WAIT\x01true\x02"),
    ("TagA", None, None, "TAGS\x01TagA\x02WAIT\x01true\x02"),
    (None, "k1 k2", None, "KEYS\x01k1 k2\x02WAIT\x01true\x02"),
    ("TagA", "k1", {"a": "1", "b": "2"}, "KEYS\x01k1\x02TAGS\x01TagA\x02WAIT\x01true\x02a\x011\x02b\x012\x02"),
    ("", "", [("a", "1")], "WAIT\x01true\x02a\x011\x02"),  # empty tags and keys are left out
    # system properties in the row's map (as a read of a topic has them) are dropped: the columns and the send
    # decide them
    ("TagA", None, {"WAIT": "false", "TAGS": "TagB", "KEYS": "kx", "TRAN_MSG": "false", "PGROUP": "g", "DELAY": "3",
                    "RMQ_SINK_RUN": "x", "MIN_OFFSET": "0", "MAX_OFFSET": "9", "CLUSTER": "c", "u": "1"},
     "TAGS\x01TagA\x02WAIT\x01true\x02u\x011\x02"),
    (None, None, {"c": "é ü"}, "WAIT\x01true\x02c\x01é ü\x02"),
]


def test_half_message_properties_byte_for_byte(fakes):
    namesrv, broker = fakes
    opts = SinkOptions.parse({"namesrvAddr": namesrv.addr, "topic": "T", "sinkId": "s1"}, streaming=False)
    sender = sink_task.HalfSender(opts, "batch-0", "run-0")
    try:
        for tags, keys, properties, _ in ROWS:
            sender.send("T", b"body", tags, keys, properties, None)
        sender.send("T", b"body", None, None, {"UNIQ_KEY": "MINE", "k": "v"}, None)  # a fresh UNIQ_KEY all the same
        sender.flush()
    finally:
        sender.close()
    half = ("TRAN_MSG\x01true\x02PGROUP\x01RMQ_SINK_s1\x02RMQ_SINK_ID\x01s1\x02RMQ_SINK_BATCH\x01batch-0\x02"
            "RMQ_SINK_RUN\x01run-0\x02CHECK_IMMUNITY_TIME_IN_SECONDS\x01120\x02")
    if broker.transaction_batch:  # one batch: the rows go to one queue until it is full
        (batch,) = broker.requests_of(RequestCode.SEND_BATCH_MESSAGE)
        header = SendMessageRequestHeader.from_ext(dict(batch.ext_fields), SendMessageRequestHeader.V2_WIRE)
        assert header.sys_flag == 4 and header.batch and "TRAN_MSG" not in (header.properties or "")
        sent = [m.encoded_properties.decode() for m in decode_batch_body(batch.body)]
    else:
        sent = [SendMessageRequestHeader.from_ext(dict(r.ext_fields), SendMessageRequestHeader.V2_WIRE).properties
                for r in broker.requests_of(RequestCode.SEND_MESSAGE_V2)]
    assert len(sent) == len(ROWS) + 1
    for (_, _, _, row), got in zip([*ROWS, (None, None, None, "WAIT\x01true\x02k\x01v\x02")], sent, strict=True):
        uniq = got.rsplit("UNIQ_KEY\x01", 1)[1]
        assert len(uniq) == 33 and uniq.endswith("\x02")  # a fresh UNIQ_KEY (32 hex digits)
        assert got == f"{row}{half}UNIQ_KEY\x01{uniq}"
