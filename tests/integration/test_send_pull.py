"""SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE and PULL_MESSAGE against a real BrokerController on 127.0.0.1,
driven by our RemotingClient: what is stored, Java's response codes and remarks, tag filtering, offsets, long
polling and the offset piggybacked on a pull."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import re
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest

from broker.common.errors import CorruptRecord
from broker.common.message import PullSysFlag, encode_properties, format_host, tags_code
from broker.common.message_batch import BatchMessage, decode_batch_body, encode_batch_body
from broker.common.record import MessageRecord, iter_records
from broker.remoting.client import RemotingClient
from broker.remoting.codes import RequestCode, ResponseCode, SerializeType
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.headers import PullMessageRequestHeader, SendMessageRequestHeader
from broker.remoting.heartbeat import parse_subscription
from broker.server.broker_controller import BrokerController
from broker.server.consumer_manager import ClientChannelInfo, SubscriptionData
from broker.server.filter.message_filter import TagMessageFilter
from broker.server.long_polling import PullRequest, PullRequestHoldService
from broker.server.metadata.groups import SubscriptionGroupConfig
from broker.server.processors import send
from broker.server.processors.pull import pull_response_code
from broker.store.results import GetMessageStatus
from tests.helpers import run
from tests.integration.cluster import start_servers
from tests.integration.in_process import dispatched, running_controller

FAQ_HINT = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
ILLEGAL_REMARK = ("the message is illegal, maybe msg body or properties length not matched. msg body length limit "
                  "8192B, msg properties length limit 32KB.")
SMALL_MESSAGES = {"max_message_size": 8192}  # the limit ILLEGAL_REMARK names


@dataclass
class Broker:
    """A broker under test: ours (``controller`` set) or Apache's (only its address)."""

    client: RemotingClient
    addr: str
    controller: BrokerController = field(default=None)  # type: ignore[assignment]

    async def invoke(self, request: RemotingCommand, timeout_ms: float = 5000) -> RemotingCommand:
        return await self.client.invoke(self.addr, request, timeout_ms)

    async def send(self, topic: str, body: bytes, properties: dict[str, str] | None = None, *, queue_id: int = 0,
                   code: int = RequestCode.SEND_MESSAGE, serialize_type: SerializeType = SerializeType.JSON,
                   **fields) -> RemotingCommand:
        header = SendMessageRequestHeader(
            producer_group="PG", topic=topic, default_topic="TBW102", default_topic_queue_nums=4, queue_id=queue_id,
            sys_flag=0, born_timestamp=int(time.time() * 1000), flag=fields.pop("flag", 0),
            properties=encode_properties(properties or {}), **fields)
        wire = None if code == RequestCode.SEND_MESSAGE else SendMessageRequestHeader.V2_WIRE
        return await self.invoke(create_request(code, header.to_ext(wire), body, serialize_type=serialize_type))

    async def pull(self, topic: str, offset: int, *, queue_id: int = 0, group: str = "CG",
                   subscription: str | None = "*", sys_flag: int = 0, suspend_ms: int = 0, commit_offset: int = 0,
                   sub_version: int = 0, max_msg_nums: int = 32, timeout_ms: float = 5000) -> RemotingCommand:
        if subscription is not None:
            sys_flag |= PullSysFlag.SUBSCRIPTION
        header = PullMessageRequestHeader(
            consumer_group=group, topic=topic, queue_id=queue_id, queue_offset=offset, max_msg_nums=max_msg_nums,
            sys_flag=int(sys_flag), commit_offset=commit_offset, suspend_timeout_millis=suspend_ms,
            sub_version=sub_version, subscription=subscription, expression_type="TAG" if subscription else None)
        return await self.invoke(create_request(RequestCode.PULL_MESSAGE, header.to_ext()), timeout_ms)

    async def dispatched(self) -> None:
        """Wait until the store's dispatch thread has put everything written into the ConsumeQueues."""
        await dispatched(self.controller.store)


