"""The README's "Executors on a real cluster" recipe, as a user follows it: the wheel is built, installed (not
editable) into a fresh virtual environment, and ``spark-submit --master local-cluster[2,1,1024]`` runs the installed
jobs/backfill.py from a directory outside the repository, with that environment's Python on the driver and on both
executors (each its own JVM and Python workers). The rows land in the table, and the job ran on spark-submit's master,
not the shipped spark-defaults.conf's local[2]."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

import pyspark
import pytest

from jobs.spark import DELTA_JARS, REPO

pytestmark = pytest.mark.slow

SOURCES = ("setup.py", "pyproject.toml", "README.md", "broker", "connector", "jobs", "conf")  # what a build reads
MASTER = "local-cluster[2,1,1024]"
ORDERS = 60
SUBMIT_TIMEOUT_S = 900  # a spark-submit takes ~130 s on a quiet 2-core machine and over 300 s on a loaded one


def run(args: list[object], **kwargs: object) -> str:
    done = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=SUBMIT_TIMEOUT_S, **kwargs)
    assert done.returncode == 0, f"{args}:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return done.stdout


def build_wheel(tmp: Path) -> Path:
    """``pip wheel --no-deps .`` on a copy of the sources (a checkout's own build/ may hold stale modules)."""
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
        else:
            shutil.copy2(REPO / name, src / name)
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", src, "-w", tmp / "dist"])
    [wheel] = (tmp / "dist").glob("*.whl")
    return wheel


def test_backfill_spark_submitted_from_an_installed_wheel(tmp_path: Path, namesrv: str, spark,
                                                          new_topic: Callable[..., str],
                                                          produce: Callable[[str, int, int], int]) -> None:
    wheel = build_wheel(tmp_path)
    python_tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform_tag = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    assert wheel.name == f"rmq-0.1.0-{python_tag}-{python_tag}-{platform_tag}.whl"  # the C extension's tags

    venv = tmp_path / "venv"  # pyspark, delta-spark, numpy... from this interpreter's site-packages; rmq from the wheel
    run([sys.executable, "-m", "venv", "--system-site-packages", venv])
    python = venv / "bin" / "python"
    run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--ignore-installed", wheel])
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "SPARK_CONF_DIR")}
    site_packages = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             cwd=outside, env=env).strip())
    imported = run([python, "-c", "import connector, jobs.backfill, rmq_conf\n"
                    "print(connector.__file__); print(jobs.backfill.__file__)"], cwd=outside, env=env).split()
    assert [Path(path).parent.parent for path in imported] == [site_packages, site_packages]

    topic = new_topic(2)
    produce(topic, 0, ORDERS)
    table, events = tmp_path / "table", tmp_path / "events"
    events.mkdir()
    out = run([Path(pyspark.__file__).parent / "bin" / "spark-submit", "--master", MASTER, "--packages", DELTA_JARS,
               "--conf", f"spark.pyspark.python={python}", "--conf", "spark.eventLog.enabled=true",
               "--conf", "spark.eventLog.compress=false", "--conf", f"spark.eventLog.dir={events.as_uri()}",
               imported[1], "--namesrv", namesrv, "--topic", topic, "--table", table], cwd=outside, env=env)
    assert f"read {ORDERS} rows, inserted {ORDERS} new" in out

    landed = spark.read.format("delta").load(str(table)).selectExpr("keys").collect()
    assert sorted(row.keys for row in landed) == sorted(f"order-{n}" for n in range(ORDERS))
    log = [line for path in sorted(events.rglob("events_*")) for line in path.read_text().splitlines()]  # rolling
    environment = next(json.loads(line) for line in log if '"SparkListenerEnvironmentUpdate"' in line)
    assert environment["Spark Properties"]["spark.master"] == MASTER
    executors = {json.loads(line)["Executor ID"] for line in log if '"SparkListenerExecutorAdded"' in line}
    assert len(executors) == 2
