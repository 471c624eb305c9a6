"""The harness of the transactional-batch tests (``test_transaction_batch*.py``): one NameServer and one broker of
ours per test module, in this process on a loop thread, spoken to through the blocking client on 127.0.0.1.

The periodic check is kept out of the way (a 10-minute transactionCheckInterval): tests run a check round themselves
when they want one, so no half message is asked about behind a test's back. The store is read directly to see what
a consumer would see (the real topic's ConsumeQueue) and what the broker wrote (half and op topics).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.client import Message
from broker.client.blocking import BlockingRemotingClient
from broker.client.message import MessageQueue
from broker.client.protocol import parse_send_response
from broker.client.transaction import TransactionProducer
from broker.client.transaction_protocol import (
    LocalTransactionState,
    end_transaction_batch_request,
    half_batch_handles,
    half_batch_request,
    parse_end_transaction_batch_response,
)
from broker.common.message import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from broker.common.record import MessageRecord, decode_record
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.server import NamesrvController
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.transaction_batch import TransactionHandle
from broker.server.broker_controller import BrokerController
from tests.helpers import LoopThread, client_config
from tests.integration.in_process import BROKER_NAME, broker_configs, dispatched, start_on_free_port
from tests.integration.transactions import Listener

GROUP = "txb_group"
TIMEOUT_MS = 1000  # transactionTimeOut: a half message older than this (without immunity) is due for a check
MAX_MESSAGE_SIZE = 64 * 1024
STORE = {"mapped_file_size_commit_log": 1024 * 1024, "max_message_size": MAX_MESSAGE_SIZE}
# The same sizes for Apache's broker (it refuses CommitLog and ConsumeQueue files of another size than configured).
APACHE_STORE_CONF = {"brokerName": BROKER_NAME, "mappedFileSizeCommitLog": 1024 * 1024,
                     "mappedFileSizeConsumeQueue": 100 * 20, "maxHashSlotNum": 64, "maxIndexNum": 256,
                     "maxMessageSize": MAX_MESSAGE_SIZE, "transactionTimeOut": TIMEOUT_MS,
                     "transactionCheckInterval": 300, "transactionCheckMax": 50, "transactionOpBatchInterval": 100}


@dataclass
class Env:
    """The module's NameServer and broker on a loop thread, and a blocking connection to the broker."""

    tmp: Path
    loop: LoopThread
    namesrv: NamesrvController
    broker: BrokerController
    remote: BlockingRemotingClient

    @property
    def store(self):
        return self.broker.store

    def invoke(self, request: RemotingCommand) -> RemotingCommand:
        return self.remote.invoke(request, 10_000)

    def send_half_batch(self, topic: str, queue_id: int, messages: Sequence[Message],
                        group: str = GROUP) -> tuple[RemotingCommand, list[TransactionHandle]]:
        """The prepared batch as the client helpers send it; its answer and (when stored) its handles."""
        response = self.invoke(half_batch_request(group, MessageQueue(topic, BROKER_NAME, queue_id), messages))
        if response.code != ResponseCode.SUCCESS:
            return response, []
        result = parse_send_response(response, topic, BROKER_NAME, self.remote.address, [])
        return response, half_batch_handles(result, messages)

    def end(self, topic: str, state: LocalTransactionState, handles: Sequence[TransactionHandle],
            group: str = GROUP):
        return parse_end_transaction_batch_response(
            self.invoke(end_transaction_batch_request(group, topic, BROKER_NAME, state, handles)))

    def records(self, topic: str, queue_ids: Sequence[int] = range(4)) -> list[MessageRecord]:
        """What a consumer of ``topic`` would read, queue by queue, in queue order."""
        async def read() -> list[MessageRecord]:
            await dispatched(self.store)
            found = []
            for queue_id in queue_ids:
                offset = self.store.min_offset_in_queue(topic, queue_id)
                while offset < self.store.max_offset_in_queue(topic, queue_id):
                    result = self.store.get_message("test", topic, queue_id, offset, 64)
                    found += [decode_record(data) for data in result.records()]
                    offset = result.next_begin_offset
            return found
        return self.loop.run(read())

    def snapshot(self) -> tuple[int, int]:
        """The CommitLog's end and the sum of every ConsumeQueue's max offset: what a refusal must leave alone."""
        async def read() -> tuple[int, int]:
            await dispatched(self.store)
            return self.store.max_phy_offset, self.store.sum_max_offset_in_queues()
        return self.loop.run(read())

    def update_config(self, key: str, value: str) -> None:
        request = create_request(RequestCode.UPDATE_BROKER_CONFIG, body=f"{key}={value}\n".encode())
        assert self.invoke(request).code == ResponseCode.SUCCESS

    def restart(self) -> None:
        async def restart() -> None:
            await self.broker.shutdown()
            self.broker = BrokerController(self.broker.broker_config, self.broker.store_config, bind_host="127.0.0.1")
            await self.broker.start()
        self.loop.run(restart())
        self.remote.close()

    def check_round(self) -> int:
        return self.loop.run(self.broker.transactional_message_check_service.run_round())

    def producer(self, group: str, listener: Listener, namesrv_addr: str | None = None) -> TransactionProducer:
        """Our TransactionProducer of ``group``, started on the loop: the check's listener."""
        config = client_config(namesrv_addr or self.namesrv.address, f"txb-{group}-{time.monotonic_ns()}",
                               heartbeat_broker_interval=300, poll_name_server_interval=300)
        producer = TransactionProducer(group, listener=listener, client_config=config)
        self.loop.run(producer.start())
        return producer


def start_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("txb")
    loop = LoopThread(timeout=60)

    async def start() -> tuple[NamesrvController, BrokerController]:
        namesrv = NamesrvController(NamesrvConfig(listen_port=0, bind_address="127.0.0.1",
                                                  kv_config_path=str(tmp / "kvConfig.json")))
        await namesrv.start()
        broker = await start_on_free_port(lambda port: BrokerController(*broker_configs(
            tmp / "store", port, namesrv_addr=namesrv.address, store=STORE, default_topic_queue_nums=4,
            transaction_time_out=TIMEOUT_MS, transaction_check_interval=600_000), bind_host="127.0.0.1"))
        return namesrv, broker

    namesrv, broker = loop.run(start())
    environment = Env(tmp, loop, namesrv, broker, BlockingRemotingClient(broker.broker_addr))
    try:
        yield environment
    finally:
        environment.remote.close()

        async def stop() -> None:
            if environment.broker.started:
                await environment.broker.shutdown()
            await environment.namesrv.stop()
        loop.run(stop())
        loop.close()


def orders(topic: str, prefix: str, count: int) -> list[Message]:
    return [Message(topic, f"{prefix}-{i}".encode(), tags=f"Tag{i % 2}", keys=f"{prefix}k{i}",
                    properties={"order": str(i)}) for i in range(count)]


def uniq_keys(messages: Sequence[Message]) -> list[str]:
    return [m.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] for m in messages]
