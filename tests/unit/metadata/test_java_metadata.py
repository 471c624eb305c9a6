"""Our metadata files against Apache RocketMQ 5.5.1's own managers (tests/java/metadata/MetadataOracle.java).

Both directions go through the real ConfigManager.persist / ConfigManager.load: we load the store Apache's broker
wrote, Apache's broker loads the store we wrote, and our encoder reproduces fastjson2's bytes. TopicValidator is
asked directly for its verdicts and remarks.
"""

from __future__ import annotations

import json
import os

import pytest

from broker.common import validation
from broker.common.fastjson import decode_json, encode_json_pretty
from broker.common.topic import PERM_READ, PERM_WRITE, TopicConfig
from broker.server.metadata.groups import SYSTEM_GROUPS, SubscriptionGroupConfig, SubscriptionGroupManager
from broker.server.metadata.offsets import ConsumerOffsetManager
from broker.server.metadata.topics import TopicConfigManager
from tests.unit.metadata.java_captures import JAVA_CUSTOM_GROUP

pytestmark = pytest.mark.java

RW = PERM_READ | PERM_WRITE
FILES = ("topics.json", "subscriptionGroup.json", "consumerOffset.json")


def managers(broker_config, root):
    return (
        TopicConfigManager(broker_config, root),
        SubscriptionGroupManager(broker_config, root),
        ConsumerOffsetManager(broker_config, root),
    )


