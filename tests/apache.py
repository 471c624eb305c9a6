"""Apache RocketMQ's own NameServer and broker as child processes, and its official Java client as a driver.

The judge of our broker: tests start the real ``NamesrvStartup`` / ``BrokerStartup`` on 127.0.0.1 with free ports,
each with its own home (``user.home`` and ``rocketmq.home.dir``), so logs land in ``<home>/logs/rocketmqlogs`` and
nothing is written under ``~``; the broker's store goes where the test says. The client driver
(``tests/java/client/ClientDriver.java``) prints one JSON object per result; ``ApacheClient.run`` starts one JVM per
command, ``ApacheClient.session()`` keeps one JVM for many commands (about 0.5-1 s saved per command).

Startup cost is kept down with small heaps, SerialGC, C1 only, TLS off (the default "permissive" mode builds a
self-signed SslContext: about 4 s) and an AppCDS archive per classpath, written by the first run that exits cleanly
and reused after (``RMQ_TEST_CDS=0`` turns that off). Servers run under ``ServerLauncher``, which calls the real main
and only takes waiting out: it cuts the 3 s-per-executor stall of a clean stop, and it makes the broker's first
registration with the name servers happen at boot instead of up to 10 s later (see ServerLauncher.java). Typical
numbers on the 2-core machine, archives warm: namesrv ready 0.4 s, broker ready 1-1.5 s, broker SIGTERM 5.5 s
(Apache sleeps 3 s + 2 s in its shutdown), a one-shot driver command 0.5-1 s, a command in a session 0.02-0.4 s.

Examples:
    >>> namesrv = start_apache_namesrv(tmp_path / "namesrv")  # doctest: +SKIP
    >>> broker = start_apache_broker(tmp_path / "broker", namesrv, tmp_path / "store")  # doctest: +SKIP
    >>> client = apache_client(tmp_path / "client")  # doctest: +SKIP
    >>> with client.session() as s:  # doctest: +SKIP
    ...     s.call("create-topic", namesrv=namesrv.addr, topic="T", queues=4)
    ...     sent = s.call("produce", namesrv=namesrv.addr, topic="T", count=10, keys_prefix="k").records
    >>> broker.stop(); namesrv.kill()  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import threading
import time
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from broker.tools.local_cluster import free_port  # noqa: F401  (re-exported: interop tests import it from here)
from tests.javatools import (
    JavaProgram,
    JavaToolError,
    cache_dir,
    compile_java,
    require_tools,
    resolve_classpath,
    rocketmq_artifact,
)

# 5.5.1 (javatools.ROCKETMQ_VERSION) is only partly on Maven Central: common, remoting, store and broker are there,
# but namesrv, client, tools and srvutil are not, and the 5.5.1 broker depends on the 5.5.1 client. 5.5.0 is the
# newest release whose whole server and client side resolves. The codecs we are judged on are the same source in
# both (MessageDecoder, MessageExtEncoder, IndexFile, IndexHeader, StoreCheckpoint, RemotingCommand); 5.5.1 changes
# CommitLog/ConsumeQueue recovery details, RocketMQSerializable speed-ups and RocksDB queues.
APACHE_VERSION = os.environ.get("RMQ_APACHE_VERSION", "5.5.0")
NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"
LAUNCHER_MAIN = "ServerLauncher"
DRIVER_MAIN = "ClientDriver"
HOST = "127.0.0.1"

# Unified JVM logging (CDS warnings included) goes to stderr: the driver's stdout carries only JSON.
FAST_START_JVM_ARGS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xshare:auto",
    "-XX:-UsePerfData",
    "-Xlog:disable",
    "-Xlog:all=warning:stderr",
    "--add-opens",
    "java.base/java.lang=ALL-UNNAMED",  # ServerLauncher and the driver read a thread's Runnable
)
SERVER_JVM_ARGS = ("-Xms256m", "-Xmx256m", *FAST_START_JVM_ARGS)
DRIVER_JVM_ARGS = ("-Xms64m", "-Xmx256m", *FAST_START_JVM_ARGS)
# TLS "permissive" (the default) builds a self-signed SslContext at startup: about 4 s of a namesrv's boot.
SERVER_SYSTEM_PROPERTIES = {"tls.server.mode": "disabled", "tls.enable": "false"}

BOOT_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 60.0
DRIVER_TIMEOUT_S = 120.0
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


class DriverError(JavaToolError):
    """The client driver reported {"error": ...} or exited non-zero; ``output`` holds what it printed before."""

    def __init__(self, message: str, output: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.output = output or []


# -- building ---------------------------------------------------------------------------------------------------------


def apache_artifact(artifact_id: str) -> str:
    return rocketmq_artifact(artifact_id, APACHE_VERSION)


def apache_mqadmin(home: Path) -> JavaProgram:
    """Apache's own ``mqadmin`` (rocketmq-tools' MQAdminStartup); what it writes goes under ``home``."""
    return JavaProgram(resolve_classpath([apache_artifact("rocketmq-tools")]),
                       "org.apache.rocketmq.tools.command.MQAdminStartup",
                       (*DRIVER_JVM_ARGS, f"-Duser.home={home}", f"-Drocketmq.home.dir={home}"))


@functools.cache
def _driver_build() -> tuple[Path, Path, str]:
    """(driver jar, launcher jar, client+tools classpath), compiled from tests/java/client.

    Jars rather than the classes directory because AppCDS refuses non-empty directories on the classpath; the
    launcher gets a jar of its own so the servers' classpaths (and CDS archives) survive edits of the driver."""
    require_tools("java", "javac", "mvn")
    classpath = resolve_classpath([apache_artifact("rocketmq-client"), apache_artifact("rocketmq-tools")])
    classes = compile_java("client", classpath)
    every = sorted(classes.rglob("*.class"))
    launcher = [path for path in every if path.name.startswith(LAUNCHER_MAIN)]
    return _jar("driver", classes, every), _jar("launcher", classes, launcher), classpath


