"""DLedgerMessageStore, a group of one, in this process: puts become entries (a batch one entry per message), reads
cross from an old plain CommitLog to DLedger's data, and DLedger's refusals become Apache's put statuses, with the
queue offsets taken only by entries that were written; a new leader serves as master only once its log is committed
and dispatched, with its queue offsets rebuilt. A few hundred milliseconds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from pathlib import Path
from types import SimpleNamespace

import pytest

from broker.common.errors import DLedgerError
from broker.common.message import pack_host
from broker.common.record import decode_record
from broker.dledger.layout import BODY_OFFSET
from broker.dledger.member_state import Role
from broker.dledger.message_store import DLedgerMessageStore
from broker.dledger.protocol import DLedgerResponseCode
from broker.dledger.server import AppendResult
from broker.server.dledger_role import DLedgerRoleChangeHandler
from broker.store.commit_log import StoreMessage
from broker.store.config import BrokerRole, MessageStoreConfig
from broker.store.message_store import MessageStore
from broker.store.results import GetMessageStatus, PutMessageStatus
from tests.helpers import eventually, wait_until

HOST = pack_host("127.0.0.1", 10911)


def store_config(root: Path, dledger: bool = True) -> MessageStoreConfig:
    keys = {"storePathRootDir": str(root), "mappedFileSizeCommitLog": "65536", "dispatchMode": "THREAD"}
    if dledger:
        keys.update({"enableDLegerCommitLog": "true", "dLegerGroup": "broker-a",
                     "dLegerPeers": "n0-127.0.0.1:40911", "dLegerSelfId": "n0"})
    return MessageStoreConfig.from_properties(keys)


def message(i: int, queue_id: int = 0) -> StoreMessage:
    return StoreMessage("TopicD", queue_id, b"body-%d" % i, {"KEYS": f"k{i}"}, born_timestamp=int(time.time() * 1000))


def dispatched(store: MessageStore) -> None:
    wait_until("dispatch caught up", lambda: not store.dispatch_behind_bytes, 5, interval=0.01)


def bodies(store: MessageStore, queue_id: int = 0) -> list[bytes]:
    found = store.get_message("g", "TopicD", queue_id, 0, 100)
    assert found.status is GetMessageStatus.FOUND
    return [decode_record(record).body for record in found.records()]


@pytest.fixture
def store(tmp_path: Path):  # noqa: ANN201
    opened = DLedgerMessageStore(store_config(tmp_path), HOST)
    opened.start()
    yield opened
    opened.shutdown()


def test_a_put_of_several_messages_is_an_entry_each_with_its_queue_offset(store: DLedgerMessageStore) -> None:
    msgs = [message(i, queue_id=i % 2) for i in range(5)]
    result = asyncio.run(store.put_messages_async(msgs))
    assert result.status is PutMessageStatus.PUT_OK
    assert result.append.queue_offsets == [0, 0, 1, 1, 2]
    entries = [store.dledger.store.get(i) for i in range(5)]
    assert result.append.record_offsets == [e.pos + BODY_OFFSET for e in entries]
    end = entries[-1].pos + entries[-1].size
    assert [store.dledger.entry_start(o) for o in (*result.append.record_offsets, entries[2].pos, end)] == [
        *(e.pos for e in entries), entries[2].pos, end]  # where dispatch may begin, from a record's offset too
    for i, msg in enumerate(msgs):  # what the put says it stored is what reads find
        stored = store.stored_record(msg, result.append, i)
        read = store.lookup_message(result.append.record_offsets[i])
        assert (read.body, read.queue_offset, read.store_size) == (msg.body, stored.queue_offset, stored.store_size)
    dispatched(store)
    assert bodies(store, 0) == [b"body-0", b"body-2", b"body-4"]


def test_refusals_answer_as_apache_and_take_queue_offsets_only_when_written(store: DLedgerMessageStore,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    start_append = store.server.start_append

    def not_leader(bodies: list[bytes]) -> None:
        raise DLedgerError(DLedgerResponseCode.NOT_LEADER, "n0 is CANDIDATE, not the leader")

    def no_quorum(bodies: list[bytes]) -> tuple[list[AppendResult], Awaitable[None]]:
        appended, _ = start_append(bodies)  # in the local log, never acknowledged by a quorum

        async def timed_out() -> None:
            raise DLedgerError(DLedgerResponseCode.WAIT_QUORUM_ACK_TIMEOUT, "no quorum within 2500 ms")
        return appended, timed_out()

    monkeypatch.setattr(store.server, "start_append", not_leader)
    refused = asyncio.run(store.put_messages_async([message(0)]))
    assert refused.status is PutMessageStatus.OS_PAGE_CACHE_BUSY  # handleAppend's pos -1
    monkeypatch.setattr(store.server, "start_append", no_quorum)
    unsure = asyncio.run(store.put_messages_async([message(1)]))
    assert unsure.status is PutMessageStatus.IN_SYNC_REPLICAS_NOT_ENOUGH
    monkeypatch.setattr(store.server, "start_append", start_append)
    huge = StoreMessage("TopicD", 0, bytes(store.config.max_message_size - 100))  # a record, not a DLedger entry
    too_big = asyncio.run(store.put_messages_async([huge]))
    assert too_big.status is PutMessageStatus.UNKNOWN_ERROR and "4194304" in too_big.reason
    stored = asyncio.run(store.put_messages_async([message(2)]))
    assert stored.status is PutMessageStatus.PUT_OK
    assert stored.append.queue_offsets == [1]  # message 1's entry holds offset 0; messages 0 and huge took none


def test_a_batch_lands_whole_or_not_at_all(store: DLedgerMessageStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pending check passes once per put (DLedger's batch append): a put of many is never cut by the pending
    limit filling part way, which left entries missing under queue offsets already taken."""
    full = iter([False, True, False])  # the limit reached right after the first batch's check
    monkeypatch.setattr(store.server.pusher, "is_pending_full", lambda term: next(full))
    batch = asyncio.run(store.put_messages_async([message(i) for i in range(3)]))
    assert (batch.status, batch.append.queue_offsets) == (PutMessageStatus.PUT_OK, [0, 1, 2])
    end = store.dledger.store.ledger_end_index
    refused = asyncio.run(store.put_messages_async([message(3), message(4)]))
    assert refused.status is PutMessageStatus.OS_PAGE_CACHE_BUSY and store.dledger.store.ledger_end_index == end
    after = asyncio.run(store.put_messages_async([message(5)]))
    assert after.append.queue_offsets == [3]
    dispatched(store)
    assert bodies(store, 0) == [b"body-0", b"body-1", b"body-2", b"body-5"]


