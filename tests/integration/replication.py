"""What replication tests ask of a master and its slave, ours or Apache's alike: offsets, catch-up, store files, and
what a broker holds for clients (topics, queue ends, a group's committed offsets)."""

from __future__ import annotations

import filecmp
import os
from pathlib import Path
from typing import Protocol

from broker.client import MessageQueue, protocol
from broker.client.blocking import BlockingRemotingClient, create_topic, get_max_offset
from broker.common.errors import BrokerSystemError, OffsetNotFound
from broker.common.fastjson import decode_json
from broker.remoting.codes import RequestCode
from broker.remoting.command import create_request
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
    # A young Apache broker may answer GET_BROKER_RUNTIME_INFO with SYSTEM_ERROR (NoSuchElementException from its
    # stats' empty sample list) until the stats took a first sample: "not yet".
    wait_until("the slave holds the master's whole CommitLog, dispatched",
               lambda: max_offset(slave) == max_offset(master) and runtime(slave.addr)["dispatchBehindBytes"] == "0",
               timeout, ignoring=(BrokerSystemError,))


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


def create_topic_on(addr: str, topic: str, queue_nums: int) -> None:
    with BlockingRemotingClient(addr) as client:
        create_topic(client, topic, queue_nums=queue_nums)


def has_topic(addr: str, topic: str) -> bool:
    """Whether the broker has the topic's config (a slave: once its SlaveSynchronize copied it)."""
    with BlockingRemotingClient(addr) as client:
        body = client.invoke(create_request(RequestCode.GET_ALL_TOPIC_CONFIG), 3000).body
    return topic in decode_json(body.decode())["topicConfigTable"]


def max_offsets(addr: str, mqs: list[MessageQueue]) -> list[int]:
    with BlockingRemotingClient(addr) as client:
        return [get_max_offset(client, mq) for mq in mqs]


def committed_offsets(addr: str, group: str, mqs: list[MessageQueue]) -> list[int]:
    """The group's committed offset of each queue on that broker (-1: none)."""
    offsets = []
    with BlockingRemotingClient(addr) as client:
        for mq in mqs:
            try:
                response = client.invoke(protocol.query_consumer_offset_request(group, mq), 3000)
                offsets.append(protocol.parse_offset_response(response, addr))
            except OffsetNotFound:
                offsets.append(-1)
    return offsets


def consumed_to_the_end(addr: str, groups: list[str], mqs: list[MessageQueue]) -> bool:
    """Every group has committed, on that broker, the end of each queue there."""
    wanted = max_offsets(addr, mqs)
    return all(committed_offsets(addr, group, mqs) == wanted for group in groups)
