"""The console as a child process (``python -m broker.console``), started as ``broker.tools.local_cluster`` starts
the NameServer and brokers: on a free port, its output in ``console.console.log`` under ``home``, ready once its
API answers. The demo job starts it this way beside its cluster.

Examples:
    >>> with start_console_process(tmp_path / "console", cluster.namesrv_addr) as console:  # doctest: +SKIP
    ...     print(f"http://{console.addr}/")
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from broker.console.sampler import DEFAULT_INTERVAL_S
from broker.tools.local_cluster import (
    BOOT_TIMEOUT_S,
    HOST,
    ServerProcess,
    await_ready,
    free_port,
    spawn_server,
    start_with_retries,
)


def console_url(proc: ServerProcess) -> str:
    return f"http://{proc.addr}/"


def _answers(proc: ServerProcess) -> bool:
    try:
        with urllib.request.urlopen(console_url(proc) + "api/health", timeout=1) as answer:
            return json.loads(answer.read()).get("status") == "UP"
    except (OSError, ValueError):  # not listening yet (URLError is an OSError), or not our answer
        return False


def start_console_process(home: Path, namesrv_addr: str, *, port: int | None = None,
                          sample_interval_s: float = DEFAULT_INTERVAL_S, env: Mapping[str, str] | None = None,
                          timeout: float = BOOT_TIMEOUT_S, extra_args: tuple[str, ...] = ()) -> ServerProcess:
    """``mqconsole -n namesrv_addr`` on 127.0.0.1 and a free port (or ``port``); ``extra_args`` go to the command
    (``--accessKey``...). ``stop()`` is SIGTERM and a wait; ``console_url(proc)`` its address."""
    fixed_port = port

    def start_once() -> ServerProcess:
        chosen = fixed_port or free_port()
        args = ["-n", namesrv_addr, "--host", HOST, "--port", str(chosen), "--sampleInterval", str(sample_interval_s),
                *extra_args]
        conf: dict[str, object] = {"namesrvAddr": namesrv_addr, "port": chosen, "sampleInterval": sample_interval_s}
        proc = spawn_server("console", "broker.console", Path(home), chosen, conf, env, args)
        try:
            await_ready(proc, lambda: _answers(proc), timeout)
        except BaseException:
            proc.kill()
            raise
        return proc

    return start_with_retries(start_once)
