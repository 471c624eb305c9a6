"""DLedger storage across implementations: Apache's broker in DLedger mode writes a store, ours opens it (every
message where Apache put it, its ConsumeQueue units what our dispatch makes of the entries), appends to it, and
Apache's broker opens the result and serves every message, ours included, to our client.

The writer is Apache RocketMQ 5.3.2 (DLedger 0.3.1.2), the broker that takes the store back the suite's
``APACHE_VERSION`` (5.5.0, DLedger 0.3.2): the two DLedger releases keep the same files, and so does ours."""

from __future__ import annotations

import filecmp
import os
import shutil
from pathlib import Path

import pytest

from broker.client import BlockingClient, Message, MessageExt, MessageQueue, PullStatus, SendStatus
from broker.common.errors import MQClientError
from broker.common.message import decode_message_id, pack_host
from broker.common.record import decode_record, encode_record
from broker.dledger.commit_log import DLedgerCommitLog, DLedgerSetup
from broker.dledger.layout import BODY_OFFSET
from broker.store.config import MessageStoreConfig
from broker.store.consume_queue import ConsumeQueueStore
from broker.store.dispatch import BuildConsumeQueue, BuildIndex
from broker.store.index_service import IndexService
from broker.store.layout import iter_cq_units
from broker.tools.admin import MQAdminExt
from broker.tools.local_cluster import free_port
from tests.apache.servers import start_apache_broker, start_apache_namesrv
from tests.helpers import run, wait_until

pytestmark = [pytest.mark.java, pytest.mark.slow]

TOPIC = "DLedgerTakeover"
QUEUES = 4
FILE_SIZE = 16 * 1024  # data files roll every few dozen entries
OURS = 20
WRITER_VERSION = "5.3.2"
CQ_FILE_SIZE = MessageStoreConfig().mapped_file_size_consume_queue


def dledger_conf(store: Path) -> dict[str, object]:
    return {"enableDLegerCommitLog": True, "dLegerGroup": "broker-a", "dLegerPeers": f"n0-127.0.0.1:{free_port()}",
            "dLegerSelfId": "n0", "mappedFileSizeCommitLog": FILE_SIZE, "defaultTopicQueueNums": QUEUES}


def our_commit_log(store: Path) -> DLedgerCommitLog:
    config = MessageStoreConfig.from_properties({
        "storePathRootDir": str(store), "mappedFileSizeCommitLog": str(FILE_SIZE), "enableDLegerCommitLog": "true",
        "dLegerGroup": "broker-a", "dLegerPeers": "n0-127.0.0.1:40911", "dLegerSelfId": "n0"})
    log = DLedgerCommitLog(DLedgerSetup.from_store_config(config))
    log.open()
    return log


def cq_units(store: Path, queue_id: int) -> list[tuple[int, int, int]]:
    folder = store / "consumequeue" / TOPIC / str(queue_id)
    units = []
    for name in sorted(os.listdir(folder)):
        units += [tuple(u) for u in iter_cq_units((folder / name).read_bytes()) if u.size]
    return units


def wait_led(client: BlockingClient) -> None:
    """A DLedger broker registers as the master of its group once it won its election, after its boot line."""
    wait_until("the DLedger broker registered as master",
               lambda: any(0 in b.broker_addrs for b in client.get_route("TBW102", refresh=True).broker_datas),
               ignoring=(MQClientError,))


async def query_key(namesrv_addr: str, key: str) -> list[MessageExt]:
    async with MQAdminExt(namesrv_addr) as admin:
        return (await admin.query_message(TOPIC, key, 32, 0, 2_000_000_000_000)).messages


def pull_all(client: BlockingClient, queue_id: int) -> list[bytes]:
    mq, bodies, offset = MessageQueue(TOPIC, "broker-a", queue_id), [], 0
    while True:
        result = client.pull(mq, offset, 32, decode=True)
        if result.status is not PullStatus.FOUND:
            return bodies
        bodies += [m.body for m in result.messages]
        offset = result.next_begin_offset


