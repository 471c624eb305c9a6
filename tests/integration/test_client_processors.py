"""The client and consumer processors on a real BrokerController: heartbeats, consumer lists, rebalance notices when
a client joins, leaves or drops its connection, consumer offsets, consume stats, offset resets, rebalance locks and
the requests the broker passes on to a client. Bodies are checked against the field names Java's classes use."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from unittest import mock

from broker.common.fastjson import decode_json
from broker.common.topic import TopicConfig
from broker.remoting.client import RemotingClient
from broker.remoting.codes import LanguageCode, RequestCode, ResponseCode
from broker.remoting.command import REMOTING_VERSION, RemotingCommand, create_request, create_response
from broker.server.broker_controller import BrokerController
from broker.server.consumer_manager import ClientChannelInfo, ConsumerManager, SubscriptionData
from broker.store.commit_log import StoreMessage
from tests.integration.in_process import running_controller
from tests.unit.remoting.remoting_helpers import run

MY_PROCESSORS = ("client_manage", "consumer_manage", "admin")
GROUP = "GID_orders"
TOPIC = "TopicTest"
NOTICE_TIMEOUT_S = 3.0


# -- a broker and clients ----------------------------------------------------------------------------------------------


def on_broker(tmp_path: Path, scenario: Callable[[BrokerController], Awaitable[None]], **broker_settings: Any) -> None:
    """Run ``scenario`` against a fresh in-process broker (tests/integration/in_process.py) with only the
    client/consumer/admin processors (the send and pull processors are tested on their own), 64-unit ConsumeQueue
    files and no NameServer."""

    async def main() -> None:
        async with running_controller(tmp_path / "store", store={"mapped_file_size_consume_queue": 20 * 64},
                                      processors=MY_PROCESSORS, **broker_settings) as broker:
            await scenario(broker)

    run(main())


class Client:
    """One client process: its own connection, recording what the broker sends it."""

    def __init__(self, controller: BrokerController, client_id: str, answers: dict[int, RemotingCommand] | None = None):
        self.address = controller.broker_addr
        self.client_id = client_id
        self.received: asyncio.Queue[RemotingCommand] = asyncio.Queue()
        self.answers = answers or {}
        self.remoting = RemotingClient(self._handle)

    async def _handle(self, conn: object, request: RemotingCommand) -> RemotingCommand | None:
        await self.received.put(request)
        answer = self.answers.get(request.code)
        return create_response(request, answer.code, answer.remark, body=answer.body) if answer else None

    async def call(self, code: int, ext: dict[str, str] | None = None, body: bytes = b"", **options: Any
                   ) -> RemotingCommand:
        request = create_request(code, ext or {}, body, language=LanguageCode.JAVA, version=REMOTING_VERSION,
                                 **options)
        return await self.remoting.invoke(self.address, request)

    async def heartbeat(self, *groups: str, topics: tuple[str, ...] = (TOPIC,), producer: str | None = None,
                        fingerprint: int = 0, without_sub: bool = False) -> RemotingCommand:
        body = heartbeat_body(self.client_id, groups, topics, producer, fingerprint, without_sub)
        return await self.call(RequestCode.HEART_BEAT, body=body)

    async def next_request(self, code: int, timeout: float = NOTICE_TIMEOUT_S) -> RemotingCommand:
        async with asyncio.timeout(timeout):
            while True:
                request = await self.received.get()
                if request.code == code:
                    return request

    async def close(self) -> None:
        await self.remoting.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()


def heartbeat_body(client_id: str, groups: tuple[str, ...], topics: tuple[str, ...], producer: str | None,
                   fingerprint: int = 0, without_sub: bool = False) -> bytes:
    """HeartbeatData as the Java client's fastjson writes it."""
    subs = [{"classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*",
             "subVersion": 1_700_000_000_000, "tagsSet": [], "topic": t} for t in topics]
    consumers = [{"consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
                  "groupName": g, "messageModel": "CLUSTERING", "subscriptionDataSet": [] if without_sub else subs,
                  "unitMode": False} for g in groups]
    producers = [{"groupName": producer}] if producer else []
    data = {"clientID": client_id, "consumerDataSet": consumers, "heartbeatFingerprint": fingerprint,
            "producerDataSet": producers, "withoutSub": without_sub}
    return json.dumps(data, separators=(",", ":")).encode()


