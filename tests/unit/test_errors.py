"""The response-code table of broker/common/errors.py: one class per code the client treats specially."""

from __future__ import annotations

import pytest

from broker.common.errors import MQBrokerError, OffsetNotFound, RmqError, broker_error, for_code
from broker.remoting.codes import ResponseCode

# DefaultMQProducer.retryResponseCodes
JAVA_RETRY_RESPONSE_CODES = {
    ResponseCode.TOPIC_NOT_EXIST, ResponseCode.SERVICE_NOT_AVAILABLE, ResponseCode.SYSTEM_ERROR,
    ResponseCode.SYSTEM_BUSY, ResponseCode.NO_PERMISSION, ResponseCode.NO_BUYER_ID, ResponseCode.NOT_IN_CURRENT_UNIT,
    ResponseCode.GO_AWAY,
}


@pytest.mark.parametrize("code", list(ResponseCode))
def test_retriable_codes_are_javas(code: ResponseCode) -> None:
    cls = for_code(code)
    assert issubclass(cls, MQBrokerError)
    assert cls.retriable == (code in JAVA_RETRY_RESPONSE_CODES)
    if cls is not MQBrokerError:
        assert cls.code == code


def test_broker_error_keeps_its_text_and_fields() -> None:
    err = broker_error(ResponseCode.SYSTEM_BUSY, "[PC_SYNCHRONIZED]broker busy", "127.0.0.1:10911")
    assert isinstance(err, MQBrokerError) and isinstance(err, RmqError) and err.retriable
    assert str(err) == "CODE: 2  DESC: [PC_SYNCHRONIZED]broker busy BROKER: 127.0.0.1:10911"
    assert (err.code, err.remark, err.address) == (2, "[PC_SYNCHRONIZED]broker busy", "127.0.0.1:10911")
    plain = broker_error(ResponseCode.MESSAGE_ILLEGAL, None)
    assert type(plain) is MQBrokerError and not plain.retriable and str(plain) == "CODE: 13  DESC: None"
    unknown = broker_error(12345, "new code")
    assert type(unknown) is MQBrokerError and unknown.code == 12345


def test_query_not_found_is_offset_not_found() -> None:
    err = broker_error(ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe", "a:1")
    assert isinstance(err, OffsetNotFound) and not err.retriable and err.code == ResponseCode.QUERY_NOT_FOUND
