"""``python -m broker.namesrv`` as a real process, and side by side with Apache's NameServer.

The first tests start our NameServer with a namesrv.conf (free port), register a fake broker over our
RemotingClient and ask what clients ask; SIGTERM must end it with exit code 0. The ``java`` test plays the whole
namesrv_scenario session over sockets against Apache's NameServer (tests/apache) and ours at once and compares
every answer byte for byte, waiting where Apache unregisters asynchronously (BatchUnregistrationService).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.remoting.client import RemotingClient
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.route import decode_cluster_info, decode_topic_list, decode_topic_route_data
from tests.apache import ApacheProcess, start_apache_namesrv
from tests.helpers import free_port, mqadmin, mqadmin_ok, run
from tests.javatools import JavaToolError
from tests.unit.namesrv.namesrv_scenario import (
    CONFIG,
    SCENARIO,
    crc,
    describe,
    register_body,
    topic_config,
    version,
)

REPO = Path(__file__).resolve().parents[2]
BOOT_LINE = "The Name Server boot success"
BOOT_TIMEOUT_S = 20.0
CLUSTER, BROKER, ADDR = "DefaultCluster", "broker-a", "127.0.0.1:10911"


class NamesrvProcess:
    def __init__(self, popen: subprocess.Popen[bytes], port: int, stderr_path: Path, conf_path: Path) -> None:
        self.popen = popen
        self.port = port
        self.stderr_path = stderr_path
        self.conf_path = conf_path

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace") if self.stderr_path.exists() else ""

    def stop(self, timeout: float = 10.0) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        return self.popen.wait(timeout)

    def close(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()
        if self.popen.stdout is not None:
            self.popen.stdout.close()


def _wait_for_boot(popen: subprocess.Popen[bytes]) -> str:
    """Stdout until the boot line (returned), or '' if the process ended first."""
    assert popen.stdout is not None
    seen = b""
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    with selectors.DefaultSelector() as selector:
        selector.register(popen.stdout, selectors.EVENT_READ)
        while BOOT_LINE.encode() not in seen:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no boot line within {BOOT_TIMEOUT_S}s; stdout so far: {seen!r}")
            if selector.select(remaining):
                chunk = os.read(popen.stdout.fileno(), 4096)
                if not chunk:
                    return ""
                seen += chunk
    return seen.decode()


def start_namesrv(tmp_path: Path, **conf: str) -> NamesrvProcess:
    """Our NameServer on a free port, configured by a namesrv.conf; retried if another process takes the port."""
    for _ in range(3):
        port = free_port()
        home = tmp_path / f"namesrv-{port}"
        home.mkdir(parents=True)
        settings = {"listenPort": port, "bindAddress": "127.0.0.1", "kvConfigPath": home / "kvConfig.json", **conf}
        conf_path = home / "namesrv.conf"
        conf_path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        proc = _boot(conf_path, port)
        if proc is not None:
            return proc
    raise AssertionError("no free port for the namesrv after 3 tries")


def restart_namesrv(proc: NamesrvProcess) -> NamesrvProcess:
    """The same NameServer started again with its namesrv.conf (and port), once ``proc`` has stopped."""
    proc.close()
    again = _boot(proc.conf_path, proc.port)
    assert again is not None, f"the namesrv did not start again on port {proc.port}"
    return again


def _boot(conf_path: Path, port: int) -> NamesrvProcess | None:
    """``python -m broker.namesrv -c conf_path`` booted on ``port``; None when the port was taken."""
    stderr_path = conf_path.parent / "namesrv.stderr"
    with stderr_path.open("ab") as stderr:
        popen = subprocess.Popen(
            [sys.executable, "-m", "broker.namesrv", "-c", str(conf_path)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
        )
    proc = NamesrvProcess(popen, port, stderr_path, conf_path)
    line = _wait_for_boot(popen)
    if line:
        assert f"127.0.0.1:{port}" in line
        return proc
    proc.close()
    if "Address already in use" not in proc.stderr():
        raise AssertionError(f"namesrv exited with {popen.returncode}:\n{proc.stderr()}")
    return None


@pytest.fixture
def namesrv(tmp_path: Path) -> Iterator[NamesrvProcess]:
    proc = start_namesrv(tmp_path)
    try:
        yield proc
    finally:
        proc.close()


def register_request(broker_id: int = 0, addr: str = ADDR, topics=("TopicTest", "TBW102")) -> RemotingCommand:
    body = register_body([topic_config(t) for t in topics], version(1))
    ext = {
        "brokerName": BROKER,
        "brokerAddr": addr,
        "clusterName": CLUSTER,
        "haServerAddr": addr + "-ha",
        "brokerId": str(broker_id),
        "enableActingMaster": "false",
        "compressed": "false",
        "bodyCrc32": crc(body),
    }
    return create_request(RequestCode.REGISTER_BROKER, ext, body)


def test_register_and_query_then_sigterm(namesrv):
    async def scenario() -> None:
        async with RemotingClient() as broker, RemotingClient() as client:
            assert (await broker.invoke(namesrv.addr, register_request())).code == ResponseCode.SUCCESS
            slave = await broker.invoke(namesrv.addr, register_request(1, "127.0.0.1:10912"))
            assert dict(slave.ext_fields) == {"haServerAddr": ADDR + "-ha", "masterAddr": ADDR}

            response = await client.invoke(
                namesrv.addr, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
            )
            route = decode_topic_route_data(response.body)
            assert [(q.broker_name, q.write_queue_nums, q.perm) for q in route.queue_datas] == [(BROKER, 4, 6)]
            assert route.broker_datas[0].broker_addrs == {0: ADDR, 1: "127.0.0.1:10912"}
            assert b'"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10912"}' in response.body

            info = decode_cluster_info(
                (await client.invoke(namesrv.addr, create_request(RequestCode.GET_BROKER_CLUSTER_INFO))).body
            )
            assert info.cluster_addr_table == {CLUSTER: [BROKER]}
            assert info.broker_addr_table[BROKER].broker_addrs == {0: ADDR, 1: "127.0.0.1:10912"}

            topics = await client.invoke(namesrv.addr, create_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
            assert sorted(decode_topic_list(topics.body)) == ["TBW102", "TopicTest"]

            unknown = await client.invoke(
                namesrv.addr, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "NoSuchTopic"})
            )
            assert unknown.code == ResponseCode.TOPIC_NOT_EXIST
            assert unknown.remark.startswith("No topic route info in name server for the topic: NoSuchTopic\nSee ")

    run(scenario())
    assert namesrv.stop() == 0, namesrv.stderr()
    assert "Traceback" not in namesrv.stderr()


def test_update_namesrv_config_is_written_to_its_file_and_read_after_a_restart(tmp_path):
    """``mqadmin updateNamesrvConfig`` changes the running NameServer and its -c file (as Apache's
    Configuration.persist): the key is set in place, the rest of the file stays, and a restart reads the change."""
    proc = start_namesrv(tmp_path, orderMessageEnable="false")
    proc.conf_path.write_text("# kept by the update\n" + proc.conf_path.read_text())
    try:
        assert mqadmin_ok("updateNamesrvConfig", "-n", proc.addr, "-k", "orderMessageEnable", "-v", "true") == (
            f"update name server config success![{proc.addr}]\norderMessageEnable : true\n")
        refused = mqadmin("updateNamesrvConfig", "-n", proc.addr, "-k", "kvConfigPath", "-v", "/etc/x")
        assert refused.code == 1 and "Can not update config in black list." in refused.err
        lines = proc.conf_path.read_text().splitlines()
        assert lines[0] == "# kept by the update" and "orderMessageEnable=true" in lines
        assert "orderMessageEnable=false" not in lines
        assert not any(line.startswith("kvConfigPath=/etc") for line in lines)
        assert proc.stop() == 0, proc.stderr()
        proc = restart_namesrv(proc)
        shown = mqadmin_ok("getNamesrvConfig", "-n", proc.addr).splitlines()
        assert f"{'orderMessageEnable':<50}=  true" in shown
    finally:
        proc.close()


def test_print_config_and_bad_config(tmp_path):
    conf = tmp_path / "namesrv.conf"
    conf.write_text("listenPort=19876\nscanNotActiveBrokerInterval=1000\n")
    cmd = [sys.executable, "-m", "broker.namesrv", "-c", str(conf), "-p"]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert "listenPort=19876\n" in done.stdout and "scanNotActiveBrokerInterval=1000\n" in done.stdout
    conf.write_text("listenPort=not-a-port\n")
    done = subprocess.run(cmd[:-1], cwd=REPO, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 1 and "listenPort" in done.stderr


# -- differential: Apache's NameServer and ours, the same session over sockets ----------------------------------------

UNREGISTERING = {RequestCode.UNREGISTER_BROKER}


@pytest.fixture
def apache_namesrv(tmp_path: Path) -> Iterator[ApacheProcess]:
    try:
        proc = start_apache_namesrv(tmp_path / "apache", orderMessageEnable=CONFIG["orderMessageEnable"])
    except JavaToolError as err:
        pytest.fail(f"cannot start Apache's NameServer: {err}", pytrace=False)
    with proc:
        yield proc


async def _cluster_info(client: RemotingClient, addr: str) -> bytes:
    return (await client.invoke(addr, create_request(RequestCode.GET_BROKER_CLUSTER_INFO))).body


async def _settle(client: RemotingClient, ours: str, theirs: str, before: bytes) -> None:
    """Apache unregisters in a background thread and both learn of a close asynchronously: wait until both
    cluster infos changed and agree."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        a, b = await _cluster_info(client, ours), await _cluster_info(client, theirs)
        if a == b and a != before:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the NameServers did not settle after an unregistration")


