"""Trace records: the golden strings Apache 5.5.0's TraceDataEncoder wrote, decoded back, and the trace keys."""

from __future__ import annotations

import logging

import pytest

from broker.client.blocking_trace import BlockingTraceDispatcher
from broker.client.message import Message, MessageQueue, SendResult, SendStatus
from broker.client.trace import (
    ConsumeReturnType,
    MessageType,
    TraceBean,
    TraceContext,
    TraceError,
    TraceType,
    decode_trace_data,
    encode_trace_context,
    trace_message_keys,
    trace_views,
)
from broker.client.trace_batch import QUEUE_CAPACITY, TraceDispatcherType
from broker.client.trace_dispatcher import AsyncTraceDispatcher
from broker.client.trace_hooks import message_type_of

MSG_ID = "7F0000011F9018B4AAC2745E5A0A0000"
PUB = (f"Pub\x011700000000000\x01DefaultRegion\x01PG\x01TopicTest\x01{MSG_ID}\x01TagA\x01order-1 order-2"
       "\x01127.0.0.1:10911\x0114\x013\x010\x017F00000100002A9F0000000000000000\x01true\x02")
SUB_AFTER = "SubAfter\x01REQ\x01ID\x015\x01false\x01k\x014\x012\x01CG\x02"


def _pub() -> TraceContext:
    bean = TraceBean(topic="TopicTest", msg_id=MSG_ID, tags="TagA", keys="order-1 order-2",
                     store_host="127.0.0.1:10911", body_length=14,
                     offset_msg_id="7F00000100002A9F0000000000000000")
    return TraceContext(TraceType.Pub, 1700000000000, "DefaultRegion", "PG", cost_time=3, beans=[bean])


def test_pub_record_and_keys_as_java_writes_them() -> None:
    transfer = encode_trace_context(_pub())
    assert transfer.data == PUB
    assert trace_message_keys([transfer]) == f"{MSG_ID} order-1 order-2"  # Java HashSet order
    null_fields = TraceContext(TraceType.Pub, 1, "R", "G", beans=[
        TraceBean(topic="T", msg_id="ID", tags=None, keys=None, store_host="10.0.0.1")])
    assert encode_trace_context(null_fields).data == (
        "Pub\x011\x01R\x01G\x01T\x01ID\x01null\x01null\x0110.0.0.1\x010\x010\x010\x01\x01true\x02")
    assert encode_trace_context(null_fields).keys == ("ID",)


def test_sub_after_and_its_cloud_form() -> None:
    ctx = TraceContext(TraceType.SubAfter, 2, group_name="CG", cost_time=5, success=False, request_id="REQ",
                       context_code=ConsumeReturnType.FAILED, beans=[TraceBean(msg_id="ID", keys="k")])
    assert encode_trace_context(ctx).data == SUB_AFTER
    ctx.cloud = True
    assert encode_trace_context(ctx).data == "SubAfter\x01REQ\x01ID\x015\x01false\x01k\x014\x01\x02"
    (cloud,) = decode_trace_data(encode_trace_context(ctx).data)
    assert (cloud.context_code, cloud.group_name) == (4, "")  # String.split drops the empty last field


def test_sub_before_one_record_per_message() -> None:
    ctx = TraceContext(TraceType.SubBefore, 7, "DefaultRegion", "CG", request_id="REQ",
                       beans=[TraceBean(msg_id="A", retry_times=1, keys=None), TraceBean(msg_id="B", keys="x y")])
    transfer = encode_trace_context(ctx)
    assert transfer.data == ("SubBefore\x017\x01DefaultRegion\x01CG\x01REQ\x01A\x011\x01null\x02"
                             "SubBefore\x017\x01DefaultRegion\x01CG\x01REQ\x01B\x010\x01x y\x02")
    assert transfer.keys == ("A", "B", "x", "y")
    assert [(c.request_id, c.beans[0].msg_id, c.beans[0].retry_times) for c in decode_trace_data(transfer.data)] == [
        ("REQ", "A", 1), ("REQ", "B", 0)]


def test_end_transaction_round_trip() -> None:
    bean = TraceBean(topic="T", msg_id="ID", tags=None, keys="k", store_host="127.0.0.1:10911",
                     msg_type=MessageType.Trans_msg_Commit, transaction_id="TX", transaction_state="COMMIT_MESSAGE",
                     from_transaction_check=True)
    data = encode_trace_context(TraceContext(TraceType.EndTransaction, 9, "R", "PG", beans=[bean])).data
    assert data == "EndTransaction\x019\x01R\x01PG\x01T\x01ID\x01null\x01k\x01127.0.0.1:10911\x012\x01TX" \
                   "\x01COMMIT_MESSAGE\x01true\x02"
    (back,) = decode_trace_data(data)
    assert back.beans[0].transaction_state == "COMMIT_MESSAGE" and back.beans[0].from_transaction_check


