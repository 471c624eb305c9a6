"""The README's main command, as a user runs it: a subprocess that starts its own NameServer and broker, ingests,
backfills, prints what landed, and stops what it started."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from broker.tools.local_cluster import port_accepts
from jobs.spark import REPO

pytestmark = pytest.mark.smoke


def test_main_command_runs_to_completion(tmp_path) -> None:
    done = subprocess.run([sys.executable, "-m", "jobs.main", "--orders", "300", "--workdir", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    out = done.stdout
    assert "300 rows, 300 distinct messages" in out
    assert re.search(r"created\s+100\n.*paid\s+100\n.*shipped\s+100", out, re.S)
    assert "read 300 rows, inserted 0 new (300 already there)" in out  # the backfill found everything ingested
    assert (tmp_path / "delta" / "orders" / "_delta_log").is_dir()
    ports = [int(p) for p in re.findall(r"NameServer 127\.0\.0\.1:(\d+), broker 127\.0\.0\.1:(\d+)", out)[0]]
    assert not any(port_accepts(port) for port in ports)  # stopped what it started
