"""Replication across implementations: Apache's slave following our master, and our slave following Apache's
master. Apache's broker is the judge: the CommitLog files must come out byte-identical, the slave must serve what
it holds, and each side's metadata sync must accept the other's answers.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.client import BlockingClient, Message, MessageQueue, SendResult, SendStatus
from broker.common.fastjson import decode_json
from broker.common.message import decode_message_id
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from broker.remoting.headers import QueryMessageRequestHeader
from broker.remoting.subscription import SubscriptionGroupConfig
from broker.tools.admin import MQAdminExt
from tests.apache.servers import start_apache_broker, start_apache_namesrv
from tests.helpers import run, wait_until
from tests.integration.cluster import start_broker, start_namesrv
from tests.integration.replication import Broker, assert_same_files, wait_caught_up
from tests.interop.test_official_mqadmin import Mqadmin, build_mqadmin
from tests.javatools import JavaToolError

pytestmark = [pytest.mark.java]

TOPIC = "InteropReplicated"
FILE_SIZE = 4 * 1024 * 1024  # Apache's test default: both sides must cut the CommitLog alike
SLAVE = {"brokerId": 1, "brokerRole": "SLAVE", "mappedFileSizeCommitLog": FILE_SIZE}
GROUP = "interop_replicated_group"
SLAVE_SYNC_WAIT_S = 90.0


def send_many(namesrv_addr: str, count: int, tag: str) -> list[SendResult]:
    with BlockingClient(namesrv_addr) as client:
        results = [client.send(Message(TOPIC, f"{tag}-{i}|".encode() * 30, keys=f"{tag}-{i}")) for i in range(count)]
    assert {r.send_status for r in results} == {SendStatus.SEND_OK}
    return results


def assert_slave_serves(slave: Broker, sent: list[SendResult], key: str) -> None:
    async def check() -> None:
        async with MQAdminExt() as admin:
            for result in sent:
                _, offset = decode_message_id(result.offset_msg_id)
                assert (await admin.view_message(slave.addr, TOPIC, offset)).msg_id == result.msg_id
            header = QueryMessageRequestHeader(TOPIC, key, 32, 0, 2**63 - 1)
            answer = await admin.invoke(slave.addr, create_request(RequestCode.QUERY_MESSAGE, header.to_ext()))
            assert answer.code == ResponseCode.SUCCESS and key.encode() in answer.body

    run(check())


def synced_metadata(addr: str) -> tuple[set[str], dict[str, dict[str, int]]]:
    """A broker's topic names and consumer offsets, as a slave's SlaveSynchronize asks its master for them."""
    async def fetch() -> tuple[set[str], dict[str, dict[str, int]]]:
        async with MQAdminExt() as admin:
            topics = await admin.invoke(addr, create_request(RequestCode.GET_ALL_TOPIC_CONFIG))
            offsets = await admin.invoke(addr, create_request(RequestCode.GET_ALL_CONSUMER_OFFSET))
            assert topics.code == offsets.code == ResponseCode.SUCCESS
            return (set(decode_json(topics.body.decode())["topicConfigTable"]),
                    decode_json(offsets.body.decode())["offsetTable"])

    return run(fetch())


def wait_synced(slave_addr: str, queue: MessageQueue, offset: int, timeout: float = 10.0) -> None:
    """Until the slave holds the master's topic config of TOPIC and GROUP's ``offset`` of ``queue``."""
    def synced() -> bool:
        topics, offsets = synced_metadata(slave_addr)
        return TOPIC in topics and offsets.get(f"{TOPIC}@{GROUP}", {}).get(str(queue.queue_id)) == offset

    wait_until("the slave synced its master's topic configs and consumer offsets", synced, timeout)


def commit_offset(master_addr: str, queue: MessageQueue, offset: int) -> None:
    async def commit() -> None:
        async with MQAdminExt() as admin:
            await admin.create_and_update_subscription_group_config(master_addr, SubscriptionGroupConfig(GROUP))
            await admin.update_consumer_offset(master_addr, GROUP, queue, offset)

    run(commit())


@pytest.fixture(scope="module")
def mqadmin(tmp_path_factory: pytest.TempPathFactory) -> Mqadmin:
    try:
        return build_mqadmin(tmp_path_factory.mktemp("mqadmin-home"))
    except JavaToolError as err:
        pytest.fail(f"cannot build Apache's mqadmin: {err}", pytrace=False)


def assert_mqadmin_shows_the_pair(mqadmin: Mqadmin, namesrv_addr: str, master: Broker, slave: Broker) -> None:
    """Apache's own mqadmin sees one brokerName with both copies, and the master's HA status names the slave."""
    def ok(*args: str) -> str:
        run = mqadmin.run(*args, "-n", namesrv_addr)
        assert run.failure() is None, run.failure()
        return run.out

    clusters = ok("clusterList")
    assert master.addr in clusters and slave.addr in clusters
    status = ok("haStatus", "-b", master.addr)
    assert "#SlaveNum\t1" in status and "OK" in status, status


def test_apache_slave_follows_our_master(tmp_path: Path, mqadmin: Mqadmin) -> None:
    with (start_namesrv(tmp_path / "namesrv") as namesrv,
          start_broker(tmp_path / "master", namesrv.addr, mappedFileSizeCommitLog=FILE_SIZE) as master):
        before = send_many(namesrv.addr, 100, "before")
        commit_offset(master.addr, before[0].message_queue, 42)
        # No haMasterAddress: Apache's slave learns it from our NameServer's answer to its registration.
        with start_apache_broker(tmp_path / "apache-slave", namesrv.addr, **SLAVE) as slave:
            after = send_many(namesrv.addr, 100, "after")
            wait_caught_up(slave, master)
            assert_same_files(slave, master, "commitlog")
            assert_slave_serves(slave, before + after, "after-42")
            # Apache 5.x's SlaveSynchronize first runs a minute after its broker started: topic configs and
            # consumer offsets from our master.
            assert_mqadmin_shows_the_pair(mqadmin, namesrv.addr, master, slave)
            wait_synced(slave.addr, before[0].message_queue, 42, SLAVE_SYNC_WAIT_S)


def test_our_slave_follows_apache_master(tmp_path: Path, mqadmin: Mqadmin) -> None:
    with (start_apache_namesrv(tmp_path / "namesrv") as namesrv,
          start_apache_broker(tmp_path / "apache-master", namesrv, mappedFileSizeCommitLog=FILE_SIZE) as master):
        before = send_many(namesrv.addr, 100, "before")
        commit_offset(master.addr, before[0].message_queue, 17)
        # No haMasterAddress: our slave learns it from Apache's NameServer, and syncs metadata every second.
        with start_broker(tmp_path / "slave", namesrv.addr, slaveSynchronizeInterval=1000, **SLAVE) as slave:
            after = send_many(namesrv.addr, 100, "after")
            wait_caught_up(slave, master)
            assert_same_files(slave, master, "commitlog")
            assert_slave_serves(slave, before + after, "before-7")
            wait_synced(slave.addr, before[0].message_queue, 17)
            assert_mqadmin_shows_the_pair(mqadmin, namesrv.addr, master, slave)
