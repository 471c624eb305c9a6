"""topics.py: TopicConfig's JSON, the system topics, topic creation on the send paths, and topics.json."""

from __future__ import annotations

import dataclasses

import pytest

from broker.common.errors import IllegalName
from broker.common.fastjson import decode_json
from broker.common.topic import PERM_INHERIT, PERM_READ, PERM_WRITE, TopicConfig, TopicFilterType, perm_to_string
from broker.server.metadata.topics import TopicConfigManager
from tests.unit.metadata.java_captures import JAVA_SYSTEM_TOPICS

RW = PERM_READ | PERM_WRITE


def summary(manager: TopicConfigManager) -> set[tuple[str, int, int, int]]:
    return {(c.topic_name, c.read_queue_nums, c.write_queue_nums, c.perm) for c in manager.topic_config_table.values()}


@pytest.fixture
def created():
    return []


@pytest.fixture
def manager(broker_config, store_root, created):
    return TopicConfigManager(broker_config, store_root, on_topic_created=created.append)


# -- TopicConfig ------------------------------------------------------------------------------------------------------


def test_topic_config_json_is_javas():
    config = TopicConfig("T", 4, 2, 7, topic_sys_flag=1, order=True, attributes={"message.type": "FIFO"})
    assert config.to_json() == {
        "attributes": {"message.type": "FIFO"},
        "order": True,
        "perm": 7,
        "readQueueNums": 4,
        "topicFilterType": "SINGLE_TAG",
        "topicName": "T",
        "topicSysFlag": 1,
        "writeQueueNums": 2,
    }
    assert list(config.to_json()) == sorted(config.to_json())  # fastjson2's property order
    assert TopicConfig.from_json(config.to_json()) == config


def test_topic_config_from_sparse_json_takes_java_defaults_and_keeps_unknowns():
    config = TopicConfig.from_json({"futureField": [1]}, "T")
    assert config == TopicConfig("T", 16, 16, RW, TopicFilterType.SINGLE_TAG, 0, False, {})
    assert config.to_json()["futureField"] == [1]


def test_perm_names():
    assert perm_to_string(7) == "RWX" and perm_to_string(6) == "RW-" and perm_to_string(1) == "--X"


# -- system topics ----------------------------------------------------------------------------------------------------


def test_system_topics_are_javas(manager):
    assert summary(manager) == JAVA_SYSTEM_TOPICS
    assert manager.is_system_topic("broker-a") and manager.is_system_topic("DefaultCluster")
    assert not manager.is_system_topic("TopicTest")


def test_system_topics_follow_the_switches(broker_config, store_root):
    config = dataclasses.replace(
        broker_config,
        auto_create_topic_enable=False,
        cluster_topic_enable=False,
        broker_topic_enable=False,
        trace_topic_enable=True,
        default_topic_queue_nums=4,
    )
    manager = TopicConfigManager(config, store_root)
    assert manager.select_topic_config("TBW102") is None
    assert manager.select_topic_config("DefaultCluster").perm == PERM_INHERIT
    assert manager.select_topic_config("broker-a").perm == PERM_INHERIT
    assert manager.select_topic_config("RMQ_SYS_TRACE_TOPIC").read_queue_nums == 1


# -- creation on the send path ----------------------------------------------------------------------------------------


def test_auto_create_copies_tbw102(manager, created):
    before = manager.data_version
    config = manager.create_topic_in_send_message_method("TopicTest", "TBW102", "10.0.0.1:5000", 16, 0)
    assert config == TopicConfig("TopicTest", 8, 8, RW)  # min(client 16, TBW102's 8); perm without INHERIT
    assert manager.data_version.counter == before.counter + 1
    assert created == [config]
    assert "TopicTest" in decode_json(open_text(manager.path))["topicConfigTable"]
    # The second send finds it: no new version, no second registration.
    assert manager.create_topic_in_send_message_method("TopicTest", "TBW102", "10.0.0.1:5000", 2, 0) is config
    assert len(created) == 1


def test_auto_create_takes_the_smaller_queue_count_and_the_flags(manager):
    config = manager.create_topic_in_send_message_method("Small", "TBW102", "h", 3, 1)
    assert (config.read_queue_nums, config.write_queue_nums, config.topic_sys_flag) == (3, 3, 1)
    assert manager.create_topic_in_send_message_method("Zero", "TBW102", "h", -5).write_queue_nums == 0


def test_auto_create_refuses(manager, created):
    assert manager.create_topic_in_send_message_method("A", "NoSuchTemplate", "h", 4) is None
    assert manager.create_topic_in_send_message_method("B", "SELF_TEST_TOPIC", "h", 4) is None  # not inheritable
    assert manager.create_topic_in_send_message_method("../escape", "TBW102", "h", 4) is None
    assert manager.create_topic_in_send_message_method("x" * 128, "TBW102", "h", 4) is None
    assert created == []
    assert summary(manager) == JAVA_SYSTEM_TOPICS


def test_stale_tbw102_does_not_template_when_auto_create_is_off(broker_config, store_root):
    TopicConfigManager(broker_config, store_root).persist()  # a topics.json with TBW102 in it
    off = TopicConfigManager(dataclasses.replace(broker_config, auto_create_topic_enable=False), store_root)
    off.load()
    assert off.select_topic_config("TBW102").perm == 7
    assert off.create_topic_in_send_message_method("T", "TBW102", "h", 4) is None


