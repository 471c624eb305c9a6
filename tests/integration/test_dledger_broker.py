"""Brokers in DLedger mode (enableDLegerCommitLog=true), in this process on loopback with one NameServer and short
DLedger timings (heartbeats every 200 ms, a new election after 3 missed: at 100 ms a loaded machine made a leader
lose its lead mid-test), and as processes on DLedger's own.

A group of one: our Producer and LitePullConsumer send and read, its schedule service delivers a delayed message,
haStatus gets Apache's answer for a broker without an HA service; a restart, and a SIGKILL, keep messages and queue
offsets. Bad DLedger keys stop the start with errors that name them.
A group of three: a member started alone registers as brokerId -1 at the first periodic registration (10 s, as
Apache's unelected member does); once the others start, exactly one member registers as master (brokerId 0) and
runs the master-only services (delayed delivery, transaction checks), the two others register as slaves (brokerId =
their self id's number + 1), refuse SEND as Apache's slave does (SYSTEM_BUSY, [REJECTREQUEST]) and copy the
master's topics and offsets; stopping (or killing) the master moves all of it to another member, and clients' routes
follow; writes are acknowledged once a quorum holds them.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from broker.client import LitePullConfig, LitePullConsumer, Message, Producer, SendResult, SendStatus
from broker.client.blocking import BlockingClient
from broker.client.protocol import (
    create_topic_request,
    send_message_header,
    send_message_request,
    update_consumer_offset_request,
)
from broker.common.errors import ConfigError
from broker.common.fastjson import encode_json
from broker.common.message import MessageQueue
from broker.common.topic import TopicConfig
from broker.namesrv.config import NamesrvConfig
from broker.namesrv.server import NamesrvController
from broker.remoting.client import RemotingClient
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from broker.remoting.route import TopicRouteData
from broker.remoting.server import REJECT_REQUEST_REMARK
from broker.remoting.subscription import SubscriptionGroupConfig
from broker.server.broker_controller import REGISTER_FIRST_S, BrokerController
from broker.server.config import load_broker_config
from broker.store.config import BrokerRole
from broker.tools.local_cluster import free_port
from tests.helpers import broker_ids, client_config, mqadmin, mqadmin_ok, run
from tests.integration.cluster import REPO, ServerProcess, start_broker, start_namesrv
from tests.integration.in_process import broker_configs

TIMINGS = {"d_leger_heart_beat_time_interval_ms": 200, "d_leger_max_heart_beat_leak": 3,
           "d_leger_min_vote_interval_ms": 50, "d_leger_max_vote_interval_ms": 150}  # rmq's keys
ROLE_TIMEOUT_S = 15.0
SYNC_MS = 1000  # slaveSynchronizeInterval: a follower copies its master's metadata every second
CHECK_MS = 100  # transactionCheckInterval: the master's check rounds, counted


def dledger_store(peers: dict[str, int], self_id: str) -> dict[str, object]:
    return {"enable_d_leger_commit_log": True, "d_leger_group": "broker-a", "d_leger_self_id": self_id,
            "d_leger_peers": ";".join(f"{member}-127.0.0.1:{port}" for member, port in peers.items()), **TIMINGS}


def member(tmp: Path, namesrv: str, peers: dict[str, int], self_id: str, port: int | None = None,
           **fields: object) -> BrokerController:
    broker, store = broker_configs(tmp / self_id, port, namesrv_addr=namesrv, store=dledger_store(peers, self_id),
                                   slave_synchronize_interval=SYNC_MS, transaction_check_interval=CHECK_MS,
                                   broker_id=-1, **fields)  # -1: as load_broker_config makes it in DLedger mode
    return BrokerController(broker, store, bind_host="127.0.0.1")


@contextlib.asynccontextmanager
async def namesrv_running(tmp: Path) -> AsyncIterator[NamesrvController]:
    namesrv = NamesrvController(NamesrvConfig(listen_port=0, bind_address="127.0.0.1",
                                              kv_config_path=str(tmp / "kvConfig.json")))
    await namesrv.start()
    try:
        yield namesrv
    finally:
        await namesrv.stop()


async def until(condition, what: str, timeout: float = ROLE_TIMEOUT_S):  # noqa: ANN001, ANN201
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        await asyncio.sleep(0.05)
    return value


def master_of(controllers: list[BrokerController]) -> BrokerController | None:
    masters = [c for c in controllers if c.started and c.broker_config.broker_id == 0]
    return masters[0] if len(masters) == 1 else None


async def registered(namesrv: NamesrvController) -> dict[int, str]:
    """broker-a's {brokerId: address} as the NameServer routes it (mqadmin clusterList, run beside the loop)."""
    out = await asyncio.to_thread(mqadmin_ok, "clusterList", "-n", namesrv.address)
    rows = [line.split() for line in out.splitlines() if "broker-a" in line]
    return {int(row[2]): row[3] for row in rows}