def body_of(response: RemotingCommand) -> Any:
    return decode_json(response.body.decode())


def mq_keys(table: dict[str, Any]) -> dict[tuple[str, str, int], Any]:
    """A MessageQueue-keyed map as fastjson writes it, with the keys parsed."""
    result = {}
    for key, value in table.items():
        mq = json.loads(key)
        assert list(mq) == ["brokerName", "queueId", "topic"]
        result[mq["topic"], mq["brokerName"], mq["queueId"]] = value
    return result


def create_topic(controller: BrokerController, topic: str = TOPIC, queues: int = 2) -> None:
    controller.topic_config_manager.update_topic_config(TopicConfig(topic, queues, queues))


async def put(controller: BrokerController, topic: str, queue_id: int, count: int, **properties: str) -> list[int]:
    """Store ``count`` messages and wait until they are dispatched; returns their commit log offsets."""
    before = controller.store.max_offset_in_queue(topic, queue_id)
    msgs = [StoreMessage(topic, queue_id, f"body-{i}".encode(), dict(properties), born_timestamp=1)
            for i in range(count)]
    result = await controller.put_messages(msgs)
    assert result.ok, result
    async with asyncio.timeout(5):
        while controller.store.max_offset_in_queue(topic, queue_id) < before + count:
            await asyncio.sleep(0.01)
    return list(result.append.record_offsets)


def consumer_ids(response: RemotingCommand) -> list[str]:
    assert response.code == ResponseCode.SUCCESS, response.remark
    return sorted(body_of(response)["consumerIdList"])


# -- heartbeats and consumer lists ------------------------------------------------------------------------------------


def test_heartbeat_registers_consumers_and_producers_and_creates_the_retry_topic(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        async with Client(broker, "127.0.0.1@a") as a:
            response = await a.heartbeat(GROUP, producer="PID_orders")
            assert response.code == ResponseCode.SUCCESS and response.remark is None
            assert response.ext_fields == {"IS_SUPPORT_HEART_BEAT_V2": "true", "IS_SUB_CHANGE": "true"}
            listed = await a.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": GROUP})
            assert consumer_ids(listed) == ["127.0.0.1@a"]
            retry = broker.topic_config_manager.select_topic_config("%RETRY%" + GROUP)
            assert (retry.read_queue_nums, retry.write_queue_nums, retry.perm) == (1, 1, 6)
            assert broker.subscription_group_manager.contains_subscription_group(GROUP)
            channel = broker.producer_manager.any_channel("PID_orders")
            assert channel.client_id == "127.0.0.1@a" and channel.language is LanguageCode.JAVA
            assert channel.version == REMOTING_VERSION
            unknown = await a.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "nobody"})
            assert (unknown.code, unknown.remark) == (ResponseCode.SYSTEM_ERROR, "no consumer for this group, nobody")

    on_broker(tmp_path, scenario)


def test_consumers_hear_when_their_group_changes(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        async with Client(broker, "10.0.0.1@a") as a, Client(broker, "10.0.0.2@b") as b:
            await a.heartbeat(GROUP)
            notice = await a.next_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)  # a itself joined, as in Java
            assert notice.ext_fields == {"consumerGroup": GROUP} and notice.is_oneway
            await b.heartbeat(GROUP)
            await a.next_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)
            await b.next_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)
            listed = await a.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": GROUP})
            assert consumer_ids(listed) == ["10.0.0.1@a", "10.0.0.2@b"]
            await a.heartbeat(GROUP)  # nothing changed: nobody is told
            await asyncio.sleep(0.2)
            assert a.received.empty()
            gone = await b.call(RequestCode.UNREGISTER_CLIENT, {"clientID": "10.0.0.2@b", "consumerGroup": GROUP,
                                                                  "producerGroup": "PID_none"})
            assert gone.code == ResponseCode.SUCCESS
            notice = await a.next_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)
            assert notice.ext_fields["consumerGroup"] == GROUP
            listed = await a.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": GROUP})
            assert consumer_ids(listed) == ["10.0.0.1@a"]

    on_broker(tmp_path, scenario)


