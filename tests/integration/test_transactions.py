"""Transactional (half) messages end to end, in one process: our NameServer and BrokerController on 127.0.0.1 and the
Python TransactionProducer (broker.client.transaction). The store is read directly to see what a consumer would see
(the real topic's ConsumeQueue) and what the broker wrote (half and op topics).

Check timing is shortened through the broker's config keys (transactionTimeOut, transactionCheckInterval).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from broker.client import ClientConfig, Message, MessageExt
from broker.client.transaction import TransactionProducer
from broker.client.transaction_protocol import LocalTransactionState
from broker.common.errors import RequestTimeout
from broker.common.fastjson import decode_json, encode_json
from broker.common.message import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_ID,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    decode_offset_msg_id,
    encode_properties,
    pack_host,
    transaction_type,
)
from broker.common.record import MessageRecord, decode_record, encode_record
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.server import NamesrvController
from broker.remoting.client import RemotingClient
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from broker.remoting.headers import EndTransactionRequestHeader, SendMessageRequestHeader
from broker.server.broker_controller import BrokerController
from broker.server.metadata.paths import consumer_offset_path
from broker.server.schedule import SCHEDULE_TOPIC
from broker.server.transaction.bridge import CHECK_MAX_TIME_TOPIC, HALF_TOPIC, OP_TOPIC, TRANS_GROUP
from broker.store.layout import CQ_UNIT_SIZE
from tests.helpers import client_config, eventually, free_port, now_ms, run
from tests.integration.in_process import broker_configs, dispatched

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
    port = free_port()
    broker = broker_controller(tmp, port, namesrv.address, **broker_fields)
    await broker.start()
    c = Cluster(namesrv, broker, tmp, port)
    try:
        yield c
    finally:
        await c.broker.shutdown()
        await namesrv.stop()


def body_of(record: MessageRecord) -> bytes:
    return record.body or b""


def op_bodies(records: list[MessageRecord]) -> list[str]:
    return [body_of(r).decode() for r in records]


# -- the three outcomes ---------------------------------------------------------------------------------------------


def test_commit_writes_the_message_to_its_real_topic_and_an_op_record(tmp_path):
    async def scenario() -> None:
        async with cluster(tmp_path) as c:
            listener = Listener(LocalTransactionState.COMMIT_MESSAGE)
            async with c.producer(listener) as producer:
                msg = Message(TOPIC, b"paid", tags="TagA", keys="order-1", flag=7)
                result = await producer.send_message_in_transaction(msg, arg="order-1")
                assert result.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
                assert result.transaction_id == result.msg_id
                await eventually("commit", lambda: c.broker.transactional_message_service.open == {})
            [half] = await c.records(HALF_TOPIC)
            [op] = await c.records(OP_TOPIC)
            [committed] = await c.records(TOPIC)
            uniq = result.msg_id
            # The half message: in queue 0 of the half topic, not a transaction type, destination kept.
            assert transaction_type(half.sys_flag) == TRANSACTION_NOT_TYPE
            assert half.queue_id == 0 and half.queue_offset == result.queue_offset
            assert half.properties[PROPERTY_REAL_TOPIC] == TOPIC
            assert half.properties[PROPERTY_REAL_QUEUE_ID] == str(result.message_queue.queue_id)
            assert half.properties[PROPERTY_TRANSACTION_ID] == uniq
            assert half.properties[PROPERTY_PRODUCER_GROUP] == GROUP
            # The committed message: real topic and queue, commit type, the half record's properties but its
            # destination (as Apache 5.5 writes it: TRAN_MSG stays).
            assert (committed.topic, committed.queue_id) == (TOPIC, result.message_queue.queue_id)
            assert transaction_type(committed.sys_flag) == TRANSACTION_COMMIT_TYPE
            assert committed.prepared_transaction_offset == half.commit_log_offset
            assert body_of(committed) == b"paid" and committed.flag == 7
            destination = (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID)
            assert list(committed.properties.items()) == [(k, val) for k, val in half.properties.items()
                                                          if k not in destination]
            assert committed.properties[PROPERTY_TRANSACTION_PREPARED] == "true"
            assert committed.properties[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] == uniq
            assert committed.properties["KEYS"] == "order-1" and committed.properties["TAGS"] == "TagA"
            assert committed.born_timestamp == half.born_timestamp
            # The op record: tag "d", body the half queue offset and a comma, as Java 5 writes it.
            assert list(op.properties.items()) == [("WAIT", "true"), ("TAGS", "d")]  # Java's HashMap order
            assert body_of(op) == f"{half.queue_offset},".encode()
            assert listener.executed[0].properties[PROPERTY_TRANSACTION_PREPARED] == "true"
            assert listener.checked == []
            offsets = c.broker.consumer_offset_manager
            assert offsets.query_offset(TRANS_GROUP, HALF_TOPIC, 0) == 1
            assert offsets.query_offset(TRANS_GROUP, OP_TOPIC, 0) == 1

    run(scenario())


def test_rollback_leaves_nothing_visible_but_writes_the_op_record(tmp_path):
    async def scenario() -> None:
        async with cluster(tmp_path) as c:
            async with c.producer(Listener(LocalTransactionState.ROLLBACK_MESSAGE)) as producer:
                result = await producer.send_message_in_transaction(Message(TOPIC, b"cancelled"))
                assert result.local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE
                await eventually("rollback", lambda: c.broker.transactional_message_service.open == {})
            assert await c.records(TOPIC) == []
            [op] = await c.records(OP_TOPIC)
            assert body_of(op) == f"{result.queue_offset},".encode()

    run(scenario())


def test_unknown_stays_invisible_until_the_check_commits_it(tmp_path):
    async def scenario() -> None:
        async with cluster(tmp_path) as c:
            listener = Listener(LocalTransactionState.UNKNOW)
            async with c.producer(listener) as producer:
                sent_at = now_ms()
                result = await producer.send_message_in_transaction(Message(TOPIC, b"later", keys="k"))
                assert result.local_transaction_state is LocalTransactionState.UNKNOW
                await asyncio.sleep(TIMEOUT_MS / 2000)
                # Only the check commits it: whatever the timing on a busy machine, visible means checked already.
                assert await c.records(TOPIC) == [] or listener.checked, "visible before anyone committed it"
                await eventually("a check", lambda: listener.checked)
                await eventually("commit on check", lambda: c.broker.transactional_message_service.open == {})
            checked_at, checked = listener.checked[0]
            assert len(listener.checked) == 1
            assert checked_at - sent_at >= TIMEOUT_MS, "checked before transactionTimeOut"
            # What the producer is asked about: the message as sent, in its real topic, one check counted.
            assert checked.topic == TOPIC and checked.body == b"later" and checked.keys == "k"
            assert checked.msg_id == result.msg_id
            assert checked.properties[PROPERTY_TRANSACTION_CHECK_TIMES] == "1"
            halves = await c.records(HALF_TOPIC)
            assert [h.properties.get(PROPERTY_TRANSACTION_CHECK_TIMES) for h in halves] == [None, "1"]
            [committed] = await c.records(TOPIC)
            assert committed.prepared_transaction_offset == halves[1].commit_log_offset
            assert body_of(committed) == b"later"
            [op] = await c.records(OP_TOPIC)
            assert body_of(op) == f"{halves[1].queue_offset},".encode()

    run(scenario())


def test_the_check_can_roll_back_and_an_unanswered_transaction_is_discarded_after_check_max(tmp_path):
    async def scenario() -> None:
        async with cluster(tmp_path, transaction_check_max=2) as c:
            answers = {"rollback": LocalTransactionState.ROLLBACK_MESSAGE, "never": LocalTransactionState.UNKNOW}
            listener = Listener(LocalTransactionState.UNKNOW, check=lambda m: answers[m.body.decode()])
            async with c.producer(listener) as producer:
                sent = {body: await producer.send_message_in_transaction(Message(TOPIC, body.encode()))
                        for body in answers}
                await eventually("all ended", lambda: c.broker.transactional_message_service.open == {})
                await asyncio.sleep(5 * INTERVAL_MS / 1000)
            asked = [m.body for _, m in listener.checked]
            assert asked.count(b"rollback") == 1
            assert asked.count(b"never") == 2, "asked other than transactionCheckMax times"
            assert await c.records(TOPIC) == []
            [discarded] = await c.records(CHECK_MAX_TIME_TOPIC)
            assert body_of(discarded) == b"never"
            assert discarded.properties[PROPERTY_TRANSACTION_CHECK_TIMES] == "2"
            assert c.broker.topic_config_manager.select_topic_config(CHECK_MAX_TIME_TOPIC) is not None
            # A commit that comes after the discard still commits, as Java's does; a rolled-back one stays so.
            for body in answers:
                response = await end_transaction(c, sent[body], TRANSACTION_COMMIT_TYPE, oneway=False)
                assert response.code == ResponseCode.SUCCESS
            assert [body_of(r) for r in await c.records(TOPIC)] == [b"never"]

    run(scenario())


def test_check_immunity_time_delays_the_check_and_a_late_end_is_refused(tmp_path):
    async def scenario() -> None:
        async with cluster(tmp_path) as c:
            listener = Listener(LocalTransactionState.UNKNOW)
            async with c.producer(listener) as producer:
                msg = Message(TOPIC, b"immune", properties={PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: "1"})
                sent_at = now_ms()
                result = await producer.send_message_in_transaction(msg)
                await asyncio.sleep(0.2)
                # The producer's own commit within the immunity time is fine...
                early = await end_transaction(c, result, TRANSACTION_COMMIT_TYPE, oneway=False)
                assert early.code == ResponseCode.SUCCESS
                late_msg = Message(TOPIC, b"late", properties={PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: "1"})
                late = await producer.send_message_in_transaction(late_msg)
                await eventually("a check", lambda: listener.checked)
                assert listener.checked[0][0] - sent_at >= 1000, "checked within CHECK_IMMUNITY_TIME_IN_SECONDS"
                # ...after it, only an answer to a check may end it.
                response = await end_transaction(c, late, TRANSACTION_COMMIT_TYPE, oneway=False)
                assert response.code == ResponseCode.ILLEGAL_OPERATION
            await eventually("commit on check", lambda: c.broker.transactional_message_service.open == {})
            assert sorted(body_of(r) for r in await c.records(TOPIC)) == [b"immune", b"late"]

    run(scenario())


# -- END_TRANSACTION as the broker answers it -------------------------------------------------------------------------


async def end_transaction(c: Cluster, result, commit_or_rollback: int, *, oneway: bool = True,
                          **overrides: object) -> object:
    from broker.common.message import decode_offset_msg_id

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


def test_end_transaction_codes_and_remarks(tmp_path):
    async def scenario() -> None:
        async with cluster(tmp_path, transaction_time_out=60_000) as c:  # no check while we talk
            async with c.producer(Listener(LocalTransactionState.UNKNOW)) as producer:
                result = await producer.send_message_in_transaction(Message(TOPIC, b"x"))
            commit = TRANSACTION_COMMIT_TYPE

            async def remark_of(kind: int = commit, **overrides: object) -> tuple[int, str | None]:
                response = await end_transaction(c, result, kind, oneway=False, **overrides)
                return response.code, response.remark

            assert await remark_of(producer_group="other") == (ResponseCode.SYSTEM_ERROR, "The producer group wrong")
            assert await remark_of(tran_state_table_offset=99) == (
                ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong")
            assert await remark_of(commit_log_offset=10**9) == (
                ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
            code, remark = await remark_of(kind=5)
            assert code == ResponseCode.SYSTEM_ERROR and "commitOrRollback field wrong" in remark
            with pytest.raises(RequestTimeout):  # a pending state is not answered at all
                await end_transaction(c, result, TRANSACTION_NOT_TYPE, oneway=False)
            assert c.broker.transactional_message_service.open, "a refused end ended the transaction"
            assert await remark_of() == (ResponseCode.SUCCESS, None)
            assert await remark_of() == (ResponseCode.SUCCESS, None)  # ended before: nothing written again
            assert await remark_of(kind=TRANSACTION_ROLLBACK_TYPE) == (ResponseCode.SUCCESS, None)
            assert [body_of(r) for r in await c.records(TOPIC)] == [b"x"]
            assert len(await c.records(OP_TOPIC)) == 1

    run(scenario())


def test_concurrent_ends_of_one_transaction_commit_it_once(tmp_path):
    async def scenario() -> None:
        async with cluster(tmp_path, transaction_time_out=60_000) as c:
            async with c.producer(Listener(LocalTransactionState.UNKNOW)) as producer:
                result = await producer.send_message_in_transaction(Message(TOPIC, b"once"))
            await asyncio.gather(*(end_transaction(c, result, TRANSACTION_COMMIT_TYPE) for _ in range(5)))
            await eventually("commit", lambda: c.broker.transactional_message_service.open == {})
            await asyncio.sleep(0.2)
            assert [body_of(r) for r in await c.records(TOPIC)] == [b"once"]

    run(scenario())


def test_a_kept_half_record_is_the_stored_one_and_is_ended_as_one_read_from_the_store(tmp_path):
    """The records kept for END_TRANSACTION (HalfRecords) are what lookup_message decodes, field for field, and a
    kept half and one read back from the store end alike; ended halves are not kept."""
    async def scenario() -> None:
        async with cluster(tmp_path, transaction_time_out=60_000) as c:
            service = c.broker.transactional_message_service
            async with c.producer(Listener(LocalTransactionState.UNKNOW)) as producer:
                sent = [await producer.send_message_in_transaction(
                    Message(TOPIC, body, tags="TagA", keys=f"k{i} k", flag=3, properties={"user": "é"}))
                    for i, body in enumerate([b"kept", b"read", b"x" * 5000])]
            offsets = [decode_offset_msg_id(r.offset_msg_id)[1] for r in sent]
            for offset in offsets:
                kept = service.half_records.get(offset)
                assert kept is not None and kept == c.store.lookup_message(offset)
            service.half_records.discard(offsets[1])  # as if the bound had pushed it out: read from the store
            for r in sent:
                assert (await end_transaction(c, r, TRANSACTION_COMMIT_TYPE, oneway=False)).code == ResponseCode.SUCCESS
            assert service.open == {} and len(service.half_records) == 0 and service.half_records.bytes == 0
            committed = sorted(await c.records(TOPIC), key=lambda r: r.prepared_transaction_offset)
            assert [r.prepared_transaction_offset for r in committed] == offsets
            kept, read, big = committed
            differs = {"store_size", "body_crc", "queue_id", "queue_offset", "commit_log_offset", "born_timestamp",
                       "store_timestamp", "prepared_transaction_offset", "body", "properties"}
            for field_ in set(MessageRecord.__slots__) - differs:
                assert getattr(kept, field_) == getattr(read, field_), field_
            ids = (PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, PROPERTY_TRANSACTION_ID, "KEYS")
            assert [(k, v if k not in ids else k) for k, v in kept.properties.items()] == [
                (k, v if k not in ids else k) for k, v in read.properties.items()]
            assert (body_of(kept), body_of(read), big.body == c.store.lookup_message(offsets[2]).body) == (
                b"kept", b"read", True)

    run(scenario())


def test_kept_half_records_stay_within_their_bound():
    from broker.server.transaction.state import RECORD_OVERHEAD, KeptByOffset

    records: KeptByOffset[str] = KeptByOffset(max_bytes=3 * (100 + RECORD_OVERHEAD))
    for offset in range(0, 1000, 100):
        records.add(offset, f"r{offset}", 100)
        assert records.bytes <= records.max_bytes
    assert len(records) == 3 and [records.get(o) for o in (600, 700, 800, 900)] == [None, "r700", "r800", "r900"]
    records.add(900, "again", 200)  # the same offset again replaces it
    assert len(records) == 2 and records.bytes == 100 + 200 + 2 * RECORD_OVERHEAD and records.get(900) == "again"
    records.add(1000, "huge", 10 * records.max_bytes)  # bigger than the bound: not kept at all
    assert len(records) == 0 and records.bytes == 0
    records.discard(12345)  # not there: nothing happens


def test_a_committed_message_with_a_delay_level_is_delivered_after_its_delay(tmp_path):
    """Official clients clear DELAY from transactional sends, so they never see this case. Apache's broker parks
    such a half message at prepare time, and its commit then goes to the half topic (REAL_TOPIC); ours keeps the half
    in the half topic and parks the committed message, as its store hook does for any committed message."""
    async def scenario() -> None:
        async with cluster(tmp_path, transaction_time_out=60_000) as c, RemotingClient() as client:
            props = {PROPERTY_TRANSACTION_PREPARED: "true", PROPERTY_PRODUCER_GROUP: GROUP,
                     PROPERTY_DELAY_TIME_LEVEL: "1", PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: "AC110001000078308DB1"}
            header = SendMessageRequestHeader(
                producer_group=GROUP, topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=4, queue_id=0,
                sys_flag=TRANSACTION_PREPARED_TYPE, born_timestamp=now_ms(), flag=0,
                properties=encode_properties(props))
            sent = await client.invoke(c.broker.broker_addr,
                                       create_request(RequestCode.SEND_MESSAGE, header.to_ext(), b"later"), 2000)
            assert sent.code == ResponseCode.SUCCESS
            _, offset = decode_offset_msg_id(sent.ext_fields["msgId"])
            end = EndTransactionRequestHeader(
                producer_group=GROUP, tran_state_table_offset=int(sent.ext_fields["queueOffset"]),
                commit_log_offset=offset, commit_or_rollback=TRANSACTION_COMMIT_TYPE,
                msg_id="AC110001000078308DB1", topic=TOPIC)
            committed_at = now_ms()
            response = await client.invoke(c.broker.broker_addr,
                                           create_request(RequestCode.END_TRANSACTION, end.to_ext()), 2000)
            assert response.code == ResponseCode.SUCCESS
            [parked] = await c.records(SCHEDULE_TOPIC)
            assert parked.properties[PROPERTY_REAL_TOPIC] == TOPIC
            assert transaction_type(parked.sys_flag) == TRANSACTION_COMMIT_TYPE
            assert await c.records(TOPIC) == [], "delivered before its delay"
            await eventually("delayed delivery", lambda: c.store.max_offset_in_queue(TOPIC, 0) > 0)
            [delivered] = await c.records(TOPIC)
            assert body_of(delivered) == b"later"
            assert delivered.store_timestamp - committed_at >= 900  # level 1 is 1 s

    run(scenario())


def test_prepared_sends_are_refused_when_reject_transaction_message(tmp_path):
    async def scenario() -> None:
        async with cluster(tmp_path, reject_transaction_message=True) as c, RemotingClient() as client:
            header = SendMessageRequestHeader(
                producer_group=GROUP, topic=TOPIC, default_topic="TBW102", default_topic_queue_nums=4, queue_id=0,
                sys_flag=TRANSACTION_PREPARED_TYPE, born_timestamp=now_ms(), flag=0,
                properties=encode_properties({PROPERTY_TRANSACTION_PREPARED: "true", PROPERTY_PRODUCER_GROUP: GROUP}))
            response = await client.invoke(c.broker.broker_addr,
                                           create_request(RequestCode.SEND_MESSAGE, header.to_ext(), b"x"), 2000)
            assert response.code == ResponseCode.NO_PERMISSION
            assert response.remark == "the broker[127.0.0.1] sending transaction message is forbidden"
            assert await c.records(HALF_TOPIC) == []

    run(scenario())


# -- restarts -------------------------------------------------------------------------------------------------------


def forget_transaction_offsets(tmp: Path) -> None:
    """A crash before consumerOffset.json was written: the CID_RMQ_SYS_TRANS offsets are gone."""
    path = Path(consumer_offset_path(str(tmp / "store")))
    data = decode_json(path.read_text())
    table = data["offsetTable"]
    for key in [k for k in table if k.endswith(f"@{TRANS_GROUP}")]:
        del table[key]
    path.write_text(encode_json(data))


@pytest.mark.parametrize("offsets", ["kept", "lost"])
def test_a_restart_loses_no_half_message_and_commits_none_twice(tmp_path, offsets):
    async def scenario() -> None:
        async with cluster(tmp_path, transaction_time_out=600, transaction_check_interval=200) as c:
            # Before the restart: one committed, one rolled back, two open (one of them checked once already).
            answers = {b"committed": LocalTransactionState.COMMIT_MESSAGE,
                       b"rolled-back": LocalTransactionState.ROLLBACK_MESSAGE}
            listener = Listener(LocalTransactionState.UNKNOW, check=lambda m: LocalTransactionState.UNKNOW)
            async with c.producer(listener, "before") as producer:
                for body, state in answers.items():
                    listener.execute = state
                    await producer.send_message_in_transaction(Message(TOPIC, body))
                listener.execute = LocalTransactionState.UNKNOW
                await producer.send_message_in_transaction(Message(TOPIC, b"open-checked"))
                await eventually("a first check", lambda: listener.checked)
                await producer.send_message_in_transaction(Message(TOPIC, b"open-new"))
                assert len(c.broker.transactional_message_service.open) == 2
            assert [body_of(r) for r in await c.records(TOPIC)] == [b"committed"]

            await c.restart(before_start=(lambda: forget_transaction_offsets(tmp_path)) if offsets == "lost"
                            else (lambda: None))
            reopened = c.broker.transactional_message_service.open.values()
            assert sorted(body_of(c.store.lookup_message(e.commit_log_offset)) for e in reopened) == [
                b"open-checked", b"open-new"]

            # After it, a producer that commits whatever it is asked about: only the open ones may be asked.
            after = Listener(LocalTransactionState.COMMIT_MESSAGE)
            async with c.producer(after, "after"):
                await eventually("commits on check", lambda: c.broker.transactional_message_service.open == {})
                await asyncio.sleep(5 * INTERVAL_MS / 1000)
            assert sorted(m.body for _, m in after.checked) == [b"open-checked", b"open-new"]
            assert sorted(body_of(r) for r in await c.records(TOPIC)) == [b"committed", b"open-checked", b"open-new"]

            await c.restart()  # and once everything ended, a restart has nothing to reopen
            assert c.broker.transactional_message_service.open == {}

    run(scenario())


def test_transaction_offsets_follow_javas_meaning(tmp_path):
    """CID_RMQ_SYS_TRANS offsets: every half offset below the half one is ended or superseded, every op record below
    the op one names only such offsets; an open transaction holds both back."""
    async def scenario() -> None:
        async with cluster(tmp_path, transaction_time_out=60_000) as c:
            listener = Listener(LocalTransactionState.UNKNOW, check=lambda m: LocalTransactionState.UNKNOW)
            async with c.producer(listener) as producer:
                first = await producer.send_message_in_transaction(Message(TOPIC, b"open"))
                listener.execute = LocalTransactionState.COMMIT_MESSAGE
                for i in range(3):
                    await producer.send_message_in_transaction(Message(TOPIC, b"c%d" % i))
                await eventually("commits", lambda: len(c.broker.transactional_message_service.open) == 1)
                offsets = c.broker.consumer_offset_manager
                service = c.broker.transactional_message_service
                assert (service.half.offset, service.op.offset) == (first.queue_offset, 0) == (0, 0)
                # Nothing moved yet, so nothing is committed (as in Java: no CID_RMQ_SYS_TRANS entry at all).
                assert offsets.query_offset(TRANS_GROUP, HALF_TOPIC, 0) == -1
                assert offsets.query_offset(TRANS_GROUP, OP_TOPIC, 0) == -1
                await end_transaction(c, first, TRANSACTION_ROLLBACK_TYPE)
                await eventually("rollback", lambda: not c.broker.transactional_message_service.open)
                await c.dispatched()
                assert offsets.query_offset(TRANS_GROUP, HALF_TOPIC, 0) == c.store.max_offset_in_queue(HALF_TOPIC, 0)
                assert offsets.query_offset(TRANS_GROUP, OP_TOPIC, 0) == c.store.max_offset_in_queue(OP_TOPIC, 0)

    run(scenario())


def test_consumer_offsets_file_names_the_transaction_group(tmp_path):
    async def scenario() -> None:
        async with cluster(tmp_path) as c:
            async with c.producer(Listener(LocalTransactionState.COMMIT_MESSAGE)) as producer:
                await producer.send_message_in_transaction(Message(TOPIC, b"x"))
                await eventually("commit", lambda: c.broker.transactional_message_service.open == {})
        table = decode_json(Path(consumer_offset_path(str(tmp_path / "store"))).read_text())["offsetTable"]
        assert table[f"{HALF_TOPIC}@{TRANS_GROUP}"] == {"0": 1}
        assert table[f"{OP_TOPIC}@{TRANS_GROUP}"] == {"0": 1}

    run(scenario())


# -- the pieces -------------------------------------------------------------------------------------------------------


def test_op_records_of_java_4_and_5_are_read():
    from broker.server.transaction.bridge import op_message, op_offsets

    host = pack_host("127.0.0.1", 1)

    def op(body: bytes, tags: str = "d") -> MessageRecord:
        props = encode_properties({"WAIT": "true", "TAGS": tags}).encode()
        return decode_record(encode_record(topic=OP_TOPIC.encode(), queue_id=0, body=body, properties=props,
                                           born_host=host, store_host=host))

    assert op_offsets(op(b"3,4,")) == [3, 4]  # 5.x: batched, each offset followed by ","
    assert op_offsets(op(b"7")) == [7]  # 4.x: one offset, no separator
    assert op_offsets(op(b"7", tags="x")) == []  # not a remove record
    assert op_offsets(op(b"x,9,")) == [9]
    assert op_message([5, 6], host, 0).body == b"5,6,"


def test_immunity_times_as_java_reads_them():
    from broker.server.transaction.bridge import check_immunity_ms, end_immunity_ms

    assert check_immunity_ms("2", 6000) == 2000  # the check honours a shorter one (TransactionalMessageServiceImpl)
    assert check_immunity_ms("ten", 6000) == 6000
    assert end_immunity_ms("2", 6000) == 6000  # ending refuses only after at least transactionTimeOut
    assert end_immunity_ms("10", 6000) == 10_000


def test_queue_progress_moves_over_done_offsets_only():
    from broker.server.transaction.state import QueueProgress

    progress = QueueProgress(3)
    assert not progress.done(5) and progress.offset == 3
    assert not progress.done(1)  # below: nothing to do
    assert progress.done(3) and progress.offset == 4
    assert progress.done(4) and progress.offset == 6