# -- a group of one -------------------------------------------------------------------------------------------------


def test_group_of_one_sends_consumes_and_keeps_everything_across_a_restart(tmp_path: Path) -> None:
    peers = {"n0": free_port()}

    async def send_and_read(namesrv: NamesrvController, count: int, start: int) -> list[tuple[int, int]]:
        async with Producer("dl_pg", client_config=client_config(namesrv.address, "p")) as producer:
            results = [await producer.send(Message("DLedgerTopic", b"body-%d" % (start + i), keys=[f"k{start + i}"]))
                       for i in range(count)]
        assert {r.send_status for r in results} == {SendStatus.SEND_OK}
        config = LitePullConfig(auto_commit=False)
        async with LitePullConsumer("dl_cg", config=config,
                                    client_config=client_config(namesrv.address, "c")) as consumer:
            queues = await consumer.fetch_message_queues("DLedgerTopic")
            consumer.assign(queues)
            for mq in queues:
                await consumer.seek(mq, 0)
            got = []
            deadline = time.monotonic() + 10
            while len(got) < start + count and time.monotonic() < deadline:
                got += await consumer.poll(500)
        assert sorted(m.body for m in got) == sorted(b"body-%d" % i for i in range(start + count))
        by_id = {m.offset_msg_id: m for m in got}
        for result in results:  # each message where its send said, with the queue offset it said
            assert by_id[result.offset_msg_id].queue_offset == result.queue_offset
        return [(r.message_queue.queue_id, r.queue_offset) for r in results]

    async def scenario() -> None:
        async with namesrv_running(tmp_path) as namesrv:
            broker = member(tmp_path, namesrv.address, peers, "n0")
            await broker.start()
            try:
                master = await until(lambda: master_of([broker]), "the member of a group of one becomes master")
                assert master.broker_config.broker_role is BrokerRole.SYNC_MASTER
                assert await registered(namesrv) == {0: broker.broker_addr}
                first = await send_and_read(namesrv, 12, 0)
                await check_delayed_delivery(namesrv)
                await check_no_ha_status(broker.broker_addr)
            finally:
                await broker.shutdown()
            port = broker.broker_config.listen_port
            again = member(tmp_path, namesrv.address, peers, "n0", port)
            await again.start()
            try:
                await until(lambda: master_of([again]), "master again after the restart")
                both = first + await send_and_read(namesrv, 8, 12)
                for queue_id in {q for q, _ in both}:  # each queue's offsets went on from where they were
                    offsets = sorted(o for q, o in both if q == queue_id)
                    assert offsets == list(range(len(offsets)))
            finally:
                await again.shutdown()

    run(scenario())


async def check_no_ha_status(addr: str) -> None:
    """GET_BROKER_HA_STATUS (mqadmin haStatus) as Apache's DLedger broker answers it: no HA service, SYSTEM_ERROR."""
    async with RemotingClient() as client:
        response = await client.invoke(addr, create_request(RequestCode.GET_BROKER_HA_STATUS), 3000)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert response.remark.startswith("Can not get HARuntimeInfo, may be duplicationEnable is true (DLedger mode")
    done = await asyncio.to_thread(mqadmin, "haStatus", "-b", addr)
    assert done.code != 0 and "Can not get HARuntimeInfo" in done.out + done.err, done


async def check_delayed_delivery(namesrv: NamesrvController) -> None:
    """The master's schedule service delivers a delayed message (level 1: 1 s) through the DLedger put."""
    msg = Message("DLedgerDelayed", b"later")
    msg.delay_time_level = 1
    async with Producer("dl_pg_delay", client_config=client_config(namesrv.address, "pd")) as producer:
        sent = await producer.send(msg)
    assert sent.send_status is SendStatus.SEND_OK
    sent_at = time.monotonic()
    async with LitePullConsumer("dl_cg_delay", config=LitePullConfig(auto_commit=False),
                                client_config=client_config(namesrv.address, "cd")) as consumer:
        consumer.assign([sent.message_queue])
        await consumer.seek(sent.message_queue, 0)
        got = []
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            got = await consumer.poll(500)
    assert [m.body for m in got] == [b"later"] and time.monotonic() - sent_at > 0.5


