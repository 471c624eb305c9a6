"""The sans-IO requests and responses (protocol.py) and the route rules (route.py)."""

from __future__ import annotations

import pytest

from broker.client import protocol
from broker.client.message import Message, MessageQueue, PullStatus, SendStatus
from broker.client.route import (
    BrokerData,
    QueueData,
    RouteTable,
    TopicRouteData,
    publish_queues,
    subscribe_queues,
)
from broker.common.errors import MQBrokerError, MQClientError, OffsetNotFound
from broker.common.fastjson import decode_json
from broker.common.message import PullSysFlag, encode_properties, pack_host
from broker.common.record import encode_record
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_response
from broker.remoting.heartbeat import build_subscription_data

MQ = MessageQueue("T", "broker-a", 1)

# What Apache's NameServer 5.5 sends for a topic (fastjson: bare integer map keys, alphabetical properties).
ROUTE_BODY = (b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-b",'
              b'"cluster":"DefaultCluster","enableActingMaster":false},{"brokerAddrs":{0:"127.0.0.1:10811"},'
              b'"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false},{"brokerAddrs":'
              b'{1:"127.0.0.1:10711"},"brokerName":"broker-c","cluster":"DefaultCluster","enableActingMaster":false}],'
              b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-b","perm":6,"readQueueNums":2,'
              b'"topicSysFlag":0,"writeQueueNums":3},{"brokerName":"broker-a","perm":4,"readQueueNums":2,'
              b'"topicSysFlag":0,"writeQueueNums":2},{"brokerName":"broker-c","perm":6,"readQueueNums":1,'
              b'"topicSysFlag":0,"writeQueueNums":1}]}')


def test_route_decodes_fastjson() -> None:
    route = TopicRouteData.decode(ROUTE_BODY)
    assert route.broker("broker-b").broker_addrs == {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}
    assert route.queue_datas[0] == QueueData("broker-b", 2, 3, 6, 0)


def test_publish_queues_writable_brokers_with_a_master_sorted() -> None:
    queues, order = publish_queues("T", TopicRouteData.decode(ROUTE_BODY))
    # broker-a is read-only (perm 4), broker-c has no master: only broker-b's three write queues
    assert queues == [MessageQueue("T", "broker-b", i) for i in range(3)] and not order


def test_publish_queues_of_an_order_topic_conf() -> None:
    route = TopicRouteData([], [], order_topic_conf="broker-b:2;broker-a:1")
    queues, order = publish_queues("T", route)
    assert order and queues == [MessageQueue("T", "broker-b", 0), MessageQueue("T", "broker-b", 1),
                                MessageQueue("T", "broker-a", 0)]


def test_subscribe_queues_every_readable_queue() -> None:
    queues = subscribe_queues("T", TopicRouteData.decode(ROUTE_BODY))
    assert [(q.broker_name, q.queue_id) for q in queues] == [
        ("broker-a", 0), ("broker-a", 1), ("broker-b", 0), ("broker-b", 1), ("broker-c", 0)]


def test_default_route_caps_queue_nums() -> None:
    route = TopicRouteData([QueueData("b", 8, 8, 7)], [BrokerData("c", "b", {0: "x:1"})]).with_queue_nums(4)
    assert route.queue_datas[0].read_queue_nums == 4 and route.queue_datas[0].write_queue_nums == 4


def test_route_table_addresses() -> None:
    table = RouteTable()
    assert table.update("T", TopicRouteData.decode(ROUTE_BODY))
    assert not table.update("T", TopicRouteData.decode(ROUTE_BODY))
    assert table.find_broker_address_in_publish("broker-b") == "127.0.0.1:10911"
    assert table.find_broker_address_in_publish("broker-c") is None
    assert table.find_broker_address_in_subscribe("broker-c") == ("127.0.0.1:10711", True)  # any replica
    assert table.find_broker_address_in_subscribe("broker-b", 1) == ("127.0.0.1:10921", True)
    assert table.master_addresses() == {"broker-b": "127.0.0.1:10911", "broker-a": "127.0.0.1:10811"}


def test_route_response_errors_carry_the_namesrv_code() -> None:
    request = protocol.get_route_request("T")
    assert request.code == RequestCode.GET_ROUTEINFO_BY_TOPIC and request.ext_fields == {"topic": "T"}
    with pytest.raises(MQClientError) as info:
        protocol.parse_route_response(create_response(request, ResponseCode.TOPIC_NOT_EXIST, "No topic route"))
    assert info.value.code == ResponseCode.TOPIC_NOT_EXIST


# -- sending -----------------------------------------------------------------------------------------------------------