def test_takeover_both_ways(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with start_apache_namesrv(tmp_path / "namesrv") as namesrv:
        # 1. Apache's broker writes: single messages and a batch (one entry per message)
        with start_apache_broker(tmp_path / "apache-1", namesrv, store, version=WRITER_VERSION,
                                 **dledger_conf(store)) as broker, \
                BlockingClient(namesrv.addr) as client:
            wait_led(client)
            sent = [client.send(Message(TOPIC, f"apache {i}|".encode() * 30, keys=f"a{i}", tags=f"t{i % 3}"))
                    for i in range(60)]
            batch = [Message(TOPIC, f"batch {i}|".encode() * 30, keys=f"b{i}") for i in range(8)]
            sent.append(client.send_batch(batch, MessageQueue(TOPIC, "broker-a", 1)))
            assert {r.send_status for r in sent} == {SendStatus.SEND_OK}
            broker.stop()
        apache_copy = tmp_path / "apache-copy"
        shutil.copytree(store / "dledger-n0", apache_copy)

        # 2. ours opens it: every message where Apache's offsetMsgId says, PHYSICALOFFSET = entry pos + 48
        log = our_commit_log(store)
        # (at least: a send that timed out under load is sent again, and both copies are stored)
        assert len(log.store.data.files) > 2 and log.store.ledger_end_index >= 60 + 8 - 1
        offsets = [decode_message_id(mid)[1] for r in sent for mid in r.offset_msg_id.split(",")]
        bodies = [f"apache {i}|".encode() * 30 for i in range(60)] + [m.body for m in batch]
        for offset, body in zip(offsets, bodies, strict=True):
            record = decode_record(log.read_record(offset))
            assert record.commit_log_offset == offset and record.body == body
            assert log.store.data.view(offset - BODY_OFFSET, 4) == (1).to_bytes(4, "big")  # an entry starts there
        # Apache's ConsumeQueue units are what our dispatch makes of the entries
        requests, _ = log.dispatch_from(log.min_offset, 1000)
        for queue_id in range(QUEUES):
            ours = [(r.commit_log_offset, r.msg_size, r.tags_code) for r in requests if r.queue_id == queue_id]
            assert cq_units(store, queue_id) == ours
        stored = [decode_record(log.read_record(r.commit_log_offset)).body for r in requests]
        assert set(stored) == set(bodies)
        log.shutdown()
        # opening and closing changed nothing of Apache's files
        compared = filecmp.dircmp(apache_copy, store / "dledger-n0")
        assert compared.diff_files == [] and compared.left_only == compared.right_only == []
        assert not filecmp.cmpfiles(apache_copy / "data", store / "dledger-n0" / "data",
                                    os.listdir(apache_copy / "data"), shallow=False)[1]

        # 3. ours appends records after Apache's, and dispatches them into Apache's ConsumeQueues
        log = our_commit_log(store)
        consume_queues = ConsumeQueueStore(str(store / "consumequeue"), CQ_FILE_SIZE)
        consume_queues.load()
        consume_queues.recover()
        defaults = MessageStoreConfig()
        index = IndexService(str(store / "index"), defaults.max_hash_slot_num, defaults.max_index_num)
        index.load(True, 0)
        host = pack_host("127.0.0.1", 10911)
        next_offset = {q: consume_queues.get(TOPIC, q).max_offset for q in range(QUEUES)}
        for i in range(OURS):
            queue_id = i % QUEUES
            log.put_record(encode_record(topic=TOPIC.encode(), queue_id=queue_id, body=f"ours {i}|".encode() * 30,
                                         properties=f"KEYS\x01o{i}\x02".encode(), born_host=host, store_host=host,
                                         queue_offset=next_offset[queue_id], store_timestamp=1_800_000_000_000 + i))
            next_offset[queue_id] += 1
        dispatchers = [BuildConsumeQueue(consume_queues), BuildIndex(index)]
        assert log.dispatch_to(dispatchers, consume_queues.max_physic_offset) == log.max_offset
        consume_queues.flush_all()
        consume_queues.close()
        index.flush()
        index.close()
        log.shutdown()

        # 4. Apache's broker opens the result and serves every message, ours included, to our client
        with start_apache_broker(tmp_path / "apache-2", namesrv, store, **dledger_conf(store)), \
                BlockingClient(namesrv.addr) as client:
            wait_led(client)
            served = [body for q in range(QUEUES) for body in pull_all(client, q)]
            expected = stored + [f"ours {i}|".encode() * 30 for i in range(OURS)]
            assert sorted(served) == sorted(expected)
            found = run(query_key(namesrv.addr, "o7"))
            assert [m.body for m in found] == [b"ours 7|" * 30]  # through the IndexFile entries ours added
            after = client.send(Message(TOPIC, b"after the takeover"))
            assert decode_message_id(after.offset_msg_id)[1] > offsets[-1]
