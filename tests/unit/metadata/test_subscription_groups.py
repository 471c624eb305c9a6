"""groups.py: SubscriptionGroupConfig's JSON, system groups, auto-creation, forbidden bits, subscriptionGroup.json."""

from __future__ import annotations

import dataclasses

import pytest

from broker.common.errors import IllegalName
from broker.common.fastjson import decode_json
from broker.server.metadata.groups import SYSTEM_GROUPS, SubscriptionGroupConfig, SubscriptionGroupManager
from tests.unit.metadata.java_captures import JAVA_CUSTOM_GROUP


@pytest.fixture
def manager(broker_config, store_root):
    return SubscriptionGroupManager(broker_config, store_root)


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return decode_json(f.read())


def test_defaults_are_javas():
    assert SubscriptionGroupConfig("G").to_json() == {
        "attributes": {},
        "brokerId": 0,
        "consumeBroadcastEnable": True,
        "consumeEnable": True,
        "consumeFromMinEnable": True,
        "consumeMessageOrderly": False,
        "consumeTimeoutMinute": 15,
        "groupName": "G",
        "groupRetryPolicy": {"type": "CUSTOMIZED"},
        "groupSysFlag": 0,
        "notifyConsumerIdsChangedEnable": True,
        "retryMaxTimes": 16,
        "retryQueueNums": 1,
        "whichBrokerWhenConsumeSlowly": 1,
    }


def test_java_group_round_trips():
    config = SubscriptionGroupConfig.from_json(JAVA_CUSTOM_GROUP)
    assert (config.retry_max_times, config.consume_broadcast_enable, config.consume_message_orderly) == (3, False, True)
    assert config.to_json() == JAVA_CUSTOM_GROUP


def test_unknown_and_optional_properties_survive():
    data = dict(JAVA_CUSTOM_GROUP, subscriptionDataSet=[{"topic": "T", "expression": "*"}], newField={"x": 1})
    config = SubscriptionGroupConfig.from_json(data)
    assert config.to_json() == dict(sorted(data.items()))


def test_system_groups(manager):
    assert set(manager.subscription_group_table) == set(SYSTEM_GROUPS)
    assert manager.select_subscription_group_config("CID_ONS-HTTP-PROXY").consume_broadcast_enable


def test_find_auto_creates_and_persists(manager, broker_config, store_root):
    before = manager.data_version.counter
    config = manager.find_subscription_group_config("GID_orders")
    assert config == SubscriptionGroupConfig("GID_orders")
    assert manager.data_version.counter == before + 1
    assert "GID_orders" in read_json(manager.path)["subscriptionGroupTable"]
    assert manager.find_subscription_group_config("GID_orders") is config


def test_find_without_auto_create(broker_config, store_root):
    manager = SubscriptionGroupManager(
        dataclasses.replace(broker_config, auto_create_subscription_group=False), store_root
    )
    assert manager.find_subscription_group_config("GID_orders") is None
    assert manager.find_subscription_group_config("CID_RMQ_SYS_X") is not None  # enableCreateSysGroup
    assert manager.find_subscription_group_config("TOOLS_CONSUMER") is not None


def test_find_refuses_illegal_names(manager):
    assert manager.find_subscription_group_config("../g") is None
    assert manager.find_subscription_group_config("g" * 121) is None
    assert not manager.contains_subscription_group("../g")


def test_update_delete_and_disable(manager):
    manager.update_subscription_group_config(SubscriptionGroupConfig("G", retry_max_times=2))
    assert manager.select_subscription_group_config("G").retry_max_times == 2
    manager.disable_consume("G")
    assert not manager.select_subscription_group_config("G").consume_enable
    assert manager.delete_subscription_group_config("G") is True
    assert manager.delete_subscription_group_config("G") is False
    with pytest.raises(IllegalName):
        manager.update_subscription_group_config(SubscriptionGroupConfig("a.b"))


def test_forbidden_bits(manager):
    manager.set_forbidden("G", "T", 1)
    manager.set_forbidden("G", "T", 3)
    assert manager.get_forbidden("G", "T") == 0b1010
    assert manager.is_forbidden("G", "T", 3) and not manager.is_forbidden("G", "T", 0)
    assert read_json(manager.path)["forbiddenTable"] == {"G": {"T": 10}}
    manager.clear_forbidden("G", "T", 1)
    assert manager.get_forbidden("G", "T") == 0b1000
    manager.clear_forbidden("G", "T", 3)
    assert manager.get_forbidden("G", "T") == 0


def test_subscription_group_json_round_trip(manager, broker_config, store_root):
    manager.update_subscription_group_config(SubscriptionGroupConfig.from_json(JAVA_CUSTOM_GROUP))
    manager.set_forbidden("GID_custom", "T", 0)
    assert list(read_json(manager.path)) == ["dataVersion", "forbiddenTable", "subscriptionGroupTable"]
    again = SubscriptionGroupManager(broker_config, store_root)
    assert again.load() is True
    assert again.subscription_group_table == manager.subscription_group_table
    assert again.get_forbidden("GID_custom", "T") == 1
    assert again.data_version == manager.data_version
