"""The admin processor on a real BrokerController: queue offsets and times, queries by key and by offset, topics and
subscription groups created, listed and deleted, broker config and runtime info. Bodies are checked against the
field names Java's classes (TopicConfigAndMappingSerializeWrapper, TopicStatsTable, KVTable...) use."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

from broker.common.attributes import parse_attributes
from broker.common.fastjson import decode_json
from broker.common.message import decode_offset_msg_id
from broker.common.properties import parse_properties, write_config_file
from broker.common.record import decode_record
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand
from broker.server.broker_controller import BrokerController
from broker.server.metadata.attributes import alter_attributes
from broker.server.processors.admin import human_bytes
from tests.integration.test_client_processors import (
    GROUP,
    TOPIC,
    Client,
    body_of,
    create_topic,
    mq_keys,
    on_broker,
    put,
)

TOPIC_CONFIG_FIELDS = ["attributes", "order", "perm", "readQueueNums", "topicFilterType", "topicName", "topicSysFlag",
                       "writeQueueNums"]


def create_topic_ext(topic: str, **overrides: str) -> dict[str, str]:
    """CreateTopicRequestHeader as DefaultMQAdminExt.createAndUpdateTopicConfig sends it."""
    return {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6",
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false", **overrides}


def records(response: RemotingCommand) -> list[Any]:
    """The raw CommitLog records of a QUERY_MESSAGE / VIEW_MESSAGE_BY_ID body."""
    found, pos = [], 0
    while pos < len(response.body):
        record = decode_record(response.body, pos)
        found.append(record)
        pos += record.store_size
    return found


# -- queue offsets and times -------------------------------------------------------------------------------------------


def test_queue_offsets_times_and_search_by_time(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        create_topic(broker, queues=1)
        async with Client(broker, "admin") as admin:
            queue = {"topic": TOPIC, "queueId": "0"}
            empty = await admin.call(RequestCode.GET_MAX_OFFSET, queue)
            assert (empty.code, empty.ext_fields) == (ResponseCode.SUCCESS, {"offset": "0"})
            await put(broker, TOPIC, 0, 3)
            await asyncio.sleep(0.005)
            await put(broker, TOPIC, 0, 2)
            assert (await admin.call(RequestCode.GET_MAX_OFFSET, queue)).ext_fields == {"offset": "5"}
            assert (await admin.call(RequestCode.GET_MIN_OFFSET, queue)).ext_fields == {"offset": "0"}
            earliest = await admin.call(RequestCode.GET_EARLIEST_MSG_STORETIME, queue)
            first_time = broker.store.message_store_timestamp(TOPIC, 0, 0)
            assert earliest.ext_fields == {"timestamp": str(first_time)}
            fourth_time = broker.store.message_store_timestamp(TOPIC, 0, 3)
            found = await admin.call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**queue, "timestamp": str(fourth_time)})
            assert found.ext_fields == {"offset": "3"}
            later = await admin.call(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {**queue, "timestamp": "9" * 15})
            assert later.ext_fields == {"offset": "5"}
            unknown = await admin.call(RequestCode.GET_MAX_OFFSET, {"topic": "..", "queueId": "0"})
            assert (unknown.code, unknown.ext_fields) == (ResponseCode.SUCCESS, {"offset": "0"})
            missing = await admin.call(RequestCode.GET_MAX_OFFSET, {"topic": TOPIC})
            assert missing.code == ResponseCode.SYSTEM_ERROR and "<queueId> is null" in missing.remark

    on_broker(tmp_path, scenario)


# -- messages ------------------------------------------------------------------------------------------------------


def test_query_by_key_and_view_by_offset_return_the_stored_records(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        create_topic(broker, queues=1)
        async with Client(broker, "admin") as admin:
            offsets = await put(broker, TOPIC, 0, 2, KEYS="order-7 other", UNIQ_KEY="C0A8000100002A9F0000000000000001")
            await put(broker, TOPIC, 0, 1, KEYS="order-8")
            query = {"topic": TOPIC, "key": "order-7", "maxNum": "32", "beginTimestamp": "0",
                     "endTimestamp": str(2**62)}
            async with asyncio.timeout(5):  # the index is built by the dispatcher, after the ConsumeQueue
                while (response := await admin.call(RequestCode.QUERY_MESSAGE, query)).code != ResponseCode.SUCCESS:
                    await asyncio.sleep(0.02)
            assert sorted(r.commit_log_offset for r in records(response)) == offsets
            assert all(r.properties["KEYS"] == "order-7 other" for r in records(response))
            assert set(response.ext_fields) == {"indexLastUpdateTimestamp", "indexLastUpdatePhyoffset"}
            by_uniq = await admin.call(RequestCode.QUERY_MESSAGE, {**query, "key": "C0A8000100002A9F0000000000000001",
                                                                   "maxNum": "1", "_UNIQUE_KEY_QUERY": "true"})
            assert len(records(by_uniq)) == 2  # a unique-key query takes defaultQueryMaxNum, not maxNum
            none = await admin.call(RequestCode.QUERY_MESSAGE, {**query, "key": "order-404"})
            assert (none.code, none.remark) == (ResponseCode.QUERY_NOT_FOUND,
                                                "can not find message, maybe time range not correct")
            view = await admin.call(RequestCode.VIEW_MESSAGE_BY_ID, {"topic": TOPIC, "offset": str(offsets[1])})
            (record,) = records(view)
            assert (record.commit_log_offset, record.body, record.topic) == (offsets[1], b"body-1", TOPIC)
            assert decode_offset_msg_id(record.msg_id)[1] == offsets[1]
            other = await admin.call(RequestCode.VIEW_MESSAGE_BY_ID, {"topic": "Other", "offset": str(offsets[1])})
            assert (other.code, other.remark) == (ResponseCode.NO_PERMISSION, "The topic does not match the message")
            bogus = await admin.call(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offsets[1] + 3)})
            assert (bogus.code, bogus.remark) == (ResponseCode.SYSTEM_ERROR,
                                                  f"can not find message by the offset, {offsets[1] + 3}")

    on_broker(tmp_path, scenario)


# -- topics ------------------------------------------------------------------------------------------------------------


def test_topics_are_created_listed_described_and_deleted(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        async with Client(broker, "admin") as admin:
            created = await admin.call(RequestCode.UPDATE_AND_CREATE_TOPIC,
                                       create_topic_ext("Orders", attributes="+message.type=FIFO"))
            assert (created.code, created.remark) == (ResponseCode.SUCCESS, None)
            config = broker.topic_config_manager.select_topic_config("Orders")
            assert (config.read_queue_nums, config.perm, dict(config.attributes)) == (4, 6, {"message.type": "FIFO"})
            saved = decode_json(Path(broker.topic_config_manager.path).read_text())
            assert saved["topicConfigTable"]["Orders"]["attributes"] == {"message.type": "FIFO"}
            again = await admin.call(RequestCode.UPDATE_AND_CREATE_TOPIC, create_topic_ext("Orders", perm="4"))
            assert again.code == ResponseCode.SUCCESS
            assert broker.topic_config_manager.select_topic_config("Orders").perm == 4

            one = body_of(await admin.call(RequestCode.GET_TOPIC_CONFIG, {"topic": "Orders"}))
            assert list(one) == TOPIC_CONFIG_FIELDS and one["topicName"] == "Orders"
            missing = await admin.call(RequestCode.GET_TOPIC_CONFIG, {"topic": "Nope"})
            assert (missing.code, missing.remark) == (ResponseCode.TOPIC_NOT_EXIST,
                                                      "No topic in this broker. topic: Nope")

            response = await admin.call(RequestCode.GET_ALL_TOPIC_CONFIG)
            everything = body_of(response)
            assert list(everything) == ["dataVersion", "mappingDataVersion", "topicConfigTable",
                                        "topicQueueMappingDetailMap", "topicQueueMappingInfoMap"]
            assert list(everything["dataVersion"]) == ["counter", "stateVersion", "timestamp"]
            assert "Orders" in everything["topicConfigTable"] and "TBW102" in everything["topicConfigTable"]
            assert response.ext_fields == {"totalTopicNum": str(len(everything["topicConfigTable"]))}

            await put(broker, "Orders", 1, 2)
            broker.consumer_offset_manager.commit_offset(GROUP, "Orders", 1, 1)
            stats = body_of(await admin.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Orders"}))
            assert list(stats) == ["offsetTable", "topicPutTps"]
            table = mq_keys(stats["offsetTable"])
            assert len(table) == 4 and list(table["Orders", "broker-a", 1]) == ["lastUpdateTimestamp", "maxOffset",
                                                                                  "minOffset"]
            assert table["Orders", "broker-a", 1]["maxOffset"] == 2
            assert table["Orders", "broker-a", 1]["lastUpdateTimestamp"] > 0
            assert table["Orders", "broker-a", 0] == {"lastUpdateTimestamp": 0, "maxOffset": 0, "minOffset": 0}

            cq_dir = os.path.join(broker.store_config.consume_queue_dir, "Orders")
            assert os.path.isdir(cq_dir)
            deleted = await admin.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Orders"})
            assert deleted.code == ResponseCode.SUCCESS
            assert broker.topic_config_manager.select_topic_config("Orders") is None
            assert not os.path.exists(cq_dir) and broker.store.max_offset_in_queue("Orders", 1) == 0
            assert broker.consumer_offset_manager.query_offset(GROUP, "Orders", 1) == -1
            gone = await admin.call(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Orders"})
            assert (gone.code, gone.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[Orders] not exist")

    on_broker(tmp_path, scenario)


def test_topic_changes_are_refused_with_javas_codes_and_remarks(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        async with Client(broker, "admin") as admin:
            cases = [
                (create_topic_ext("bad/topic"), ResponseCode.INVALID_PARAMETER,
                 "The specified topic: bad/topic, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
                (create_topic_ext("x" * 128), ResponseCode.INVALID_PARAMETER,
                 f"The specified topic: {'x' * 128}, is longer than topic max length: 127"),
                (create_topic_ext("TBW102"), ResponseCode.INVALID_PARAMETER,
                 "The topic[TBW102] is conflict with system topic."),
                (create_topic_ext("broker-a"), ResponseCode.INVALID_PARAMETER,
                 "The topic[broker-a] is conflict with system topic."),
                (create_topic_ext("T1", attributes="+message.type=MIXED"), ResponseCode.INVALID_PARAMETER,
                 "MIXED message type is not supported."),
                (create_topic_ext("T1", attributes="+color=red"), ResponseCode.SYSTEM_ERROR,
                 "unsupported key: color"),
                (create_topic_ext("T1", attributes="-message.type"), ResponseCode.SYSTEM_ERROR,
                 "only add attribute is supported while creating topic. key: message.type"),
                (create_topic_ext("T1", topicFilterType="ANY_TAG"), ResponseCode.SYSTEM_ERROR,
                 "No enum constant org.apache.rocketmq.common.TopicFilterType.ANY_TAG"),
            ]
            for ext, code, remark in cases:
                response = await admin.call(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
                assert (response.code, response.remark) == (code, remark), ext
            assert broker.topic_config_manager.select_topic_config("T1") is None
            no_default = {k: v for k, v in create_topic_ext("T1").items() if k != "perm"}
            response = await admin.call(RequestCode.UPDATE_AND_CREATE_TOPIC, no_default)
            assert response.code == ResponseCode.SYSTEM_ERROR and "<perm> is null" in response.remark
            system = await admin.call(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "SCHEDULE_TOPIC_XXXX"})
            assert (system.code, system.remark) == (ResponseCode.INVALID_PARAMETER,
                                                    "The topic[SCHEDULE_TOPIC_XXXX] is conflict with system topic.")
            blank = await admin.call(RequestCode.DELETE_TOPIC_IN_BROKER_LIST, body=b'{"topicList":[]}')
            assert (blank.code, blank.remark) == (ResponseCode.INVALID_PARAMETER, "The specified topic list is blank.")
            topics = body_of(await admin.call(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER))["topicList"]
            assert {"TBW102", "SCHEDULE_TOPIC_XXXX", "broker-a", "DefaultCluster"} <= set(topics)

    on_broker(tmp_path, scenario)


def test_topic_attribute_edits_follow_attribute_util() -> None:
    assert parse_attributes("+message.type=FIFO,-queue.type") == {"+message.type": "FIFO", "-queue.type": ""}
    current = {"message.type": "FIFO", "queue.type": "SimpleCQ"}
    known = {"message.type": (True, lambda v: None), "queue.type": (False, lambda v: None)}
    assert alter_attributes(False, known, current, {"+message.type": "NORMAL"}) == {"message.type": "NORMAL",
                                                                                   "queue.type": "SimpleCQ"}
    for edits, message in [({"-queue.type": ""}, "attempt to update an unchangeable attribute. key: queue.type"),
                           ({"-nope": ""}, "attempt to delete a nonexistent key: nope")]:
        try:
            alter_attributes(False, known, current, edits)
        except ValueError as err:
            assert str(err) == message
        else:
            raise AssertionError(f"{edits} was accepted")
    assert human_bytes(512) == "512 B" and human_bytes(1536) == "1.5 KiB" and human_bytes(3 * 2**30) == "3.0 GiB"


# -- subscription groups -----------------------------------------------------------------------------------------------


def test_subscription_groups_are_created_listed_and_deleted(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        async with Client(broker, "admin") as admin:
            config = {"groupName": "GID_admin", "consumeEnable": True, "retryMaxTimes": 3, "retryQueueNums": 1,
                      "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1, "attributes": {}}
            created = await admin.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                                       body=json.dumps(config).encode())
            assert created.code == ResponseCode.SUCCESS
            assert broker.subscription_group_manager.select_subscription_group_config("GID_admin").retry_max_times == 3
            bad = await admin.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                                   body=json.dumps({**config, "groupName": "bad group"}).encode())
            assert (bad.code, bad.remark) == (
                ResponseCode.INVALID_PARAMETER,
                "The specified group: bad group, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$")

            response = await admin.call(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            wrapper = body_of(response)
            assert list(wrapper) == ["dataVersion", "forbiddenTable", "subscriptionGroupTable"]
            assert wrapper["subscriptionGroupTable"]["GID_admin"]["retryMaxTimes"] == 3
            assert response.ext_fields == {"totalGroupNum": str(len(wrapper["subscriptionGroupTable"]))}
            one = body_of(await admin.call(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "GID_admin"}))
            assert one["groupName"] == "GID_admin" and "notifyConsumerIdsChangedEnable" in one

            forbid = await admin.call(RequestCode.UPDATE_AND_GET_GROUP_FORBIDDEN,
                                      {"group": "GID_admin", "topic": TOPIC, "readable": "false"})
            assert (forbid.code, body_of(forbid)) == (ResponseCode.SUCCESS, {"group": "GID_admin",
                                                                            "readable": False, "topic": TOPIC})

            broker.consumer_offset_manager.commit_offset("GID_admin", TOPIC, 0, 9)
            deleted = await admin.call(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "GID_admin",
                                                                               "cleanOffset": "true"})
            assert deleted.code == ResponseCode.SUCCESS
            assert broker.subscription_group_manager.select_subscription_group_config("GID_admin") is None
            assert broker.consumer_offset_manager.query_offset("GID_admin", TOPIC, 0) == -1

    on_broker(tmp_path, scenario)


# -- the broker itself ---------------------------------------------------------------------------------------------


def test_broker_config_is_listed_and_changed_at_runtime(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        async with Client(broker, "admin") as admin:
            response = await admin.call(RequestCode.GET_BROKER_CONFIG)
            lines = dict(line.split("=", 1) for line in response.body.decode().splitlines())
            assert lines["brokerName"] == "broker-a" and lines["listenPort"] == str(broker.broker_config.listen_port)
            assert lines["storePathRootDir"] == broker.store_config.store_path_root_dir
            assert list(json.loads(response.ext_fields["version"])) == ["counter", "stateVersion", "timestamp"]
            refused = await admin.call(RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerConfigPath=/etc/x\n")
            assert (refused.code, refused.remark) == (ResponseCode.NO_PERMISSION,
                                                      "Can not update config in black list.")
            refused = await admin.call(RequestCode.UPDATE_BROKER_CONFIG, body=b"listenPort=1\nfileReservedTime=9\n")
            assert refused.code == ResponseCode.NO_PERMISSION
            assert refused.remark.startswith("Can not update config at runtime: listenPort (")
            for body, named in ((b"noSuchKey=1\n", "noSuchKey"), (b"fileReservedTime=soon\n", "fileReservedTime"),
                                (b"deleteWhen=25\n", "deleteWhen")):
                refused = await admin.call(RequestCode.UPDATE_BROKER_CONFIG, body=body)
                assert refused.code == ResponseCode.SYSTEM_ERROR and named in refused.remark, refused.remark
            assert broker.store_config.file_reserved_time == 72  # a refused update changes nothing
            applied = await admin.call(RequestCode.UPDATE_BROKER_CONFIG,
                                       body=b"fileReservedTime=48\nlongPollingEnable=false\n")
            assert applied.code == ResponseCode.SUCCESS, applied.remark
            assert broker.store_config.file_reserved_time == 48 and broker.broker_config.long_polling_enable is False
            listed = await admin.call(RequestCode.GET_BROKER_CONFIG)
            lines = dict(line.split("=", 1) for line in listed.body.decode().splitlines())
            assert (lines["fileReservedTime"], lines["longPollingEnable"]) == ("48", "false")
            assert json.loads(listed.ext_fields["version"])["counter"] > json.loads(
                response.ext_fields["version"])["counter"]

    on_broker(tmp_path, scenario)


def test_config_file_keeps_its_lines_and_takes_the_change(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_text("# the broker\nbrokerName = broker-a\nfileReservedTime=72\n  fileReservedTime: 10\n")
    write_config_file(str(path), {"fileReservedTime": "48", "deleteWhen": "04;05", "regionId": "a b\\c#"})
    assert path.read_text() == ("# the broker\nbrokerName = broker-a\nfileReservedTime=48\ndeleteWhen=04;05\n"
                                "regionId=a b\\\\c\\#\n")
    assert parse_properties(path.read_text())["regionId"] == "a b\\c#"
    assert (tmp_path / "broker.conf.bak").exists()


def test_runtime_info_reports_what_the_broker_measures(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        create_topic(broker, queues=1)
        async with Client(broker, "admin") as admin:
            await put(broker, TOPIC, 0, 5)
            stats = broker.stats
            stats.sample()
            stats.record_get(2)
            table = body_of(await admin.call(RequestCode.GET_BROKER_RUNTIME_INFO))["table"]
            assert table["msgPutTotalTodayNow"] == "5" and table["msgGetTotalTodayNow"] == "2"
            assert table["msgPutTotalTodayMorning"] == "0" and table["brokerVersionDesc"] == "V5_5_1"
            assert int(table["commitLogMaxOffset"]) == broker.store.max_phy_offset > 0
            assert table["commitLogMinOffset"] == "0" and table["dispatchBehindBytes"] == "0"
            assert int(table["earliestMessageTimeStamp"]) == broker.store.message_store_timestamp(TOPIC, 0, 0)
            assert int(table["bootTimestamp"]) <= int(table["earliestMessageTimeStamp"])
            assert table["runtime"].startswith("[ 0 days, 0 hours, 0 minutes, ")
            assert 0.0 <= float(table["commitLogDiskRatio"]) <= 1.0
            assert table["commitLogDirCapacity"].startswith("Total : ")
            assert table["putTps"].split(" ") == ["", "", ""]  # fewer samples than the 10 s window
            for _ in range(11):
                stats.sample()
            assert float(broker.stats.tps(1).split(" ")[0]) >= 0.0
            schedule = {k: v for k, v in table.items() if k.startswith("scheduleMessageOffset_")}
            assert schedule == broker.schedule_message_service.running_stats()
            delay = body_of(await admin.call(RequestCode.GET_ALL_DELAY_OFFSET))
            assert delay["offsetTable"] == broker.schedule_message_service.offset_table
            missing = await admin.call(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS",
                                                                             "statsKey": TOPIC})
            assert (missing.code, missing.remark) == (ResponseCode.SYSTEM_ERROR,
                                                      f"The stats <TOPIC_PUT_NUMS> <{TOPIC}> not exist")

    on_broker(tmp_path, scenario)


def test_clean_unused_topic_drops_queues_of_deleted_topics(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        create_topic(broker, "Leftover", queues=1)
        async with Client(broker, "admin") as admin:
            await put(broker, "Leftover", 0, 1)
            broker.topic_config_manager.delete_topic_config("Leftover")  # config gone, queues left behind
            assert broker.store.max_offset_in_queue("Leftover", 0) == 1
            assert (await admin.call(RequestCode.CLEAN_UNUSED_TOPIC)).code == ResponseCode.SUCCESS
            assert broker.store.max_offset_in_queue("Leftover", 0) == 0
            cq = await admin.call(RequestCode.QUERY_CONSUME_QUEUE, {"topic": "Leftover", "queueId": "0",
                                                                     "index": "0", "count": "1"})
            assert (cq.code, cq.remark) == (ResponseCode.SYSTEM_ERROR, "0@Leftover is not exist!")
            create_topic(broker, TOPIC, queues=1)
            await put(broker, TOPIC, 0, 2)
            cq = body_of(await admin.call(RequestCode.QUERY_CONSUME_QUEUE, {"topic": TOPIC, "queueId": "0",
                                                                             "index": "1", "count": "5"}))
            assert (cq["minQueueIndex"], cq["maxQueueIndex"]) == (0, 2)
            (unit,) = cq["queueData"]
            assert list(unit) == ["eval", "physicOffset", "physicSize", "tagsCode"] and unit["physicSize"] > 0

    on_broker(tmp_path, scenario)


def test_topics_and_groups_in_batches(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        async with Client(broker, "admin") as admin:
            topics = {"topicConfigList": [{"topicName": name, "readQueueNums": 2, "writeQueueNums": 2, "perm": 6,
                                           "topicFilterType": "SINGLE_TAG", "attributes": {}} for name in ("B1", "B2")]}
            created = await admin.call(RequestCode.UPDATE_AND_CREATE_TOPIC_LIST, body=json.dumps(topics).encode())
            assert created.code == ResponseCode.SUCCESS
            assert all(broker.topic_config_manager.contains_topic(t) for t in ("B1", "B2"))
            deleted = await admin.call(RequestCode.DELETE_TOPIC_IN_BROKER_LIST, body=b'{"topicList":["B1","B2"]}')
            assert deleted.code == ResponseCode.SUCCESS and not broker.topic_config_manager.contains_topic("B1")
            groups = {"groupConfigList": [{"groupName": g} for g in ("G1", "G2")]}
            created = await admin.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST,
                                       body=json.dumps(groups).encode())
            assert created.code == ResponseCode.SUCCESS
            assert broker.subscription_group_manager.contains_subscription_group("G2")
            deleted = await admin.call(RequestCode.DELETE_SUBSCRIPTION_GROUP_LIST,
                                       body=b'{"cleanOffset":true,"groupNameList":["G1","G2"]}')
            assert deleted.code == ResponseCode.SUCCESS
            assert not broker.subscription_group_manager.contains_subscription_group("G1")
            clean = await admin.call(RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)
            assert clean.code == ResponseCode.SUCCESS

    on_broker(tmp_path, scenario)