@pytest.mark.parametrize("peers, self_id, extra, message", [
    ("n0-127.0.0.1:40911;n1-127.0.0.1:40912", "n2", "", "dLegerSelfId 'n2' is not among dLegerPeers"),
    ("n0-127.0.0.1:40911;n1:40912", "n0", "", "dLegerPeers: 'n1:40912' is not id-host:port"),
    ("a-127.0.0.1:40911", "a", "", "dLegerSelfId 'a' must be a letter and a number"),
    ("n0-127.0.0.1:40911", "n0", "dLegerMinVoteIntervalMs=400\ndLegerMaxVoteIntervalMs=300",
     "dLegerMinVoteIntervalMs 400 must be at least 0 and below dLegerMaxVoteIntervalMs 300"),
    ("n0-127.0.0.1:40911", "n0", "dLegerHeartBeatTimeIntervalMs=0", "dLegerHeartBeatTimeIntervalMs must be positive"),
    ("n0-127.0.0.1:40911", "n0", "dLegerMaxHeartBeatLeak=many", "dLegerMaxHeartBeatLeak"),
    ("n0-127.0.0.1:40911", "n0", "dLegerPeerPushQuota=0", "dLegerPeerPushQuota must be positive"),
    ("n0-127.0.0.1:40911", "n0", "dLegerPeerPushThrottlePoint=300m", "dLegerPeerPushThrottlePoint"),
])
def test_bad_dledger_keys_stop_the_start_with_an_error_naming_them(tmp_path: Path, peers: str, self_id: str,
                                                                   extra: str, message: str) -> None:
    path = tmp_path / "broker.conf"
    path.write_text(f"enableDLegerCommitLog=true\ndLegerGroup=broker-a\ndLegerPeers={peers}\n"
                    f"dLegerSelfId={self_id}\nstorePathRootDir={tmp_path / 'store'}\n{extra}\n")
    with pytest.raises(ConfigError, match=message):
        load_broker_config(path)


def test_the_shipped_group_of_three_loads_with_no_broker_id_until_elected() -> None:
    loaded = [load_broker_config(REPO / "conf" / "dledger" / f"broker-n{i}.conf") for i in range(3)]
    assert [(b.broker_id, s.enable_d_leger_commit_log, s.d_leger_self_id) for b, s in loaded] == [
        (-1, True, f"n{i}") for i in range(3)]  # -1 as BrokerStartup sets it
    assert len({s.d_leger_peers for _, s in loaded}) == 1 and len({b.listen_port for b, _ in loaded}) == 3
    assert len({s.store_path_root_dir for _, s in loaded}) == 3
    assert all(s.enable_batch_push for _, s in loaded)


# -- a group of three -------------------------------------------------------------------------------------------------


def test_group_of_three_has_one_master_whose_role_and_services_move_when_it_stops(tmp_path: Path) -> None:
    peers = {f"n{i}": free_port() for i in range(3)}

    async def scenario() -> None:
        async with namesrv_running(tmp_path) as namesrv:
            members = [member(tmp_path, namesrv.address, peers, self_id) for self_id in peers]
            try:
                await members[0].start()  # alone, no election: registered at the first period as -1 (Apache's)
                await until_async(lambda: registered(namesrv), {-1: members[0].broker_addr},
                                  "an unelected member registers as -1", timeout=REGISTER_FIRST_S + 5)
                await asyncio.gather(*(m.start() for m in members[1:]))
                await check_roles(namesrv, members)  # the elected ids replace the -1
                master = master_of(members)
                assert master is not None
                await check_follower_refuses_send(members, master)
                await check_followers_copy_metadata(members, master)
                acked = await asyncio.to_thread(send_through_route, namesrv.address, range(20))
                assert [r.queue_offset for r in acked] == list(range(20))  # each answered once a quorum held it
                await master.shutdown()  # the group elects another; it serves as master and registers as 0
                rest = [m for m in members if m is not master]
                await until(lambda: master_of(rest), "another member becomes master")
                await check_roles(namesrv, rest)
                route = await asyncio.to_thread(route_of, namesrv.address, "DLedgerShared")
                assert route.broker_datas[0].broker_addrs[0] == master_of(rest).broker_addr
                # every acknowledged message is on the new master, in order, and its queue goes on from there
                (more,) = await asyncio.to_thread(send_through_route, namesrv.address, range(20, 21))
                assert more.queue_offset == 20
                bodies = await asyncio.to_thread(queue_bodies, namesrv.address)
                assert bodies == [f"w{i}".encode() for i in range(21)]
            finally:
                await asyncio.gather(*(m.shutdown() for m in members))

    run(scenario(), timeout=90)


