"""Fixtures shared by the whole suite. ``spark``: the one local Spark session of a test run (Delta Lake and the rmq
source registered), created on first use so that tests without Spark never pay for it. ``clusters``: the running
NameServer + broker clusters (ours or Apache's) that test modules share, one per setting, started on first use
(see tests/integration/cluster.py). ``resolver_dir``: where the sink's resolvers of one test keep their files; they
are stopped when the test ends. ``server_logs`` (automatic): servers' log files go under the session's temp dir.
Small helpers (free_port, now_ms, wait_until, eventually...) are in tests/helpers.py.

Parallel runs (``pytest -n 2``, what CI does): each worker runs whole modules, so a module's fixtures start once, and
every test that starts Spark (tests/connector, tests/jobs) runs on one worker, so that one Spark session serves
them all and two JVMs never resolve Delta's jars into the Ivy cache at the same time.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from tests.integration.cluster import ClusterPool


SPARK_DIRS = ("tests/connector/", "tests/jobs/")

# Property tests assert what the code does with each input, not how fast inputs come: on 2 busy cores (two workers,
# brokers and JVMs beside them) Hypothesis's per-example deadline and its too-slow health check measure the machine.
settings.register_profile("rmq", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("rmq")

try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pragma: no cover - pytest-xdist is a test extra; without it the suite runs in one process
    LoadScopeScheduling = None
else:

    class SparkApartScheduling(LoadScopeScheduling):
        """Whole modules per worker, and all the Spark tests as one unit (sent first: it is the longest)."""

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "spark" if path.startswith(SPARK_DIRS) else path

    @pytest.hookimpl(optionalhook=True)  # known only while xdist is on: `-p no:xdist` must still run
    def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> SparkApartScheduling:
        return SparkApartScheduling(config, log)


def pytest_configure(config: pytest.Config) -> None:
    """Each parallel worker draws its servers' ports from its own slice of the range (broker/tools/local_cluster.py's
    port band): a broker restarted on its port finds it free even when the other worker chose ports meanwhile."""
    import os

    from broker.tools.local_cluster import PORT_BAND_ENV

    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if worker.startswith("gw") and worker[2:].isdigit() and count.isdigit():
        os.environ.setdefault(PORT_BAND_ENV, f"{worker[2:]}/{count}")


@pytest.fixture(scope="session", autouse=True)
def server_logs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Servers the tests start write their log files under the session's temp dir, not the user's
    ~/logs/rocketmqlogs, and copy every INFO line to the stderr the tests read (broker/common/logs.py)."""
    import os

    from broker.common.logs import CONSOLE_LEVEL_ENV, LOG_DIR_ENV

    saved = {key: os.environ.get(key) for key in (LOG_DIR_ENV, CONSOLE_LEVEL_ENV)}
    os.environ.setdefault(LOG_DIR_ENV, str(tmp_path_factory.mktemp("rocketmqlogs")))
    os.environ.setdefault(CONSOLE_LEVEL_ENV, "INFO")
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from jobs.spark import build_session

    session = build_session("rmq-tests", master="local[2]")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterPool]:
    """``clusters.shared(kind="rmq", brokers=1, **broker_conf)``: the session's cluster with those settings. Shared
    by every module that asks for the same, so a test names its own topics and groups and stops no server; a test
    that needs servers of its own starts them (``start_cluster``)."""
    from tests.integration.cluster import ClusterPool

    with ClusterPool(tmp_path_factory.mktemp("clusters")) as pool:
        yield pool


@pytest.fixture
def resolver_dir(tmp_path: Path) -> Iterator[Path]:
    """The sink's resolverDir for one test; the resolvers it started (pid files) are stopped afterwards."""
    import os
    import signal

    directory = tmp_path / "resolvers"
    directory.mkdir()
    yield directory
    for pid_file in directory.glob("*.pid"):
        text = pid_file.read_text().split(" ")[0]
        if text.isdigit():
            try:
                os.kill(int(text), signal.SIGTERM)
            except ProcessLookupError:
                pass
