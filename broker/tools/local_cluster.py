"""Our NameServer and brokers as real processes on 127.0.0.1: what jobs (``python -m jobs.main``) start when no
NameServer is given, and what integration tests start for the whole system.

``start_namesrv`` runs ``python -m broker.namesrv -c namesrv.conf`` and ``start_broker`` runs
``python -m broker -c broker.conf``, each with a generated config on free ports and its files (config, store, console
log, ``logs/``) under the directory given. A server is ready when its port accepts connections and a route query
answers: for the NameServer any answer; for a broker, the NameServer's route of TBW102 must list its address (it has
registered, so clients can find it). ``start_cluster`` does both; ``Cluster`` stops everything on exit.

Examples:
    >>> with start_cluster(tmp_path) as cluster:  # doctest: +SKIP
    ...     client = BlockingClient(cluster.namesrv_addr)
    ...     client.send(Message("TopicTest", b"hello"))
    >>> with start_namesrv(tmp_path / "ns") as namesrv, start_broker(tmp_path / "b", namesrv.addr) as broker:
    ...     broker.stop()  # SIGTERM: a clean shutdown  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from broker.client.blocking import BlockingRemotingClient
from broker.client.protocol import cluster_info_request, get_route_request
from broker.client.route import TopicRouteData
from broker.common.errors import RemotingError, ServerError
from broker.remoting.codes import ResponseCode

HOST = "127.0.0.1"
# The directory holding the ``broker`` package: the repository in an editable install, site-packages otherwise.
REPO = Path(__file__).resolve().parents[2]
BOOT_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
BIND_RETRIES = 3
ADDRESS_IN_USE = "Address already in use"
AUTO_CREATE_TOPIC = "TBW102"
DEFAULT_CLUSTER = "DefaultCluster"
SMALL_COMMIT_LOG = 1024 * 1024  # small files so tests roll them; Java's default is 1 GiB


LOWEST_PORT = 20000  # servers' ports are drawn from here up to the start of the kernel's ephemeral range
PORT_BAND_ENV = "RMQ_PORT_BAND"


def ephemeral_port_start() -> int:
    """Where the kernel starts handing out ports to outgoing connections (Linux's ip_local_port_range, else the
    common 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def port_band(low: int, high: int) -> tuple[int, int]:
    """[low, high) narrowed to the slice ``PORT_BAND_ENV`` names ("i/n": the i-th of n equal slices), so that
    processes choosing ports side by side (parallel test workers) never choose the same one."""
    band = os.environ.get(PORT_BAND_ENV, "")
    index, _, count = band.partition("/")
    if not (index.isdigit() and count.isdigit() and int(index) < int(count)):
        return low, high
    width = (high - low) // int(count)
    return low + int(index) * width, low + (int(index) + 1) * width


def free_port() -> int:
    """A free port below the ephemeral range. A port the kernel chose (bind to 0) can be handed to any process's
    next outgoing connection as soon as it is released, so a server stopped and restarted on it (a broker's restart
    keeps its port) could find it taken; ports below that range are only ever taken by a bind."""
    low, top = port_band(LOWEST_PORT, ephemeral_port_start())
    if top > low + 100:
        for _ in range(200):
            port = random.randrange(low + 2, top - 1)  # room for a broker's listenPort - 2 and + 1
            if _port_free(port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
    return True


def free_broker_port() -> int:
    """A listenPort with listenPort + 1 (the HA port) and listenPort - 2 (the VIP channel) free too."""
    for _ in range(100):
        port = free_port()
        if LOWEST_PORT <= port - 2 and port + 1 < 65535 and _port_free(port + 1) and _port_free(port - 2):
            return port
    raise ServerError("no free port p with p+1 and p-2 free after 100 tries")


def port_accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((HOST, port)) == 0


def _properties(conf: dict[str, object]) -> str:
    def text(value: object) -> str:
        return str(value).lower() if isinstance(value, bool) else str(value)

    return "".join(f"{key}={text(value)}\n" for key, value in conf.items())


@dataclass
class ServerProcess:
    """One of our servers. ``stop()`` is SIGTERM and a wait (a clean shutdown); ``kill()`` a crash."""

    role: str
    popen: subprocess.Popen[bytes]
    port: int
    home: Path
    conf: dict[str, object]
    console_path: Path
    boot_s: float = 0.0

    @property
    def addr(self) -> str:
        return f"{HOST}:{self.port}"

    def console(self) -> str:
        return self.console_path.read_text(errors="replace") if self.console_path.exists() else ""

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise ServerError(f"{self.role} {self.addr} ignored SIGTERM for {timeout}s:\n"
                                  f"{self.console()[-3000:]}") from None
        return self.popen.returncode

    def kill(self) -> int:
        if self.alive():
            self.popen.kill()
        return self.popen.wait()

    def close(self) -> None:
        """Fixture cleanup: a clean stop when it works, else a kill."""
        with contextlib.suppress(ServerError):
            self.stop()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def spawn_server(role: str, module: str, home: Path, port: int, conf: dict[str, object],
                 env: Mapping[str, str] | None = None, args: Sequence[str] | None = None) -> ServerProcess:
    """``python -m module`` in ``home``, its output in ``<role>.console.log`` there; its arguments are ``args``, by
    default ``-c <role>.conf`` (``conf`` written as properties)."""
    home.mkdir(parents=True, exist_ok=True)
    if args is None:
        conf_path = home / f"{role}.conf"
        conf_path.write_text(_properties(conf))
        args = ["-c", str(conf_path)]
    console_path = home / f"{role}.console.log"
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    full_env = {**os.environ, **(env or {}), "PYTHONPATH": path}
    with console_path.open("wb") as console:
        popen = subprocess.Popen([sys.executable, "-m", module, *args], cwd=home, env=full_env,
                                 stdout=console, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return ServerProcess(role, popen, port, home, conf, console_path)


def _route(namesrv_addr: str, topic: str) -> tuple[int, TopicRouteData | None]:
    """(response code, route) of one GET_ROUTEINFO_BY_TOPIC; raises RemotingError when nobody answers."""
    with BlockingRemotingClient(namesrv_addr, connect_timeout_ms=500) as client:
        response = client.invoke(get_route_request(topic), 1000)
    if response.code == ResponseCode.SUCCESS and response.body:
        return response.code, TopicRouteData.decode(response.body)
    return response.code, None


def _answers(namesrv_addr: str) -> bool:
    _route(namesrv_addr, AUTO_CREATE_TOPIC)  # any code will do: it speaks remoting
    return True


def _registered(namesrv_addr: str, broker_addr: str) -> bool:
    """The NameServer's cluster info lists the broker: registered, with or without auto-created topics (its
    TBW102 route, the older check, exists only when autoCreateTopicEnable is on)."""
    with BlockingRemotingClient(namesrv_addr, connect_timeout_ms=500) as client:
        response = client.invoke(cluster_info_request(), 1000)
    return response.code == ResponseCode.SUCCESS and f'"{broker_addr}"'.encode() in (response.body or b"")


def await_ready(proc: ServerProcess, ready: Callable[[], bool], timeout: float) -> None:
    start = time.monotonic()
    while True:
        if not proc.alive():
            raise ServerError(f"{proc.role} exited during boot (rc {proc.popen.returncode}):\n{proc.console()[-3000:]}")
        if port_accepts(proc.port):
            try:
                if ready():
                    proc.boot_s = time.monotonic() - start
                    return
            except RemotingError:
                pass
        if time.monotonic() - start > timeout:
            proc.kill()
            raise ServerError(f"{proc.role} {proc.addr} not ready after {timeout}s:\n{proc.console()[-3000:]}")
        time.sleep(0.05)


def start_with_retries(start_once: Callable[[], ServerProcess]) -> ServerProcess:
    """A free port can be taken between picking it and binding it: try again on a new one."""
    for attempt in range(BIND_RETRIES):
        try:
            return start_once()
        except ServerError as err:
            if attempt + 1 == BIND_RETRIES or ADDRESS_IN_USE not in str(err):
                raise
    raise AssertionError("unreachable")


def _log_conf(home: Path) -> dict[str, object]:
    """Each server's log files under its own directory; its console file (what tests read) gets every INFO line."""
    return {"logDir": home / "logs", "logConsoleLevel": "INFO"}


def namesrv_conf(port: int, home: Path, **conf: object) -> dict[str, object]:
    return {"listenPort": port, "bindAddress": HOST, "kvConfigPath": home / "kvConfig.json",
            "configStorePath": home / "namesrv.properties", **_log_conf(home), **conf}


def start_namesrv(home: Path, *, timeout: float = BOOT_TIMEOUT_S, **conf: object) -> ServerProcess:
    """``python -m broker.namesrv`` on a free port; ready when a route query gets any answer."""

    def start_once() -> ServerProcess:
        port = free_port()
        proc = spawn_server("namesrv", "broker.namesrv", Path(home), port, namesrv_conf(port, Path(home), **conf))
        try:
            await_ready(proc, lambda: _answers(proc.addr), timeout)
        except BaseException:
            proc.kill()
            raise
        return proc

    return start_with_retries(start_once)


def broker_conf(port: int, namesrv_addr: str, store_dir: Path, **conf: object) -> dict[str, object]:
    return {
        "brokerClusterName": DEFAULT_CLUSTER,
        "brokerName": "broker-a",
        "brokerId": 0,
        "namesrvAddr": namesrv_addr,
        "listenPort": port,
        "brokerIP1": HOST,
        "brokerIP2": HOST,
        "storePathRootDir": store_dir,
        "autoCreateTopicEnable": True,
        "autoCreateSubscriptionGroup": True,
        "defaultTopicQueueNums": 4,
        "flushDiskType": "ASYNC_FLUSH",
        "mappedFileSizeCommitLog": SMALL_COMMIT_LOG,
        **conf,
    }


def start_broker(home: Path, namesrv_addr: str, *, store_dir: Path | None = None, timeout: float = BOOT_TIMEOUT_S,
                 env: Mapping[str, str] | None = None, port: int | None = None, **conf: object) -> ServerProcess:
    """``python -m broker`` on a free port (or on ``port``: a restart where it was), registered with
    ``namesrv_addr`` ("a;b": every one of them); ready when each NameServer's cluster info lists it. ``conf`` adds
    or overrides broker.conf keys (``brokerName=...``); ``env`` adds environment variables (``RMQ_EVENT_LOOP``)."""
    namesrvs = [a for a in namesrv_addr.split(";") if a]
    fixed_port = port

    def start_once() -> ServerProcess:
        port = fixed_port or free_broker_port()
        store = Path(store_dir) if store_dir is not None else Path(home) / "store"
        full_conf = broker_conf(port, namesrv_addr, store, **{**_log_conf(Path(home)), **conf})
        proc = spawn_server("broker", "broker", Path(home), port, full_conf, env)
        try:
            await_ready(proc, lambda: all(_registered(ns, proc.addr) for ns in namesrvs), timeout)
        except BaseException:
            proc.kill()
            raise
        return proc

    return start_with_retries(start_once)


@dataclass
class Cluster:
    """A NameServer and its brokers; closing stops the brokers first (they unregister), then the NameServer."""

    namesrv: ServerProcess
    brokers: list[ServerProcess] = field(default_factory=list)

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.addr

    def add_broker(self, home: Path, **conf: object) -> ServerProcess:
        broker = start_broker(home, self.namesrv_addr, **conf)
        self.brokers.append(broker)
        return broker

    def close(self) -> None:
        for broker in self.brokers:
            broker.close()
        self.namesrv.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def start_cluster(tmp: Path, brokers: int = 1, **broker_conf: object) -> Cluster:
    """A NameServer and ``brokers`` brokers named broker-a, broker-b... under ``tmp``."""
    cluster = Cluster(start_namesrv(Path(tmp) / "namesrv"))
    try:
        for i in range(brokers):
            name = f"broker-{chr(ord('a') + i)}"
            cluster.add_broker(Path(tmp) / name, **{"brokerName": name, **broker_conf})
    except BaseException:
        cluster.close()
        raise
    return cluster