WRITTEN_QUEUE = MessageQueue("DLedgerShared", "broker-a", 0)


def send_through_route(namesrv_addr: str, numbers: range) -> list[SendResult]:
    """Messages w<i> to queue 0 of DLedgerShared, sent to whichever member the route names master."""
    with BlockingClient(namesrv_addr) as client:
        return [client.send(Message("DLedgerShared", f"w{i}".encode(), keys=f"w{i}"), WRITTEN_QUEUE) for i in numbers]


def queue_bodies(namesrv_addr: str) -> list[bytes]:
    with BlockingClient(namesrv_addr) as client:
        return [m.body for m in client.pull(WRITTEN_QUEUE, 0, 64, decode=True).messages]


def route_of(namesrv_addr: str, topic: str) -> TopicRouteData:
    with BlockingClient(namesrv_addr) as client:
        return client.get_route(topic, refresh=True)


async def check_roles(namesrv: NamesrvController, members: list[BrokerController]) -> None:
    """One master (brokerId 0, SYNC_MASTER) with the master-only services, the others slaves under their DLedger
    brokerId without them; the NameServer lists exactly those ids."""
    master = await until(lambda: master_of(members), "one master")
    slaves = [m for m in members if m is not master]
    await until(lambda: all(m.broker_config.broker_role is BrokerRole.SLAVE for m in slaves), "the others slaves")
    assert master.broker_config.broker_role is BrokerRole.SYNC_MASTER
    ids = {m.broker_config.broker_id for m in slaves}
    expected_ids = {int(m.store.dledger.setup.self_id[1:]) + 1 for m in slaves}
    assert ids == expected_ids
    assert master.schedule_message_service.started and not any(m.schedule_message_service.started for m in slaves)
    rounds = [m.transactional_message_check_service.rounds for m in members]
    await asyncio.sleep(3 * CHECK_MS / 1000)
    assert [m.transactional_message_check_service.rounds > r for m, r in zip(members, rounds, strict=True)] == [
        m is master for m in members]  # transaction checks run on the master only
    want = {0: master.broker_addr, **{m.broker_config.broker_id: m.broker_addr for m in slaves}}
    await until_async(lambda: registered(namesrv), want, "the NameServer lists the roles")
    for broker, active in ((master, "true"), (slaves[0], "false")):  # brokerActive: the master-only services run
        status = await asyncio.to_thread(mqadmin_ok, "brokerStatus", "-b", broker.broker_addr)
        assert re.search(rf"^brokerActive\s*:\s*{active}$", status, re.M), status


async def until_async(read, want, what: str, timeout: float = ROLE_TIMEOUT_S) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while (seen := await read()) != want:
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: {seen} != {want}")
        await asyncio.sleep(0.2)


async def check_follower_refuses_send(members: list[BrokerController], master: BrokerController) -> None:
    follower = next(m for m in members if m is not master)
    msg = Message("DLedgerShared", b"refused")
    header = send_message_header("pg", msg, MessageQueue("DLedgerShared", "broker-a", 0), 0, batch=False)
    async with RemotingClient() as client:
        response = await client.invoke(follower.broker_addr, send_message_request(header, msg.body), 3000)
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_BUSY, REJECT_REQUEST_REMARK)  # Apache's slave


async def check_followers_copy_metadata(members: list[BrokerController], master: BrokerController) -> None:
    """A topic, a subscription group and a consumer offset set on the master reach both followers
    (SlaveSynchronize)."""
    group = encode_json(SubscriptionGroupConfig("dl_cg").to_json()).encode()
    mq = MessageQueue("DLedgerShared", "broker-a", 1)
    async with RemotingClient() as client:
        answers = [await client.invoke(master.broker_addr, request, 3000) for request in (
            create_topic_request(TopicConfig("DLedgerShared")),
            create_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group),
            update_consumer_offset_request("dl_cg", mq, 7))]
    assert [a.code for a in answers] == [ResponseCode.SUCCESS] * 3
    followers = [m for m in members if m is not master]
    await until(lambda: all(f.topic_config_manager.contains_topic("DLedgerShared")
                            and f.subscription_group_manager.contains_subscription_group("dl_cg")
                            and f.consumer_offset_manager.query_offset("dl_cg", "DLedgerShared", 1) == 7
                            for f in followers), "the followers copy the master's topic, group and offset")


