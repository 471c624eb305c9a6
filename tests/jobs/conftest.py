"""Fixtures of the job tests: a real NameServer + broker, the suite's shared default cluster (jobs only read and
write topics they create, named per test), and a producer of demo orders."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from broker.tools.local_cluster import Cluster
from jobs.common import create_topic
from jobs.main import produce_orders
from tests.integration.cluster import ClusterPool

_names = itertools.count()


@pytest.fixture(scope="session")
def jobs_cluster(clusters: ClusterPool) -> Cluster:
    return clusters.shared()


@pytest.fixture
def namesrv(jobs_cluster: Cluster) -> str:
    return jobs_cluster.namesrv_addr


@pytest.fixture
def new_topic(namesrv: str, request: pytest.FixtureRequest) -> Callable[..., str]:
    """A fresh topic with ``queues`` queues, named after the test."""

    def make(queues: int = 4) -> str:
        name = "".join(c for c in request.node.name if c.isalnum())[:40] + f"{next(_names)}"
        create_topic(namesrv, name, queues)
        return name

    return make


@pytest.fixture
def produce(namesrv: str) -> Callable[[str, int, int], int]:
    """produce(topic, first, count): orders numbered first..first+count-1 (keys order-N, tags by N % 3)."""

    def send(topic: str, first: int, count: int) -> int:
        return produce_orders(namesrv, first, count, topic)

    return send


@pytest.fixture
def lake_dir(tmp_path: Path) -> Path:
    return tmp_path / "lake"
