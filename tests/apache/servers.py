"""Apache RocketMQ's own NameServer and broker as child processes on 127.0.0.1 (see the package docstring).

Each gets free ports and its own home (``user.home`` and ``rocketmq.home.dir``), so logs land in
``<home>/logs/rocketmqlogs`` and nothing is written under ``~``; the broker's store goes where the test says. They run
under ``ServerLauncher`` (tests/java/common), with an AppCDS archive per classpath. ``start_apache_cluster`` starts a
NameServer and its brokers as one ``ApacheCluster``, the same shape as our ``Cluster``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.tools.local_cluster import free_port
from tests.apache.build import LAUNCHER_MAIN, SERVER_JVM_ARGS, server_classpath
from tests.javatools import CdsArchive, JavaToolError, cds_archive

NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"
HOST = "127.0.0.1"

# TLS "permissive" (the default) builds a self-signed SslContext at startup: about 4 s of a namesrv's boot.
SERVER_SYSTEM_PROPERTIES = {"tls.server.mode": "disabled", "tls.enable": "false"}

BOOT_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 60.0
BIND_RETRIES = 3
NAMESRV_BOOT_LINE = "The Name Server boot success"
BROKER_BOOT_LINE = "boot success"
BROKER_REGISTERED = "Registering current broker to name server completed. TargetHost={}"
BROKER_REGISTER_FAILED = "Failed to register current broker to name server. TargetHost={}"
BROKER_REGISTER_TIMEOUT = "Registration to one or more name servers does NOT complete within deadline"
ADDRESS_IN_USE = ("Address already in use", "BindException")

DEFAULT_CLUSTER = "DefaultCluster"
DEFAULT_BROKER_NAME = "broker-a"
DEFAULT_COMMIT_LOG_FILE_SIZE = 4 * 1024 * 1024  # RocketMQ's default is 1 GiB; tests want small, rolling files


class ApacheProcessError(JavaToolError):
    """An Apache namesrv or broker did not come up (or down) as expected; the message carries its console tail."""


# -- ports ------------------------------------------------------------------------------------------------------------


def _port_free(port: int) -> bool:
    if not 0 < port < 65536:
        return False
    for host in (HOST, "0.0.0.0"):  # the HA port binds the wildcard address
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                return False
    return True


def free_broker_port() -> int:
    """A listenPort whose neighbours are free too: the broker also binds listenPort-2 (fast/VIP channel) and we put
    the HA service on listenPort+1."""
    for _ in range(200):
        port = free_port()
        if _port_free(port - 2) and _port_free(port + 1):
            return port
    raise ApacheProcessError("no free port p with p-2 and p+1 free after 200 tries")


def port_accepts(port: int, host: str = HOST) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def _addr_accepts(addr: str) -> bool:
    host, _, port = addr.rpartition(":")
    return port.isdigit() and port_accepts(int(port), host or HOST)


# -- processes --------------------------------------------------------------------------------------------------------


def _properties_text(conf: Mapping[str, object]) -> str:
    def text(value: object) -> str:
        return str(value).lower() if isinstance(value, bool) else str(value)

    return "".join(f"{key}={text(value)}\n" for key, value in conf.items())


@dataclass(slots=True)
class ApacheProcess:
    """One running Apache namesrv or broker. ``close()`` (also ``__exit__``) ends it; ``stop()`` is the clean way."""

    role: str
    popen: subprocess.Popen[bytes]
    port: int
    home: Path
    conf_path: Path
    console_path: Path
    store_dir: Path | None = None
    ports: tuple[int, ...] = ()
    first_output_s: float = 0.0  # spawn until the JVM printed anything: roughly the JVM's own start-up
    boot_s: float = 0.0  # spawn until ready
    stop_s: float | None = None
    _cds: CdsArchive = field(default_factory=lambda: CdsArchive(()))

    @property
    def addr(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def log_dir(self) -> Path:
        return self.home / "logs" / "rocketmqlogs"

    def log(self, name: str) -> str:
        """A RocketMQ log file (``broker.log``, ``store.log``, ``namesrv.log``...), '' if not written yet."""
        path = self.log_dir / name
        return path.read_text(errors="replace") if path.exists() else ""

    def console(self) -> str:
        return self.console_path.read_text(errors="replace") if self.console_path.exists() else ""

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, so Apache's shutdown hook flushes and checkpoints the store and deletes the abort file; SIGKILL
        only if that takes longer than ``timeout``. Returns the exit code (143 after a SIGTERM)."""
        start = time.monotonic()
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
                self._cds.commit(None)
                raise ApacheProcessError(f"{self.role} {self.addr} ignored SIGTERM for {timeout}s") from None
        self.stop_s = time.monotonic() - start
        self._cds.commit(self.popen.returncode)
        return self.popen.returncode

    def kill(self) -> int:
        """SIGKILL: a crash, as far as the store is concerned (the abort file stays)."""
        start = time.monotonic()
        if self.alive():
            self.popen.kill()
        self.popen.wait()
        self.stop_s = time.monotonic() - start
        self._cds.commit(None)
        return self.popen.returncode

    def close(self) -> None:
        """Cleanup for fixtures: a kill, unless the first run of this classpath still has to write its CDS archive."""
        if self.alive():
            if self._cds.pending is not None:
                self.stop()
            else:
                self.kill()

    def __enter__(self) -> ApacheProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _spawn(
    role: str,
    artifact: str,
    main: str,
    home: Path,
    conf: dict[str, object],
    jvm_args: tuple[str, ...],
    ports: tuple[int, ...],
    version: str | None = None,
    home_files: Mapping[str, str] | None = None,
) -> ApacheProcess:
    home.mkdir(parents=True, exist_ok=True)
    for relative, text in (home_files or {}).items():  # e.g. conf/plain_acl.yml, read at start
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_text(text)
    conf_path = home / f"{role}.conf"
    conf_path.write_text(_properties_text(conf))
    console_path = home / f"{role}.console.log"
    classpath = server_classpath(artifact, version)
    cds = cds_archive(role, classpath)
    props = {**SERVER_SYSTEM_PROPERTIES, "user.home": home, "rocketmq.home.dir": home}
    cmd = [
        "java",
        *SERVER_JVM_ARGS,
        *cds.jvm_args,
        *jvm_args,
        *(f"-D{key}={value}" for key, value in props.items()),
        "-cp",
        classpath,
        LAUNCHER_MAIN,
        main,
        "-c",
        str(conf_path),
    ]
    env = {**os.environ, "ROCKETMQ_HOME": str(home)}
    with console_path.open("wb") as console:
        popen = subprocess.Popen(
            cmd, cwd=home, env=env, stdout=console, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    return ApacheProcess(role, popen, ports[0], home, conf_path, console_path, ports=ports, _cds=cds)


def _await_ready(proc: ApacheProcess, boot_line: str, timeout: float, registered_with: tuple[str, ...] = ()) -> None:
    """Until the boot line is on the console, every port accepts and (broker) every namesrv has the registration.

    Raises with the console tail if the JVM exits or the time runs out; a lost port race surfaces as
    ``ApacheProcessError`` whose message contains "Address already in use"."""
    start = time.monotonic()
    deadline = start + timeout
    probed = False
    while True:
        console = proc.console()
        if console and not proc.first_output_s:
            proc.first_output_s = time.monotonic() - start
        if not proc.alive() or any(marker in console for marker in ADDRESS_IN_USE):
            proc.kill()
            raise ApacheProcessError(f"{proc.role} exited during boot (rc {proc.popen.returncode}):\n{console[-4000:]}")
        if boot_line in console and all(port_accepts(port) for port in proc.ports[:1]):
            log = proc.log("broker.log") if registered_with else ""
            failed = [addr for addr in registered_with if BROKER_REGISTER_FAILED.format(addr) in log]
            if not probed:  # once: a name server that is not even listening will never see the registration
                failed += [addr for addr in registered_with if not _addr_accepts(addr)]
                probed = True
            if failed or BROKER_REGISTER_TIMEOUT in log:
                proc.kill()
                raise ApacheProcessError(f"broker {proc.addr} failed to register with {failed}")
            if all(BROKER_REGISTERED.format(addr) in log for addr in registered_with):
                proc.boot_s = time.monotonic() - start
                return
        if time.monotonic() > deadline:
            proc.kill()
            raise ApacheProcessError(f"{proc.role} not ready after {timeout}s:\n{console[-4000:]}")
        time.sleep(0.02)


def _start_with_retries(start_once: Any) -> ApacheProcess:
    """Free ports are picked before the JVM binds them, so another process can win the race: try again."""
    for attempt in range(BIND_RETRIES):
        try:
            return start_once()
        except ApacheProcessError as err:
            if attempt + 1 == BIND_RETRIES or not any(marker in str(err) for marker in ADDRESS_IN_USE):
                raise
    raise AssertionError("unreachable")


def namesrv_conf(port: int, home: Path, **conf: object) -> dict[str, object]:
    """NamesrvConfig + NettyServerConfig + NettyClientConfig keys. The namesrv's own remoting client targets the
    machine's non-loopback address (NetworkUtil.getLocalAddress); with scanning off it stays idle."""
    return {
        "listenPort": port,
        "bindAddress": HOST,
        "kvConfigPath": home / "namesrv" / "kvConfig.json",
        "scanAvailableNameSrv": False,
        **conf,
    }


def start_apache_namesrv(
    tmp: Path, *, jvm_args: tuple[str, ...] = (), boot_timeout: float = BOOT_TIMEOUT_S, **conf: object
) -> ApacheProcess:
    """Apache's NameServer on 127.0.0.1 and a free port, home (logs, kvConfig) under ``tmp``; ready when it printed
    its boot line and accepts connections. ``conf`` adds or overrides namesrv.conf keys."""

    def start_once() -> ApacheProcess:
        port = free_port()
        home = Path(tmp) / f"namesrv-{port}"
        proc = _spawn(
            "namesrv",
            "rocketmq-namesrv",
            NAMESRV_MAIN,
            home,
            namesrv_conf(port, home, **conf),
            tuple(jvm_args),
            (port,),
        )
        _await_ready(proc, NAMESRV_BOOT_LINE, boot_timeout)
        return proc

    return _start_with_retries(start_once)


def broker_conf(port: int, namesrv_addr: str, store_dir: Path, **conf: object) -> dict[str, object]:
    """BrokerConfig + NettyServerConfig + MessageStoreConfig keys; ``conf`` adds or overrides any of them."""
    store_dir = Path(store_dir)
    return {
        "brokerClusterName": DEFAULT_CLUSTER,
        "brokerName": DEFAULT_BROKER_NAME,
        "brokerId": 0,
        "namesrvAddr": namesrv_addr,
        "listenPort": port,  # the fast (VIP) server takes port-2
        "haListenPort": port + 1,
        "bindAddress": HOST,
        "brokerIP1": HOST,
        "brokerIP2": HOST,
        "storePathRootDir": store_dir,
        "storePathCommitLog": store_dir / "commitlog",
        "autoCreateTopicEnable": True,
        "autoCreateSubscriptionGroup": True,
        "flushDiskType": "ASYNC_FLUSH",
        "mappedFileSizeCommitLog": DEFAULT_COMMIT_LOG_FILE_SIZE,
        # The 5.x timer wheel (timerlog/, timerwheel, pop revive through it) is not what we judge, and with it on
        # a SIGTERM waits about 3 s more for PopReviveService; delay levels still go through the schedule topic.
        "timerWheelEnable": False,
        **conf,
    }


def start_apache_broker(
    tmp: Path,
    namesrv: str | ApacheProcess,
    store_dir: Path | None = None,
    *,
    jvm_args: tuple[str, ...] = (),
    boot_timeout: float = BOOT_TIMEOUT_S,
    version: str | None = None,
    home_files: Mapping[str, str] | None = None,
    **conf: object,
) -> ApacheProcess:
    """Apache's broker (master, brokerId 0) on 127.0.0.1; ready when it printed its boot line, accepts connections
    and logged a completed registration with every namesrv in ``namesrv`` (an address list "a;b" or a process).

    ``store_dir`` defaults to ``tmp/store``; ``conf`` adds or overrides broker.conf keys
    (``flushDiskType="SYNC_FLUSH"``, ``mappedFileSizeCommitLog=4096``, ``brokerName=...``). ``version`` runs another
    release's broker than ``APACHE_VERSION``; ``home_files`` (path under the broker's home -> text) are written
    before it starts."""
    namesrv_addr = namesrv.addr if isinstance(namesrv, ApacheProcess) else namesrv
    store = Path(store_dir) if store_dir is not None else Path(tmp) / "store"

    def start_once() -> ApacheProcess:
        port = free_broker_port()
        home = Path(tmp) / f"broker-{port}"
        full = broker_conf(port, namesrv_addr, store, **conf)
        proc = _spawn("broker", "rocketmq-broker", BROKER_MAIN, home, full, tuple(jvm_args), (port, port - 2, port + 1),
                      version, home_files)
        proc.store_dir = Path(str(full["storePathRootDir"]))
        _await_ready(proc, BROKER_BOOT_LINE, boot_timeout, tuple(namesrv_addr.split(";")))
        return proc

    return _start_with_retries(start_once)




@dataclass
class ApacheCluster:
    """Apache's NameServer and its brokers; closing ends the brokers first, then the NameServer (as our ``Cluster``)."""

    namesrv: ApacheProcess
    brokers: list[ApacheProcess] = field(default_factory=list)

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.addr

    def close(self) -> None:
        for broker in self.brokers:
            broker.close()
        self.namesrv.close()

    def __enter__(self) -> ApacheCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def start_apache_cluster(tmp: Path, brokers: int = 1, *, version: str | None = None,
                         home_files: Mapping[str, str] | None = None, **broker_conf: object) -> ApacheCluster:
    """Apache's NameServer and ``brokers`` brokers named broker-a, broker-b... under ``tmp``, each with its store in
    ``tmp/<name>/store``; ``broker_conf`` adds or overrides broker.conf keys of every broker, ``version`` and
    ``home_files`` are ``start_apache_broker``'s (the NameServer stays ``APACHE_VERSION``'s)."""
    cluster = ApacheCluster(start_apache_namesrv(Path(tmp) / "namesrv"))
    try:
        for i in range(brokers):
            name = f"broker-{chr(ord('a') + i)}"
            home = Path(tmp) / name
            cluster.brokers.append(start_apache_broker(home, cluster.namesrv, home / "store", version=version,
                                                       home_files=home_files, **{"brokerName": name, **broker_conf}))
    except BaseException:
        cluster.close()
        raise
    return cluster