# -- real processes, DLedger's own timings -----------------------------------------------------------------------------


def test_processes_elect_register_and_fail_over_when_the_master_is_killed(tmp_path: Path) -> None:
    """Three ``python -m broker`` processes with DLedger's default timings (2 s heartbeats): one registers as master;
    once it is killed (no unregistering), another registers as master, and the last one stays a slave."""
    namesrv = start_namesrv(tmp_path / "namesrv")
    peers = {f"n{i}": free_port() for i in range(3)}
    peer_keys = ";".join(f"{member}-127.0.0.1:{port}" for member, port in peers.items())

    def start(self_id: str) -> ServerProcess:
        return start_broker(tmp_path / self_id, namesrv.addr, enableDLegerCommitLog="true",
                            dLegerGroup="broker-a", dLegerPeers=peer_keys, dLegerSelfId=self_id)

    with ThreadPoolExecutor(3) as pool:  # each is ready once registered, which takes the group's election
        brokers = list(pool.map(start, peers))
    try:
        ids = wait_for_ids(namesrv.addr, lambda ids: len(ids) == 3 and 0 in ids)
        master = next(b for b in brokers if b.addr == ids[0])
        assert set(ids) == {0} | {int(self_id[1:]) + 1 for self_id, b in zip(peers, brokers, strict=True)
                                  if b is not master}
        master.kill()
        after = wait_for_ids(namesrv.addr, lambda ids: len(ids) == 2 and 0 in ids and ids[0] != master.addr)
        assert set(after.values()) == {b.addr for b in brokers if b is not master}
    finally:
        for broker in brokers:
            if broker.alive():
                broker.stop()
        namesrv.stop()


def wait_for_ids(namesrv_addr: str, done, timeout: float = 30.0) -> dict[int, str]:  # noqa: ANN001
    """broker-a's {brokerId: address} at the NameServer, once ``done`` says so."""
    deadline = time.monotonic() + timeout
    while not done(ids := broker_ids(namesrv_addr, "broker-a")):
        if time.monotonic() > deadline:
            raise AssertionError(f"broker-a's ids at the NameServer: {ids}")
        time.sleep(0.2)
    return ids


def test_a_killed_group_of_one_restarts_with_every_acknowledged_message(tmp_path: Path) -> None:
    """SIGKILL after the sends (no shutdown: DLedger's checkpoint and the store's are stale, the abort file is left);
    the restarted member recovers the log, commits what it holds, dispatches it and takes sends again, each queue
    going on from its last offset."""
    namesrv = start_namesrv(tmp_path / "namesrv")
    keys = {"enableDLegerCommitLog": "true", "dLegerGroup": "broker-a", "dLegerPeers": f"n0-127.0.0.1:{free_port()}",
            "dLegerSelfId": "n0", "defaultTopicQueueNums": 2}
    broker = start_broker(tmp_path / "first", namesrv.addr, store_dir=tmp_path / "store", **keys)
    try:
        with BlockingClient(namesrv.addr) as client:
            sent = [client.send(Message("DLedgerKilled", b"m%d" % i)) for i in range(40)]
            batch = client.send_batch([Message("DLedgerKilled", b"b%d" % i) for i in range(5)], sent[0].message_queue)
        broker.kill()
        broker = start_broker(tmp_path / "again", namesrv.addr, store_dir=tmp_path / "store",
                              port=int(broker.addr.rsplit(":", 1)[1]), **keys)
        with BlockingClient(namesrv.addr) as client:
            queues = sorted({r.message_queue for r in sent}, key=lambda mq: mq.queue_id)
            stored = {m.body for mq in queues for m in client.pull(mq, 0, 64, decode=True).messages}
            assert stored == {b"m%d" % i for i in range(40)} | {b"b%d" % i for i in range(5)}
            after = client.send(Message("DLedgerKilled", b"after"), sent[0].message_queue)
            assert after.queue_offset == batch.queue_offset + 5
    finally:
        broker.close()
        namesrv.close()