def test_retry_and_dlq_topics(manager, created):
    retry = manager.create_retry_topic("GID_orders", 2)
    assert retry == TopicConfig("%RETRY%GID_orders", 2, 2, RW)
    dlq = manager.create_dlq_topic("GID_orders")
    assert dlq == TopicConfig("%DLQ%GID_orders", 1, 1, RW)  # 5.x: readable too, so it can be consumed
    assert created == [retry, dlq]
    assert manager.create_retry_topic("GID_orders", 5) is retry


def test_send_back_flips_order_like_java(manager, created):
    manager.create_retry_topic("G", 1, order=True)
    version = manager.data_version.counter
    unordered = manager.create_retry_topic("G", 1)
    assert not unordered.order and manager.data_version.counter == version + 1
    assert len(created) == 1  # an update, not a creation


def test_send_back_rejects_illegal_names(manager):
    with pytest.raises(IllegalName):
        manager.create_retry_topic("bad/group", 1)


def test_trans_check_max_time_topic(manager):
    config = manager.create_topic_of_tran_check_max_time(1, RW)
    assert config == TopicConfig("TRANS_CHECK_MAX_TIME_TOPIC", 1, 1, RW)
    assert manager.create_topic_of_tran_check_max_time(8, PERM_READ) is config


# -- admin changes ----------------------------------------------------------------------------------------------------


def test_update_and_delete(manager):
    manager.update_topic_config(TopicConfig("T", 4, 4, RW, attributes={"message.type": "NORMAL"}))
    manager.update_topic_config(TopicConfig("T", 8, 8, PERM_READ))
    assert manager.select_topic_config("T") == TopicConfig("T", 8, 8, PERM_READ)
    version = manager.data_version.counter
    assert manager.delete_topic_config("T") is True
    assert manager.delete_topic_config("T") is False
    assert manager.data_version.counter == version + 1
    assert not manager.contains_topic("T")
    with pytest.raises(IllegalName):
        manager.update_topic_config(TopicConfig(".."))


def test_order_topics_from_the_namesrv(manager):
    manager.update_topic_config(TopicConfig("O"))
    manager.update_order_topic_config(["O", "Unknown"])
    assert manager.is_order_topic("O") and not manager.is_order_topic("Unknown")


# -- topics.json ------------------------------------------------------------------------------------------------------


def open_text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_topics_json_round_trip(broker_config, store_root, manager):
    manager.update_topic_config(TopicConfig("T", 4, 4, RW, order=True, attributes={"a": "b"}))
    manager.create_topic_in_send_message_method("Auto", "TBW102", "h", 4)
    data = decode_json(open_text(manager.path))
    assert list(data) == ["dataVersion", "topicConfigTable"]
    again = TopicConfigManager(broker_config, store_root)
    assert again.load() is True
    assert again.topic_config_table == manager.topic_config_table
    assert again.data_version == manager.data_version


def test_file_wins_over_the_system_defaults(broker_config, store_root, manager):
    manager.update_topic_config(TopicConfig("TBW102", 2, 2, RW | PERM_INHERIT))
    again = TopicConfigManager(broker_config, store_root)
    again.load()
    assert again.select_topic_config("TBW102").write_queue_nums == 2


def test_load_without_a_file(manager):
    assert manager.load() is False
    assert summary(manager) == JAVA_SYSTEM_TOPICS


def test_register_body(manager):
    manager.update_topic_config(TopicConfig("T", 4, 4, RW, order=True, attributes={"a": "b"}))
    body = manager.build_register_body()
    assert list(body) == [
        "dataVersion",
        "mappingDataVersion",
        "topicConfigTable",
        "topicQueueMappingDetailMap",
        "topicQueueMappingInfoMap",
    ]
    assert body["dataVersion"] == manager.data_version.to_json()
    assert body["topicConfigTable"]["T"] == manager.select_topic_config("T").to_json()


def test_register_body_of_a_read_only_broker_masks_perms(broker_config, store_root):
    manager = TopicConfigManager(dataclasses.replace(broker_config, broker_permission=PERM_READ), store_root)
    manager.update_topic_config(TopicConfig("T", 4, 4, RW, order=True, attributes={"a": "b"}))
    table = manager.build_register_body()["topicConfigTable"]
    assert table["T"] == TopicConfig("T", 4, 4, PERM_READ).to_json()  # Java rebuilds the config: flags dropped
    assert table["TBW102"]["perm"] == PERM_READ
    assert manager.select_topic_config("T").perm == RW  # the table itself is untouched


def test_a_failed_write_after_a_change_is_logged_not_raised(manager, monkeypatch, caplog):
    def disk_full(path, text):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("broker.common.config_manager.write_atomic", disk_full)
    config = manager.create_topic_in_send_message_method("T", "TBW102", "h", 4)
    assert manager.select_topic_config("T") == config  # live in memory; the next persist writes it
    assert "failed to persist" in caplog.text
    with pytest.raises(OSError):
        manager.persist()  # an explicit persist (the periodic flush, shutdown) reports the failure
