"""The send processor's fast path (broker/server/processors/send_record.py) against its general path, on a real
BrokerController over loopback: each single send of the common shape is sent twice, once taken by the fast path and
once with it switched off, and both store the same record (but for what only the put decides: queue offset,
physical offset, store time) and get the same answer (but for the msgId and queueOffset, which name where each
landed). Sends out of the common shape are left to the general path."""

from __future__ import annotations

from broker.common.message import decode_offset_msg_id, encode_properties
from broker.common.record import decode_record, stamp_record
from broker.common.topic import PERM_READ, PERM_WRITE, TopicConfig, TopicFilterType
from broker.remoting.codes import RequestCode, ResponseCode, SerializeType
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.headers import SendMessageRequestHeader
from broker.server.config_update import apply_update
from broker.server.processors import send_record
from tests.helpers import run
from tests.integration.send_pull import Broker, running_broker

V2 = RequestCode.SEND_MESSAGE_V2
COMMON = {"KEYS": "order-1", "TAGS": "TagA", "WAIT": "true", "UNIQ_KEY": "AC1100020001", "userProp": "v"}
LONG_TOPIC = "T" * 127  # the longest a topic may be

# (topic, properties or their raw text, send fields)
TAKEN = [
    ("Plain", COMMON, {"queue_id": 1, "flag": 3}),
    ("Plain", COMMON, {"code": RequestCode.SEND_MESSAGE}),
    ("Plain", COMMON, {"serialize_type": SerializeType.ROCKETMQ}),
    ("Plain", "UNIQ_KEY\x01u1\x02KEYS\x01a\x02KEYS\x01b\x02EMPTY\x01\x02\x01x\x02VAL\x01é€\x01\x02", {}),
    ("Plain", {"UNIQ_KEY": "u2", "MSG_REGION": "theirs", "CLUSTER": "theirs", "TRACE_ON": "false"}, {}),
    ("Plain", {"UNIQ_KEY": "u3", **{f"user{i}": str(i) for i in range(40)}}, {"reconsume_times": 2}),
    ("Plain", {"UNIQ_KEY": "u4"}, {"sys_flag": 1, "born_timestamp": 0}),
    ("MultiTag", COMMON, {"queue_id": 2}),
    ("Ordered", COMMON, {"queue_id": 3}),
    (LONG_TOPIC, COMMON, {}),
]

# sends the general path takes, and why
GENERAL = [
    ("Plain", {**COMMON, "DELAY": "1"}, {}, "delayed"),
    ("Plain", {**COMMON, "TRAN_MSG": "true"}, {"sys_flag": 4}, "a transaction half"),
    ("Plain", {"KEYS": "k"}, {}, "no UNIQ_KEY: the broker makes one"),
    ("Plain", COMMON, {"queue_id": 8}, "past the topic's queues"),
    ("Plain", COMMON, {"code": RequestCode.SEND_BATCH_MESSAGE, "batch": False}, "a batch's code"),
    ("Compacted", {"UNIQ_KEY": "u"}, {}, "compacted: KEYS required"),
    ("%RETRY%CG", COMMON, {"reconsume_times": 1}, "a retry topic"),
    ("NotYet", COMMON, {}, "not created yet"),
]


async def send(b: Broker, topic: str, props: dict[str, str] | str, fields: dict) -> RemotingCommand:
    """A single send as Broker.send makes it, ``props`` a dict or the PROPERTIES text as it is."""
    fields = {"queue_id": 0, "sys_flag": 0, "born_timestamp": 1_700_000_000_000, "flag": 0, **fields}
    code, serialize_type = fields.pop("code", V2), fields.pop("serialize_type", SerializeType.JSON)
    header = SendMessageRequestHeader(
        producer_group="PG", topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
        properties=props if isinstance(props, str) else encode_properties(props), **fields)
    wire = None if code == RequestCode.SEND_MESSAGE else SendMessageRequestHeader.V2_WIRE
    body = b"body of " + topic.encode()
    return await b.invoke(create_request(code, header.to_ext(wire), body, serialize_type=serialize_type))


def stored(b: Broker, response: RemotingCommand) -> bytes:
    """The record a send stored, with its put's fields zeroed."""
    _, offset = decode_offset_msg_id(response.ext_fields["msgId"])
    record = b.controller.store.lookup_message(offset)
    raw = b.controller.store.commit_log.read(offset, record.store_size)
    assert decode_record(raw).queue_offset == int(response.ext_fields["queueOffset"])
    return stamp_record(raw, 0, 0, 0, record.store_host)


def test_the_fast_path_stores_and_answers_as_the_general_path(tmp_path, monkeypatch):
    async def scenario() -> None:
        async with running_broker(tmp_path) as b:
            topics = b.controller.topic_config_manager
            topics.update_topic_config(TopicConfig("Plain", 8, 8))
            topics.update_topic_config(TopicConfig("MultiTag", 4, 4, topic_filter_type=TopicFilterType.MULTI_TAG))
            topics.update_topic_config(TopicConfig("Ordered", 4, 4, order=True))
            topics.update_topic_config(TopicConfig(LONG_TOPIC, 4, 4))
            topics.update_topic_config(TopicConfig("Compacted", 4, 4, attributes={"cleanup.policy": "COMPACTION"}))
            sends = b.controller.processors["send"].single_sends
            taken: list[tuple[str, dict | str, dict]] = []
            records = sends.record_of

            def noting(remote_address, request):
                made = records(remote_address, request)
                taken.append(made is not None)
                return made

            monkeypatch.setattr(sends, "record_of", noting)
            fast = [await send(b, *case) for case in TAKEN]
            assert taken == [True] * len(TAKEN)
            for topic, props, fields, why in GENERAL:
                taken.clear()
                await send(b, topic, props, fields)
                assert taken == [False], why
            config = (b.controller.broker_config, b.controller.store_config)
            apply_update(*config, {"brokerPermission": str(PERM_READ)})  # sends to order topics are refused
            taken.clear()
            refused = await send(b, "Ordered", COMMON, {})
            assert (taken, refused.code) == ([False], ResponseCode.NO_PERMISSION)
            apply_update(*config, {"brokerPermission": str(PERM_READ | PERM_WRITE)})
            monkeypatch.setattr(send_record, "send_record", lambda *args: None)  # the general path alone
            general = [await send(b, *case) for case in TAKEN]
            for case, ours, theirs in zip(TAKEN, fast, general, strict=True):
                assert (ours.code, ours.remark) == (theirs.code, theirs.remark) == (ResponseCode.SUCCESS, None)
                moved = {"msgId", "queueOffset"}
                assert {k: v for k, v in ours.ext_fields.items() if k not in moved} == {
                    k: v for k, v in theirs.ext_fields.items() if k not in moved}, case
                assert list(ours.ext_fields) == list(theirs.ext_fields)
                assert stored(b, ours) == stored(b, theirs), case

    run(scenario())
