"""offsets.py: commits and queries, who-consumes-what, cleanup, resets, consumerOffset.json, thread safety."""

from __future__ import annotations

import dataclasses
import os
import threading

import pytest

from broker.common.fastjson import decode_json
from broker.server.metadata.offsets import ConsumerOffsetManager, split_topic_at_group, topic_at_group
from tests.unit.metadata.java_captures import JAVA_CONSUMER_OFFSET_JSON


@pytest.fixture
def offsets(broker_config, store_root):
    return ConsumerOffsetManager(broker_config, store_root)


def test_commit_and_query(offsets):
    assert offsets.query_offset("G", "T", 0) == -1
    offsets.commit_offset("G", "T", 0, 250)
    offsets.commit_offset("G", "T", 3, 7)
    offsets.commit_offset("G", "T", 0, 100)  # moving back is allowed (and logged)
    assert offsets.query_offset("G", "T", 0) == 100
    assert offsets.query_offsets("G", "T") == {0: 100, 3: 7}
    assert offsets.query_offsets("G", "Other") is None
    assert offsets.offset_table == {"T@G": {0: 100, 3: 7}}


def test_keys():
    assert topic_at_group("%RETRY%G", "G") == "%RETRY%G@G"
    assert split_topic_at_group("T@G") == ("T", "G")
    assert split_topic_at_group("T@G@X") is None


def test_who_consumes_what(offsets):
    offsets.commit_offset("G1", "T1", 0, 1)
    offsets.commit_offset("G1", "T2", 0, 1)
    offsets.commit_offset("G2", "T1", 0, 1)
    assert offsets.which_topic_by_consumer("G1") == {"T1", "T2"}
    assert offsets.which_group_by_topic("T1") == {"G1", "G2"}
    assert offsets.group_topic_map() == {"G1": {"T1", "T2"}, "G2": {"T1"}}


def test_removal(offsets):
    for group, topic in [("G1", "T1"), ("G1", "T2"), ("G2", "T1"), ("G12", "T1")]:
        offsets.commit_offset(group, topic, 0, 5)
    assert offsets.remove_offset("G1") == ["T1@G1", "T2@G1"]  # G12 is not G1 (Java checks the whole name)
    assert offsets.clean_offset_by_topic("T1") == ["T1@G2", "T1@G12"]
    assert offsets.offset_table == {}


def test_clean_offsets_of_deleted_topics(offsets):
    offsets.commit_offset("G", "Live", 0, 1)
    offsets.commit_offset("G", "Gone", 0, 1)
    assert offsets.clean_offsets_of_deleted_topics({"Live", "TBW102"}) == ["Gone@G"]
    assert offsets.which_topic_by_consumer("G") == {"Live"}


def test_clone(offsets):
    offsets.commit_offset("Src", "T", 1, 9)
    offsets.clone_offset("Src", "Dst", "T")
    offsets.commit_offset("Src", "T", 1, 10)
    assert offsets.query_offset("Dst", "T", 1) == 9


def test_server_side_reset(offsets, broker_config, store_root):
    offsets.commit_offset("G", "T", 0, 100)
    offsets.assign_reset_offset("T", "G", 0, 10)
    assert offsets.has_offset_reset("T", "G", 0)
    offsets.commit_offset("G", "T", 0, 50)  # the client has not seen the reset yet
    assert offsets.query_offset("G", "T", 0) == 10
    assert offsets.query_then_erase_reset_offset("T", "G", 0) == 10
    assert offsets.query_then_erase_reset_offset("T", "G", 0) is None
    assert offsets.query_offset("G", "T", 0) == 50
    offsets.assign_reset_offset("T", "G", -1, 10)  # ignored
    assert not offsets.has_offset_reset("T", "G", -1)
    plain = ConsumerOffsetManager(dataclasses.replace(broker_config, use_server_side_reset_offset=False), store_root)
    plain.assign_reset_offset("T", "G", 0, 10)
    plain.commit_offset("G", "T", 0, 50)
    assert plain.query_offset("G", "T", 0) == 50


def test_data_version_moves_every_step_commits(broker_config, store_root):
    offsets = ConsumerOffsetManager(
        dataclasses.replace(broker_config, consumer_offset_update_version_step=3), store_root
    )
    for i in range(7):
        offsets.commit_offset("G", "T", 0, i)
    assert offsets.data_version.counter == 2


def test_consumer_offset_json(offsets, broker_config, store_root):
    offsets.commit_offset("G", "T", 0, 250)
    offsets.commit_offset("G", "T", 1, 2**40)
    offsets.persist()
    with open(offsets.path, encoding="utf-8") as f:
        text = f.read()
    assert '"offsetTable":{\n\t\t"T@G":{\n\t\t\t0:250,\n\t\t\t1:1099511627776\n\t\t}' in text  # bare int keys
    assert '"groupTopicMap":{\n\t\t"G":[\n\t\t\t"T"\n\t\t]\n\t}' in text
    again = ConsumerOffsetManager(broker_config, store_root)
    assert again.load() is True
    assert again.offset_table == {"T@G": {0: 250, 1: 2**40}}
    assert again.data_version == offsets.data_version


def test_loads_the_file_apache_wrote(offsets):
    os.makedirs(os.path.dirname(offsets.path))
    with open(offsets.path, "w", encoding="utf-8") as f:
        f.write(JAVA_CONSUMER_OFFSET_JSON)
    assert offsets.load() is True
    assert offsets.offset_table == {
        "%RETRY%GID_test@GID_test": {0: 2},
        "TopicTest@GID_custom": {1: 12345678901},
        "TopicTest@GID_test": {0: 250, 3: 7},
    }
    assert offsets.data_version.timestamp == 1795647958504
    # And writes the same document back (groupTopicMap's order is Java's HashMap order, so compared as sets).
    ours, java = decode_json(offsets.encode()), decode_json(JAVA_CONSUMER_OFFSET_JSON)
    for document in (ours, java):
        document["groupTopicMap"] = {g: set(topics) for g, topics in document["groupTopicMap"].items()}
    assert ours == java


def test_concurrent_commits_and_persists(offsets, broker_config, store_root):
    def commit(group):
        for queue_id in range(8):
            for offset in range(50):
                offsets.commit_offset(group, "T", queue_id, offset)

    def persist():
        for _ in range(20):
            offsets.persist()

    threads = [threading.Thread(target=commit, args=(f"G{i}",)) for i in range(8)]
    threads += [threading.Thread(target=persist) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    offsets.persist()
    again = ConsumerOffsetManager(broker_config, store_root)
    again.load()
    assert again.offset_table == {f"T@G{i}": dict.fromkeys(range(8), 49) for i in range(8)}
