"""The pure parts of master and slave: which broker a pull suggests (PullMessageProcessor.composeResponseHeader,
5.3.3), the store's suggestPullingFromSlave, a slave's uncorrected offsets, the managers' copies of a master's
tables (DataVersion arithmetic included), and SlaveSynchronize against a fake master."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path

import pytest

from broker.common.fastjson import DataVersion, decode_json, encode_json
from broker.common.topic import TopicConfig
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_response
from broker.remoting.subscription import SubscriptionGroupConfig
from broker.server.config import BrokerConfig, BrokerRole
from broker.server.metadata.groups import SubscriptionGroupManager
from broker.server.metadata.offsets import ConsumerOffsetManager
from broker.server.metadata.topics import TopicConfigManager
from broker.server.processors.pull import suggest_which_broker_id, uncorrect_on_slave
from broker.server.slave_synchronize import SlaveSynchronize
from broker.store.commit_log import StoreMessage
from broker.store.config import DispatchMode, MessageStoreConfig
from broker.store.message_store import MessageStore, suggest_pulling_from_slave
from broker.store.results import GetMessageResult, GetMessageStatus
from tests.helpers import wait_until

MASTER = BrokerConfig(broker_name="broker-a", broker_ip1="127.0.0.1")
SLAVE = dataclasses.replace(MASTER, broker_id=1, broker_role=BrokerRole.SLAVE)
GROUP = SubscriptionGroupConfig("g", broker_id=3, which_broker_when_consume_slowly=2)


# -- suggestWhichBrokerId ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config, slave_read, slow, found, expected",
    [
        (MASTER, False, True, True, (0, False)),  # without slaveReadEnable, always the master
        (MASTER, False, False, False, (0, False)),
        (MASTER, True, True, True, (2, False)),  # behind: the group's whichBrokerWhenConsumeSlowly
        (MASTER, True, False, True, (3, False)),  # not behind: the group's brokerId
        (SLAVE, True, True, True, (2, False)),  # a slave keeps a slow reader
        (SLAVE, True, True, False, (2, False)),
        (SLAVE, True, False, True, (3, False)),  # ... and one that caught up gets the group's brokerId: a plain
        (SLAVE, True, False, False, (3, False)),  # slave is its own min broker id (Java 5.5), so no redirect
        (SLAVE, False, False, False, (0, False)),
    ],
)
def test_suggest_which_broker_id_follows_compose_response_header(config, slave_read, slow, found, expected):
    config = dataclasses.replace(config, slave_read_enable=slave_read)
    assert suggest_which_broker_id(config, GROUP, found=found, suggest_pulling_from_slave=slow) == expected


def test_a_slave_whose_group_has_the_master_up_front_sends_readers_back():
    """composeResponseHeader's redirect, reached only where the group's minimum broker id is the master's."""
    slave = dataclasses.replace(SLAVE, slave_read_enable=True)
    assert suggest_which_broker_id(slave, GROUP, found=False, suggest_pulling_from_slave=False,
                                   min_broker_id_in_group=0) == (0, True)


@pytest.mark.parametrize("status, kept", [
    (GetMessageStatus.OFFSET_TOO_SMALL, True), (GetMessageStatus.OFFSET_OVERFLOW_BADLY, True),
    (GetMessageStatus.NO_MESSAGE_IN_QUEUE, True), (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, True),
    (GetMessageStatus.FOUND, False), (GetMessageStatus.NO_MATCHED_MESSAGE, False),
])
def test_a_slave_does_not_correct_the_request_offset(status, kept):
    result = GetMessageResult(status, 40, 30, 50)
    uncorrect_on_slave(result, 7)
    assert result.next_begin_offset == (7 if kept else 40)


# -- suggestPullingFromSlave -------------------------------------------------------------------------------------------


def test_suggest_pulling_from_slave_compares_the_backlog_with_a_share_of_memory():
    assert suggest_pulling_from_slave(1000, 599, 40, 1000) is True  # 401 bytes behind > 400
    assert suggest_pulling_from_slave(1000, 600, 40, 1000) is False
    assert suggest_pulling_from_slave(1000, 999, 0, 1000) is True