def restore_int_keys(value):
    if isinstance(value, dict):
        return {(int(k) if k.lstrip("-").isdigit() else k): restore_int_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [restore_int_keys(v) for v in value]
    return value


def as_sets(offsets_json):
    """groupTopicMap lists are Java HashSet order: compare them as sets."""
    return {**offsets_json, "groupTopicMap": {g: set(t) for g, t in offsets_json["groupTopicMap"].items()}}


@pytest.fixture(scope="module")
def java_store(tmp_path_factory, metadata_oracle):
    """A store Apache's broker wrote; read-only for the tests (loading never writes)."""
    root = str(tmp_path_factory.mktemp("java-store"))
    metadata_oracle.run("write", root, "broker-a")
    return root


def read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_our_encoder_writes_fastjson2s_bytes(java_store):
    for name in FILES:
        text = read_text(os.path.join(java_store, "config", name))
        assert encode_json_pretty(restore_int_keys(decode_json(text))) == text, name


def test_we_load_what_apache_wrote(java_store, broker_config):
    topics, groups, offsets = managers(broker_config, java_store)
    assert topics.load() and groups.load() and offsets.load()
    assert topics.select_topic_config("TopicTest") == TopicConfig(
        "TopicTest", 4, 4, RW, attributes={"message.type": "NORMAL"}
    )
    assert topics.select_topic_config("OrderTopic").order
    assert topics.select_topic_config("AutoTopic") == TopicConfig("AutoTopic", 4, 4, RW)
    assert topics.select_topic_config("%RETRY%GID_test") == TopicConfig("%RETRY%GID_test", 1, 1, RW)
    assert topics.select_topic_config("%DLQ%GID_test") == TopicConfig("%DLQ%GID_test", 1, 1, RW)
    assert groups.select_subscription_group_config("GID_test") == SubscriptionGroupConfig("GID_test")
    assert groups.select_subscription_group_config("GID_custom").to_json() == JAVA_CUSTOM_GROUP
    assert groups.is_forbidden("GID_test", "TopicTest", 1)
    assert offsets.offset_table == {
        "TopicTest@GID_test": {0: 250, 3: 7},
        "TopicTest@GID_custom": {1: 12345678901},
        "%RETRY%GID_test@GID_test": {0: 2},
    }
    # Everything we hold re-encodes to the document Java wrote (key order aside).
    for manager, name in zip((topics, groups, offsets), FILES, strict=True):
        java = decode_json(read_text(os.path.join(java_store, "config", name)))
        ours = decode_json(manager.encode())
        if name == "consumerOffset.json":
            java, ours = as_sets(java), as_sets(ours)
        assert ours == java, name


def test_our_system_topics_and_groups_are_apaches(java_store, broker_config, store_root):
    java = decode_json(read_text(os.path.join(java_store, "config", "topics.json")))["topicConfigTable"]
    created_by_oracle = {"TopicTest", "OrderTopic", "AutoTopic", "%RETRY%GID_test", "%DLQ%GID_test"}
    java_system = {name: item for name, item in java.items() if name not in created_by_oracle}
    ours = TopicConfigManager(broker_config, store_root).build_serialize_wrapper()["topicConfigTable"]
    assert set(java_system) - set(ours) == {validation.TIMER_TOPIC}  # rmq has no timer store
    assert {name: java_system[name] for name in ours} == ours

    java_groups = decode_json(read_text(os.path.join(java_store, "config", "subscriptionGroup.json")))
    system = {name: item for name, item in java_groups["subscriptionGroupTable"].items() if name in SYSTEM_GROUPS}
    ours_groups = SubscriptionGroupManager(broker_config, store_root).to_json()["subscriptionGroupTable"]
    assert set(system) == set(SYSTEM_GROUPS) and system == ours_groups


def test_apache_loads_what_we_wrote(metadata_oracle, broker_config, store_root):
    topics, groups, offsets = managers(broker_config, store_root)
    topics.update_topic_config(TopicConfig("TopicTest", 4, 4, RW, attributes={"message.type": "NORMAL"}))
    topics.update_topic_config(TopicConfig("OrderTopic", 2, 2, RW, order=True))
    topics.create_topic_in_send_message_method("AutoTopic", "TBW102", "127.0.0.1:50000", 4)
    topics.create_retry_topic("GID_test", 1)
    topics.create_dlq_topic("GID_test")
    groups.find_subscription_group_config("GID_test")
    groups.update_subscription_group_config(SubscriptionGroupConfig.from_json(JAVA_CUSTOM_GROUP))
    groups.set_forbidden("GID_test", "TopicTest", 1)
    offsets.commit_offset("GID_test", "TopicTest", 0, 250)
    offsets.commit_offset("GID_test", "TopicTest", 3, 7)
    offsets.commit_offset("GID_custom", "TopicTest", 1, 12345678901)
    for manager in (topics, groups, offsets):
        manager.persist()
        manager.persist()  # a .bak beside each file, as on a live broker

    lines = metadata_oracle.run("read", store_root, "broker-a").stdout.decode().splitlines()
    java_topics, java_groups, java_offsets = (decode_json(line) for line in lines)
    # Java's load lays our file over its own system topics, which include the timer topic we do not create.
    del java_topics["topicConfigTable"][validation.TIMER_TOPIC]
    assert java_topics == topics.build_serialize_wrapper()
    assert java_groups == groups.to_json()
    assert as_sets(java_offsets) == as_sets(decode_json(offsets.encode()))


NAMES = [
    "TopicTest",
    "%RETRY%GID_x",
    "",
    " ",
    "../x",
    "a/b",
    "a\\b",
    "a\x00b",
    "a.b",
    "tab\t",
    "é",
    "t" * 127,
    "t" * 128,
    "g" * 120,
    "g" * 121,
    "x" * 300,
    "%RETRY%" + "g" * 248,
    "%RETRY%" + "g" * 249,
    "%DLQ%" + "g" * 251,
]


def test_validation_matches_topicvalidator(metadata_oracle):
    out = metadata_oracle.run("validate", *(name.encode().hex() for name in NAMES)).stdout.decode().splitlines()
    for name, line in zip(NAMES, out, strict=True):
        topic_valid, topic_remark, group_valid, group_remark = json.loads(line)
        assert validation.validate_topic(name) == validation.ValidateResult(topic_valid, topic_remark), name
        assert validation.validate_group(name) == validation.ValidateResult(group_valid, group_remark), name
