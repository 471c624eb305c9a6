"""Our NameServer and brokers as real processes on 127.0.0.1, for integration tests that want the whole system, and
the suite's pool of clusters (the ``clusters`` fixture of tests/conftest.py).

The process-launching core lives in broker/tools/local_cluster.py (jobs start the same embedded NameServer and broker);
this module keeps the names tests and benches have always imported from here. ``start_servers`` starts ours
(``rmq``) or Apache's (``apache``) the same way; ``ClusterPool.shared`` hands every test module that asks for the same
kind, broker count and broker.conf keys the same running cluster. A module that stops, kills or restarts a server,
or that looks at the whole store, starts its own with ``start_cluster`` (or ``start_servers``) instead.

Examples:
    >>> with start_cluster(tmp_path) as cluster:  # doctest: +SKIP
    ...     client = BlockingClient(cluster.namesrv_addr)
    ...     client.send(Message("TopicTest", b"hello"))
    >>> @pytest.fixture(scope="session")  # doctest: +SKIP
    ... def sql_cluster(clusters: ClusterPool) -> Cluster:
    ...     return clusters.shared(enablePropertyFilter=True)  # SQL92 on; topics and groups named per test
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from broker.common.errors import ServerError  # noqa: F401  (re-exported)
from broker.tools.local_cluster import (  # noqa: F401  (re-exported: tests and benches import them from here)
    ADDRESS_IN_USE,
    AUTO_CREATE_TOPIC,
    BIND_RETRIES,
    BOOT_TIMEOUT_S,
    DEFAULT_CLUSTER,
    HOST,
    SMALL_COMMIT_LOG,
    STOP_TIMEOUT_S,
    Cluster,
    ServerProcess,
    broker_conf,
    free_broker_port,
    free_port,
    namesrv_conf,
    port_accepts,
    start_broker,
    start_cluster,
    start_namesrv,
)

if TYPE_CHECKING:
    from tests.apache import ApacheCluster, ApacheProcess

# The repository root: where tests find conf/, bench/ and the Java projects.
REPO = Path(__file__).resolve().parents[2]
KINDS = ("rmq", "apache")


def start_servers(kind: str, home: Path, brokers: int = 1, *, version: str | None = None,
                  home_files: Mapping[str, str] | None = None, **conf: object) -> Cluster | ApacheCluster:
    """A NameServer and ``brokers`` brokers (broker-a, broker-b...) under ``home``: ours (``rmq``) or Apache's
    (``apache``; a missing JDK or Maven fails the test, it is never skipped). ``conf`` adds or overrides broker.conf
    keys; both kinds read the same ones. ``home_files`` (path under the RocketMQ home -> text, e.g.
    ``conf/plain_acl.yml``) are written before the brokers start (``rocketmq_home`` finds them again); ``version``
    runs another Apache release's broker (5.3.2: the last with ACL 1.0)."""
    if kind == "rmq":
        if version is not None:
            raise ValueError(f"version {version!r} names an Apache release; kind 'rmq' has one")
        if home_files:
            conf = {"rocketmqHome": str(write_home_files(Path(home) / "rocketmq-home", home_files)), **conf}
        return start_cluster(home, brokers, **conf)
    if kind != "apache":
        raise ValueError(f"kind {kind!r} is none of {KINDS}")
    from tests.apache import start_apache_cluster
    from tests.javatools import JavaToolError

    try:
        return start_apache_cluster(home, brokers, version=version, home_files=home_files, **conf)
    except JavaToolError as err:
        pytest.fail(f"cannot start Apache's NameServer and broker: {err}", pytrace=False)


def write_home_files(home: Path, files: Mapping[str, str]) -> Path:
    for relative, text in files.items():
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_text(text)
    return home


def rocketmq_home(broker: ServerProcess | ApacheProcess) -> Path:
    """Where a broker reads ``conf/plain_acl.yml``: ours its ``rocketmqHome`` key, Apache's its own home."""
    if isinstance(broker, ServerProcess):
        return Path(str(broker.conf["rocketmqHome"]))
    return broker.home


class ClusterPool:
    """Running clusters, one per (kind, brokers, broker.conf keys), each started when first asked for and stopped
    when the pool closes (at the end of the test session).

    Tests that share a cluster name their own topics and consumer groups, and leave the servers running."""

    def __init__(self, home: Path, start: Callable[..., Cluster | ApacheCluster] = start_servers) -> None:
        self.home = Path(home)
        self._start = start
        self._clusters: dict[tuple[object, ...], Cluster | ApacheCluster] = {}

    def shared(self, kind: str = "rmq", *, brokers: int = 1, version: str | None = None,
               home_files: Mapping[str, str] | None = None, **conf: object) -> Cluster | ApacheCluster:
        """The pool's cluster with these settings (``conf``: broker.conf keys; ``version`` and ``home_files`` as in
        ``start_servers``), started now if it is the first ask."""
        extra = {name: value for name, value in (("version", version), ("home_files", home_files)) if value}
        key = (kind, brokers, *sorted((name, repr(value)) for name, value in conf.items()),
               *sorted((name, repr(sorted(value.items()) if isinstance(value, Mapping) else value))
                       for name, value in extra.items()))
        if key not in self._clusters:
            home = self.home / f"{kind}-{len(self._clusters)}"
            self._clusters[key] = self._start(kind, home, brokers, **extra, **conf)
        return self._clusters[key]

    def close(self) -> None:
        """Stops every cluster, the last started first."""
        while self._clusters:
            _, cluster = self._clusters.popitem()
            cluster.close()

    def __enter__(self) -> ClusterPool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
