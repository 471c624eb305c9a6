"""PULL_MESSAGE against a real BrokerController on 127.0.0.1, driven by our RemotingClient: tag filtering at the
store, subscriptions from heartbeats, the offset codes, server-side resets, refusals and the offset piggybacked on a
pull; and the store status to response code table.
"""

from __future__ import annotations

import dataclasses

from broker.common.message import PullSysFlag
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from broker.remoting.headers import PullMessageRequestHeader
from broker.remoting.heartbeat import parse_subscription
from broker.server.consumer_manager import ClientChannelInfo, SubscriptionData
from broker.server.metadata.groups import SubscriptionGroupConfig
from broker.server.processors.pull import pull_response_code
from broker.store.results import GetMessageStatus
from tests.helpers import run
from tests.integration.send_pull import (
    FAQ_HINT,
    StubConnection,
    records,
    running_broker,
    send_tagged,
)


def test_tag_filter_at_the_store(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path) as b:
            await send_tagged(b, "TopicTags", ["TagA", "TagB", "TagA", None])
            bodies = {sub: [r.body for r in records(await b.pull("TopicTags", 0, subscription=sub))]
                      for sub in ("TagA", "TagB || TagC", "*", "")}
            assert bodies == {"TagA": [b"m0", b"m2"], "TagB || TagC": [b"m1"], "*": [b"m0", b"m1", b"m2", b"m3"],
                              "": [b"m0", b"m1", b"m2", b"m3"]}
            nothing = await b.pull("TopicTags", 0, subscription="TagZ")
            assert (nothing.code, nothing.remark) == (ResponseCode.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE")
            assert nothing.ext_fields["nextBeginOffset"] == "4" and nothing.body == b""
            unparsable = await b.pull("TopicTags", 0, subscription="||")
            assert (unparsable.code, unparsable.remark) == (ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                                                            "parse the consumer's subscription failed")
            as_tag = await b.pull("TopicTags", 0, subscription="a > 1")
            assert as_tag.code == ResponseCode.PULL_RETRY_IMMEDIATELY  # expressionType TAG: "a > 1" is a tag name
            header = PullMessageRequestHeader("CG", "TopicTags", 0, 0, 32, int(PullSysFlag.SUBSCRIPTION), 0, 0, 0,
                                              "a > 1", "SQL92")
            sql = await b.invoke(create_request(RequestCode.PULL_MESSAGE, header.to_ext()))
            assert (sql.code, sql.remark) == (ResponseCode.SYSTEM_ERROR,
                                              "The broker does not support consumer to filter message by SQL92")

    run(scenario())



def test_subscription_registered_by_heartbeat(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path) as b:
            await send_tagged(b, "TopicHb", ["TagA", "TagB"])
            missing = await b.pull("TopicHb", 0, group="HB", subscription=None)
            assert (missing.code, missing.remark) == (ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                                      f"the consumer's group info not exist{FAQ_HINT}")
            sub = parse_subscription("TopicHb", "TagB")
            sub = dataclasses.replace(sub, sub_version=100)
            channel = ClientChannelInfo(StubConnection(), "client-1")
            b.controller.consumer_manager.register_consumer("HB", channel, "CONSUME_ACTIVELY", "CLUSTERING",
                                                            "CONSUME_FROM_LAST_OFFSET",
                                                            [sub, SubscriptionData("Other")])
            found = await b.pull("TopicHb", 0, group="HB", subscription=None, sub_version=100)
            assert [r.body for r in records(found)] == [b"m1"]
            stale = await b.pull("TopicHb", 0, group="HB", subscription=None, sub_version=101)
            assert (stale.code, stale.remark) == (ResponseCode.SUBSCRIPTION_NOT_LATEST,
                                                  "the consumer's subscription not latest")
            b.controller.consumer_manager.get("HB").subscriptions.pop("TopicHb")
            gone = await b.pull("TopicHb", 0, group="HB", subscription=None)
            assert (gone.code, gone.remark) == (ResponseCode.SUBSCRIPTION_NOT_EXIST,
                                                f"the consumer's subscription not exist{FAQ_HINT}")

    run(scenario())


def test_offset_codes(tmp_path):
    async def scenario() -> None:
        # 2000-byte bodies in 16 KiB CommitLog files: seven messages a file, so a file can be deleted below a queue
        async with running_broker(tmp_path, store={"mapped_file_size_commit_log": 16 * 1024}) as b:
            await b.send("TopicOff", b"x", queue_id=1)  # creates the topic; queue 0 stays empty
            await b.dispatched()
            for offset, code, remark in [(0, ResponseCode.PULL_NOT_FOUND, "NO_MATCHED_LOGIC_QUEUE"),
                                         (5, ResponseCode.PULL_OFFSET_MOVED, "NO_MATCHED_LOGIC_QUEUE")]:
                response = await b.pull("TopicOff", offset)
                assert (response.code, response.remark) == (code, remark)
            for i in range(10):
                await b.send("TopicOff", bytes([i]) * 2000)
            await b.dispatched()
            cases = [(10, ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE", "10"),
                     (50, ResponseCode.PULL_OFFSET_MOVED, "OFFSET_OVERFLOW_BADLY", "10")]
            for offset, code, remark, next_begin in cases:
                response = await b.pull("TopicOff", offset)
                assert (response.code, response.remark, response.ext_fields["nextBeginOffset"]) == (
                    code, remark, next_begin)
                assert (response.ext_fields["minOffset"], response.ext_fields["maxOffset"]) == ("0", "10")
            store = b.controller.store
            store.commit_log.queue.delete_first()
            store.dispatch.delete_expired(store.commit_log.min_offset)  # as retention does: through their writer
            min_offset = store.min_offset_in_queue("TopicOff", 0)
            assert 0 < min_offset < 10
            small = await b.pull("TopicOff", 0)
            assert (small.code, small.remark, small.ext_fields["nextBeginOffset"]) == (
                ResponseCode.PULL_OFFSET_MOVED, "OFFSET_TOO_SMALL", str(min_offset))
            found = await b.pull("TopicOff", min_offset, max_msg_nums=2)
            assert [r.queue_offset for r in records(found)] == [min_offset, min_offset + 1]
            assert found.ext_fields["nextBeginOffset"] == str(min_offset + 2)

    run(scenario())


def test_a_server_side_offset_reset_is_served_once(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path) as b:
            await send_tagged(b, "TopicReset", ["A", "B", "C"])
            b.controller.consumer_offset_manager.assign_reset_offset("TopicReset", "CG", 0, 1)
            moved = await b.pull("TopicReset", 3)
            assert (moved.code, moved.remark) == (ResponseCode.PULL_OFFSET_MOVED, "OFFSET_RESET")
            assert [moved.ext_fields[k] for k in ("nextBeginOffset", "minOffset", "maxOffset")] == ["1", "0", "3"]
            again = await b.pull("TopicReset", 1)
            assert [r.body for r in records(again)] == [b"m1", b"m2"]

    run(scenario())


def test_pull_refusals(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path, auto_create_subscription_group=False) as b:
            await b.send("TopicR", b"x")
            response = await b.pull("TopicR", 0, group="NoSuchGroup")
            assert (response.code, response.remark) == (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                                        f"subscription group [NoSuchGroup] does not exist, {FAQ_HINT}")
            groups = b.controller.subscription_group_manager
            groups.update_subscription_group_config(SubscriptionGroupConfig("CG"))
            response = await b.pull("NoSuchTopic", 0)
            assert (response.code, response.remark) == (
                ResponseCode.TOPIC_NOT_EXIST, f"topic[NoSuchTopic] not exist, apply first please! {FAQ_HINT}")
            response = await b.pull("TopicR", 0, queue_id=9)
            assert response.code == ResponseCode.INVALID_PARAMETER
            assert response.remark.startswith("queueId[9] is illegal, topic:[TopicR] topicConfig.readQueueNums:[4] "
                                              "consumer:[/127.0.0.1:")
            groups.disable_consume("CG")
            response = await b.pull("TopicR", 0)
            assert (response.code, response.remark, response.ext_fields) == (
                ResponseCode.NO_PERMISSION, "subscription group no permission, CG", {"forbiddenType": "2"})

    run(scenario())


def test_commit_offset_piggybacks_on_the_pull(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path) as b:
            await send_tagged(b, "TopicC", ["A"])
            offsets = b.controller.consumer_offset_manager
            await b.pull("TopicC", 0, commit_offset=7)
            assert offsets.query_offset("CG", "TopicC", 0) == -1  # no COMMIT_OFFSET flag: nothing stored
            await b.pull("TopicC", 0, commit_offset=7, sys_flag=PullSysFlag.COMMIT_OFFSET)
            assert offsets.query_offset("CG", "TopicC", 0) == 7
            await b.pull("TopicC", 1, commit_offset=1, sys_flag=PullSysFlag.COMMIT_OFFSET | PullSysFlag.SUSPEND,
                         suspend_ms=100)
            assert offsets.query_offset("CG", "TopicC", 0) == 1  # stored by the first run of a held pull

    run(scenario())



def test_get_message_status_to_pull_response_code():
    expected = {
        GetMessageStatus.FOUND: (ResponseCode.SUCCESS, ResponseCode.SUCCESS),
        GetMessageStatus.NO_MATCHED_MESSAGE: (ResponseCode.PULL_RETRY_IMMEDIATELY,) * 2,
        GetMessageStatus.MESSAGE_WAS_REMOVING: (ResponseCode.PULL_RETRY_IMMEDIATELY,) * 2,
        GetMessageStatus.NO_MATCHED_LOGIC_QUEUE: (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED),
        GetMessageStatus.NO_MESSAGE_IN_QUEUE: (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED),
        GetMessageStatus.OFFSET_FOUND_NULL: (ResponseCode.PULL_NOT_FOUND,) * 2,
        GetMessageStatus.OFFSET_OVERFLOW_ONE: (ResponseCode.PULL_NOT_FOUND,) * 2,
        GetMessageStatus.OFFSET_OVERFLOW_BADLY: (ResponseCode.PULL_OFFSET_MOVED,) * 2,
        GetMessageStatus.OFFSET_TOO_SMALL: (ResponseCode.PULL_OFFSET_MOVED,) * 2,
    }
    assert set(expected) == set(GetMessageStatus)
    for status, (at_zero, elsewhere) in expected.items():
        assert (pull_response_code(status, 0), pull_response_code(status, 3)) == (at_zero, elsewhere)
