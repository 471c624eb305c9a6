"""The same sends and pulls against our broker and Apache's: codes, remarks, header keys and stored properties are
Apache's.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from broker.common.message import PullSysFlag
from broker.common.message_batch import BatchMessage, encode_batch_body
from broker.remoting.client import RemotingClient
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.headers import PullMessageRequestHeader
from tests.helpers import run
from tests.integration.cluster import start_servers
from tests.integration.send_pull import (
    Broker,
    records,
    running_broker,
)


async def observable_answers(b: Broker) -> dict[str, object]:
    """What a client sees of a fixed set of sends and pulls: codes, remarks (the client's port masked), header keys,
    and the stored properties in their stored order."""
    answers: dict[str, object] = {}

    def note(name: str, response: RemotingCommand) -> None:
        remark = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", response.remark or "")
        answers[name] = (response.code, remark, sorted(response.ext_fields))

    async def pull_until_found(topic: str, **options) -> RemotingCommand:
        for _ in range(100):
            response = await b.pull(topic, 0, **options)
            if response.code == ResponseCode.SUCCESS:
                return response
            await asyncio.sleep(0.05)
        raise AssertionError(f"nothing to pull from {topic}")

    props = {"KEYS": "order-1", "TAGS": "TagA", "WAIT": "true", "UNIQ_KEY": "AC1100020001", "userProp": "v"}
    note("send", await b.send("TopicDiff", b"hello", props, queue_id=1, flag=3))
    pulled = await pull_until_found("TopicDiff", queue_id=1)
    note("pull", pulled)
    answers["stored"] = [list(r.properties.items()) for r in records(pulled)]
    for topic in ("../x", "T" * 300, "bad\x01topic", "   ", "SCHEDULE_TOPIC_XXXX"):
        note(f"send to {topic!r}", await b.send(topic, b"x"))
    note("queue id", await b.send("TopicDiff", b"x", queue_id=4))
    note("body too big", await b.send("TopicDiff", b"x" * 8193))
    note("properties too big", await b.send("TopicDiff", b"x", {"p": "v" * 33_000}))
    note("retry", await b.send("%RETRY%CG", b"again", {"UNIQ_KEY": "U1"}, reconsume_times=16))
    note("dlq", await b.send("%RETRY%CG", b"dead", {"UNIQ_KEY": "U2"}, reconsume_times=17))
    answers["dlq stored"] = [list(r.properties.items()) for r in records(await pull_until_found("%DLQ%CG"))]
    batch = encode_batch_body([BatchMessage(b"a", {"UNIQ_KEY": "U", "KEYS": "k"}), BatchMessage(b"b", {}, 5)])
    note("batch", await b.send("TopicBatchDiff", batch, {"UNIQ_KEY": "B"}, code=RequestCode.SEND_BATCH_MESSAGE,
                               batch=True))
    answers["batch stored"] = [(r.flag, list(r.properties.items()))
                               for r in records(await pull_until_found("TopicBatchDiff"))]
    note("batch to retry", await b.send("%RETRY%CG", batch, code=RequestCode.SEND_BATCH_MESSAGE, batch=True))
    note("delayed batch", await b.send("TopicB", batch, {"DELAY": "3"}, code=RequestCode.SEND_BATCH_MESSAGE,
                                       batch=True))
    for name, offset, options in [("no match", 0, {"subscription": "TagZ"}), ("unparsable", 0, {"subscription": "||"}),
                                  ("no group info", 0, {"subscription": None, "group": "HB"}),
                                  ("overflow one", 1, {}), ("overflow badly", 50, {}), ("queue id", 0, {"queue_id": 9}),
                                  ("no topic", 0, {"topic": "NoSuchTopic"})]:
        options = {"queue_id": 1, "topic": "TopicDiff", **options}
        note(f"pull {name}", await b.pull(options.pop("topic"), offset, **options))
    header = PullMessageRequestHeader("CG", "TopicDiff", 1, 0, 32, int(PullSysFlag.SUBSCRIPTION), 0, 0, 0, "a > 1",
                                      "SQL92")
    note("pull sql92", await b.invoke(create_request(RequestCode.PULL_MESSAGE, header.to_ext())))
    return answers


@pytest.mark.java
@pytest.mark.slow
def test_answers_are_apaches(tmp_path):
    async def ours() -> dict[str, object]:
        async with running_broker(tmp_path / "rmq") as b:
            return await observable_answers(b)

    async def apaches(addr: str) -> dict[str, object]:
        async with RemotingClient() as client:
            return await observable_answers(Broker(client, addr))

    expected: dict[str, object] = {}
    with start_servers("apache", tmp_path / "apache", maxMessageSize=8192) as apache:
        expected = run(apaches(apache.brokers[0].addr))
    got = run(ours())
    assert got == expected