@pytest.mark.parametrize("ratio, slow", [(0, True), (100, False)])
def test_the_store_says_whether_a_reader_is_behind(tmp_path: Path, ratio: int, slow: bool):
    config = MessageStoreConfig(store_path_root_dir=str(tmp_path), dispatch_mode=DispatchMode.THREAD,
                                mapped_file_size_commit_log=64 * 1024, access_message_in_memory_max_ratio=ratio)
    store = MessageStore(config)
    store.start()
    try:
        for body in (b"a", b"b"):
            assert store.put_message(StoreMessage("T", 0, body, {})).ok
        wait_until("both messages dispatched", lambda: store.is_dispatched(store.max_phy_offset))
        assert store.get_message("g", "T", 0, 0, 1).suggest_pulling_from_slave is slow  # the bulk path
        assert store.get_message("g", "T", 0, 0, 1, message_filter=NoneMatch()).suggest_pulling_from_slave is slow
        assert store.get_message("g", "T", 0, 2, 1).suggest_pulling_from_slave is False  # nothing looked at
    finally:
        store.shutdown()


class NoneMatch:
    match_all = False

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return False

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        return False


# -- the managers' copies of the master's tables -----------------------------------------------------------------------


def test_topics_are_replaced_when_the_version_differs_and_bumped_as_java_does(tmp_path: Path):
    slave = TopicConfigManager(SLAVE, str(tmp_path))
    slave.update_topic_config(TopicConfig("OnlyOnSlave"))
    ours = len(slave.topic_config_table)
    master = TopicConfigManager(MASTER, str(tmp_path / "master"))
    master.update_topic_config(TopicConfig("Orders", 2, 2))
    configs = dict(master.topic_config_table)
    version = master.data_version
    assert slave.sync_from_master(configs, version) is True
    assert "Orders" in slave.topic_config_table and "OnlyOnSlave" not in slave.topic_config_table
    assert slave.topic_config_table["Orders"].read_queue_nums == 2
    # every topic of ours the master has (all but OnlyOnSlave) deleted, every topic of the master's put: one bump each
    assert slave.data_version.counter == version.counter + (ours - 1) + len(configs)
    persisted = decode_json((tmp_path / "config" / "topics.json").read_text())
    assert "Orders" in persisted["topicConfigTable"] and "OnlyOnSlave" not in persisted["topicConfigTable"]
    assert slave.sync_from_master(configs, slave.data_version) is False  # equal versions: nothing to do


def test_groups_are_replaced_and_their_forbidden_bits_dropped(tmp_path: Path):
    slave = SubscriptionGroupManager(SLAVE, str(tmp_path))
    slave.update_subscription_group_config(SubscriptionGroupConfig("gone"))
    slave.set_forbidden("gone", "T", 1)
    master = {"kept": SubscriptionGroupConfig("kept", retry_max_times=3)}
    version = DataVersion(timestamp=5, counter=9)
    assert slave.sync_from_master(master, version) is True
    assert set(slave.subscription_group_table) == {"kept"}
    assert slave.get_forbidden("gone", "T") == 0
    assert slave.data_version.counter == 10
    assert slave.sync_from_master(master, slave.data_version) is False


def test_offsets_are_put_over_ours(tmp_path: Path):
    slave = ConsumerOffsetManager(SLAVE, str(tmp_path))
    slave.commit_offset("g", "A", 0, 5)
    slave.commit_offset("g", "B", 0, 6)
    slave.commit_offset("g", "B", 1, 7)
    version = DataVersion(timestamp=1, counter=4)
    slave.sync_from_master({"B@g": {0: 60}, "C@g": {2: 8}}, version)
    assert slave.offset_table == {"A@g": {0: 5}, "B@g": {0: 60}, "C@g": {2: 8}}
    assert slave.data_version == version
    persisted = decode_json((tmp_path / "config" / "consumerOffset.json").read_text())
    assert slave.decode(persisted)[0]["B@g"] == {0: 60}


# -- SlaveSynchronize against a fake master ----------------------------------------------------------------------------


