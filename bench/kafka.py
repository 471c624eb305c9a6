"""Apache Kafka 4.x as a peer to compare with: one broker in KRaft mode (broker and controller in one JVM) on
127.0.0.1, free ports, its own log directory, from Maven Central's jars.

The jars are resolved by Maven once and cached like the tests' Java tools (tests/javatools.py, under
``~/.cache/rmq-tests`` with a file lock); the storage is formatted with Kafka's own ``StorageTool``, the broker runs
``kafka.Kafka``, topics are created with Kafka's ``TopicCommand``. Nothing of ours runs inside it.

Examples
--------
    >>> with start_kafka(tmp / "kafka") as kafka:  # doctest: +SKIP
    ...     kafka.create_topic("T", partitions=8)
    ...     spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap)...
"""

from __future__ import annotations

import base64
import contextlib
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from broker.tools.local_cluster import free_port
from tests.javatools import JavaProgram, JavaToolError, resolve_classpath

KAFKA_VERSION = "4.4.0"
KAFKA_ARTIFACTS = (f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}", f"org.apache.kafka:kafka-tools:{KAFKA_VERSION}")
# Spark's own Kafka connector, the build of the installed pyspark (4.2.0, Scala 2.13)
SPARK_KAFKA_PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:{spark}"
HOST = "127.0.0.1"
BOOT_TIMEOUT_S = 120.0
JVM_ARGS = ("-Xms512m", "-Xmx1g", "-XX:+UseG1GC", "-Djava.awt.headless=true")
TOOL_JVM_ARGS = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


def server_properties(home: Path, port: int, controller_port: int, node_id: int = 1) -> str:
    """One node that is both broker and controller (a static one-voter quorum), one replica of everything."""
    conf = {
        "process.roles": "broker,controller",
        "node.id": node_id,
        "controller.quorum.voters": f"{node_id}@{HOST}:{controller_port}",
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": home / "data",
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": 1,
        "offsets.topic.num.partitions": 4,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1,
        "group.initial.rebalance.delay.ms": 0,
    }
    return "".join(f"{key}={value}\n" for key, value in conf.items())


@dataclass(slots=True)
class KafkaBroker:
    """A running single-node Kafka; ``bootstrap`` is what ``kafka.bootstrap.servers`` takes."""

    popen: subprocess.Popen[bytes]
    port: int
    home: Path
    classpath: str

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def tool(self, main_class: str) -> JavaProgram:
        return JavaProgram(self.classpath, main_class, TOOL_JVM_ARGS)

    def create_topic(self, topic: str, partitions: int) -> None:
        self.tool("org.apache.kafka.tools.TopicCommand").run(
            "--bootstrap-server", self.bootstrap, "--create", "--topic", topic, "--partitions", str(partitions),
            "--replication-factor", "1")

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(60)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def _accepts(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((HOST, port)) == 0


def cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes in URL-safe base64 without padding (Kafka's ``Uuid`` text form)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@contextlib.contextmanager
def start_kafka(home: Path) -> Iterator[KafkaBroker]:
    """Format ``home``'s log directory and start the broker; stopped (SIGTERM) when the block ends."""
    home.mkdir(parents=True, exist_ok=True)
    classpath = resolve_classpath(KAFKA_ARTIFACTS)
    port, controller_port = free_port(), free_port()
    conf = home / "server.properties"
    conf.write_text(server_properties(home, port, controller_port))
    logs = home / "logs"
    props = (f"-Dkafka.logs.dir={logs}",)
    JavaProgram(classpath, "kafka.tools.StorageTool", TOOL_JVM_ARGS + props).run(
        "format", "-t", cluster_id(), "-c", conf)
    console = (home / "kafka.console.log").open("wb")
    popen = JavaProgram(classpath, "kafka.Kafka", JVM_ARGS + props).start(conf, stdout=console,
                                                                           stderr=subprocess.STDOUT)
    broker = KafkaBroker(popen, port, home, classpath)
    try:
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        while not _accepts(port):
            if popen.poll() is not None or time.monotonic() > deadline:
                tail = (home / "kafka.console.log").read_text(errors="replace")[-3000:]
                raise JavaToolError(f"Kafka did not start on {HOST}:{port} (exit {popen.poll()}):\n{tail}")
            time.sleep(0.2)
        yield broker
    finally:
        broker.stop()
        console.close()
