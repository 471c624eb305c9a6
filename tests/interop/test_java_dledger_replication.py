"""DLedger's log replication across implementations: our member and two of Apache's DLedger brokers (5.5.0, DLedger
0.3.2) in one group. Led by Apache, the messages sent to its broker reach our member's log; led by ours, the records
ours appends reach Apache's members, whose brokers dispatch them into their ConsumeQueues. Either way the three logs
end up equal byte for byte (DLedger's data and index files)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from broker.client import BlockingClient, Message, SendStatus
from broker.common.errors import MQClientError
from broker.common.message import pack_host
from broker.common.record import encode_record
from broker.dledger.commit_log import DLedgerCommitLog, DLedgerSetup
from broker.dledger.config import DLedgerConfig
from broker.dledger.layout import INDEX_UNIT_SIZE
from broker.dledger.protocol import DLedgerResponseCode, MetadataRequest
from broker.dledger.rpc import DLedgerRpcClient
from broker.dledger.server import DLedgerServer
from broker.store.config import MessageStoreConfig
from broker.store.layout import iter_cq_units
from broker.tools.local_cluster import free_port
from tests.apache.servers import ApacheProcess, start_apache_broker, start_apache_namesrv
from tests.helpers import LoopThread, wait_until

pytestmark = [pytest.mark.java, pytest.mark.slow]

GROUP = "broker-a"
TOPIC = "DLedgerReplication"
QUEUES = 4
FILE_SIZE = 64 * 1024  # DLedger's data files roll every few dozen entries; all three members use the same size
COUNT = 40


def member_log(root: Path, member: str) -> tuple[dict[str, bytes], bytes]:
    """A member's data files, and its index units (index files are 160 MiB: only the units written)."""
    folder = root / f"dledger-{member}"
    data = {name: (folder / "data" / name).read_bytes() for name in sorted(os.listdir(folder / "data"))}
    with open(folder / "index" / f"{0:020d}", "rb") as index:
        units = index.read(INDEX_UNIT_SIZE * 1024)
    return data, units.rstrip(b"\0")


def cq_count(store: Path) -> int:
    total = 0
    for queue_id in range(QUEUES):
        folder = store / "consumequeue" / TOPIC / str(queue_id)
        if folder.is_dir():
            total += sum(1 for name in os.listdir(folder)
                         for u in iter_cq_units((folder / name).read_bytes()) if u.size)
    return total


@pytest.mark.parametrize("ours_leads", [True, False], ids=["ours-leads", "apache-leads"])
def test_entries_cross_between_our_member_and_apaches(tmp_path: Path, ours_leads: bool) -> None:
    peers = {member: f"127.0.0.1:{free_port()}" for member in ("n0", "n1", "n2")}
    dledger_peers = ";".join(f"{member}-{address}" for member, address in peers.items())
    ours_root = tmp_path / "ours"
    store_config = MessageStoreConfig.from_properties({
        "storePathRootDir": str(ours_root), "mappedFileSizeCommitLog": str(FILE_SIZE), "enableDLegerCommitLog": "true",
        "dLegerGroup": GROUP, "dLegerPeers": dledger_peers, "dLegerSelfId": "n0"})
    commit_log = DLedgerCommitLog(DLedgerSetup.from_store_config(store_config))
    commit_log.open()
    # a loaded CI machine can keep Apache's JVMs from acknowledging within DLedger's 2.5 s; the order is the test
    patient = dataclasses.replace(DLedgerConfig.from_store_config(store_config), max_wait_ack_time_ms=15_000)
    ours = DLedgerServer(patient, store=commit_log.store)
    loop = LoopThread(timeout=60)
    probe = DLedgerRpcClient(peers)
    running: dict[str, ApacheProcess] = {}
    ours_running = False

    def leader_named_by(member: str) -> str | None:
        if member == "n0":
            return ours.member_state.leader_id
        answer = loop.run(probe.metadata(MetadataRequest(group=GROUP, remote_id=member)))
        return answer.leader_id if answer.code == DLedgerResponseCode.SUCCESS else None

    def agreed_leader() -> str | None:
        named = {leader_named_by(m) for m in (*running, *(("n0",) if ours_running else ()))}
        return named.pop() if len(named) == 1 and None not in named else None

    def start_ours() -> None:
        nonlocal ours_running
        loop.run(ours.start())
        ours_running = True

    def logs_equal(leader_root: Path, leader: str) -> bool:
        expected = member_log(leader_root, leader)
        return all(member_log(root, member) == expected for member, root in roots.items() if member != leader)

    roots = {"n0": ours_root, "n1": tmp_path / "n1" / "store", "n2": tmp_path / "n2" / "store"}
    with start_apache_namesrv(tmp_path / "namesrv") as namesrv:
        try:
            if ours_leads:
                start_ours()
            for member in ("n1", "n2"):
                running[member] = start_apache_broker(
                    tmp_path / member, namesrv, roots[member], enableDLegerCommitLog=True, dLegerGroup=GROUP,
                    dLegerPeers=dledger_peers, dLegerSelfId=member, mappedFileSizeCommitLog=FILE_SIZE,
                    defaultTopicQueueNums=QUEUES)
            if ours_leads:
                wait_until("ours leads all three", lambda: agreed_leader() == "n0", 30)
                host = pack_host("127.0.0.1", 10911)
                for i in range(COUNT):
                    record = encode_record(topic=TOPIC.encode(), queue_id=i % QUEUES, body=f"ours {i}|".encode() * 20,
                                           properties=f"KEYS\x01o{i}\x02".encode(), born_host=host, store_host=host,
                                           queue_offset=i // QUEUES, store_timestamp=1_800_000_000_000 + i)
                    result = loop.run(ours.append(record))
                    assert result.index == i
                assert commit_log.store.committed_index == COUNT - 1
                wait_until("Apache's members hold our log", lambda: logs_equal(ours_root, "n0"), 30)
                # committed there too: Apache's brokers dispatched our records into their ConsumeQueues
                wait_until("Apache's ConsumeQueues hold our records",
                           lambda: all(cq_count(roots[m]) == COUNT for m in running), 30)
            else:
                wait_until("the Apache members elect between them", agreed_leader, 30)
                leader = agreed_leader()
                assert leader in running
                with BlockingClient(namesrv.addr) as client:
                    wait_until("the leader registered as master", lambda: any(
                        0 in b.broker_addrs for b in client.get_route("TBW102", refresh=True).broker_datas),
                        ignoring=(MQClientError,))
                    sent = [client.send(Message(TOPIC, f"apache {i}|".encode() * 20, keys=f"a{i}"))
                            for i in range(COUNT)]
                assert {r.send_status for r in sent} == {SendStatus.SEND_OK}
                start_ours()
                wait_until("ours follows Apache's leader", lambda: agreed_leader() == leader, 30)
                wait_until("ours holds Apache's log", lambda: logs_equal(roots[leader], leader), 30,
                           ignoring=(FileNotFoundError,))  # its data folder comes with the first push
                wait_until("ours committed it", lambda: commit_log.store.committed_index
                           == commit_log.store.ledger_end_index >= COUNT - 1, 30)
                requests, _ = commit_log.dispatch_from(commit_log.min_offset, 1000)
                keys = sorted(k for r in requests if r.topic == TOPIC for k in r.keys)
                assert keys == sorted(f"a{i}" for i in range(COUNT))
        finally:
            if ours_running:
                loop.run(ours.stop())
            loop.run(probe.close())
            loop.close()
            commit_log.shutdown()
            for proc in running.values():
                proc.close()
