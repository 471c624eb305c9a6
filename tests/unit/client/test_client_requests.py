"""Requests built once in broker/client/protocol.py and shared by the client, the blocking client, the transactional
producer, the sink's templates and mqadmin: the extFields each sends, in order."""

from __future__ import annotations

from broker.client import protocol
from broker.client.message import MessageQueue
from broker.client.transaction_protocol import LocalTransactionState, end_transaction_template, half_message_template
from broker.common.topic import TopicConfig
from broker.remoting.codes import RequestCode


def test_create_topic_request_carries_what_java_createtopic_sets() -> None:
    config = TopicConfig("T", 3, 5, 6, topic_sys_flag=1, order=True, attributes={"+queue.type": "BatchCQ"})
    request = protocol.create_topic_request(config)
    assert request.code == RequestCode.UPDATE_AND_CREATE_TOPIC
    assert list(request.ext_fields.items()) == [
        ("topic", "T"), ("defaultTopic", "TBW102"), ("readQueueNums", "3"), ("writeQueueNums", "5"), ("perm", "6"),
        ("topicFilterType", "SINGLE_TAG"), ("order", "true"), ("topicSysFlag", "1"),
        ("attributes", "+queue.type=BatchCQ"), ("force", "false")]


def test_end_transaction_request_and_its_template_agree() -> None:
    request = protocol.end_transaction_request(
        "pg", topic="T", broker_name="broker-a", msg_id="U1", commit_log_offset=100, queue_offset=7,
        transaction_id="U1", commit_or_rollback=LocalTransactionState.COMMIT_MESSAGE.transaction_type,
        remark="why")
    assert request.code == RequestCode.END_TRANSACTION and request.remark == "why"
    assert list(request.ext_fields) == ["producerGroup", "tranStateTableOffset", "commitLogOffset",
                                        "commitOrRollback", "msgId", "topic", "fromTransactionCheck",
                                        "transactionId", "bname"]
    template = end_transaction_template("pg", "T", "broker-a", LocalTransactionState.COMMIT_MESSAGE)
    assert template.open_fields == ["tranStateTableOffset", "commitLogOffset", "msgId", "transactionId"]
    half = half_message_template("pg", "T", "broker-a")
    assert half.open_fields == ["e", "f", "g", "i"] and half.code == RequestCode.SEND_MESSAGE_V2


def test_a_queue_known_only_by_address_sends_no_bname() -> None:
    named, unnamed = MessageQueue("T", "broker-a", 1), MessageQueue("T", "", 1)
    assert protocol.update_consumer_offset_request("g", named, 5).ext_fields["bname"] == "broker-a"
    assert "bname" not in protocol.update_consumer_offset_request("g", unnamed, 5).ext_fields
    deprecated = protocol.search_offset_request(unnamed, 123, None).ext_fields
    assert deprecated == {"topic": "T", "queueId": "1", "timestamp": "123"}
    assert protocol.search_offset_request(named, 123).ext_fields["boundaryType"] == "LOWER"


def test_nameserver_requests_without_header() -> None:
    assert protocol.cluster_info_request().code == RequestCode.GET_BROKER_CLUSTER_INFO
    assert protocol.topic_list_request().code == RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER
    assert not protocol.cluster_info_request().ext_fields
