"""What replication tests ask of a master and its slave, ours or Apache's alike: offsets, catch-up, store files."""

from __future__ import annotations

import filecmp
import os
from pathlib import Path
from typing import Protocol

from broker.tools.admin import MQAdminExt
from tests.helpers import run, wait_until

CATCH_UP_TIMEOUT_S = 30.0


class Broker(Protocol):
    """A broker process of ours (tests.integration.cluster.ServerProcess) or of Apache's (tests.apache)."""

    port: int

    @property
    def addr(self) -> str: ...


def ha_address(master: Broker) -> str:
    """Where slaves replicate from: haListenPort is listenPort + 1 in both our test configs and Apache's."""
    return f"127.0.0.1:{master.port + 1}"


def runtime(addr: str) -> dict[str, str]:
    async def fetch() -> dict[str, str]:
        async with MQAdminExt() as admin:
            return await admin.fetch_broker_runtime_stats(addr)

    return run(fetch())


def max_offset(broker: Broker) -> int:
    return int(runtime(broker.addr)["commitLogMaxOffset"])


def wait_caught_up(slave: Broker, master: Broker, timeout: float = CATCH_UP_TIMEOUT_S) -> None:
    wait_until("the slave holds the master's whole CommitLog, dispatched",
               lambda: max_offset(slave) == max_offset(master) and runtime(slave.addr)["dispatchBehindBytes"] == "0",
               timeout)


def store_files(broker: Broker, *parts: str) -> Path:
    store = getattr(broker, "store_dir", None) or Path(broker.conf["storePathRootDir"])  # type: ignore[attr-defined]
    return Path(store, *parts)


def assert_same_files(slave: Broker, master: Broker, *parts: str) -> list[str]:
    """Every file the slave has under ``parts`` equals the master's byte for byte; their names. A file that holds
    nothing yet (Apache maps the next CommitLog file ahead of need) is all zeros instead."""
    names = sorted(os.listdir(store_files(slave, *parts)))
    assert names, f"the slave has no {'/'.join(parts)} files"
    for name in names:
        theirs = store_files(master, *parts, name)
        if theirs.exists():
            assert filecmp.cmp(store_files(slave, *parts, name), theirs, shallow=False), name
        else:
            data = store_files(slave, *parts, name).read_bytes()
            assert data.count(0) == len(data), f"{name} is on the slave only, and not empty"
    return names
