"""GET_CONSUMER_RUNNING_INFO as a broker sends it to a client's connection (the fakes' broker side of it), and the
ConsumerRunningInfo body's parts on their own."""

from __future__ import annotations

import asyncio
import time

from broker.client.consumer import LitePullConfig, LitePullConsumer
from broker.client.instance import ClientConfig
from broker.client.message import Message, MessageExt, MessageQueue
from broker.client.offsets import OrderlyProcessQueue
from broker.client.producer import Producer
from broker.client.running_info import CLIENT_VERSION_DESC, process_queue_info
from broker.common.fastjson import decode_json
from broker.common.mq_version import version_desc
from broker.remoting.admin_bodies import mq_key
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import REMOTING_VERSION, RemotingCommand, create_request
from tests.unit.client.fakes import FakeBroker, FakeNamesrv, run

TOPIC = "T"
PROCESS_QUEUE_INFO_FIELDS = ["cachedMsgCount", "cachedMsgMaxOffset", "cachedMsgMinOffset", "cachedMsgSizeInMiB",
                             "commitOffset", "droped", "lastConsumeTimestamp", "lastLockTimestamp",
                             "lastPullTimestamp", "locked", "transactionMsgCount", "transactionMsgMaxOffset",
                             "transactionMsgMinOffset", "tryUnlockTimes"]


def _ext(offset: int) -> MessageExt:
    return MessageExt(TOPIC, b"x" * 10, 0, {}, 0, offset, offset * 100, 0, 0, "1.1.1.1:1", 0, "2.2.2.2:2", 0, 0, 0, 0,
                      "ID")


async def _ask(broker: FakeBroker, group: str, ext: dict[str, str]) -> RemotingCommand:
    """What a broker's callConsumer does: the request on the connection the group's client heartbeats on."""
    deadline = time.monotonic() + 10
    while not broker.groups.get(group):
        assert time.monotonic() < deadline, f"no heartbeat of group {group}"
        await asyncio.sleep(0.02)
    (conn,) = broker.groups[group]
    return await conn.invoke(create_request(RequestCode.GET_CONSUMER_RUNNING_INFO, ext), 3000)


def test_lite_pull_consumer_answers_with_its_queues_and_offsets() -> None:
    async def scenario() -> None:
        namesrv, broker = await FakeNamesrv().start(), await FakeBroker("broker-a").start()
        namesrv.routes[TOPIC] = [broker]
        namesrv_addr = namesrv.addr
        client = ClientConfig(namesrv_addr=namesrv.addr, client_ip="10.0.0.9", instance_name="info")
        try:
            async with Producer("pg", client_config=ClientConfig(namesrv_addr=namesrv.addr)) as producer:
                for i in range(3):
                    await producer.send(Message(TOPIC, b"m%d" % i), MessageQueue(TOPIC, "broker-a", 0))
            config = LitePullConfig(auto_commit=False)
            async with LitePullConsumer("cg", config=config, client_config=client) as consumer:
                queues = (await consumer.fetch_message_queues(TOPIC))[:2]
                consumer.assign(queues)
                await consumer.seek_to_begin(queues[0])
                got: list[MessageExt] = []
                while len(got) < 3:
                    got += await consumer.poll(2000)
                await consumer.commit({queues[0]: 3})
                ext = {"consumerGroup": "cg", "clientId": consumer.instance.client_id, "jstackEnable": "true"}
                response = await _ask(broker, "cg", ext)
                missing = await _ask(broker, "cg", {**ext, "consumerGroup": "other"})
        finally:
            await broker.stop()
            await namesrv.stop()
        assert response.code == ResponseCode.SUCCESS, response.remark
        info = decode_json(response.body.decode())
        assert list(info) == ["jstack", "mqPopTable", "mqTable", "properties", "statusTable", "subscriptionSet",
                              "userConsumerInfo"]
        props = info["properties"]
        assert {k: props[k] for k in ("PROP_CONSUME_TYPE", "PROP_CLIENT_VERSION", "PROP_NAMESERVER_ADDR",
                                      "consumerGroup", "messageModel", "clientIP", "instanceName", "autoCommit")} == {
            "PROP_CONSUME_TYPE": "CONSUME_ACTIVELY", "PROP_CLIENT_VERSION": "V5_5_1",
            "PROP_NAMESERVER_ADDR": f"{namesrv_addr};", "consumerGroup": "cg", "messageModel": "CLUSTERING",
            "clientIP": "10.0.0.9", "instanceName": "info", "autoCommit": "false"}
        assert props["PROP_CONSUMER_START_TIMESTAMP"] == str(consumer.consumer_start_timestamp)
        assert info["subscriptionSet"] == []  # assigned queues are no subscription
        table = {mq_key(k): v for k, v in info["mqTable"].items()}
        assert list(table) == queues
        assert [table[mq]["commitOffset"] for mq in queues] == [3, -1]
        assert all(list(v) == PROCESS_QUEUE_INFO_FIELDS and v["droped"] is False for v in table.values())
        assert table[queues[0]]["lastPullTimestamp"] > 0
        assert "TID: " in info["jstack"] and "pull-MessageQueue [topic=T, brokerName=broker-a, queueId=0]" in \
            info["jstack"]
        assert (missing.code, missing.remark) == (ResponseCode.SYSTEM_ERROR,
                                                  "The Consumer Group <other> not exist in this consumer")

    run(scenario())


def test_process_queue_info_of_an_orderly_queue() -> None:
    pq = OrderlyProcessQueue()
    pq.put_messages([_ext(offset) for offset in (5, 6, 7, 8)])
    assert [m.queue_offset for m in pq.take_messages(2)] == [5, 6]
    pq.locked, pq.last_lock_timestamp = True, time.monotonic() - 2.0
    info = process_queue_info(pq, 5)
    assert {k: info[k] for k in ("commitOffset", "cachedMsgCount", "cachedMsgMinOffset", "cachedMsgMaxOffset",
                                 "transactionMsgCount", "transactionMsgMinOffset", "transactionMsgMaxOffset",
                                 "locked")} == {
        "commitOffset": 5, "cachedMsgCount": 2, "cachedMsgMinOffset": 7, "cachedMsgMaxOffset": 8,
        "transactionMsgCount": 2, "transactionMsgMinOffset": 5, "transactionMsgMaxOffset": 6, "locked": True}
    assert abs(info["lastLockTimestamp"] - (time.time() - 2.0) * 1000) < 1000
    assert CLIENT_VERSION_DESC == version_desc(REMOTING_VERSION)
