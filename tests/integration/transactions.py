"""Helpers of the transaction tests (test_transactions.py, test_end_transaction.py, test_transaction_offsets.py): our
NameServer and BrokerController in the test's process on 127.0.0.1 (``cluster``), the Python TransactionProducer with
a ``Listener`` that answers from tables, and the store read directly to see what a consumer would see (the real
topic's ConsumeQueue) and what the broker wrote (half and op topics).

Check timing is shortened through the broker's config keys (transactionTimeOut, transactionCheckInterval).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

from broker.client import ClientConfig, Message, MessageExt
from broker.client.transaction import TransactionProducer
from broker.client.transaction_protocol import LocalTransactionState
from broker.common.message import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, decode_offset_msg_id
from broker.common.record import MessageRecord, decode_record
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.server import NamesrvController
from broker.remoting.client import RemotingClient
from broker.remoting.codes import RequestCode
from broker.remoting.command import create_request
from broker.remoting.headers import EndTransactionRequestHeader
from broker.server.broker_controller import BrokerController
from broker.store.layout import CQ_UNIT_SIZE
from tests.helpers import client_config, now_ms
from tests.integration.in_process import broker_configs, dispatched, start_on_free_port

TOPIC = "TxTopic"
GROUP = "tx_producer_group"
TIMEOUT_MS = 400  # transactionTimeOut
INTERVAL_MS = 100  # transactionCheckInterval


@dataclass
class Listener:
    """A TransactionListener that answers from tables and records every call."""

    execute: LocalTransactionState = LocalTransactionState.COMMIT_MESSAGE
    check: Callable[[MessageExt], LocalTransactionState] = lambda _msg: LocalTransactionState.COMMIT_MESSAGE
    executed: list[Message] = field(default_factory=list)
    checked: list[tuple[int, MessageExt]] = field(default_factory=list)  # (ms, message)

    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
        self.executed.append(msg)
        return self.execute

    async def check_local_transaction(self, msg: MessageExt) -> LocalTransactionState:
        self.checked.append((now_ms(), msg))
        return self.check(msg)

    def asked(self) -> list[str]:
        """The UNIQ_KEY of each half the broker asked about, in the order asked."""
        return [m.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] for _, m in self.checked]


@dataclass
class Cluster:
    namesrv: NamesrvController
    broker: BrokerController
    tmp: Path
    port: int

    @property
    def store(self):
        return self.broker.store

    def client_config(self, name: str) -> ClientConfig:
        return client_config(self.namesrv.address, name, heartbeat_broker_interval=300, poll_name_server_interval=300)

    def producer(self, listener: Listener, name: str = "tx") -> TransactionProducer:
        return TransactionProducer(GROUP, listener=listener, client_config=self.client_config(name))

    async def dispatched(self) -> None:
        await dispatched(self.store)

    async def records(self, topic: str) -> list[MessageRecord]:
        """Every record in the ConsumeQueues of ``topic`` (what consumers can see), in queue order."""
        await self.dispatched()
        found = []
        for queue_id in range(8):
            offset = self.store.min_offset_in_queue(topic, queue_id)
            while offset < self.store.max_offset_in_queue(topic, queue_id):
                result = self.store.get_message("test", topic, queue_id, offset, 64)
                found += [decode_record(data) for data in result.records()]
                offset = result.next_begin_offset
        return found

    async def restart(self, *, before_start: Callable[[], None] = lambda: None) -> None:
        await self.broker.shutdown()
        before_start()
        self.broker = BrokerController(self.broker.broker_config, self.broker.store_config, bind_host="127.0.0.1")
        await self.broker.start()


def broker_controller(tmp: Path, port: int, namesrv_addr: str, **fields: object) -> BrokerController:
    """The in-process broker of tests/integration/in_process.py with 256 KiB CommitLog files, 300-unit ConsumeQueue
    files and short transaction check timings; ``fields`` override BrokerConfig fields."""
    broker_fields = {"default_topic_queue_nums": 4, "transaction_time_out": TIMEOUT_MS,
                     "transaction_check_interval": INTERVAL_MS, **fields}
    store = {"mapped_file_size_commit_log": 256 * 1024, "mapped_file_size_consume_queue": 300 * CQ_UNIT_SIZE}
    return BrokerController(*broker_configs(tmp / "store", port, namesrv_addr=namesrv_addr, store=store,
                                            **broker_fields), bind_host="127.0.0.1")


@contextlib.asynccontextmanager
async def cluster(tmp: Path, **broker_fields: object) -> AsyncIterator[Cluster]:
    namesrv = NamesrvController(NamesrvConfig(listen_port=0, bind_address="127.0.0.1",
                                              kv_config_path=str(tmp / "kvConfig.json")))
    await namesrv.start()
    broker = await start_on_free_port(lambda port: broker_controller(tmp, port, namesrv.address, **broker_fields))
    c = Cluster(namesrv, broker, tmp, broker.broker_config.listen_port)
    try:
        yield c
    finally:
        await c.broker.shutdown()
        await namesrv.stop()


def body_of(record: MessageRecord) -> bytes:
    return record.body or b""


def op_bodies(records: list[MessageRecord]) -> list[str]:
    return [body_of(r).decode() for r in records]


async def end_transaction(c: Cluster, result, commit_or_rollback: int, *, oneway: bool = True,
                          **overrides: object) -> object:
    """END_TRANSACTION of ``result`` (a half the producer left open), oneway or waiting for the broker's answer;
    ``overrides`` replace header fields."""
    _, offset = decode_offset_msg_id(result.offset_msg_id)
    fields = dict(producer_group=GROUP, tran_state_table_offset=result.queue_offset, commit_log_offset=offset,
                  commit_or_rollback=commit_or_rollback, msg_id=result.msg_id, topic=TOPIC)
    fields.update(overrides)
    ext = EndTransactionRequestHeader(**fields).to_ext()
    async with RemotingClient() as client:
        request = create_request(RequestCode.END_TRANSACTION, ext)
        if oneway:
            await client.invoke_oneway(c.broker.broker_addr, request)
            return None
        return await client.invoke(c.broker.broker_addr, request, 2000)