def test_a_closed_connection_leaves_its_groups_at_once_and_the_others_are_told(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        async with Client(broker, "10.0.0.1@a") as a, Client(broker, "10.0.0.2@b") as b:
            await a.heartbeat(GROUP)
            await a.next_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)  # a itself joined
            await b.heartbeat(GROUP, producer="PID_b")
            await a.next_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)  # b joined
            assert a.received.empty()
            await b.close()  # no UNREGISTER_CLIENT: the connection just goes away
            notice = await a.next_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED)  # long before a 10 s scan
            assert notice.ext_fields == {"consumerGroup": GROUP}
            listed = await a.call(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": GROUP})
            assert consumer_ids(listed) == ["10.0.0.1@a"]
            assert broker.producer_manager.any_channel("PID_b") is None

    on_broker(tmp_path, scenario)


def test_heartbeat_v2_keeps_subscriptions_and_reports_a_changed_fingerprint(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        async with Client(broker, "10.0.0.1@a") as a:
            first = await a.heartbeat(GROUP, fingerprint=7)
            assert first.ext_fields["IS_SUB_CHANGE"] == "false"
            same = await a.heartbeat(GROUP, fingerprint=7, without_sub=True)
            assert same.ext_fields == {"IS_SUPPORT_HEART_BEAT_V2": "true", "IS_SUB_CHANGE": "false"}
            assert list(broker.consumer_manager.get(GROUP).subscriptions) == [TOPIC]
            changed = await a.heartbeat(GROUP, fingerprint=8, without_sub=True)
            assert changed.ext_fields["IS_SUB_CHANGE"] == "true"

    on_broker(tmp_path, scenario)


def test_bad_heartbeats_and_headers_get_error_answers_and_the_broker_keeps_serving(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        async with Client(broker, "10.0.0.1@a") as a:
            for body in (b"", b"not json", b'{"consumerDataSet": 5}', b"[1, 2]"):
                response = await a.call(RequestCode.HEART_BEAT, body=body)
                assert response.code == ResponseCode.SYSTEM_ERROR and response.remark
            response = await a.call(RequestCode.UNREGISTER_CLIENT, {"consumerGroup": GROUP})
            assert response.code == ResponseCode.SYSTEM_ERROR
            assert "the custom field <clientID> is null" in response.remark
            response = await a.call(RequestCode.QUERY_CONSUMER_OFFSET,
                                    {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "x"})
            assert response.code == ResponseCode.SYSTEM_ERROR and "queueId" in response.remark
            assert (await a.heartbeat(GROUP)).code == ResponseCode.SUCCESS

    on_broker(tmp_path, scenario)


def test_check_client_config_accepts_tags_only(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        async with Client(broker, "10.0.0.1@a") as a:
            sub = {"classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*",
                   "subVersion": 1, "tagsSet": [], "topic": TOPIC}
            body = {"clientId": "10.0.0.1@a", "group": GROUP, "subscriptionData": sub}
            ok = await a.call(RequestCode.CHECK_CLIENT_CONFIG, body=json.dumps(body).encode())
            assert ok.code == ResponseCode.SUCCESS
            body["subscriptionData"] = {**sub, "expressionType": "SQL92", "subString": "a > 1"}
            refused = await a.call(RequestCode.CHECK_CLIENT_CONFIG, body=json.dumps(body).encode())
            assert (refused.code, refused.remark) == (
                ResponseCode.SYSTEM_ERROR, "The broker does not support consumer to filter message by SQL92")

    on_broker(tmp_path, scenario)


def test_connection_lists_carry_javas_fields(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        async with Client(broker, "10.0.0.1@a") as a:
            await a.heartbeat(GROUP, producer="PID_orders")
            response = await a.call(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": GROUP})
            body = body_of(response)
            assert list(body) == ["connectionSet", "consumeFromWhere", "consumeType", "messageModel",
                                  "subscriptionTable"]
            (connection,) = body["connectionSet"]
            assert list(connection) == ["clientAddr", "clientId", "language", "version"]
            assert connection["clientId"] == "10.0.0.1@a" and connection["language"] == "JAVA"
            assert connection["clientAddr"].startswith("127.0.0.1:") and connection["version"] == REMOTING_VERSION
            assert (body["consumeType"], body["messageModel"]) == ("CONSUME_PASSIVELY", "CLUSTERING")
            sub = body["subscriptionTable"][TOPIC]
            assert list(sub) == ["classFilterMode", "codeSet", "expressionType", "subString", "subVersion",
                                 "tagsSet", "topic"]
            offline = await a.call(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "nobody"})
            assert (offline.code, offline.remark) == (ResponseCode.CONSUMER_NOT_ONLINE,
                                                      "the consumer group[nobody] not online")
            producers = await a.call(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PID_orders"})
            assert body_of(producers)["connectionSet"][0]["clientId"] == "10.0.0.1@a"
            missing = await a.call(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PID_x"})
            assert (missing.code, missing.remark) == (ResponseCode.SYSTEM_ERROR,
                                                      "the producer group[PID_x] not exist")
            table = body_of(await a.call(RequestCode.GET_ALL_PRODUCER_INFO))["data"]
            assert list(table["PID_orders"][0]) == ["clientId", "language", "lastUpdateTimestamp", "remoteIP",
                                                    "version"]

    on_broker(tmp_path, scenario)


def test_consumer_running_info_is_asked_of_the_client_itself(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        info = create_response(create_request(0), ResponseCode.SUCCESS, body=b'{"properties":{"x":"1"}}')
        answers = {RequestCode.GET_CONSUMER_RUNNING_INFO: info}
        async with Client(broker, "10.0.0.1@a", answers) as a, Client(broker, "admin") as admin:
            await a.heartbeat(GROUP)
            ext = {"consumerGroup": GROUP, "clientId": "10.0.0.1@a", "jstackEnable": "false"}
            response = await admin.call(RequestCode.GET_CONSUMER_RUNNING_INFO, ext)
            assert (response.code, response.body) == (ResponseCode.SUCCESS, b'{"properties":{"x":"1"}}')
            asked = await a.next_request(RequestCode.GET_CONSUMER_RUNNING_INFO)
            assert asked.ext_fields["clientId"] == "10.0.0.1@a"
            ext["clientId"] = "nobody"
            offline = await admin.call(RequestCode.GET_CONSUMER_RUNNING_INFO, ext)
            assert (offline.code, offline.remark) == (ResponseCode.SYSTEM_ERROR,
                                                      f"The Consumer <{GROUP}> <nobody> not online")

    on_broker(tmp_path, scenario)


def test_silent_clients_expire_and_their_connection_is_closed(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        async with Client(broker, "10.0.0.1@a") as a:
            await a.heartbeat(GROUP, producer="PID_a")
            manager = broker.consumer_manager
            (channel,) = manager.get(GROUP).channels.values()
            expired = manager.scan_expired(now=channel.last_update_timestamp + 120_001)
            assert [c.client_id for c in expired] == ["10.0.0.1@a"] and manager.get(GROUP) is None
            async with asyncio.timeout(3):
                await channel.connection.wait_closed()
            assert broker.producer_manager.any_channel("PID_a") is None  # the close event dropped it too

    on_broker(tmp_path, scenario)


def test_consumer_manager_follows_javas_change_rules() -> None:
    changes: list[tuple[str, int]] = []
    manager = ConsumerManager(on_change=lambda group, conns: changes.append((group, len(conns))))
    conn_a, conn_b = mock.Mock(closed=False), mock.Mock(closed=False)
    a, b = ClientChannelInfo(conn_a, "a"), ClientChannelInfo(conn_b, "b")
    subs = [SubscriptionData(TOPIC, sub_version=1)]
    assert manager.register_consumer(GROUP, a, "CONSUME_PASSIVELY", "CLUSTERING", "X", subs)
    assert not manager.register_consumer(GROUP, a, "CONSUME_PASSIVELY", "CLUSTERING", "X", subs)
    newer = [SubscriptionData(TOPIC, "TagA", sub_version=2)]
    assert not manager.register_consumer(GROUP, a, "CONSUME_PASSIVELY", "CLUSTERING", "X", newer)
    assert manager.find_subscription_data(GROUP, TOPIC).sub_string == "TagA"  # replaced, yet no change event
    manager.register_consumer(GROUP, b, "CONSUME_PASSIVELY", "CLUSTERING", "X", newer, notify=False)
    assert changes == [(GROUP, 1)]
    manager.register_consumer("GID_bc", b, "CONSUME_PASSIVELY", "BROADCASTING", "X", subs)
    assert manager.query_topic_consume_by_who(TOPIC) == {GROUP, "GID_bc"}
    assert manager.connection_closed(conn_b)
    assert changes == [(GROUP, 1), (GROUP, 1)]  # broadcasting groups are not told
    assert manager.query_topic_consume_by_who(TOPIC) == {GROUP}


# -- consumer offsets ---------------------------------------------------------------------------------------------


def test_offsets_are_committed_and_queried_with_javas_codes(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        create_topic(broker)
        async with Client(broker, "c") as c:
            update = {"consumerGroup": "GID_new", "topic": TOPIC, "queueId": "0", "commitOffset": "5"}
            refused = await c.call(RequestCode.UPDATE_CONSUMER_OFFSET, update)
            assert (refused.code, refused.remark) == (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                                      "Group GID_new not exist!")
            await c.heartbeat(GROUP)  # creates the group
            refused = await c.call(RequestCode.UPDATE_CONSUMER_OFFSET, {**update, "consumerGroup": GROUP,
                                                                         "topic": "NoSuchTopic"})
            assert (refused.code, refused.remark) == (ResponseCode.TOPIC_NOT_EXIST, "Topic NoSuchTopic not exist!")
            query = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0"}
            missing = await c.call(RequestCode.QUERY_CONSUMER_OFFSET, query)
            assert (missing.code, missing.remark) == (
                ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")
            no_zero = await c.call(RequestCode.QUERY_CONSUMER_OFFSET, {**query, "setZeroIfNotFound": "false"})
            assert (no_zero.code, no_zero.remark) == (
                ResponseCode.QUERY_NOT_FOUND, "Not found, do not set to zero, maybe this group boot first")
            await put(broker, TOPIC, 0, 3)
            zero = await c.call(RequestCode.QUERY_CONSUMER_OFFSET, query)  # the first message is still there
            assert (zero.code, zero.ext_fields) == (ResponseCode.SUCCESS, {"offset": "0"})
            ok = await c.call(RequestCode.UPDATE_CONSUMER_OFFSET, {**update, "consumerGroup": GROUP})
            assert ok.code == ResponseCode.SUCCESS
            assert (await c.call(RequestCode.QUERY_CONSUMER_OFFSET, query)).ext_fields == {"offset": "5"}
            everything = body_of(await c.call(RequestCode.GET_ALL_CONSUMER_OFFSET))
            assert everything["offsetTable"] == {f"{TOPIC}@{GROUP}": {"0": 5}}
            who = body_of(await c.call(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": TOPIC}))
            assert who == {"groupList": [GROUP]}
            topics = body_of(await c.call(RequestCode.QUERY_TOPICS_BY_CONSUMER, {"group": GROUP}))
            assert topics == {"brokerAddr": broker.broker_addr, "topicList": [TOPIC]}

    on_broker(tmp_path, scenario)


def test_consume_stats_show_each_queue_of_the_subscribed_topics(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        create_topic(broker, queues=2)
        async with Client(broker, "c") as c:
            await c.heartbeat(GROUP)
            await put(broker, TOPIC, 0, 4)
            await put(broker, TOPIC, 1, 1)
            broker.consumer_offset_manager.commit_offset(GROUP, TOPIC, 0, 3)
            response = await c.call(RequestCode.GET_CONSUME_STATS, {"consumerGroup": GROUP})
            body = body_of(response)
            assert list(body) == ["consumeTps", "offsetTable"] and body["consumeTps"] == 0.0
            table = mq_keys(body["offsetTable"])
            assert set(table) == {(TOPIC, "broker-a", 0), (TOPIC, "broker-a", 1)}
            q0 = table[TOPIC, "broker-a", 0]
            assert list(q0) == ["brokerOffset", "consumerOffset", "lastTimestamp", "pullOffset"]
            assert (q0["brokerOffset"], q0["consumerOffset"], q0["pullOffset"]) == (4, 3, 3)
            assert q0["lastTimestamp"] == broker.store.message_store_timestamp(TOPIC, 0, 2) > 0
            q1 = table[TOPIC, "broker-a", 1]
            assert (q1["brokerOffset"], q1["consumerOffset"], q1["lastTimestamp"]) == (1, 0, 0)
            listed = await c.call(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "GID_other",
                                                                   "topicList": f"{TOPIC};NoSuchTopic"})
            assert len(body_of(listed)["offsetTable"]) == 2
            stats = broker.stats_manager  # consumeTps: pulls' messages per second over the last minute (sampled)
            stats.record_get(GROUP, TOPIC, 30, 3000)
            stats.sample_seconds()
            tps = body_of(await c.call(RequestCode.GET_CONSUME_STATS, {"consumerGroup": GROUP}))["consumeTps"]
            assert tps > 0 and tps == stats.stats_data("GROUP_GET_NUMS", f"{TOPIC}@{GROUP}").stats_minute.tps
            span = body_of(await c.call(RequestCode.QUERY_CONSUME_TIME_SPAN, {"topic": TOPIC, "group": GROUP}))
            first = span["consumeTimeSpanSet"][0]
            assert first["messageQueue"] == {"brokerName": "broker-a", "queueId": 0, "topic": TOPIC}
            assert first["minTimeStamp"] > 0 and first["delayTime"] >= 0 and "#" in first["minTimeStampStr"]

    on_broker(tmp_path, scenario)


def test_reset_offset_by_time_in_the_broker_is_served_to_the_next_pulls(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        create_topic(broker, queues=2)
        async with Client(broker, "c") as c:
            await c.heartbeat(GROUP)
            await put(broker, TOPIC, 0, 3)
            middle = broker.store.message_store_timestamp(TOPIC, 0, 2)
            broker.consumer_offset_manager.commit_offset(GROUP, TOPIC, 0, 3)
            reset = {"group": GROUP, "topic": TOPIC, "timestamp": str(middle), "isForce": "true", "offset": "-1"}
            response = await c.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset)
            assert response.code == ResponseCode.SUCCESS
            table = mq_keys(body_of(response)["offsetTable"])
            target = broker.store.offset_in_queue_by_time(TOPIC, 0, middle)
            assert table == {(TOPIC, "broker-a", 0): target, (TOPIC, "broker-a", 1): 0}
            assert broker.consumer_offset_manager.has_offset_reset(TOPIC, GROUP, 0)
            ignored = await c.call(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": GROUP, "topic": TOPIC,
                                                                        "queueId": "0", "commitOffset": "3"})
            assert (ignored.code, ignored.remark) == (ResponseCode.SUCCESS, "Offset has been previously reset")
            assert broker.consumer_offset_manager.query_then_erase_reset_offset(TOPIC, GROUP, 0) == target
            one = await c.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {**reset, "queueId": "0",
                                                                             "offset": "99"})
            assert (one.code, one.remark) == (ResponseCode.SYSTEM_ERROR,
                                              "Target offset 99 not in consume queue range [0-3]")
            nothing = await c.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {**reset, "topic": "NoSuchTopic"})
            assert (nothing.code, nothing.remark) == (ResponseCode.TOPIC_NOT_EXIST,
                                                      "Topic NoSuchTopic does not exist")

    on_broker(tmp_path, scenario)


def test_reset_offset_without_server_side_reset_tells_the_online_clients(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        create_topic(broker, queues=1)
        async with Client(broker, "c") as c, Client(broker, "admin") as admin:
            await put(broker, TOPIC, 0, 2)
            reset = {"group": GROUP, "topic": TOPIC, "timestamp": "0", "isForce": "true", "offset": "-1"}
            broker.consumer_offset_manager.commit_offset(GROUP, TOPIC, 0, 2)
            offline = await admin.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset)
            assert offline.code == ResponseCode.CONSUMER_NOT_ONLINE
            assert offline.remark == (f"Consumer not online, so can not reset offset, Group: {GROUP} "
                                      f"Topic: {TOPIC} Timestamp: 0")
            await c.heartbeat(GROUP)
            response = await admin.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset)
            assert mq_keys(body_of(response)["offsetTable"]) == {(TOPIC, "broker-a", 0): 0}
            notice = await c.next_request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET)
            assert notice.ext_fields["group"] == GROUP and notice.ext_fields["timestamp"] == "0"
            assert mq_keys(body_of(notice)["offsetTable"]) == {(TOPIC, "broker-a", 0): 0}

    on_broker(tmp_path, scenario, use_server_side_reset_offset=False)


def test_rebalance_locks_belong_to_one_client_at_a_time(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        async with Client(broker, "c") as c:
            mqs = [{"brokerName": "broker-a", "queueId": q, "topic": TOPIC} for q in (0, 1)]

            async def lock(client_id: str, code: int = RequestCode.LOCK_BATCH_MQ) -> Any:
                body = {"clientId": client_id, "consumerGroup": GROUP, "mqSet": mqs, "onlyThisBroker": False}
                response = await c.call(code, body=json.dumps(body).encode())
                assert response.code == ResponseCode.SUCCESS
                return body_of(response) if response.body else None

            assert len((await lock("a"))["lockOKMQSet"]) == 2
            assert (await lock("b"))["lockOKMQSet"] == []
            assert len((await lock("a"))["lockOKMQSet"]) == 2  # renewing is fine
            await lock("a", RequestCode.UNLOCK_BATCH_MQ)
            assert sorted(m["queueId"] for m in (await lock("b"))["lockOKMQSet"]) == [0, 1]

    on_broker(tmp_path, scenario)


def test_group_offsets_are_cloned_compared_and_summed(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        create_topic(broker, queues=2)
        async with Client(broker, "c") as c:
            await c.heartbeat(GROUP)
            await put(broker, TOPIC, 0, 4)
            offsets = broker.consumer_offset_manager
            offsets.commit_offset(GROUP, TOPIC, 0, 3)
            offsets.commit_offset("GID_slow", TOPIC, 0, 1)
            cloned = await c.call(RequestCode.CLONE_GROUP_OFFSET, {"srcGroup": GROUP, "destGroup": "GID_copy",
                                                                   "topic": TOPIC, "offline": "false"})
            assert cloned.code == ResponseCode.SUCCESS and offsets.query_offset("GID_copy", TOPIC, 0) == 3
            correction = body_of(await c.call(RequestCode.QUERY_CORRECTION_OFFSET, {
                "topic": TOPIC, "compareGroup": GROUP, "filterGroups": "GID_copy"}))
            assert correction == {"correctionOffsets": {"0": 1}}  # GID_slow is the furthest behind
            sub = body_of(await c.call(RequestCode.QUERY_SUBSCRIPTION_BY_CONSUMER, {"group": GROUP, "topic": TOPIC}))
            assert (sub["group"], sub["topic"], sub["subscriptionData"]["subString"]) == (GROUP, TOPIC, "*")
            stats = body_of(await c.call(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false"}))
            assert list(stats) == ["brokerAddr", "consumeStatsList", "totalDiff", "totalInflightDiff"]
            by_group = {group: entries for item in stats["consumeStatsList"] for group, entries in item.items()}
            (ours,) = by_group[GROUP]
            assert mq_keys(ours["offsetTable"])[TOPIC, "broker-a", 0]["consumerOffset"] == 3
            assert "GID_slow" not in by_group  # only groups with a subscription config are counted, as in Java
            assert stats["totalDiff"] == 4 - 3

    on_broker(tmp_path, scenario)


def test_consumer_status_and_direct_consumption_go_through_the_client(tmp_path: Path) -> None:
    async def scenario(broker: BrokerController) -> None:
        create_topic(broker, queues=1)
        (offset,) = await put(broker, TOPIC, 0, 1)
        status = create_response(create_request(0), ResponseCode.SUCCESS, body=(
            b'{"consumerTable":{},"messageQueueTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:7}}'))
        direct = create_response(create_request(0), ResponseCode.SUCCESS, body=b'{"consumeResult":"CR_SUCCESS"}')
        answers = {RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT: status, RequestCode.CONSUME_MESSAGE_DIRECTLY: direct}
        async with Client(broker, "10.0.0.1@a", answers) as a, Client(broker, "admin") as admin:
            await a.heartbeat(GROUP)
            response = await admin.call(RequestCode.INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
                                        {"topic": TOPIC, "group": GROUP})
            table = body_of(response)["consumerTable"]
            assert mq_keys(table["10.0.0.1@a"]) == {(TOPIC, "broker-a", 0): 7}
            msg_id = broker.store.lookup_message(offset).msg_id
            ext = {"consumerGroup": GROUP, "clientId": "10.0.0.1@a", "msgId": msg_id, "topic": TOPIC}
            consumed = await admin.call(RequestCode.CONSUME_MESSAGE_DIRECTLY, ext)
            assert (consumed.code, consumed.body) == (ResponseCode.SUCCESS, b'{"consumeResult":"CR_SUCCESS"}')
            asked = await a.next_request(RequestCode.CONSUME_MESSAGE_DIRECTLY)
            assert asked.ext_fields["brokerName"] == "broker-a" and asked.ext_fields["topicSysFlag"] == "0"
            assert asked.body == broker.store.select_one_message(offset)

    on_broker(tmp_path, scenario)
