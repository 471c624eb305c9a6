"""Helpers of the send and pull tests (test_send.py, test_pull.py, test_long_polling.py, test_send_pull_apache.py):
a broker spoken to with our RemotingClient, ours in-process (tests/integration/in_process.py) or Apache's (only its
address), with SEND_MESSAGE and PULL_MESSAGE built from their headers, and the records a pull answered.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from broker.common.message import PullSysFlag, encode_properties
from broker.common.record import MessageRecord, iter_records
from broker.remoting.client import RemotingClient
from broker.remoting.codes import RequestCode, ResponseCode, SerializeType
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.headers import PullMessageRequestHeader, SendMessageRequestHeader
from broker.server.broker_controller import BrokerController
from tests.integration.in_process import dispatched, running_controller

FAQ_HINT = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
ILLEGAL_REMARK = ("the message is illegal, maybe msg body or properties length not matched. msg body length limit "
                  "8192B, msg properties length limit 32KB.")
SMALL_MESSAGES = {"max_message_size": 8192}  # the limit ILLEGAL_REMARK names


@dataclass
class Broker:
    """A broker under test: ours (``controller`` set) or Apache's (only its address)."""

    client: RemotingClient
    addr: str
    controller: BrokerController = field(default=None)  # type: ignore[assignment]

    async def invoke(self, request: RemotingCommand, timeout_ms: float = 5000) -> RemotingCommand:
        return await self.client.invoke(self.addr, request, timeout_ms)

    async def send(self, topic: str, body: bytes, properties: dict[str, str] | None = None, *, queue_id: int = 0,
                   code: int = RequestCode.SEND_MESSAGE, serialize_type: SerializeType = SerializeType.JSON,
                   **fields) -> RemotingCommand:
        header = SendMessageRequestHeader(
            producer_group="PG", topic=topic, default_topic="TBW102", default_topic_queue_nums=4, queue_id=queue_id,
            sys_flag=0, born_timestamp=int(time.time() * 1000), flag=fields.pop("flag", 0),
            properties=encode_properties(properties or {}), **fields)
        wire = None if code == RequestCode.SEND_MESSAGE else SendMessageRequestHeader.V2_WIRE
        return await self.invoke(create_request(code, header.to_ext(wire), body, serialize_type=serialize_type))

    async def pull(self, topic: str, offset: int, *, queue_id: int = 0, group: str = "CG",
                   subscription: str | None = "*", sys_flag: int = 0, suspend_ms: int = 0, commit_offset: int = 0,
                   sub_version: int = 0, max_msg_nums: int = 32, timeout_ms: float = 5000) -> RemotingCommand:
        if subscription is not None:
            sys_flag |= PullSysFlag.SUBSCRIPTION
        header = PullMessageRequestHeader(
            consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset, max_msg_nums=max_msg_nums,
            sys_flag=int(sys_flag), commit_offset=commit_offset, suspend_timeout_millis=suspend_ms,
            sub_version=sub_version, subscription=subscription, expression_type="TAG" if subscription else None)
        return await self.invoke(create_request(RequestCode.PULL_MESSAGE, header.to_ext()), timeout_ms)

    async def dispatched(self) -> None:
        """Wait until the store's dispatch thread has put everything written into the ConsumeQueues."""
        await dispatched(self.controller.store)


@contextlib.asynccontextmanager
async def running_broker(tmp_path, store: dict | None = None, **broker_fields) -> AsyncIterator[Broker]:
    """A fresh in-process broker (tests/integration/in_process.py) with 8 KiB messages at most, and a client."""
    async with running_controller(tmp_path / "store", store={**SMALL_MESSAGES, **(store or {})},
                                  **broker_fields) as controller:
        client = RemotingClient()
        try:
            yield Broker(client, controller.broker_addr, controller)
        finally:
            await client.close()


def records(response: RemotingCommand) -> list[MessageRecord]:
    return list(iter_records(response.body))


async def send_tagged(b: Broker, topic: str, tags: list[str | None]) -> None:
    for i, tag in enumerate(tags):
        props = {"TAGS": tag} if tag else {}
        assert (await b.send(topic, f"m{i}".encode(), props)).code == ResponseCode.SUCCESS
    await b.dispatched()



class StubConnection:
    closed = False
    remote_address = "127.0.0.1:1"