def _jar(name: str, classes: Path, members: list[Path]) -> Path:
    """A jar of ``members`` named by their content, so an unchanged set keeps its path."""
    digest = hashlib.sha256()
    for path in members:
        digest.update(path.relative_to(classes).as_posix().encode() + b"\0" + path.read_bytes())
    jar = cache_dir() / "jars" / f"{name}-{digest.hexdigest()[:16]}.jar"
    if not jar.exists():
        jar.parent.mkdir(parents=True, exist_ok=True)
        partial = jar.with_suffix(f".{os.getpid()}.tmp")
        with zipfile.ZipFile(partial, "w") as zf:
            for path in members:
                zf.write(path, path.relative_to(classes).as_posix())
        partial.replace(jar)
    return jar


@functools.cache
def _server_classpath(artifact_id: str) -> str:
    _, launcher_jar, _ = _driver_build()
    return f"{launcher_jar}{os.pathsep}{resolve_classpath([apache_artifact(artifact_id)])}"


@functools.cache
def _driver_classpath() -> str:
    jar, _, classpath = _driver_build()
    return f"{jar}{os.pathsep}{classpath}"


# -- AppCDS -----------------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _CdsArchive:
    """Flags that use the archive if it exists, else dump one at exit into a private file renamed on success."""

    jvm_args: tuple[str, ...]
    pending: Path | None = None
    final: Path | None = None
    # Only a run that did the usual work is worth archiving: a driver that failed early loaded few classes.
    good_exits: tuple[int, ...] = (0, 128 + signal.SIGTERM)

    def commit(self, returncode: int | None) -> None:
        """Publish a freshly dumped archive, only from a JVM that exited normally (not killed mid-dump, not failed)."""
        if self.pending is None or self.final is None:
            return
        if returncode in self.good_exits and self.pending.exists():
            self.pending.replace(self.final)
        else:
            self.pending.unlink(missing_ok=True)
        self.pending = None


def _cds(tag: str, classpath: str) -> _CdsArchive:
    if os.environ.get("RMQ_TEST_CDS", "1") == "0":
        return _CdsArchive(())
    java = Path(shutil.which("java") or "java").resolve()
    identity = f"{java}:{java.stat().st_mtime_ns if java.exists() else 0}\n{classpath}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    final = cache_dir() / "cds" / f"{tag}-{digest}.jsa"
    if final.exists():
        return _CdsArchive((f"-XX:SharedArchiveFile={final}",))
    final.parent.mkdir(parents=True, exist_ok=True)
    pending = final.with_name(f"{final.name}.{os.getpid()}.{threading.get_ident()}.{time.monotonic_ns()}.tmp")
    return _CdsArchive((f"-XX:ArchiveClassesAtExit={pending}",), pending, final)


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
    _cds: _CdsArchive = field(default_factory=lambda: _CdsArchive(()))

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
) -> ApacheProcess:
    home.mkdir(parents=True, exist_ok=True)
    conf_path = home / f"{role}.conf"
    conf_path.write_text(_properties_text(conf))
    console_path = home / f"{role}.console.log"
    classpath = _server_classpath(artifact)
    cds = _cds(role, classpath)
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
    **conf: object,
) -> ApacheProcess:
    """Apache's broker (master, brokerId 0) on 127.0.0.1; ready when it printed its boot line, accepts connections
    and logged a completed registration with every namesrv in ``namesrv`` (an address list "a;b" or a process).

    ``store_dir`` defaults to ``tmp/store``; ``conf`` adds or overrides broker.conf keys
    (``flushDiskType="SYNC_FLUSH"``, ``mappedFileSizeCommitLog=4096``, ``brokerName=...``)."""
    namesrv_addr = namesrv.addr if isinstance(namesrv, ApacheProcess) else namesrv
    store = Path(store_dir) if store_dir is not None else Path(tmp) / "store"

    def start_once() -> ApacheProcess:
        port = free_broker_port()
        home = Path(tmp) / f"broker-{port}"
        full = broker_conf(port, namesrv_addr, store, **conf)
        proc = _spawn("broker", "rocketmq-broker", BROKER_MAIN, home, full, tuple(jvm_args), (port, port - 2, port + 1))
        proc.store_dir = Path(str(full["storePathRootDir"]))
        _await_ready(proc, BROKER_BOOT_LINE, boot_timeout, tuple(namesrv_addr.split(";")))
        return proc

    return _start_with_retries(start_once)


