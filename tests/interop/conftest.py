"""Interop tests: our code against Apache RocketMQ's own Java code, built once per session by tests.javatools."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.apache import DRIVER_JVM_ARGS, SHARED_JAVA, ApacheClient, driver_args
from tests.javatools import (
    JavaProgram,
    JavaToolError,
    build_program,
    compile_java,
    resolve_classpath,
    rocketmq_artifact,
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "java: runs Apache RocketMQ's Java code as an oracle; needs java, javac and mvn (never skipped)"
    )


@pytest.fixture(scope="session")
def codec_oracle() -> JavaProgram:
    """tests/java/codec/CodecOracle on RocketMQ's common (MessageDecoder) and store (MessageExtEncoder) jars.

    A missing JDK or Maven fails the tests with the reason instead of skipping them: CI must prove the interop."""
    artifacts = [rocketmq_artifact("rocketmq-common"), rocketmq_artifact("rocketmq-store")]
    try:
        return build_program("codec", "CodecOracle", artifacts)
    except JavaToolError as err:
        reason = str(err)
    pytest.fail(f"cannot build the Java codec oracle: {reason}", pytrace=False)


# -- the official 4.9.x client (tests/java/client49/ClientDriver49.java, with tests/java/common) -----------------------

CLIENT49_VERSION = "4.9.8"  # the newest 4.9.x on Maven Central
CLIENT49_MAIN = "ClientDriver49"


@dataclass(slots=True)
class Client49Driver(ApacheClient):
    """ClientDriver49 on rocketmq-client 4.9.x: same JSON lines, same ``run``/``session`` as tests.apache's driver.

    No AppCDS archive (the 5.x driver's archive is keyed to its own classpath): a session starts in about 1.5 s."""

    classpath: str = ""

    def java_command(self, cds: object, argv: list[str]) -> list[str]:
        flags = driver_args("", serialize=self.serialize, smart_msg=self.smart_msg, log_root=self.log_dir)[1:]
        return ["java", *DRIVER_JVM_ARGS, "-cp", self.classpath, CLIENT49_MAIN, *argv, *flags]


@functools.cache
def client49_classpath() -> str:
    # rocketmq-acl: AclClientRPCHook, which 4.9's client does not bring (it moved into the client in 5.3.3)
    classpath = resolve_classpath([rocketmq_artifact("rocketmq-client", CLIENT49_VERSION),
                                   rocketmq_artifact("rocketmq-acl", CLIENT49_VERSION)])
    return f"{compile_java('client49', classpath, shared=SHARED_JAVA)}{os.pathsep}{classpath}"


def client49_driver(log_dir: Path, *, serialize: str | None = None) -> Client49Driver:
    """The 4.9.x driver, built (Maven + javac, cached) on first use; a missing JDK or Maven fails the test."""
    try:
        classpath = client49_classpath()
    except JavaToolError as err:
        pytest.fail(f"cannot build the 4.9.x client driver: {err}", pytrace=False)
    return Client49Driver(Path(log_dir), serialize=serialize, classpath=classpath)


@pytest.fixture(scope="session")
def client49_factory() -> Callable[..., Client49Driver]:
    """``client49_factory(log_dir, serialize="JSON")`` makes a 4.9.x driver (see ``client49_driver``)."""
    return client49_driver
