"""``python -m connector.resolver --service`` as users run it: a process of its own with a pid file and a log file,
serving a sink whose driver dies after the decision and before any END_TRANSACTION (the killable driver of
test_sink_recovery.py). The service, not a resolver of the driver's, answers the broker's checks: every decided row
is committed exactly once. A second service on the same pid file refuses to start; one serving every sink of the
decision topic finds the sink in it; SIGTERM stops a service and removes its pid files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.connector.conftest import SINK_CHECK_IMMUNITY_S, read_topic
from tests.connector.test_sink_recovery import REPO, resolver_answers, run_driver
from tests.helpers import wait_until
from tests.integration.cluster import Cluster

pytestmark = pytest.mark.slow

ROWS = 12


ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def service_argv(namesrv: str, directory: Path, pid_file: Path, *flags: str) -> list[str]:
    return [sys.executable, "-m", "connector.resolver", "--service", "--namesrv", namesrv, "--dir", str(directory),
            "--pid-file", str(pid_file), "--log-dir", str(directory / "logs"), *flags]


def start_service(namesrv: str, directory: Path, pid_file: Path, *flags: str) -> subprocess.Popen:
    # its output goes to its log file (--log-dir); anything before that (a bad flag) to the test's stderr
    return subprocess.Popen(service_argv(namesrv, directory, pid_file, *flags), cwd=REPO, env=ENV,
                            stdout=subprocess.DEVNULL)


def stop(service: subprocess.Popen) -> int:
    service.send_signal(signal.SIGTERM)
    return service.wait(timeout=30)


def test_service_commits_a_dead_drivers_decided_batch(sink_cluster: Cluster, tmp_path: Path,
                                                      topic_name: str) -> None:
    namesrv = sink_cluster.namesrv_addr
    sink_id = "service_" + topic_name[-40:].replace("-", "_")
    directory, pid_file = tmp_path / "resolvers", tmp_path / "run" / "resolver.pid"
    log_file = directory / "logs" / "resolver.log"
    service = start_service(namesrv, directory, pid_file, "--sink-id", sink_id)
    others: list[subprocess.Popen] = []
    try:
        wait_until("the service serves the sink", lambda: (directory / f"{sink_id}.pid").exists()
                   and (directory / f"{sink_id}.pid").read_text() == f"{service.pid} ready", timeout=30)
        assert pid_file.read_text().strip() == str(service.pid)

        twice = subprocess.run(service_argv(namesrv, directory, pid_file, "--all-sinks"), cwd=REPO, env=ENV,
                               capture_output=True, text=True, timeout=60)
        assert twice.returncode == 1 and f"already runs with the pid file {pid_file} (pid {service.pid})" in \
            twice.stderr, twice.stderr
        assert pid_file.read_text().strip() == str(service.pid)

        (tmp_path / "input").mkdir()
        (tmp_path / "input" / "part-0.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in range(ROWS)))
        config = {"namesrv": namesrv, "topic": topic_name, "input": str(tmp_path / "input"),
                  "checkpoint": str(tmp_path / "checkpoint"), "kill_after_decision": 0,
                  "options": {"namesrvAddr": namesrv, "sinkId": sink_id, "resolverDir": str(directory),
                              "checkImmunitySeconds": str(SINK_CHECK_IMMUNITY_S)}}
        driver_log = tmp_path / "driver.log"
        code = run_driver(config, driver_log)
        assert code == -9, f"the driver should have been killed after the decision, exited {code}:\n" \
                           f"{driver_log.read_text(errors='replace')[-3000:]}"
        assert not (directory / f"{sink_id}.log").exists(), "the driver started a resolver of its own"

        wait_until("every decided row committed by the service",
                   lambda: len(read_topic(namesrv, topic_name)) >= ROWS, timeout=60)
        assert Counter(m.body.decode() for m in read_topic(namesrv, topic_name)) == \
            Counter(f"row-{i}" for i in range(ROWS))
        answers = resolver_answers(directory / "logs", "resolver")
        # checks before the decision was recorded are answered UNKNOWN (asked again), after it COMMIT; never ROLLBACK
        assert {a for _, _, a in answers} <= {"COMMIT", "UNKNOWN"} and {b for b, _, _ in answers} == {"0"}
        assert sum(a == "COMMIT" for _, _, a in answers) >= ROWS

        # a service for every sink of the decision topic finds this one there
        every = start_service(namesrv, tmp_path / "all", tmp_path / "all" / "all.pid", "--all-sinks")
        others.append(every)
        wait_until("the all-sinks service serves the sink", lambda: f"serving sink {sink_id} " in
                   (tmp_path / "all" / "logs" / "all.log").read_text(), timeout=30, ignoring=(FileNotFoundError,))
        assert stop(every) == 0 and not (tmp_path / "all" / "all.pid").exists()

        assert stop(service) == 0, log_file.read_text()[-3000:]
        assert not pid_file.exists() and not (directory / f"{sink_id}.pid").exists()
        assert "resolver service stopped" in log_file.read_text()
    finally:
        for process in (service, *others):
            if process.poll() is None:
                process.kill()
                process.wait()
