"""Interop tests: our code against Apache RocketMQ's own Java code, built once per session by tests.javatools."""

from __future__ import annotations

import pytest

from tests.javatools import JavaProgram, JavaToolError, build_program, rocketmq_artifact


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
