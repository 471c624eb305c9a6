"""The code tables against the values named in anchors.md §5.2-5.3. The exact 5.5.1 tables are compared with
RocketMQ's own classes by the Java oracle (test_remoting_java_oracle.py)."""

from __future__ import annotations

from broker.remoting.codes import LanguageCode, RequestCode, ResponseCode, SerializeType


def test_request_codes_named_in_the_anchors() -> None:
    expected = {
        "SEND_MESSAGE": 10, "PULL_MESSAGE": 11, "QUERY_MESSAGE": 12, "QUERY_CONSUMER_OFFSET": 14,
        "UPDATE_CONSUMER_OFFSET": 15, "UPDATE_AND_CREATE_TOPIC": 17, "GET_ALL_TOPIC_CONFIG": 21,
        "SEARCH_OFFSET_BY_TIMESTAMP": 29, "GET_MAX_OFFSET": 30, "GET_MIN_OFFSET": 31, "HEART_BEAT": 34,
        "UNREGISTER_CLIENT": 35, "CONSUMER_SEND_MSG_BACK": 36, "END_TRANSACTION": 37,
        "GET_CONSUMER_LIST_BY_GROUP": 38, "CHECK_TRANSACTION_STATE": 39, "NOTIFY_CONSUMER_IDS_CHANGED": 40,
        "REGISTER_BROKER": 103, "GET_ROUTEINFO_BY_TOPIC": 105, "GET_BROKER_CLUSTER_INFO": 106,
        "GET_CONSUME_STATS": 208, "DELETE_TOPIC_IN_BROKER": 215, "CONSUME_MESSAGE_DIRECTLY": 309,
        "SEND_MESSAGE_V2": 310, "SEND_BATCH_MESSAGE": 320, "SEND_REPLY_MESSAGE": 324, "SEND_REPLY_MESSAGE_V2": 325,
        "GET_TOPIC_CONFIG": 351, "LITE_PULL_MESSAGE": 361, "QUERY_ASSIGNMENT": 400, "BROKER_HEARTBEAT": 904,
        "POP_MESSAGE": 200050, "ACK_MESSAGE": 200051, "CHANGE_MESSAGE_INVISIBLETIME": 200053, "NOTIFICATION": 200054,
    }  # fmt: skip
    assert {name: RequestCode[name].value for name in expected} == expected


def test_response_codes_include_the_remoting_sys_codes() -> None:
    assert [ResponseCode(v).name for v in range(5)] == [
        "SUCCESS", "SYSTEM_ERROR", "SYSTEM_BUSY", "REQUEST_CODE_NOT_SUPPORTED", "TRANSACTION_FAILED",
    ]  # fmt: skip
    assert ResponseCode.TOPIC_NOT_EXIST == 17
    assert ResponseCode.TRANSACTION_STATE_UNKNOW == 202
    assert ResponseCode.NO_MESSAGE == 208
    assert ResponseCode.RPC_TIME_OUT == -1006
    assert ResponseCode.GO_AWAY == 1500
    assert ResponseCode.POLICY_NOT_EXIST == 3002


def test_table_sizes_and_no_aliases() -> None:
    assert len(RequestCode.__members__) == len(RequestCode) == 171
    assert len(ResponseCode.__members__) == len(ResponseCode) == 68
    assert [lc.value for lc in LanguageCode] == list(range(14))
    assert (SerializeType.JSON, SerializeType.ROCKETMQ) == (0, 1)
