"""Master–slave replication between our brokers, as real processes: byte-identical CommitLogs, the slave's own
ConsumeQueues and index, SYNC_MASTER's answers, catch-up after restarts, and bad bytes on the HA port.

The master sends in small frames (haTransferBatchSize) and small CommitLog files, so frames end mid-record and
files roll: the slave must dispatch only whole records and follow the master across files.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.client import BlockingClient, Message, SendResult, SendStatus
from broker.common.message import decode_message_id
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from broker.remoting.headers import QueryMessageRequestHeader
from broker.replication.protocol import REPORT
from broker.tools.admin import MQAdminExt
from tests.helpers import run, wait_until
from tests.integration.cluster import ServerProcess, start_broker, start_namesrv
from tests.integration.replication import assert_same_files, ha_address, max_offset, store_files, wait_caught_up

TOPIC = "ReplicatedTopic"
FILE_SIZE = 64 * 1024
PAIR_CONF: dict[str, object] = {"mappedFileSizeCommitLog": FILE_SIZE, "haTransferBatchSize": 1000,
                                "haSendHeartbeatInterval": 1000, "haHousekeepingInterval": 4000,
                                "slaveTimeout": 1000}


def start_slave(home: Path, namesrv: ServerProcess, master: ServerProcess, *, configured: bool = True,
                **conf: object) -> ServerProcess:
    """A slave of ``master``: told its HA address (haMasterAddress), or, ``configured=False``, left to learn it
    from the NameServer's answer to its registration."""
    slave_conf = PAIR_CONF | {"brokerId": 1, "brokerRole": "SLAVE"}
    if configured:
        slave_conf["haMasterAddress"] = ha_address(master)
    return start_broker(home, namesrv.addr, **(slave_conf | conf))


def send_many(client: BlockingClient, count: int, tag: str = "a") -> list[SendResult]:
    return [client.send(Message(TOPIC, f"{tag}-{i}-".encode() * 40, keys=f"{tag}-key-{i}")) for i in range(count)]


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[ServerProcess]:
    with start_namesrv(tmp_path / "namesrv") as proc:
        yield proc


def test_slave_holds_the_masters_commit_log_byte_for_byte(tmp_path: Path, namesrv: ServerProcess) -> None:
    with (start_broker(tmp_path / "master", namesrv.addr, **PAIR_CONF) as master,
          start_slave(tmp_path / "slave", namesrv, master, configured=False) as slave,
          BlockingClient(namesrv.addr) as client):
        sent = send_many(client, 300)
        wait_caught_up(slave, master)
        files = assert_same_files(slave, master, "commitlog")
        assert len(files) >= 3  # the master rolled files while replicating
        for queue_id in os.listdir(store_files(slave, "consumequeue", TOPIC)):
            assert_same_files(slave, master, "consumequeue", TOPIC, queue_id)

        async def read_back() -> None:
            async with MQAdminExt(namesrv.addr) as admin:
                for result in sent[::37]:
                    _, offset = decode_message_id(result.offset_msg_id)
                    on_slave = await admin.view_message(slave.addr, TOPIC, offset)
                    assert on_slave.msg_id == result.msg_id
                header = QueryMessageRequestHeader(TOPIC, "a-key-123", 32, 0, 2**63 - 1)
                answer = await admin.invoke(slave.addr, create_request(RequestCode.QUERY_MESSAGE, header.to_ext()))
                assert answer.code == ResponseCode.SUCCESS and b"a-123-" in answer.body

        run(read_back())

        # A second, empty slave starts from the beginning of the master's last file, as Apache's does.
        with start_slave(tmp_path / "late", namesrv, master, brokerId=2) as late:
            wait_caught_up(late, master)
            late_files = assert_same_files(late, master, "commitlog")
            assert late_files == files[-1:]


def test_sync_master_answers_by_what_its_slave_holds(tmp_path: Path, namesrv: ServerProcess) -> None:
    conf = PAIR_CONF | {"brokerRole": "SYNC_MASTER", "flushDiskType": "SYNC_FLUSH"}
    with (start_broker(tmp_path / "master", namesrv.addr, **conf) as master, BlockingClient(namesrv.addr) as client):
        alone = client.send(Message(TOPIC, b"no slave yet"))
        assert alone.send_status is SendStatus.SLAVE_NOT_AVAILABLE  # stored all the same:
        wait_until("the message is stored", lambda: client.pull(alone.message_queue, alone.queue_offset,
                                                                 decode=True).messages[0].body == b"no slave yet",
                   ignoring=(IndexError,))

        with start_slave(tmp_path / "slave", namesrv, master) as slave:
            wait_until("the slave is connected", lambda: client.send(Message(TOPIC, b"probe")).send_status
                       is SendStatus.SEND_OK)
            results = send_many(client, 50)
            assert {r.send_status for r in results} == {SendStatus.SEND_OK}
            # Every acknowledged message is on the slave already: no waiting for it.
            assert max_offset(slave) >= max(decode_message_id(r.offset_msg_id)[1] for r in results)

            slave.popen.send_signal(signal.SIGSTOP)  # connected, but acknowledging nothing
            try:
                started = time.monotonic()
                stalled = client.send(Message(TOPIC, b"slave stalled"))
                assert stalled.send_status is SendStatus.FLUSH_SLAVE_TIMEOUT
                assert 0.9 < time.monotonic() - started < 5  # slaveTimeout=1000
            finally:
                slave.popen.send_signal(signal.SIGCONT)
            slave.kill()
            wait_until("the master notices its slave is gone",
                       lambda: client.send(Message(TOPIC, b"slave gone")).send_status
                       is SendStatus.SLAVE_NOT_AVAILABLE)


def test_restarted_slave_and_master_catch_up(tmp_path: Path, namesrv: ServerProcess) -> None:
    master = start_broker(tmp_path / "master", namesrv.addr, **PAIR_CONF)
    slave = start_slave(tmp_path / "slave", namesrv, master)
    try:
        with BlockingClient(namesrv.addr) as client:
            send_many(client, 50, "first")
            wait_caught_up(slave, master)
            slave.kill()
            send_many(client, 100, "while-slave-down")
            slave = start_slave(tmp_path / "slave", namesrv, master)  # its own store: on from its own offset
            wait_caught_up(slave, master)
            master.kill()
            master = start_broker(tmp_path / "master", namesrv.addr, port=master.port, **PAIR_CONF)
            send_many(client, 100, "after-master-restart")
            wait_caught_up(slave, master)
        assert_same_files(slave, master, "commitlog")
    finally:
        slave.close()
        master.close()


def test_bad_bytes_on_the_ha_port_close_only_that_connection(tmp_path: Path, namesrv: ServerProcess) -> None:
    with (start_broker(tmp_path / "master", namesrv.addr, **PAIR_CONF) as master,
          start_slave(tmp_path / "slave", namesrv, master) as slave,
          BlockingClient(namesrv.addr) as client):
        send_many(client, 20)
        host, port = ha_address(master).split(":")
        end = max_offset(master)
        for garbage in (os.urandom(64) + REPORT.pack(-5), REPORT.pack(end + 10**9), REPORT.pack(-1)):
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                sock.sendall(garbage)
                assert sock.recv(1) == b"", "the master should close a connection that reports nonsense"
        send_many(client, 20, "after")
        wait_caught_up(slave, master)
        assert_same_files(slave, master, "commitlog")