# -- client driver ----------------------------------------------------------------------------------------------------


def driver_body(index: int, size: int, prefix: str = "body") -> bytes:
    """The body ClientDriver ``produce`` sends as message ``index``: "<prefix>-<index>|" padded with 'x' to ``size``."""
    head = f"{prefix}-{index}|".encode()
    return (head + b"x" * max(0, size - len(head)))[:size]


def driver_args(command: str, *args: str, **flags: object) -> list[str]:
    """``("produce", topic="T", keys_prefix="k", property=["a=1", "b=2"])`` -> produce --topic T --keys-prefix k
    --property a=1 --property b=2; bools become true/false, ``None`` is left out."""
    out = [command, *map(str, args)]
    for name, value in flags.items():
        if value is None:
            continue
        values = value if isinstance(value, list | tuple) else [value]
        for item in values:
            text = str(item).lower() if isinstance(item, bool) else str(item)
            out += [f"--{name.replace('_', '-')}", text]
    return out


@dataclass(frozen=True, slots=True)
class DriverOutput:
    """What one driver command printed: ``records`` (one per message, queue or result) and its summary line."""

    command: str
    records: list[dict[str, Any]]
    summary: dict[str, Any] | None
    elapsed_s: float
    error: dict[str, Any] | None = None  # the {"error": ...} line of a failed command (seen with check=False)


def _split_output(command: str, lines: list[dict[str, Any]], elapsed_s: float) -> DriverOutput:
    records = [line for line in lines if "summary" not in line and "done" not in line and "error" not in line]
    summary = next((line for line in lines if "summary" in line), None)
    error = next((line for line in lines if "error" in line), None)
    return DriverOutput(command, records, summary, elapsed_s, error)


def _parse_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@dataclass(slots=True)
class ApacheClient:
    """The official RocketMQ Java client through ClientDriver; ``timings`` collects (command, seconds) per call.

    ``serialize`` ("JSON" or "ROCKETMQ") sets rocketmq.serialize.type and ``smart_msg`` the client's
    org.apache.rocketmq.client.sendSmartMsg (SEND_MESSAGE_V2 headers; the client's default is on)."""

    log_dir: Path
    serialize: str | None = None
    smart_msg: bool | None = None
    timings: list[tuple[str, float]] = field(default_factory=list)

    def _command(self, cds: _CdsArchive, argv: list[str]) -> list[str]:
        flags = driver_args("", serialize=self.serialize, smart_msg=self.smart_msg, log_root=self.log_dir)[1:]
        return ["java", *DRIVER_JVM_ARGS, *cds.jvm_args, "-cp", _driver_classpath(), DRIVER_MAIN, *argv, *flags]

    def run(
        self, command: str, *args: str, timeout: float = DRIVER_TIMEOUT_S, check: bool = True, **flags: object
    ) -> DriverOutput:
        """One JVM for one command. With ``check`` an {"error"} line or a non-zero exit raises DriverError."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        cds = _cds("driver", _driver_classpath())
        start = time.monotonic()
        try:
            done = subprocess.run(
                self._command(cds, driver_args(command, *args, **flags)),
                capture_output=True,
                timeout=timeout,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as err:
            cds.commit(None)
            raise DriverError(f"driver {command} timed out after {timeout}s") from err
        cds.commit(done.returncode)
        elapsed = time.monotonic() - start
        self.timings.append((command, elapsed))
        lines = _parse_lines(done.stdout.decode(errors="replace"))
        if check and (done.returncode != 0 or any("error" in line for line in lines)):
            stderr = done.stderr.decode(errors="replace").strip()[-3000:]
            errors = [line for line in lines if "error" in line]
            raise DriverError(f"driver {command} exited {done.returncode}: {errors}\n{stderr}", lines)
        return _split_output(command, lines, elapsed)

    @contextlib.contextmanager
    def session(self, timeout: float = DRIVER_TIMEOUT_S) -> Iterator[DriverSession]:
        """One JVM running ClientDriver ``script``: commands go in on stdin, one per line."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        session = DriverSession(self, timeout)
        try:
            yield session
        finally:
            session.close()


