"""What the Apache side of the suite runs, and how it is built: Apache RocketMQ's artifacts (``APACHE_VERSION``),
the JVM flags that keep start-up short, and the jars compiled from ``tests/java/client`` (the client driver) and
``tests/java/common`` (what the 4.9 and 5.x drivers share, and ``ServerLauncher``, which runs Apache's servers).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from tests.javatools import (
    JavaProgram,
    compile_java,
    content_jar,
    require_tools,
    resolve_classpath,
    rocketmq_artifact,
)

# 5.5.1 (javatools.ROCKETMQ_VERSION) is only partly on Maven Central: common, remoting, store and broker are there,
# but namesrv, client, tools and srvutil are not, and the 5.5.1 broker depends on the 5.5.1 client. 5.5.0 is the
# newest release whose whole server and client side resolves. The codecs we are judged on are the same source in
# both (MessageDecoder, MessageExtEncoder, IndexFile, IndexHeader, StoreCheckpoint, RemotingCommand); 5.5.1 changes
# CommitLog/ConsumeQueue recovery details, RocketMQSerializable speed-ups and RocksDB queues.
APACHE_VERSION = os.environ.get("RMQ_APACHE_VERSION", "5.5.0")
LAUNCHER_MAIN = "ServerLauncher"
MQADMIN_LAUNCHER_MAIN = "MqadminLauncher"  # tests/java/mqadmin
DRIVER_MAIN = "ClientDriver"
# Compiled with each client driver (tests/java/client, tests/java/client49); ServerLauncher is one of its classes.
SHARED_JAVA = ("common",)

# Unified JVM logging (CDS warnings included) goes to stderr: the driver's stdout carries only JSON.
FAST_START_JVM_ARGS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xshare:auto",
    "-XX:-UsePerfData",
    "-Xlog:disable",
    "-Xlog:all=warning:stderr",
    "--add-opens",
    "java.base/java.lang=ALL-UNNAMED",  # ServerLauncher and the driver read a thread's Runnable
)
SERVER_JVM_ARGS = ("-Xms256m", "-Xmx256m", *FAST_START_JVM_ARGS)
DRIVER_JVM_ARGS = ("-Xms64m", "-Xmx256m", *FAST_START_JVM_ARGS)

def apache_artifact(artifact_id: str) -> str:
    return rocketmq_artifact(artifact_id, APACHE_VERSION)


def apache_mqadmin(home: Path, version: str | None = None) -> JavaProgram:
    """Apache's own ``mqadmin`` (rocketmq-tools' MQAdminStartup, unchanged) through tests/java/mqadmin/MqadminLauncher,
    which spares each command the ~5 s its client's shutdown waits for nothing (what it prints is MQAdminStartup's);
    what it writes goes under ``home``. ``version`` runs another release's tools than ``APACHE_VERSION`` (e.g. 5.3.1,
    the last with ACL 1.0's commands)."""
    artifact = rocketmq_artifact("rocketmq-tools", version) if version else apache_artifact("rocketmq-tools")
    tools = resolve_classpath([artifact])
    classes = compile_java("mqadmin", tools)
    jar = content_jar("mqadmin", classes, sorted(classes.rglob("*.class")))  # a jar: no CDS warning for a directory
    return JavaProgram(f"{jar}{os.pathsep}{tools}", MQADMIN_LAUNCHER_MAIN,
                       (*DRIVER_JVM_ARGS, f"-Duser.home={home}", f"-Drocketmq.home.dir={home}"))


@functools.cache
def driver_build() -> tuple[Path, Path, str]:
    """(driver jar, launcher jar, client+tools classpath), compiled from tests/java/client and tests/java/common.

    Jars rather than the classes directory because AppCDS refuses non-empty directories on the classpath; the
    launcher gets a jar of its own so the servers' classpaths (and CDS archives) survive edits of the driver."""
    require_tools("java", "javac", "mvn")
    classpath = resolve_classpath([apache_artifact("rocketmq-client"), apache_artifact("rocketmq-tools")])
    classes = compile_java("client", classpath, shared=SHARED_JAVA)
    every = sorted(classes.rglob("*.class"))
    launcher = [path for path in every if path.name.startswith(LAUNCHER_MAIN)]
    return content_jar("driver", classes, every), content_jar("launcher", classes, launcher), classpath


@functools.cache
def server_classpath(artifact_id: str, version: str | None = None) -> str:
    """The launcher and an Apache server artifact (``APACHE_VERSION`` unless ``version`` names another release, e.g.
    5.3.2, the last broker with ACL 1.0)."""
    _, launcher_jar, _ = driver_build()
    artifact = rocketmq_artifact(artifact_id, version) if version else apache_artifact(artifact_id)
    return f"{launcher_jar}{os.pathsep}{resolve_classpath([artifact])}"


@functools.cache
def driver_classpath() -> str:
    jar, _, classpath = driver_build()
    return f"{jar}{os.pathsep}{classpath}"
