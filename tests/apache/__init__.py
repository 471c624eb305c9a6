"""Apache RocketMQ's own NameServer and broker as child processes, and its official Java client as a driver.

The judge of our broker: tests start the real ``NamesrvStartup`` / ``BrokerStartup`` on 127.0.0.1 with free ports,
each with its own home (``user.home`` and ``rocketmq.home.dir``), so logs land in ``<home>/logs/rocketmqlogs`` and
nothing is written under ``~``; the broker's store goes where the test says. The client driver
(``tests/java/client/ClientDriver.java``) prints one JSON object per result; ``ApacheClient.run`` starts one JVM per
command, ``ApacheClient.session()`` keeps one JVM for many commands (about 0.5-1 s saved per command).

Startup cost is kept down with small heaps, SerialGC, C1 only, TLS off (the default "permissive" mode builds a
self-signed SslContext: about 4 s) and an AppCDS archive per classpath, written by the first run that exits cleanly
and reused after (``RMQ_TEST_CDS=0`` turns that off). Servers run under ``ServerLauncher``, which calls the real main
and only takes waiting out: it cuts the 3 s-per-executor stall of a clean stop, and it makes the broker's first
registration with the name servers happen at boot instead of up to 10 s later (see ServerLauncher.java). Typical
numbers on the 2-core machine, archives warm: namesrv ready 0.4 s, broker ready 1-1.5 s, broker SIGTERM 5.5 s
(Apache sleeps 3 s + 2 s in its shutdown), a one-shot driver command 0.5-1 s, a command in a session 0.02-0.4 s.

Modules: ``build`` (artifacts, JVM flags, the driver and launcher jars), ``servers`` (ApacheProcess, the NameServer,
the broker, a whole ApacheCluster), ``client`` (ApacheClient and its DriverSession) and ``fixtures``. This face only
re-exports them.

Examples:
    >>> namesrv = start_apache_namesrv(tmp_path / "namesrv")  # doctest: +SKIP
    >>> broker = start_apache_broker(tmp_path / "broker", namesrv, tmp_path / "store")  # doctest: +SKIP
    >>> client = apache_client(tmp_path / "client")  # doctest: +SKIP
    >>> with client.session() as s:  # doctest: +SKIP
    ...     s.call("create-topic", namesrv=namesrv.addr, topic="T", queues=4)
    ...     sent = s.call("produce", namesrv=namesrv.addr, topic="T", count=10, keys_prefix="k").records
    >>> broker.stop(); namesrv.kill()  # doctest: +SKIP
"""

from tests.apache.build import (
    APACHE_VERSION,
    DRIVER_JVM_ARGS,
    FAST_START_JVM_ARGS,
    SERVER_JVM_ARGS,
    SHARED_JAVA,
    apache_artifact,
    apache_mqadmin,
)
from tests.apache.client import (
    ApacheClient,
    DriverError,
    DriverOutput,
    DriverSession,
    apache_client,
    driver_args,
    driver_body,
)
from tests.apache.fixtures import apache_broker, apache_client_driver, apache_namesrv
from tests.apache.servers import (
    ApacheCluster,
    ApacheProcess,
    ApacheProcessError,
    start_apache_broker,
    start_apache_cluster,
    start_apache_namesrv,
)

__all__ = [
    "APACHE_VERSION",
    "DRIVER_JVM_ARGS",
    "FAST_START_JVM_ARGS",
    "SERVER_JVM_ARGS",
    "SHARED_JAVA",
    "ApacheClient",
    "ApacheCluster",
    "ApacheProcess",
    "ApacheProcessError",
    "DriverError",
    "DriverOutput",
    "DriverSession",
    "apache_artifact",
    "apache_broker",
    "apache_client",
    "apache_client_driver",
    "apache_mqadmin",
    "apache_namesrv",
    "driver_args",
    "driver_body",
    "start_apache_broker",
    "start_apache_cluster",
    "start_apache_namesrv",
]
