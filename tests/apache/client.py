"""The official RocketMQ Java client as a driver: ``tests/java/client/ClientDriver.java`` prints one JSON object per
result; ``ApacheClient.run`` starts one JVM per command, ``ApacheClient.session()`` keeps one JVM for many commands
(about 0.5-1 s saved per command).
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.apache.build import DRIVER_JVM_ARGS, DRIVER_MAIN, driver_classpath
from tests.javatools import CdsArchive, JavaToolError, cds_archive

DRIVER_TIMEOUT_S = 120.0


class DriverError(JavaToolError):
    """The client driver reported {"error": ...} or exited non-zero; ``output`` holds what it printed before."""

    def __init__(self, message: str, output: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.output = output or []


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

    def java_command(self, cds: CdsArchive, argv: list[str]) -> list[str]:
        flags = driver_args("", serialize=self.serialize, smart_msg=self.smart_msg, log_root=self.log_dir)[1:]
        return ["java", *DRIVER_JVM_ARGS, *cds.jvm_args, "-cp", driver_classpath(), DRIVER_MAIN, *argv, *flags]

    def run(
        self, command: str, *args: str, timeout: float = DRIVER_TIMEOUT_S, check: bool = True, **flags: object
    ) -> DriverOutput:
        """One JVM for one command. With ``check`` an {"error"} line or a non-zero exit raises DriverError."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        cds = cds_archive("driver", driver_classpath())
        start = time.monotonic()
        try:
            done = subprocess.run(
                self.java_command(cds, driver_args(command, *args, **flags)),
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
        self._cds = cds_archive("driver", driver_classpath())
        self._stderr_path = client.log_dir / f"driver-session-{os.getpid()}-{time.monotonic_ns()}.stderr"
        start = time.monotonic()
        with self._stderr_path.open("wb") as stderr:
            self._popen = subprocess.Popen(
                client.java_command(self._cds, ["script"]), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr
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
    driver_classpath()
    return ApacheClient(Path(log_dir), serialize=serialize, smart_msg=smart_msg)