class Controller:
    """The two switches DLedgerRoleChangeHandler asks of a BrokerController, recorded."""

    def __init__(self) -> None:
        self.broker_config = SimpleNamespace(broker_role=BrokerRole.SLAVE)
        self.switches: list[object] = []

    async def change_to_master(self, role: BrokerRole) -> None:
        self.switches.append(role)
        self.broker_config.broker_role = role

    async def change_to_slave(self, broker_id: int) -> None:
        self.switches.append(broker_id)
        self.broker_config.broker_role = BrokerRole.SLAVE


def test_a_new_leader_serves_as_master_once_its_log_is_committed_and_dispatched(
        store: DLedgerMessageStore, monkeypatch: pytest.MonkeyPatch) -> None:
    def uncommitted(bodies: list[bytes]) -> tuple[list[AppendResult], Awaitable[None]]:
        """The entries as an old leader left them to this member: in its log, not committed."""
        entries = [store.dledger.store.append_as_leader(body) for body in bodies]
        return [AppendResult(e.index, e.pos) for e in entries], asyncio.sleep(0)

    monkeypatch.setattr(store.server, "start_append", uncommitted)
    asyncio.run(store.put_messages_async([message(i) for i in range(3)]))
    log = store.dledger.store
    assert (log.ledger_end_index, log.committed_index) == (2, -1) and not store.caught_up
    store.commit_log.queue_offsets = {}  # a follower's: it never put
    controller = Controller()
    handler = DLedgerRoleChangeHandler(controller, store)

    async def scenario() -> None:
        handler.start()
        handler.handle(log.member_state.current_term, Role.LEADER)
        await asyncio.sleep(0.3)
        assert controller.switches == []  # not a master while its log is not committed
        log.update_committed_index(log.member_state.current_term, 2)
        await eventually("the switch to master", lambda: controller.switches, 5, interval=0.01)
        await handler.stop()

    asyncio.run(scenario())
    assert controller.switches == [BrokerRole.SYNC_MASTER] and store.caught_up
    assert store.commit_log.queue_offsets == {("TopicD", 0): 3}  # recoverTopicQueueTable
    assert bodies(store) == [b"body-0", b"body-1", b"body-2"]


def test_an_old_commit_log_stays_readable_below_the_divide(tmp_path: Path) -> None:
    plain = MessageStore(store_config(tmp_path, dledger=False), HOST)
    plain.start()
    old = [plain.put_message(message(i)) for i in range(3)]
    dispatched(plain)
    plain.shutdown()
    store = DLedgerMessageStore(store_config(tmp_path), HOST)
    store.start()
    try:
        divide = store.dledger.divided_commit_log_offset
        assert divide == 65536  # the end of the old CommitLog's only file
        new = asyncio.run(store.put_messages_async([message(3)]))
        assert new.append.wrote_offset == divide + BODY_OFFSET and new.append.queue_offsets == [3]
        assert [store.lookup_message(r.append.wrote_offset).body for r in old] == [b"body-0", b"body-1", b"body-2"]
        dispatched(store)
        assert bodies(store) == [b"body-0", b"body-1", b"body-2", b"body-3"]
    finally:
        store.shutdown()
