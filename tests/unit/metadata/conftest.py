"""Metadata fixtures: a broker config with fixed names and addresses, a store root under tmp_path, and the Java
oracle (tests/java/metadata/MetadataOracle.java) for the tests marked ``java``."""

from __future__ import annotations

import pytest

from broker.server.config import BrokerConfig
from tests.javatools import JavaProgram, JavaToolError, build_program, rocketmq_artifact

# rocketmq-broker 5.5.1 depends on client, srvutil, filter and auth 5.5.1, which Maven Central does not carry;
# declaring their 5.5.0 releases directly makes Maven pick those, while broker, remoting, common and store -- the
# jars holding the metadata managers, their JSON classes and TopicValidator -- stay 5.5.1.
ORACLE_ARTIFACTS = [
    rocketmq_artifact("rocketmq-broker"),
    rocketmq_artifact("rocketmq-remoting"),
    rocketmq_artifact("rocketmq-common"),
    rocketmq_artifact("rocketmq-store"),
    *(
        rocketmq_artifact(name, "5.5.0")
        for name in ("rocketmq-client", "rocketmq-srvutil", "rocketmq-filter", "rocketmq-auth")
    ),
]


@pytest.fixture
def broker_config() -> BrokerConfig:
    return BrokerConfig(
        broker_name="broker-a",
        broker_cluster_name="DefaultCluster",
        broker_ip1="127.0.0.1",
        broker_ip2="127.0.0.1",
        namesrv_addr="127.0.0.1:9876",
    )


@pytest.fixture
def store_root(tmp_path) -> str:
    return str(tmp_path / "store")


@pytest.fixture(scope="session")
def metadata_oracle() -> JavaProgram:
    """Apache's TopicConfigManager, SubscriptionGroupManager, ConsumerOffsetManager and TopicValidator.

    A missing JDK or Maven fails the test with the reason instead of skipping it: CI must prove the interop."""
    try:
        return build_program("metadata", "MetadataOracle", ORACLE_ARTIFACTS)
    except JavaToolError as err:
        reason = str(err)
    pytest.fail(f"cannot build the Java metadata oracle: {reason}", pytrace=False)
