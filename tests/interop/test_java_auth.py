"""ACL 2.0 against Apache's own tools: the Java 5.5.0 client signing with ``AclClientRPCHook`` sends and consumes on
our broker with authentication and authorization on (and is refused a topic its ACL does not name), and Apache's
``mqadmin`` (createUser, createAcl, listUser, listAcl, signed with ``conf/tools.yml``) manages users on our broker
and prints what it prints against Apache's 5.5.0 broker started with the same broker.conf keys."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.apache import apache_client, apache_mqadmin
from tests.integration.auth_env import AUTH_CONF, SUPER
from tests.integration.cluster import ClusterPool

pytestmark = [pytest.mark.java, pytest.mark.slow]

TOPIC, GROUP = "JavaAuthTopic", "JavaAuthGroup"
USER, PASSWORD = "javaalice", "alicepw1"
MQADMIN_TIMEOUT_S = 120


def mqadmin_script(home: Path, broker_addr: str) -> list[tuple[str, ...]]:
    return [("createUser", "-b", broker_addr, "-u", USER, "-p", PASSWORD),
            ("createAcl", "-b", broker_addr, "-s", f"User:{USER}", "-r", f"Topic:{TOPIC},Group:{GROUP}",
             "-a", "Pub,Sub,Get", "-d", "Allow"),
            ("createAcl", "-b", broker_addr, "-s", f"User:{USER}", "-r", "Topic:JavaAuthDeny*", "-a", "Pub",
             "-d", "Deny", "-i", "10.0.0.0/8,127.0.0.1"),
            ("createUser", "-b", broker_addr, "-u", USER, "-p", PASSWORD),  # exists already: refused
            ("listUser", "-b", broker_addr, "-f", "javaalice"),
            ("listAcl", "-b", broker_addr, "-s", f"User:{USER}"),
            ("updateTopic", "-b", broker_addr, "-t", TOPIC, "-r", "2", "-w", "2")]


def run_mqadmin(tmp: Path, broker_addr: str) -> list[str]:
    """Each command's output with the broker's address masked, and refusals cut to the broker's remark."""
    home = tmp / "home"
    (home / "conf").mkdir(parents=True, exist_ok=True)
    (home / "conf" / "tools.yml").write_text(f"accessKey: {SUPER.access_key}\nsecretKey: {SUPER.secret_key}\n")
    tool = apache_mqadmin(home)
    outputs = []
    for args in mqadmin_script(home, broker_addr):
        done = tool.run(*args, check=False, timeout=MQADMIN_TIMEOUT_S, cwd=tmp)
        text = (done.stdout + done.stderr).decode(errors="replace").replace(broker_addr, "<broker>")
        remark = re.search(r"CODE: (\d+)\s+DESC: ([^\n]*?)(?:\s+BROKER:|\n|$)", text)
        outputs.append(f"CODE {remark[1]}: {remark[2]}" if remark else
                       "\n".join(line.rstrip() for line in text.splitlines() if not line.startswith(("WARNING",
                                                                                                     "SLF4J"))))
    return outputs


@pytest.fixture(scope="module")
def outputs(clusters: ClusterPool, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    found = {}
    for kind in ("apache", "rmq"):
        cluster = clusters.shared(kind, **AUTH_CONF)
        found[kind] = run_mqadmin(tmp_path_factory.mktemp(f"mqadmin-{kind}"), cluster.brokers[0].addr)
    return found


def test_apache_mqadmin_manages_users_on_our_broker_as_on_apaches(outputs: dict[str, list[str]]) -> None:
    ours, theirs = outputs["rmq"], outputs["apache"]
    assert ours[0] == "create user to <broker> success."
    assert ours[3] == "CODE 16: The user is existed"
    assert ours[4].splitlines()[1].split() == [USER, PASSWORD, "Normal", "enable"]
    assert f"Topic:{TOPIC}" in ours[5] and "[10.0.0.0/8, 127.0.0.1]" in ours[5]
    assert ours == theirs


def test_java_client_signs_sends_and_consumes_on_our_broker(clusters: ClusterPool, outputs: dict[str, list[str]],
                                                           tmp_path: Path) -> None:
    ns = clusters.shared("rmq", **AUTH_CONF).namesrv_addr
    client = apache_client(tmp_path / "driver")
    keys = {"access_key": USER, "secret_key": PASSWORD}
    sent = client.run("produce", namesrv=ns, topic=TOPIC, count=4, **keys)
    assert [r["sendStatus"] for r in sent.records] == ["SEND_OK"] * 4
    pulled = client.run("consume-pull", namesrv=ns, topic=TOPIC, group=GROUP, max=4, **{"from": "committed"},
                        **keys)
    assert pulled.summary is not None and not pulled.summary["timedOut"], pulled.summary
    assert len(pulled.records) == 4
    refused = client.run("produce", namesrv=ns, topic="JavaAuthDenyTopic", count=1, retries=0, check=False,
                         timeout_ms=5000, **keys)
    assert refused.error is not None and refused.error.get("causeCode") == 16, refused.error  # NO_PERMISSION