@contextlib.asynccontextmanager
async def running_broker(tmp_path, store: dict | None = None, **broker_fields) -> AsyncIterator[Broker]:
    """A fresh in-process broker (tests/integration/in_process.py) with 8 KiB messages at most, and a client."""
    async with running_controller(tmp_path / "store", store={**SMALL_MESSAGES, **(store or {})},
                                  **broker_fields) as controller:
        client = RemotingClient()
        try:
            yield Broker(client, controller.broker_addr, controller)
        finally:
            await client.close()


def records(response: RemotingCommand) -> list[MessageRecord]:
    return list(iter_records(response.body))


# -- sending ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
@pytest.mark.parametrize("code", [RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2])
def test_sent_message_is_stored_as_java_stores_it_and_pulled_back(tmp_path, code, serialize_type):
    async def scenario() -> None:
        async with running_broker(tmp_path) as b:
            props = {"KEYS": "order-1", "TAGS": "TagA", "WAIT": "true", "UNIQ_KEY": "AC1100020001", "userProp": "v"}
            response = await b.send("TopicAuto", b"hello", props, queue_id=1, flag=3, code=code,
                                    serialize_type=serialize_type)
            assert response.code == ResponseCode.SUCCESS and response.remark is None
            ext = response.ext_fields
            assert (ext["MSG_REGION"], ext["TRACE_ON"], ext["queueId"], ext["queueOffset"]) == (
                "DefaultRegion", "true", "1", "0")
            assert ext["transactionId"] == "AC1100020001"
            # the topic was created from TBW102: min(client's 4, template's 8) queues, perm RW
            config = b.controller.topic_config_manager.select_topic_config("TopicAuto")
            assert (config.read_queue_nums, config.write_queue_nums, config.perm) == (4, 4, 6)

            await b.dispatched()
            pulled = await b.pull("TopicAuto", 0, queue_id=1)
            assert (pulled.code, pulled.remark) == (ResponseCode.SUCCESS, "FOUND")
            assert (pulled.ext_fields["nextBeginOffset"], pulled.ext_fields["maxOffset"]) == ("1", "1")
            (record,) = records(pulled)
            assert (record.topic, record.queue_id, record.body, record.flag, record.queue_offset) == (
                "TopicAuto", 1, b"hello", 3, 0)
            assert record.msg_id == ext["msgId"]
            local_port = b.client._connections[b.addr].result()._writer.get_extra_info("sockname")[1]
            assert format_host(record.born_host) == f"127.0.0.1:{local_port}"
            # Java's broker adds MSG_REGION, TRACE_ON and CLUSTER and writes them in its HashMap(128) order
            # (the order below is what jshell printed for these keys).
            assert list(record.properties) == ["MSG_REGION", "UNIQ_KEY", "CLUSTER", "TAGS", "userProp", "KEYS",
                                               "WAIT", "TRACE_ON"]
            assert record.properties["CLUSTER"] == "DefaultCluster"

    run(scenario())


def test_a_message_without_uniq_key_gets_one(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path) as b:
            response = await b.send("TopicU", b"x", {"TAGS": "T"})
            await b.dispatched()
            (record,) = records(await b.pull("TopicU", 0))
            uniq = record.properties["UNIQ_KEY"]
            assert len(uniq) == 32 and response.ext_fields["transactionId"] == uniq

    run(scenario())


def test_batch_keeps_each_messages_own_properties(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path) as b:
            items = [BatchMessage(f"m{i}".encode(), {"UNIQ_KEY": f"U{i}", "KEYS": f"k{i}", "TAGS": f"T{i % 2}"}, i)
                     for i in range(3)]
            body = encode_batch_body(items)
            first = await b.send("TopicBatch", body, {"UNIQ_KEY": "BATCH"}, code=RequestCode.SEND_BATCH_MESSAGE,
                                 batch=True)
            assert first.code == ResponseCode.SUCCESS, first.remark
            assert first.ext_fields["queueOffset"] == "0" and first.ext_fields["transactionId"] == "BATCH"
            msg_ids = first.ext_fields["msgId"].split(",")
            second = await b.send("TopicBatch", body, code=RequestCode.SEND_BATCH_MESSAGE, batch=True,
                                  serialize_type=SerializeType.ROCKETMQ)
            assert second.ext_fields["queueOffset"] == "3" and "transactionId" not in second.ext_fields
            await b.dispatched()
            got = records(await b.pull("TopicBatch", 0))
            assert [r.msg_id for r in got[:3]] == msg_ids
            assert [(r.body, r.flag, r.properties, r.queue_offset) for r in got[:3]] == [
                (item.body, item.flag, item.properties, i) for i, item in enumerate(items)]
            assert len(got) == 6

    run(scenario())