@pytest.mark.java
def test_same_answers_as_apache_namesrv(tmp_path, apache_namesrv):
    ours = start_namesrv(tmp_path / "ours", **CONFIG)

    async def play() -> list[tuple[int, dict, dict]]:
        clients: dict[int, RemotingClient] = {}
        differences = []
        observer = RemotingClient()
        try:
            for index, step in enumerate(SCENARIO):
                before = await _cluster_info(observer, ours.addr)
                if "close" in step:
                    client = clients.pop(step["close"], None)
                    if client is not None:
                        await client.close()
                        await _settle(observer, ours.addr, apache_namesrv.addr, before)
                    continue
                client = clients.setdefault(step["conn"], RemotingClient())
                answers = []
                for addr in (ours.addr, apache_namesrv.addr):
                    body = base64.b64decode(step["body"])
                    request = create_request(step["code"], step["extFields"], body, version=step["version"])
                    response = await client.invoke(addr, request)
                    # describe() maps Apache 5.5.0's FAQ URL to 5.5.1's, which we use
                    answers.append(describe(response.code, response.remark, dict(response.ext_fields), response.body))
                if answers[0] != answers[1]:
                    differences.append((index, answers[0], answers[1]))
                if step["code"] in UNREGISTERING:
                    await _settle(observer, ours.addr, apache_namesrv.addr, before)
        finally:
            for client in clients.values():
                await client.close()
            await observer.close()
        return differences

    try:
        differences = run(play(), timeout=120)
    finally:
        with contextlib.suppress(subprocess.TimeoutExpired):
            ours.stop()
        ours.close()
    assert differences == []


