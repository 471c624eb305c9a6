"""Our NameServer and brokers as real processes on 127.0.0.1, for integration tests that want the whole system.

The process-launching core lives in broker/tools/local_cluster.py (jobs start the same embedded NameServer and broker);
this module keeps the names tests and benches have always imported from here.

Examples:
    >>> with start_cluster(tmp_path) as cluster:  # doctest: +SKIP
    ...     client = BlockingClient(cluster.namesrv_addr)
    ...     client.send(Message("TopicTest", b"hello"))
"""

from __future__ import annotations

from pathlib import Path

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

# The repository root: where tests find conf/, bench/ and the Java projects.
REPO = Path(__file__).resolve().parents[2]
