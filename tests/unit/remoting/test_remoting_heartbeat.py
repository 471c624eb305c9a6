"""HeartbeatData, ConsumerData and SubscriptionData: the client writes them and the broker reads them with one
definition (broker/remoting/heartbeat.py)."""

from __future__ import annotations

import pytest

from broker.client import protocol
from broker.common.errors import RemoteProtocolError
from broker.common.fastjson import decode_json
from broker.remoting.heartbeat import ConsumerData, HeartbeatData, SubscriptionData, build_subscription_data

# The body the client sent before the client's and the broker's classes were merged.
GOLDEN_HEARTBEAT = (
    '{"clientID":"10.0.0.1@1#2","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
    '"consumeType":"CONSUME_PASSIVELY","groupName":"GID","messageModel":"CLUSTERING","subscriptionDataSet":['
    '{"classFilterMode":false,"codeSet":[2598919,2598920],"expressionType":"TAG","subString":"TagA || TagB",'
    '"subVersion":1700000000000,"tagsSet":["TagA","TagB"],"topic":"TopicTest"},'
    '{"classFilterMode":false,"codeSet":[],"expressionType":"SQL92","subString":"a > 1","subVersion":5,'
    '"tagsSet":[],"topic":"T2"}],"unitMode":false}],"heartbeatFingerprint":0,"producerDataSet":[{"groupName":"PID"}],'
    '"withoutSub":false}'
)


def _consumer() -> ConsumerData:
    tags = build_subscription_data("TopicTest", "TagA || TagB")
    tags.sub_version = 1700000000000
    sql = SubscriptionData("T2", "a > 1", "SQL92", sub_version=5)
    return ConsumerData("GID", "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET", [tags, sql])


def test_client_heartbeat_bytes_and_broker_reading() -> None:
    body = protocol.heartbeat_request("10.0.0.1@1#2", ["PID"], [_consumer()]).body
    assert body.decode() == GOLDEN_HEARTBEAT
    data = HeartbeatData.from_json(decode_json(body.decode()))
    assert data.client_id == "10.0.0.1@1#2" and data.producer_groups == ("PID",) and not data.without_sub
    (consumer,) = data.consumers
    assert consumer.group_name == "GID" and consumer.subscriptions == tuple(_consumer().subscriptions)


def test_subscription_defaults() -> None:
    before = SubscriptionData("T")
    assert (before.sub_string, before.expression_type, before.class_filter_mode) == ("*", "TAG", False)
    assert before.sub_version > 1_600_000_000_000  # Java's default: the time it was built
    assert SubscriptionData.from_json({"topic": "T"}).sub_version == 0  # a body without one: older than any
    assert SubscriptionData.from_json({"topic": "T", "subString": None}).sub_string == "*"


def test_malformed_heartbeat() -> None:
    with pytest.raises(RemoteProtocolError, match="malformed HeartbeatData body"):
        HeartbeatData.from_json({"consumerDataSet": []})
    with pytest.raises(RemoteProtocolError, match="subscription without a topic"):
        HeartbeatData.from_json({"clientID": "c", "consumerDataSet": [{"groupName": "g",
                                                                       "subscriptionDataSet": [{}]}]})