# -- Apache's broker and client on our NameServer -----------------------------------------------------------------


@pytest.mark.java
def test_apache_broker_and_client_work_through_our_namesrv(tmp_path, namesrv):
    """The official broker registers (full registration, then the single-topic increment of a new topic), the
    official client finds the route and sends; once the broker's connection drops, its routes are gone."""
    from tests.apache import apache_client, start_apache_broker

    try:
        broker = start_apache_broker(tmp_path / "broker", namesrv.addr)
    except JavaToolError as err:
        pytest.fail(f"cannot start Apache's broker: {err}", pytrace=False)
    with broker:
        with apache_client(tmp_path / "client").session() as session:
            session.call("create-topic", namesrv=namesrv.addr, topic="ViaOurNamesrv", queues=4)
            sent = session.call("produce", namesrv=namesrv.addr, topic="ViaOurNamesrv", count=3)
        assert {r["sendStatus"] for r in sent.records} == {"SEND_OK"} and len(sent.records) == 3

    async def route_gone() -> bool:
        async with RemotingClient() as client:
            request = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "ViaOurNamesrv"})
            for _ in range(500):
                if (await client.invoke(namesrv.addr, request)).code == ResponseCode.TOPIC_NOT_EXIST:
                    return True
                await asyncio.sleep(0.02)
        return False

    assert run(route_gone())
    assert namesrv.stop() == 0
