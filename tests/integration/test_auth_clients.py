"""Our clients sign their requests on our broker with ACL 2.0 on (the shared auth cluster): ``mqadmin`` with the keys of
``conf/tools.yml`` under the RocketMQ home manages a user, an ACL and a topic; the asyncio producer and lite pull
consumer and the blocking client signed with that user's keys send and pull (and a traced producer's trace records
are signed too); unsigned (or wrongly signed) ones are refused NO_PERMISSION with Apache's remark."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from broker.client import LitePullConsumer, Message, Producer
from broker.client.blocking import BlockingClient
from broker.client.producer import ProducerConfig
from broker.client.trace import TraceType, decode_trace_data
from broker.common.errors import MQClientError
from broker.remoting.codes import ResponseCode
from broker.remoting.signing import SessionCredentials
from tests.helpers import client_config, mqadmin, mqadmin_ok, wait_until
from tests.integration.auth_env import AUTH_CONF, SUPER
from tests.integration.cluster import Cluster, ClusterPool

BOB = SessionCredentials("carol_cli", "carolpw1")
TOPIC, GROUP = "AuthCliTopic", "AuthCliGroup"


def tools_home(tmp: Path, credentials: SessionCredentials) -> str:
    """A RocketMQ home whose conf/tools.yml holds ``credentials`` (quoted and commented, as people write YAML)."""
    (tmp / "conf").mkdir(parents=True, exist_ok=True)
    (tmp / "conf" / "tools.yml").write_text(f"# the tool's keys\naccessKey: {credentials.access_key}\n"
                                            f"secretKey: '{credentials.secret_key}'  # quoted\n")
    return f"-Drocketmq.home.dir={tmp}"


@pytest.fixture(scope="module")
def cluster(clusters: ClusterPool, tmp_path_factory: pytest.TempPathFactory) -> Cluster:
    """The auth cluster with BOB allowed to send and pull AuthCli* topics and groups, and TOPIC created: all done by
    our mqadmin signed as the super user."""
    cluster = clusters.shared(**AUTH_CONF)
    assert isinstance(cluster, Cluster)
    home = tools_home(tmp_path_factory.mktemp("tools-home"), SUPER)
    ns, addr = cluster.namesrv_addr, cluster.brokers[0].addr
    assert mqadmin_ok(home, "createUser", "-n", ns, "-b", addr, "-u", BOB.access_key, "-p", BOB.secret_key) == (
        f"create user to {addr} success.\n")
    mqadmin_ok(home, "createAcl", "-n", ns, "-b", addr, "-s", f"User:{BOB.access_key}",
               "-r", "Topic:AuthCli*,Group:AuthCli*", "-a", "Pub,Sub,Get", "-d", "Allow")
    mqadmin_ok(home, "updateTopic", "-n", ns, "-b", addr, "-t", TOPIC, "-r", "2", "-w", "2")
    return cluster


def test_mqadmin_without_keys_is_refused_and_with_them_lists_the_user(cluster: Cluster, tmp_path: Path) -> None:
    ns, addr = cluster.namesrv_addr, cluster.brokers[0].addr
    refused = mqadmin("-Drocketmq.home.dir=" + str(tmp_path), "listUser", "-n", ns, "-b", addr)  # no tools.yml
    assert refused.code == 1 and "CODE: 16  DESC: username cannot be null." in refused.err, refused
    out = mqadmin_ok(tools_home(tmp_path / "super", SUPER), "getUser", "-n", ns, "-b", addr, "-u", BOB.access_key)
    assert out.splitlines()[1].split() == [BOB.access_key, BOB.secret_key, "Normal", "enable"]


def test_signed_producer_and_consumer_are_served_unsigned_ones_refused(cluster: Cluster) -> None:
    asyncio.run(signed_and_unsigned(cluster.namesrv_addr))


async def signed_and_unsigned(ns: str) -> None:
    async with Producer("AuthCliProducer", client_config=client_config(ns, "auth-p"), credentials=BOB) as producer:
        sent = [await producer.send(Message(TOPIC, f"m{i}".encode())) for i in range(4)]
    assert {r.send_status.name for r in sent} == {"SEND_OK"}
    async with LitePullConsumer(GROUP, client_config=client_config(ns, "auth-c"), credentials=BOB) as consumer:
        queues = await consumer.fetch_message_queues(TOPIC)
        consumer.assign(queues)
        for mq in queues:
            await consumer.seek_to_begin(mq)
        got = []
        while len(got) < 4:  # poll returns whatever arrived within its timeout; the send above is complete
            got += await consumer.poll(1000)
    assert sorted(m.body for m in got) == [b"m0", b"m1", b"m2", b"m3"]

    for credentials, remark in ((None, "username cannot be null."),
                                (SessionCredentials(BOB.access_key, "wrong"), "check signature failed.")):
        async with Producer("AuthCliProducer", client_config=client_config(ns, "auth-bad"),
                            credentials=credentials) as producer:
            with pytest.raises(MQClientError) as refused:  # after the producer's retries
                await producer.send(Message(TOPIC, b"refused"))
        assert refused.value.code == ResponseCode.NO_PERMISSION and f"DESC: {remark} BROKER" in str(refused.value)


def test_the_blocking_client_signs_sends_and_pulls(cluster: Cluster) -> None:
    with BlockingClient(cluster.namesrv_addr, producer_group="AuthCliProducer", consumer_group=GROUP,
                        credentials=BOB) as client:
        result = client.send(Message(TOPIC, b"blocking"))
        deadline = time.monotonic() + 10
        while True:  # the answer comes once the record is dispatched to its ConsumeQueue, a moment after the send
            pulled = client.pull(result.message_queue, result.queue_offset, 1, decode=True)
            if pulled.messages or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    assert [m.body for m in pulled.messages] == [b"blocking"]
    with BlockingClient(cluster.namesrv_addr, producer_group="AuthCliProducer") as client:
        with pytest.raises(MQClientError) as refused:  # after the retries
            client.send(Message(TOPIC, b"refused"))
    assert "CODE: 16  DESC: username cannot be null." in str(refused.value)


def test_a_traced_producer_signs_its_trace_records(cluster: Cluster, tmp_path: Path) -> None:
    """The inner trace producer signs with its client's keys: unsigned, its records would be refused."""
    ns, trace_topic = cluster.namesrv_addr, "AuthCliTrace"
    mqadmin_ok(tools_home(tmp_path, SUPER), "updateTopic", "-n", ns, "-b", cluster.brokers[0].addr, "-t", trace_topic,
               "-r", "1", "-w", "1")

    async def send() -> str:
        config = ProducerConfig(enable_msg_trace=True, trace_topic=trace_topic)
        async with Producer("AuthCliTraced", client_config=client_config(ns, "auth-t"), config=config,
                            credentials=BOB) as producer:
            return (await producer.send(Message(TOPIC, b"traced"))).msg_id or ""

    msg_id = asyncio.run(send())  # the producer's shutdown sends what its dispatcher holds
    with BlockingClient(ns, consumer_group=GROUP, credentials=BOB) as client:
        (mq,) = client.fetch_message_queues(trace_topic)
        wait_until("the trace record stored", lambda: client.pull(mq, 0, 32, decode=True).messages)
        records = [c for m in client.pull(mq, 0, 32, decode=True).messages for c in decode_trace_data(m.body.decode())]
    assert [(c.trace_type, c.group_name, c.beans[0].msg_id) for c in records] == [
        (TraceType.Pub, "AuthCliTraced", msg_id)]