def test_decode_a_body_of_several_records_and_views() -> None:
    contexts = decode_trace_data(PUB + SUB_AFTER)
    assert [c.trace_type for c in contexts] == [TraceType.Pub, TraceType.SubAfter]
    pub, sub = contexts
    assert (pub.time_stamp, pub.cost_time, pub.beans[0].body_length, pub.beans[0].msg_type, pub.success) == (
        1700000000000, 3, 14, MessageType.Normal_Msg, True)
    assert pub.beans[0].offset_msg_id == "7F00000100002A9F0000000000000000"
    assert (sub.time_stamp, sub.group_name, sub.context_code, sub.success) == (2, "CG", 4, False)
    views = trace_views(MSG_ID, (PUB + SUB_AFTER).encode(), "10.1.1.1")
    assert [(v.trace_type, v.group_name, v.client_host, v.status) for v in views] == [
        (TraceType.Pub, "PG", "10.1.1.1", "success")]


def test_a_damaged_record_is_named() -> None:
    with pytest.raises(TraceError, match="Pub"):
        decode_trace_data("Pub\x01notanumber\x01R\x02")
    assert decode_trace_data("Unknown\x01x\x02") == []  # Java skips types it does not know


# -- the dispatcher's hooks, without servers ---------------------------------------------------------------------------


def _dispatcher(capacity: int = QUEUE_CAPACITY) -> AsyncTraceDispatcher:
    return AsyncTraceDispatcher("PG", TraceDispatcherType.PRODUCE, None, "127.0.0.1:9876", queue_capacity=capacity)


def _result(*, trace_on: bool = True) -> SendResult:
    return SendResult(SendStatus.SEND_OK, "UNIQ", "OFFSET", MessageQueue("T", "broker-a", 0), 7, None, "R", trace_on)


@pytest.mark.parametrize("kind", [AsyncTraceDispatcher, BlockingTraceDispatcher])
def test_a_full_queue_drops_with_a_log_line(kind: type[AsyncTraceDispatcher | BlockingTraceDispatcher],
                                            caplog: pytest.LogCaptureFixture) -> None:
    """Both dispatchers (not started): a full batch wakes the worker, a full queue drops and counts, Apache's line."""
    dispatcher = kind("PG", TraceDispatcherType.PRODUCE, None, "127.0.0.1:9876", batch_num=2, queue_capacity=2)
    contexts = [TraceContext(TraceType.Pub, beans=[TraceBean()]) for _ in range(3)]
    with caplog.at_level(logging.INFO, logger="broker.client.trace_hooks"):
        assert dispatcher.append(contexts[0]) and not dispatcher._wakeup.is_set()
        assert dispatcher.append(contexts[1]) and dispatcher._wakeup.is_set()
        assert not dispatcher.append(contexts[2])
    assert dispatcher.discard_count == 1
    assert "buffer full1" in caplog.text


def test_pub_hook_fills_the_record_from_the_answer() -> None:
    dispatcher = _dispatcher()
    assert dispatcher.producer_group.startswith("_INNER_TRACE_PRODUCER-PG-PRODUCE-")
    assert dispatcher.trace_topic == "RMQ_SYS_TRACE_TOPIC"
    ctx = dispatcher.send_before("PG", Message("T", b"abc", keys="k1 k2"), "127.0.0.1:10911", 3)
    assert ctx is not None
    dispatcher.send_after(ctx, _result())
    data = encode_trace_context(ctx).data.split("\x01")
    assert data[2:10] == ["R", "PG", "T", "UNIQ", "null", "k1 k2", "127.0.0.1:10911", "3"]
    assert data[11:] == ["0", "OFFSET", "true\x02"]
    assert dispatcher.send_before("PG", Message("RMQ_SYS_TRACE_TOPIC", b"x"), "h", 1) is None  # no trace of traces


def test_no_pub_when_the_broker_turns_trace_off_or_no_answer_came() -> None:
    dispatcher = _dispatcher(capacity=1)
    ctx = dispatcher.send_before("PG", Message("T", b"abc"), "h", 3)
    dispatcher.send_after(ctx, _result(trace_on=False))
    dispatcher.send_after(ctx, None)  # oneway
    assert dispatcher.append(TraceContext(TraceType.Pub, beans=[TraceBean()]))  # the queue is still empty


def test_message_types() -> None:
    assert message_type_of(Message("T", b"x")) is MessageType.Normal_Msg
    assert message_type_of(Message("T", b"x", properties={"TRAN_MSG": "true"})) is MessageType.Trans_Msg_Half
    assert message_type_of(Message("T", b"x", properties={"DELAY": "3"})) is MessageType.Delay_Msg
    assert message_type_of(Message("T", b"x", properties={"TIMER_DELAY_SEC": "3"})) is MessageType.Delay_Msg