@pytest.mark.parametrize(
    ("topic", "remark"),
    [
        ("../x", "The specified topic: ../x, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
        ("T" * 300, f"The specified topic: {'T' * 300}, is longer than topic max length: 127"),
        ("bad\x01topic", "The specified topic: bad\x01topic, contains illegal characters, allowing only "
                         "^[%|a-zA-Z0-9_-]+$"),
        ("   ", "The specified topic is blank."),
    ],
)
def test_invalid_topic_names_are_refused_and_nothing_is_stored(tmp_path, topic, remark):
    async def scenario() -> None:
        async with running_broker(tmp_path) as b:
            for serialize_type in SerializeType:
                response = await b.send(topic, b"x", serialize_type=serialize_type)
                assert (response.code, response.remark) == (ResponseCode.INVALID_PARAMETER, remark)
            assert b.controller.store.max_phy_offset == 0
            assert not b.controller.topic_config_manager.contains_topic(topic)

    run(scenario())


def test_refusals_use_javas_codes_and_remarks(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path) as b:
            response = await b.send("SCHEDULE_TOPIC_XXXX", b"x")
            assert (response.code, response.remark) == (
                ResponseCode.NO_PERMISSION, "Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden.")
            await b.send("TopicQ", b"x")
            response = await b.send("TopicQ", b"x", queue_id=4)
            assert response.code == ResponseCode.INVALID_PARAMETER
            assert response.remark.startswith(
                "request queueId[4] is illegal, TopicConfig [topicName=TopicQ, readQueueNums=4, writeQueueNums=4, "
                "perm=RW-, topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false, attributes={}] "
                "Producer: 127.0.0.1:")
            response = await b.send("TopicQ", b"x" * 8193)
            assert (response.code, response.remark) == (ResponseCode.MESSAGE_ILLEGAL, ILLEGAL_REMARK)
            response = await b.send("TopicQ", b"x", {"p": "v" * 33_000})
            assert (response.code, response.remark) == (ResponseCode.MESSAGE_ILLEGAL, ILLEGAL_REMARK)
            assert response.ext_fields["MSG_REGION"] == "DefaultRegion"
            await b.dispatched()
            assert b.controller.store.max_offset_in_queue("TopicQ", 0) == 1  # only the first send was stored
            # a header without its required fields is answered, and the connection keeps working
            response = await b.invoke(create_request(RequestCode.SEND_MESSAGE_V2, {"b": "TopicQ"}))
            assert response.code == ResponseCode.SYSTEM_ERROR and "the custom field <a> is null" in response.remark
            assert (await b.send("TopicQ", b"y")).code == ResponseCode.SUCCESS

    run(scenario())


def test_without_auto_create_an_unknown_topic_does_not_exist(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path, auto_create_topic_enable=False) as b:
            response = await b.send("TopicNew", b"x")
            assert (response.code, response.remark) == (
                ResponseCode.TOPIC_NOT_EXIST, f"topic[TopicNew] not exist, apply first please!{FAQ_HINT}")
            assert b.controller.store.max_phy_offset == 0

    run(scenario())


def test_a_retry_past_max_reconsume_times_goes_to_the_dlq(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path) as b:
            ok = await b.send("%RETRY%CG", b"again", {"UNIQ_KEY": "U1"}, reconsume_times=16)
            assert ok.code == ResponseCode.SUCCESS
            dead = await b.send("%RETRY%CG", b"dead", {"UNIQ_KEY": "U2"}, reconsume_times=17)
            assert dead.code == ResponseCode.SUCCESS, dead.remark
            await b.dispatched()
            assert b.controller.topic_config_manager.contains_topic("%DLQ%CG")
            (record,) = records(await b.pull("%DLQ%CG", 0))
            assert (record.body, record.reconsume_times, record.properties["DELAY"]) == (b"dead", 17, "-1")

    run(scenario())


def test_puts_beyond_the_in_flight_bound_get_system_busy(tmp_path, monkeypatch):
    monkeypatch.setattr(send, "MAX_PUTS_IN_FLIGHT", 1)

    async def scenario() -> None:
        async with running_broker(tmp_path) as b:
            release = asyncio.Event()
            real_put = b.controller.put_messages

            async def slow_put(msgs):
                await release.wait()
                return await real_put(msgs)

            b.controller.put_messages = slow_put
            first = asyncio.ensure_future(b.send("TopicBusy", b"1"))
            await asyncio.sleep(0.2)
            busy = await b.send("TopicBusy", b"2")
            assert (busy.code, busy.remark) == (ResponseCode.SYSTEM_BUSY,
                                                "[OVERLOAD]system busy, start flow control for a while")
            release.set()
            assert (await first).code == ResponseCode.SUCCESS
            assert (await b.send("TopicBusy", b"3")).code == ResponseCode.SUCCESS

    run(scenario())


# -- pulling ----------------------------------------------------------------------------------------------------------


async def send_tagged(b: Broker, topic: str, tags: list[str | None]) -> None:
    for i, tag in enumerate(tags):
        props = {"TAGS": tag} if tag else {}
        assert (await b.send(topic, f"m{i}".encode(), props)).code == ResponseCode.SUCCESS
    await b.dispatched()


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


class StubConnection:
    closed = False
    remote_address = "127.0.0.1:1"


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


# -- long polling -----------------------------------------------------------------------------------------------------


def test_a_held_pull_returns_as_soon_as_a_message_arrives(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path) as b:
            await send_tagged(b, "TopicLp", ["TagA"])
            started = time.monotonic()
            held = asyncio.ensure_future(b.pull("TopicLp", 1, subscription="TagA", sys_flag=PullSysFlag.SUSPEND,
                                                suspend_ms=10_000, timeout_ms=15_000))
            await asyncio.sleep(0.3)
            assert not held.done()
            await b.send("TopicLp", b"other", {"TAGS": "TagB"})  # filtered out: the pull stays held
            await asyncio.sleep(0.3)
            assert not held.done()
            await b.send("TopicLp", b"wanted", {"TAGS": "TagA"})
            response = await held
            assert time.monotonic() - started < 3
            assert (response.code, [r.body for r in records(response)]) == (ResponseCode.SUCCESS, [b"wanted"])
            assert response.ext_fields["nextBeginOffset"] == "3"

    run(scenario())


def test_a_held_pull_answers_not_found_after_its_suspend_timeout(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path) as b:
            await send_tagged(b, "TopicTo", ["A"])
            started = time.monotonic()
            response = await b.pull("TopicTo", 1, sys_flag=PullSysFlag.SUSPEND, suspend_ms=600)
            elapsed = time.monotonic() - started
            assert 0.55 <= elapsed < 3
            assert (response.code, response.remark) == (ResponseCode.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
            without_suspend = await b.pull("TopicTo", 1, suspend_ms=600)
            assert without_suspend.code == ResponseCode.PULL_NOT_FOUND  # at once: no SUSPEND flag

    run(scenario())


def test_short_polling_holds_for_short_polling_time_mills(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path, long_polling_enable=False, short_polling_time_mills=400) as b:
            await send_tagged(b, "TopicSp", ["A"])
            started = time.monotonic()
            response = await b.pull("TopicSp", 1, sys_flag=PullSysFlag.SUSPEND, suspend_ms=10_000)
            assert 0.35 <= time.monotonic() - started < 3 and response.code == ResponseCode.PULL_NOT_FOUND

    run(scenario())


def test_batch_refusals(tmp_path):
    async def scenario() -> None:
        async with running_broker(tmp_path) as b:
            body = encode_batch_body([BatchMessage(b"a", {"UNIQ_KEY": "U"}), BatchMessage(b"b", {})])
            batch = {"code": RequestCode.SEND_BATCH_MESSAGE, "batch": True}
            cases = [
                (await b.send("TopicB", body[:-3], **batch), "the batch body is malformed: no valid record at offset"),
                (await b.send("%RETRY%CG", body, **batch), "batch request does not support retry group %RETRY%CG"),
                (await b.send("TopicB", body, {"DELAY": "3"}, **batch), ILLEGAL_REMARK),
                (await b.send("TopicB", b"", **batch), "the batch body holds no message"),
            ]
            for response, remark in cases:
                assert response.code == ResponseCode.MESSAGE_ILLEGAL and response.remark.startswith(remark)
            assert b.controller.store.max_phy_offset == 0

    run(scenario())


# -- without a broker: the codes, the batch body, the hold service -----------------------------------------------------


def test_batch_body_round_trip_and_damage():
    items = [BatchMessage(b"", {}), BatchMessage(b"body", {"KEYS": "k", "TAGS": "t"}, 7)]
    body = encode_batch_body(items)
    # MessageDecoder.encodeMessages: totalSize, magic 0, bodyCRC 0, flag, body, short properties length, properties
    assert body[:22] == bytes.fromhex("00000016" "00000000" "00000000" "00000000" "00000000" "0000")
    assert decode_batch_body(body) == items
    with pytest.raises(CorruptRecord, match="offset 22"):
        decode_batch_body(body[:-1])
    wrong_size = bytearray(body)
    wrong_size[3] = 0x17
    with pytest.raises(CorruptRecord, match="TOTALSIZE says 23"):
        decode_batch_body(bytes(wrong_size))


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


class FakeStore:
    def __init__(self) -> None:
        self.max_offsets: dict[tuple[str, int], int] = {}

    def max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.max_offsets.get((topic, queue_id), 0)


def test_hold_service_wakes_on_a_matching_arrival_from_another_thread():
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        store, woken = FakeStore(), []
        hold = PullRequestHoldService(store, woken.append, loop)
        tag_a = TagMessageFilter(parse_subscription("T", "TagA"))
        held = PullRequest(create_request(RequestCode.PULL_MESSAGE), StubConnection(), 5000, time.monotonic(), 1,
                           SubscriptionData("T"), tag_a)
        hold.suspend_pull_request("T", 0, held)
        assert hold.held_count == 1

        def arrive(offset: int, tag: str, queue_id: int = 0) -> None:
            store.max_offsets["T", queue_id] = offset + 1
            arrivals = {("T", queue_id): (offset + 1, [tags_code(tag)])}
            threading.Thread(target=hold.on_message_arriving, args=(arrivals,)).start()

        arrive(1, "TagB")  # not for this filter
        arrive(0, "TagA", queue_id=1)  # another queue
        await asyncio.sleep(0.1)
        assert woken == [] and hold.held_count == 1
        arrive(2, "TagA")
        await asyncio.sleep(0.1)
        assert woken == [held] and hold.held_count == 0 and held.timer is None

    run(scenario())


def test_hold_service_expires_requests_on_their_own_timer():
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        woken: list[PullRequest] = []
        hold = PullRequestHoldService(FakeStore(), woken.append, loop)
        everything = TagMessageFilter(None)
        short, long = (PullRequest(create_request(RequestCode.PULL_MESSAGE), StubConnection(), ms, time.monotonic(),
                                   0, SubscriptionData("T"), everything) for ms in (100, 5000))
        hold.suspend_pull_request("T", 0, short)
        hold.suspend_pull_request("T", 0, long)
        await asyncio.sleep(0.3)
        assert woken == [short] and hold.held_count == 1
        hold.check_hold_requests()  # nothing newer: the long one stays
        assert hold.held_count == 1
        hold.close()
        assert hold.held_count == 0

    run(scenario())


# -- against Apache's broker ------------------------------------------------------------------------------------------


async def observable_answers(b: Broker) -> dict[str, object]:
    """What a client sees of a fixed set of sends and pulls: codes, remarks (the client's port masked), header keys,
    and the stored properties in their stored order."""
    answers: dict[str, object] = {}

    def note(name: str, response: RemotingCommand) -> None:
        remark = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", response.remark or "")
        answers[name] = (response.code, remark, sorted(response.ext_fields))

    async def pull_until_found(topic: str, **options) -> RemotingCommand:
        for _ in range(100):
            response = await b.pull(topic, 0, **options)
            if response.code == ResponseCode.SUCCESS:
                return response
            await asyncio.sleep(0.05)
        raise AssertionError(f"nothing to pull from {topic}")

    props = {"KEYS": "order-1", "TAGS": "TagA", "WAIT": "true", "UNIQ_KEY": "AC1100020001", "userProp": "v"}
    note("send", await b.send("TopicDiff", b"hello", props, queue_id=1, flag=3))
    pulled = await pull_until_found("TopicDiff", queue_id=1)
    note("pull", pulled)
    answers["stored"] = [list(r.properties.items()) for r in records(pulled)]
    for topic in ("../x", "T" * 300, "bad\x01topic", "   ", "SCHEDULE_TOPIC_XXXX"):
        note(f"send to {topic!r}", await b.send(topic, b"x"))
    note("queue id", await b.send("TopicDiff", b"x", queue_id=4))
    note("body too big", await b.send("TopicDiff", b"x" * 8193))
    note("properties too big", await b.send("TopicDiff", b"x", {"p": "v" * 33_000}))
    note("retry", await b.send("%RETRY%CG", b"again", {"UNIQ_KEY": "U1"}, reconsume_times=16))
    note("dlq", await b.send("%RETRY%CG", b"dead", {"UNIQ_KEY": "U2"}, reconsume_times=17))
    answers["dlq stored"] = [list(r.properties.items()) for r in records(await pull_until_found("%DLQ%CG"))]
    batch = encode_batch_body([BatchMessage(b"a", {"UNIQ_KEY": "U", "KEYS": "k"}), BatchMessage(b"b", {}, 5)])
    note("batch", await b.send("TopicBatchDiff", batch, {"UNIQ_KEY": "B"}, code=RequestCode.SEND_BATCH_MESSAGE,
                               batch=True))
    answers["batch stored"] = [(r.flag, list(r.properties.items()))
                               for r in records(await pull_until_found("TopicBatchDiff"))]
    note("batch to retry", await b.send("%RETRY%CG", batch, code=RequestCode.SEND_BATCH_MESSAGE, batch=True))
    note("delayed batch", await b.send("TopicB", batch, {"DELAY": "3"}, code=RequestCode.SEND_BATCH_MESSAGE,
                                       batch=True))
    for name, offset, options in [("no match", 0, {"subscription": "TagZ"}), ("unparsable", 0, {"subscription": "||"}),
                                  ("no group info", 0, {"subscription": None, "group": "HB"}),
                                  ("overflow one", 1, {}), ("overflow badly", 50, {}), ("queue id", 0, {"queue_id": 9}),
                                  ("no topic", 0, {"topic": "NoSuchTopic"})]:
        options = {"queue_id": 1, "topic": "TopicDiff", **options}
        note(f"pull {name}", await b.pull(options.pop("topic"), offset, **options))
    header = PullMessageRequestHeader("CG", "TopicDiff", 1, 0, 32, int(PullSysFlag.SUBSCRIPTION), 0, 0, 0, "a > 1",
                                      "SQL92")
    note("pull sql92", await b.invoke(create_request(RequestCode.PULL_MESSAGE, header.to_ext())))
    return answers


@pytest.mark.java
@pytest.mark.slow
def test_answers_are_apaches(tmp_path):
    async def ours() -> dict[str, object]:
        async with running_broker(tmp_path / "rmq") as b:
            return await observable_answers(b)

    async def apaches(addr: str) -> dict[str, object]:
        async with RemotingClient() as client:
            return await observable_answers(Broker(client, addr))

    expected: dict[str, object] = {}
    with start_servers("apache", tmp_path / "apache", maxMessageSize=8192) as apache:
        expected = run(apaches(apache.brokers[0].addr))
    got = run(ours())
    assert got == expected
