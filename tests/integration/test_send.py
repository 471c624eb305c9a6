"""SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE against a real BrokerController on 127.0.0.1, driven by our
RemotingClient: what is stored (as Java stores it), Java's response codes and remarks for what is refused, retries
past their limit going to the DLQ, flow control, and the batch body.
"""

from __future__ import annotations

import asyncio

import pytest

from broker.common.errors import CorruptRecord
from broker.common.message import format_host
from broker.common.message_batch import BatchMessage, decode_batch_body, encode_batch_body
from broker.remoting.codes import RequestCode, ResponseCode, SerializeType
from broker.remoting.command import create_request
from broker.server.processors import send
from tests.helpers import run
from tests.integration.send_pull import (
    FAQ_HINT,
    ILLEGAL_REMARK,
    records,
    running_broker,
)


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
