"""Our clients against Apache's 5.5.0 broker with ACL 2.0 on (the shared auth cluster of tests/apache): our ``mqadmin``
runs the ACL 2.0 commands and prints what Apache's ``mqadmin`` prints for the same commands on the same broker (and
on ours), and
our producer and lite pull consumer, signed with a user's keys, send and pull there while an unsigned producer is
refused."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from broker.client import LitePullConsumer, Message, Producer
from broker.common.errors import MQClientError
from broker.remoting.codes import ResponseCode
from broker.remoting.signing import SessionCredentials
from tests.apache import apache_mqadmin
from tests.helpers import client_config, mqadmin
from tests.integration.auth_env import AUTH_CONF, SUPER
from tests.integration.cluster import ClusterPool

pytestmark = [pytest.mark.java, pytest.mark.slow]

MQADMIN_TIMEOUT_S = 120
TOPIC, GROUP = "ApacheAuthCliTopic", "ApacheAuthCliGroup"


def script(user: str, addr: str) -> list[tuple[str, ...]]:
    """Every ACL 2.0 command once (copyUser/copyAcl onto the same broker: an update of what is there)."""
    b = ("-b", addr)
    return [("createUser", *b, "-u", user, "-p", "pw123456"),
            ("getUser", *b, "-u", user),
            ("updateUser", *b, "-u", user, "-t", "Normal"),
            ("createAcl", *b, "-s", f"User:{user}", "-r", f"Topic:{TOPIC},Group:{GROUP}", "-a", "Pub,Sub,Get",
             "-d", "Allow"),
            ("updateAcl", *b, "-s", f"User:{user}", "-r", "Topic:Other*", "-a", "Pub", "-d", "Deny",
             "-i", "10.0.0.0/8"),
            ("getAcl", *b, "-s", f"User:{user}"),
            ("listAcl", *b, "-s", f"User:{user}", "-r", "Topic:Other"),
            ("listUser", *b, "-f", user),
            ("copyUser", "-f", addr, "-t", addr, "-u", user),
            ("copyAcl", "-f", addr, "-t", addr, "-s", f"User:{user}"),
            ("deleteAcl", *b, "-s", f"User:{user}", "-r", "Topic:Other*"),
            ("getAcl", *b, "-s", f"User:{user}"),
            ("deleteUser", *b, "-u", user),
            ("getUser", *b, "-u", user),
            ("deleteUser", *b, "-u", "nobody_here")]


def normalized(text: str, user: str, addr: str) -> str:
    """The output with the user and broker masked and a refusal cut to its code and remark (the two tools word the
    failure around it differently)."""
    text = text.replace(addr, "<broker>").replace(user, "<user>")
    remark = re.search(r"CODE: (\d+)\s+DESC: ([^\n]*?)(?:\s+BROKER:|\n|$)", text)
    if remark:
        return f"CODE {remark[1]}: {remark[2]}"
    return "\n".join(line.rstrip() for line in text.splitlines() if not line.startswith(("WARNING", "SLF4J")))


def tools_home(home: Path) -> Path:
    (home / "conf").mkdir(parents=True, exist_ok=True)
    (home / "conf" / "tools.yml").write_text(f"accessKey: {SUPER.access_key}\nsecretKey: {SUPER.secret_key}\n")
    return home


def test_our_mqadmin_prints_what_apaches_prints_on_apaches_broker(clusters: ClusterPool, tmp_path: Path) -> None:
    cluster = clusters.shared("apache", **AUTH_CONF)
    addr = cluster.brokers[0].addr
    home = tools_home(tmp_path / "home")
    tool = apache_mqadmin(home)
    theirs = []
    for args in script("tool_user_apache", addr):
        done = tool.run(*args, check=False, timeout=MQADMIN_TIMEOUT_S, cwd=tmp_path)
        theirs.append(normalized((done.stdout + done.stderr).decode(errors="replace"), "tool_user_apache", addr))
    ours = []
    for args in script("tool_user_ours_a", addr):
        done = mqadmin(f"-Drocketmq.home.dir={home}", *args)
        ours.append(normalized(done.out + done.err, "tool_user_ours_a", addr))
    assert ours[0] == "create user to <broker> success."
    assert [row.split() for row in ours[5].splitlines()[1:]] == [
        ["User:<user>", "Custom", f"Topic:{TOPIC}", "[Pub,", "Sub,", "Get]", "null", "Allow"],
        ["User:<user>", "Custom", f"Group:{GROUP}", "[Pub,", "Sub,", "Get]", "null", "Allow"],
        ["User:<user>", "Custom", "Topic:Other*", "[Pub]", "[10.0.0.0/8]", "Deny"]]
    assert ours[-1] == "delete user to <broker> success."  # Apache: deleting a missing user is no error
    assert ours == theirs
    ours_there = clusters.shared("rmq", **AUTH_CONF).brokers[0].addr  # and our tool on our broker: the same again
    on_ours = [normalized((done := mqadmin(f"-Drocketmq.home.dir={home}", *args)).out + done.err, "tool_user_ours_r",
                          ours_there) for args in script("tool_user_ours_r", ours_there)]
    assert on_ours == theirs


def test_our_signed_clients_are_served_by_apaches_broker(clusters: ClusterPool, tmp_path: Path) -> None:
    cluster = clusters.shared("apache", **AUTH_CONF)
    ns, addr = cluster.namesrv_addr, cluster.brokers[0].addr
    home = f"-Drocketmq.home.dir={tools_home(tmp_path / 'home')}"
    dave = SessionCredentials("dave_apache", "davepw12")
    for args in (("createUser", "-b", addr, "-u", dave.access_key, "-p", dave.secret_key),
                 ("createAcl", "-b", addr, "-s", f"User:{dave.access_key}", "-r", f"Topic:{TOPIC},Group:{GROUP}",
                  "-a", "Pub,Sub,Get", "-d", "Allow"),
                 ("updateTopic", "-n", ns, "-b", addr, "-t", TOPIC, "-r", "2", "-w", "2")):
        done = mqadmin(home, *args)
        assert done.code == 0, done
    asyncio.run(send_and_pull(ns, dave))


async def send_and_pull(ns: str, credentials: SessionCredentials) -> None:
    async with Producer("ApacheAuthCliProducer", client_config=client_config(ns, "apache-auth-p"),
                        credentials=credentials) as producer:
        sent = [await producer.send(Message(TOPIC, f"m{i}".encode())) for i in range(3)]
    assert {r.send_status.name for r in sent} == {"SEND_OK"}
    async with LitePullConsumer(GROUP, client_config=client_config(ns, "apache-auth-c"),
                                credentials=credentials) as consumer:
        queues = await consumer.fetch_message_queues(TOPIC)
        consumer.assign(queues)
        for mq in queues:
            await consumer.seek_to_begin(mq)
        got = []
        while len(got) < 3:  # poll returns whatever arrived within its timeout; the sends above are complete
            got += await consumer.poll(1000)
    assert sorted(m.body for m in got) == [b"m0", b"m1", b"m2"]
    async with Producer("ApacheAuthCliProducer", client_config=client_config(ns, "apache-auth-u")) as producer:
        with pytest.raises(MQClientError) as refused:
            await producer.send(Message(TOPIC, b"refused"))
    assert refused.value.code == ResponseCode.NO_PERMISSION
    assert "DESC: username cannot be null. BROKER" in str(refused.value)