class FakeMaster:
    """Answers the four GET_ALL_* requests from a master's managers; ``down`` makes every call fail."""

    def __init__(self, tmp: Path) -> None:
        self.topics = TopicConfigManager(MASTER, str(tmp))
        self.groups = SubscriptionGroupManager(MASTER, str(tmp))
        self.offsets = ConsumerOffsetManager(MASTER, str(tmp))
        self.delay = {"dataVersion": DataVersion(timestamp=1).to_json(), "offsetTable": {1: 3}}
        self.down = False
        self.asked: list[int] = []

    async def invoke(self, address: str, request: RemotingCommand, timeout_ms: float) -> RemotingCommand:
        self.asked.append(request.code)
        if self.down:
            raise ConnectionRefusedError(f"{address} is down")
        body = {RequestCode.GET_ALL_TOPIC_CONFIG: lambda: self.topics.build_serialize_wrapper(),
                RequestCode.GET_ALL_CONSUMER_OFFSET: self.offsets.to_json,
                RequestCode.GET_ALL_DELAY_OFFSET: lambda: self.delay,
                RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.groups.to_json}[request.code]()
        return create_response(request, ResponseCode.SUCCESS, body=encode_json(body).encode())


@pytest.fixture
def synced(tmp_path: Path):
    class Schedule:
        texts: list[str] = []

        def sync_delay_offset(self, text: str) -> None:
            self.texts.append(text)

    master = FakeMaster(tmp_path / "master")
    sync = SlaveSynchronize(
        broker_addr="127.0.0.1:20911", client=master, interval_ms=1000,
        topic_config_manager=TopicConfigManager(SLAVE, str(tmp_path / "slave")),
        consumer_offset_manager=ConsumerOffsetManager(SLAVE, str(tmp_path / "slave")),
        subscription_group_manager=SubscriptionGroupManager(SLAVE, str(tmp_path / "slave")),
        schedule_message_service=Schedule())
    return master, sync


def test_sync_all_copies_every_table_from_the_master(synced):
    master, sync = synced
    asyncio.run(sync.sync_all())
    assert master.asked == []  # no master known yet
    master.topics.update_topic_config(TopicConfig("Orders"))
    master.groups.update_subscription_group_config(SubscriptionGroupConfig("readers"))
    master.offsets.commit_offset("readers", "Orders", 1, 42)
    sync.set_master_addr("127.0.0.1:10911")
    asyncio.run(sync.sync_all())
    assert master.asked == [RequestCode.GET_ALL_TOPIC_CONFIG, RequestCode.GET_ALL_CONSUMER_OFFSET,
                            RequestCode.GET_ALL_DELAY_OFFSET, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG]
    assert sync.topic_config_manager.select_topic_config("Orders") is not None
    assert sync.subscription_group_manager.select_subscription_group_config("readers") is not None
    assert sync.consumer_offset_manager.query_offset("readers", "Orders", 1) == 42
    assert sync.schedule_message_service.texts[-1] == encode_json(master.delay)


def test_an_unreachable_master_is_logged_not_raised(synced, caplog):
    master, sync = synced
    master.down = True
    sync.set_master_addr("127.0.0.1:10911")
    with caplog.at_level(logging.ERROR, logger="broker.server.slave_synchronize"):
        asyncio.run(sync.sync_all())
    assert [r.getMessage() for r in caplog.records] == [
        "SyncTopicConfig Exception, 127.0.0.1:10911", "SyncConsumerOffset Exception, 127.0.0.1:10911",
        "SyncDelayOffset Exception, 127.0.0.1:10911", "SyncSubscriptionGroup Exception, 127.0.0.1:10911"]
    assert sync.syncs == 1


def test_a_broker_never_syncs_from_itself(synced):
    master, sync = synced
    sync.set_master_addr(sync.broker_addr)
    asyncio.run(sync.sync_all())
    assert master.asked == []


def test_the_schedule_waits_for_the_interval_since_the_last_sync(synced):
    master, sync = synced
    sync.set_master_addr("127.0.0.1:10911")
    asyncio.run(sync.check())
    assert sync.syncs == 0  # less than the first delay (here: the 1 s interval) since the broker was made
    sync._created -= 2
    sync.last_sync -= 2
    asyncio.run(sync.check())
    assert sync.syncs == 1
    asyncio.run(sync.check())
    assert sync.syncs == 1  # the last sync was just now
    periods = []
    sync.start(lambda seconds, action: periods.append(seconds))
    assert periods == [0.25]