def test_send_request_v2_uses_one_letter_fields() -> None:
    msg = Message("T", b"body", tags="A")
    header = protocol.send_message_header("pg", msg, MQ, 0, batch=False)
    request = protocol.send_message_request(header, b"body")
    assert request.code == RequestCode.SEND_MESSAGE_V2
    ext = request.ext_fields
    assert (ext["a"], ext["b"], ext["c"], ext["d"], ext["e"], ext["f"], ext["h"]) == ("pg", "T", "TBW102", "4", "1",
                                                                                     "0", "0")
    assert ext["i"] == encode_properties(msg.properties) and ext["j"] == "0" and ext["m"] == "false"
    assert ext["n"] == "broker-a" and int(ext["g"]) > 0
    assert protocol.send_message_request(header, b"", batch=True).code == RequestCode.SEND_BATCH_MESSAGE
    plain = protocol.send_message_request(header, b"", v2=False)
    assert plain.code == RequestCode.SEND_MESSAGE and plain.ext_fields["producerGroup"] == "pg"


def test_retry_topic_send_carries_reconsume_counters() -> None:
    msg = Message("%RETRY%g", b"x", properties={"RECONSUME_TIME": "3", "MAX_RECONSUME_TIMES": "16"})
    header = protocol.send_message_header("pg", msg, MQ, 0, batch=False)
    assert header.reconsume_times == 3 and header.max_reconsume_times == 16


@pytest.mark.parametrize("code,status", [
    (ResponseCode.SUCCESS, SendStatus.SEND_OK),
    (ResponseCode.FLUSH_DISK_TIMEOUT, SendStatus.FLUSH_DISK_TIMEOUT),
    (ResponseCode.FLUSH_SLAVE_TIMEOUT, SendStatus.FLUSH_SLAVE_TIMEOUT),
    (ResponseCode.SLAVE_NOT_AVAILABLE, SendStatus.SLAVE_NOT_AVAILABLE),
])
def test_send_statuses(code: int, status: SendStatus) -> None:
    request = protocol.send_message_request(protocol.send_message_header("pg", Message("T", b"x"), MQ, 0,
                                                                         batch=False), b"x")
    ext = {"msgId": "7F0000010000277100000000000000A0", "queueId": "1", "queueOffset": "42"}
    result = protocol.parse_send_response(create_response(request, code, ext_fields=ext), "T", "broker-a", "addr",
                                          ["U1"])
    assert result.send_status is status and result.msg_id == "U1" and result.queue_offset == 42
    assert result.offset_msg_id == ext["msgId"] and result.message_queue == MQ


@pytest.mark.parametrize("code,retriable", [
    (ResponseCode.SYSTEM_BUSY, True), (ResponseCode.TOPIC_NOT_EXIST, True), (ResponseCode.NO_PERMISSION, True),
    (ResponseCode.MESSAGE_ILLEGAL, False), (ResponseCode.INVALID_PARAMETER, False),
])
def test_send_errors_raise_broker_errors(code: int, retriable: bool) -> None:
    request = protocol.send_message_request(protocol.send_message_header("pg", Message("T", b"x"), MQ, 0,
                                                                         batch=False), b"x")
    with pytest.raises(MQBrokerError) as info:
        protocol.parse_send_response(create_response(request, code, "nope"), "T", "b", "1.2.3.4:5", ["U"])
    assert (info.value.code, info.value.retriable, info.value.address) == (code, retriable, "1.2.3.4:5")


# -- pulling and offsets -----------------------------------------------------------------------------------------------


def test_pull_request_flags() -> None:
    sub = build_subscription_data("T", "A || B")
    request = protocol.pull_message_request("cg", MQ, 5, 32, subscription=sub, commit_offset=3,
                                            suspend_timeout_ms=15000)
    ext = request.ext_fields
    assert request.code == RequestCode.PULL_MESSAGE
    assert int(ext["sysFlag"]) == PullSysFlag.COMMIT_OFFSET | PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION
    assert (ext["queueOffset"], ext["maxMsgNums"], ext["commitOffset"], ext["suspendTimeoutMillis"]) == (
        "5", "32", "3", "15000")
    assert ext["subscription"] == "A || B" and ext["expressionType"] == "TAG" and ext["subVersion"] == "0"
    plain = protocol.pull_message_request("cg", MQ, 0, 1)
    assert plain.ext_fields["sysFlag"] == "0" and "subscription" not in plain.ext_fields


