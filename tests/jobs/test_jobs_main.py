"""The README's main command, as a user runs it: a subprocess that starts its own NameServer and broker, ingests,
backfills, replays the table through the exactly-once sink and reads it back, prints short lines per step (Spark's
and Ivy's console output goes to demo.log instead), and stops what it started."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from broker.tools.local_cluster import port_accepts
from connector.resolver import resolver_pid
from jobs.spark import REPO

pytestmark = pytest.mark.smoke

# What the JVM prints on its own: the launcher, Ivy's resolution report, log4j's console appender.
JVM_LINES = re.compile(r"^(:: (loading settings|resolving dependencies|resolution report) ::|WARNING: |"
                       r"Ivy Default Cache|Using Spark's default log4j|"
                       r"\d\d/\d\d/\d\d \d\d:\d\d:\d\d (WARN|INFO|ERROR) )", re.M)


def test_main_command_runs_to_completion(tmp_path) -> None:
    done = subprocess.run([sys.executable, "-m", "jobs.main", "--orders", "60", "--workdir", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    out = done.stdout
    assert "60 rows, 60 distinct messages" in out
    assert "created 20, paid 20, shipped 20" in out
    assert "read 60 rows, inserted 0 new (60 already there)" in out  # the backfill found everything ingested
    assert (tmp_path / "delta" / "orders" / "_delta_log").is_dir()

    # The headline: the table replayed through the exactly-once sink, read back, each key once.
    assert re.search(r"^60 messages sent as half messages and committed", out, re.M)
    assert re.search(r"^read back 60 messages in [\d.]+ s, counted per key against the table's 60 rows:\n"
                     r"60 of 60 keys match, 0 rows missing, 0 duplicates\n"
                     r"=> every row of the table arrived exactly once$", out, re.M)

    # The terminal shows the demo's lines only; the JVM's went to the log file named at the end.
    log = tmp_path / "demo.log"
    assert f"logs: {log}  (Spark, Ivy and log4j" in out
    assert JVM_LINES.findall(out + done.stderr) == []
    logged = log.read_text()
    assert ":: resolving dependencies ::" in logged and re.search(r" WARN ", logged)

    ports = [int(p) for p in re.findall(r"NameServer 127\.0\.0\.1:(\d+), broker 127\.0\.0\.1:(\d+)", out)[0]]
    assert not any(port_accepts(port) for port in ports)  # stopped what it started
    assert resolver_pid(tmp_path / "resolvers", "replay-DemoOrdersReplay") is None  # the sink's resolver too
