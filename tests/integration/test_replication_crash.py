"""SYNC_MASTER + SYNC_FLUSH under load, the master SIGKILLed at random moments: every message the master
acknowledged with SEND_OK is on the slave at the moment of the kill, byte for byte; the restarted master and its
slave go on from where each stands."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from broker.client import BlockingClient, Message, SendStatus
from broker.common.errors import RmqError
from broker.common.message import decode_message_id
from broker.tools.admin import MQAdminExt
from tests.helpers import run, wait_until
from tests.integration.cluster import start_broker, start_namesrv
from tests.integration.replication import assert_same_files, ha_address, wait_caught_up

TOPIC = "CrashReplicated"
ROUNDS = 10
WRITERS = 2
CONF: dict[str, object] = {"mappedFileSizeCommitLog": 256 * 1024, "flushDiskType": "SYNC_FLUSH",
                           "slaveTimeout": 3000}


@dataclass
class Writer:
    """A producer thread sending until stopped; ``acked`` holds (CommitLog offset, body) of each SEND_OK."""

    namesrv_addr: str
    name: str
    acked: list[tuple[int, bytes]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    other: dict[str, int] = field(default_factory=dict)

    def run(self) -> None:
        with BlockingClient(self.namesrv_addr, timeout_ms=3000) as client:
            i = 0
            while not self.stop.is_set():
                body = f"{self.name}-{i}|".encode() * random.randint(1, 60)
                i += 1
                try:
                    result = client.send(Message(TOPIC, body))
                except RmqError as err:
                    self.other[type(err).__name__] = self.other.get(type(err).__name__, 0) + 1
                    time.sleep(0.05)
                    continue
                if result.send_status is SendStatus.SEND_OK:
                    self.acked.append((decode_message_id(result.offset_msg_id)[1], body))
                else:
                    self.other[result.send_status.name] = self.other.get(result.send_status.name, 0) + 1


def acked_count(writers: list[Writer]) -> int:
    return sum(len(w.acked) for w in writers)


def on_slave(slave_addr: str, acked: list[tuple[int, bytes]]) -> list[int]:
    """The acknowledged messages the slave cannot show: their CommitLog offsets."""
    async def check() -> list[int]:
        missing = []
        async with MQAdminExt() as admin:
            for offset, body in acked:
                try:
                    if (await admin.view_message(slave_addr, TOPIC, offset)).body != body:
                        missing.append(offset)
                except RmqError:
                    missing.append(offset)
        return missing

    return run(check(), timeout=120)


def test_no_acknowledged_message_is_lost_when_the_master_dies(tmp_path: Path) -> None:
    rng = random.Random()
    with start_namesrv(tmp_path / "namesrv") as namesrv:
        master = start_broker(tmp_path / "master", namesrv.addr, brokerRole="SYNC_MASTER", **CONF)
        port = master.port
        slave = start_broker(tmp_path / "slave", namesrv.addr, brokerId=1, brokerRole="SLAVE",
                             haMasterAddress=ha_address(master), **CONF)
        writers = [Writer(namesrv.addr, f"w{n}") for n in range(WRITERS)]
        threads = [threading.Thread(target=w.run, daemon=True) for w in writers]
        try:
            for thread in threads:
                thread.start()
            checked = 0
            for _ in range(ROUNDS):
                # The slave reconnects (Java's HAClient retries every 5 s) before SEND_OK comes back.
                wait_until("the pair acknowledges sends again", lambda done=checked: acked_count(writers) > done, 30)
                time.sleep(rng.uniform(0.2, 1.5))
                master.kill()
                acked = sorted(a for w in writers for a in w.acked)
                assert on_slave(slave.addr, acked[checked:]) == []
                checked = len(acked)
                master = start_broker(tmp_path / "master", namesrv.addr, port=port, brokerRole="SYNC_MASTER",
                                      **CONF)
            for writer in writers:
                writer.stop.set()
            for thread in threads:
                thread.join(30)
            wait_caught_up(slave, master)
            assert_same_files(slave, master, "commitlog")
            assert on_slave(slave.addr, sorted(a for w in writers for a in w.acked)) == []
        finally:
            for writer in writers:
                writer.stop.set()
            slave.close()
            master.close()