class DriverSession:
    """A ClientDriver ``script`` process; ``call`` sends one command and collects its lines up to {"done"}."""

    def __init__(self, client: ApacheClient, timeout: float) -> None:
        self._client = client
        self._timeout = timeout
        self._cds = _cds("driver", _driver_classpath())
        self._stderr_path = client.log_dir / f"driver-session-{os.getpid()}-{time.monotonic_ns()}.stderr"
        start = time.monotonic()
        with self._stderr_path.open("wb") as stderr:
            self._popen = subprocess.Popen(
                client._command(self._cds, ["script"]), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr
            )
        self.spawn_s = time.monotonic() - start
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name="driver-session-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._popen.stdout is not None
        for raw in self._popen.stdout:
            self._lines.put(raw.decode(errors="replace"))
        self._lines.put(None)

    def stderr(self) -> str:
        return self._stderr_path.read_text(errors="replace") if self._stderr_path.exists() else ""

    def call(
        self, command: str, *args: str, check: bool = True, timeout: float | None = None, **flags: object
    ) -> DriverOutput:
        assert self._popen.stdin is not None
        start = time.monotonic()
        try:
            self._popen.stdin.write((json.dumps(driver_args(command, *args, **flags)) + "\n").encode())
            self._popen.stdin.flush()
        except OSError as err:
            raise DriverError(f"driver session is gone before {command}\n{self.stderr()[-3000:]}") from err
        deadline = start + (timeout or self._timeout)
        lines: list[dict[str, Any]] = []
        while True:
            try:
                raw = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self._popen.kill()
                raise DriverError(f"driver session {command} timed out\n{self.stderr()[-3000:]}", lines) from None
            if raw is None:
                raise DriverError(f"driver session exited during {command}\n{self.stderr()[-3000:]}", lines)
            if raw.startswith("{"):
                line = json.loads(raw)
                if "done" in line:
                    break
                lines.append(line)
        elapsed = time.monotonic() - start
        self._client.timings.append((command, elapsed))
        if check and not line.get("ok"):
            raise DriverError(f"driver {command} failed: {[x for x in lines if 'error' in x]}", lines)
        return _split_output(command, lines, elapsed)

    def close(self) -> None:
        if self._popen.poll() is None and self._popen.stdin is not None:
            with contextlib.suppress(OSError):
                self._popen.stdin.write(b"quit\n")
                self._popen.stdin.close()
            try:
                self._popen.wait(30)
            except subprocess.TimeoutExpired:
                self._popen.kill()
                self._popen.wait()
        self._reader.join(5)
        if self._popen.stdout is not None:
            self._popen.stdout.close()
        self._cds.commit(self._popen.returncode)


def apache_client(log_dir: Path, *, serialize: str | None = None, smart_msg: bool | None = None) -> ApacheClient:
    """The official client driver, built (Maven + javac, cached) on first use; its logs go under ``log_dir``."""
    _driver_classpath()
    return ApacheClient(Path(log_dir), serialize=serialize, smart_msg=smart_msg)


# -- pytest fixtures: ``from tests.apache import apache_broker, apache_client_driver, apache_namesrv`` -----------------


@pytest.fixture(scope="session")
def apache_client_driver(tmp_path_factory: pytest.TempPathFactory) -> ApacheClient:
    """The driver, built once per session; a missing JDK or Maven fails (never skips) with the reason."""
    try:
        return apache_client(tmp_path_factory.mktemp("apache-client"))
    except JavaToolError as err:
        reason = str(err)
    pytest.fail(f"cannot build the Apache client driver: {reason}", pytrace=False)


@pytest.fixture
def apache_namesrv(tmp_path: Path) -> Iterator[ApacheProcess]:
    with start_apache_namesrv(tmp_path) as proc:
        yield proc


@pytest.fixture
def apache_broker(tmp_path: Path, apache_namesrv: ApacheProcess) -> Iterator[ApacheProcess]:
    """A broker on ``apache_namesrv`` with its store in ``tmp_path / "store"``; killed at teardown if still up."""
    with start_apache_broker(tmp_path, apache_namesrv, tmp_path / "store") as proc:
        yield proc