@pytest.mark.parametrize("code,status", [
    (ResponseCode.SUCCESS, PullStatus.FOUND), (ResponseCode.PULL_NOT_FOUND, PullStatus.NO_NEW_MSG),
    (ResponseCode.PULL_RETRY_IMMEDIATELY, PullStatus.NO_MATCHED_MSG),
    (ResponseCode.PULL_OFFSET_MOVED, PullStatus.OFFSET_ILLEGAL),
])
def test_pull_statuses(code: int, status: PullStatus) -> None:
    ext = {"suggestWhichBrokerId": "0", "nextBeginOffset": "9", "minOffset": "1", "maxOffset": "12"}
    result = protocol.parse_pull_response(create_response(protocol.pull_message_request("g", MQ, 0, 1), code,
                                                          ext_fields=ext, body=b"raw"), "addr")
    assert (result.status, result.next_begin_offset, result.min_offset, result.max_offset) == (status, 9, 1, 12)
    assert result.body == (b"raw" if status is PullStatus.FOUND else b"")
    with pytest.raises(MQBrokerError):
        protocol.parse_pull_response(create_response(protocol.pull_message_request("g", MQ, 0, 1),
                                                     ResponseCode.SUBSCRIPTION_NOT_EXIST, "x"), "addr")


def test_decode_pull_result_filters_tag_collisions_and_stamps_offsets() -> None:
    def record(tag: str, offset: int) -> bytes:
        return encode_record(topic=b"T", queue_id=1, body=tag.encode(), properties=f"TAGS\x01{tag}\x02".encode(),
                             born_host=pack_host("1.1.1.1", 1), store_host=pack_host("2.2.2.2", 2),
                             queue_offset=offset)

    # "Aa" and "BB" share a Java hashCode: the broker lets both through, the client drops the one not wanted
    ext = {"suggestWhichBrokerId": "0", "nextBeginOffset": "2", "minOffset": "0", "maxOffset": "2"}
    response = create_response(protocol.pull_message_request("g", MQ, 0, 2), ResponseCode.SUCCESS, ext_fields=ext,
                               body=record("Aa", 0) + record("BB", 1))
    result = protocol.parse_pull_response(response, "addr")
    protocol.decode_pull_result(result, MQ, build_subscription_data("T", "Aa"))
    assert [m.body for m in result.messages] == [b"Aa"]
    assert result.messages[0].properties["MAX_OFFSET"] == "2" and result.messages[0].broker_name == "broker-a"


def test_offset_responses() -> None:
    request = protocol.query_consumer_offset_request("g", MQ)
    assert request.ext_fields["consumerGroup"] == "g" and request.ext_fields["bname"] == "broker-a"
    assert protocol.parse_offset_response(create_response(request, 0, ext_fields={"offset": "17"}), "a") == 17
    with pytest.raises(OffsetNotFound):
        protocol.parse_offset_response(create_response(request, ResponseCode.QUERY_NOT_FOUND, "no"), "a")
    assert protocol.max_offset_request(MQ).code == RequestCode.GET_MAX_OFFSET
    assert protocol.search_offset_request(MQ, 123).ext_fields["timestamp"] == "123"
    update = protocol.update_consumer_offset_request("g", MQ, 99)
    assert update.code == RequestCode.UPDATE_CONSUMER_OFFSET and update.ext_fields["commitOffset"] == "99"


# -- clients -----------------------------------------------------------------------------------------------------------


def test_heartbeat_body_is_heartbeat_data_json() -> None:
    sub = build_subscription_data("T", "A||B")
    consumer = protocol.ConsumerData("cg", "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET", [sub])
    request = protocol.heartbeat_request("1.2.3.4@77#1", ["pg"], [consumer])
    text = request.body.decode()
    assert text.startswith('{"clientID":"1.2.3.4@77#1","consumerDataSet":[{"consumeFromWhere":')
    data = decode_json(text)
    assert data["producerDataSet"] == [{"groupName": "pg"}]
    sub_json = data["consumerDataSet"][0]["subscriptionDataSet"][0]
    assert sub_json["tagsSet"] == ["A", "B"] and sub_json["codeSet"] == [65, 66] and sub_json["subString"] == "A||B"
    assert list(sub_json) == sorted(sub_json)  # fastjson's alphabetical order


def test_subscription_expressions() -> None:
    assert build_subscription_data("T", "*").tags_set == []
    assert build_subscription_data("T", "").sub_string == "*"
    sub = build_subscription_data("T", " A ||  || B ")
    assert sub.tags_set == ["A", "B"] and sub.matches_tag("B") and not sub.matches_tag("C")
    assert not sub.matches_tag(None)


def test_consumer_list_and_unregister() -> None:
    request = protocol.consumer_list_request("g")
    response = create_response(request, 0, body=b'{"consumerIdList":["a@1","b@2"]}')
    assert protocol.parse_consumer_list_response(response, "x") == ["a@1", "b@2"]
    unregister = protocol.unregister_client_request("c@1", producer_group="pg")
    assert unregister.ext_fields == {"clientID": "c@1", "producerGroup": "pg"}
