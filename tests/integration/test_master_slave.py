"""A master and its slaves as real processes (ours): what a slave copies from its master (SlaveSynchronize), what it
refuses (every write, with Apache's codes and remarks), what it serves (pulls with slaveReadEnable, queries, admin
reads), and the services it does not run (delayed delivery, transaction checks).

Replication of the CommitLog is not exercised here: a slave's messages come from a copy of a master's store.
Slaves sync every ``slaveSynchronizeInterval`` = 1 s instead of Apache's 60 s.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest

from broker.client import Message
from broker.client.blocking import BlockingRemotingClient
from broker.client.protocol import (
    create_topic_request,
    end_transaction_request,
    heartbeat_request,
    pull_message_request,
    query_consumer_offset_request,
    send_message_header,
    send_message_request,
    update_consumer_offset_request,
)
from broker.common.fastjson import decode_json, encode_json
from broker.common.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    MessageQueue,
    decode_offset_msg_id,
)
from broker.common.record import decode_record
from broker.common.topic import TopicConfig
from broker.remoting.client import RemotingClient
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.headers import ConsumerSendMsgBackRequestHeader, PullMessageResponseHeader
from broker.remoting.heartbeat import build_subscription_data
from broker.remoting.server import REJECT_REQUEST_REMARK
from broker.remoting.subscription import SubscriptionGroupConfig
from tests.helpers import eventually, mqadmin_ok, run, unique_topic, wait_until
from tests.integration.cluster import ServerProcess, start_broker, start_namesrv

BROKER = "broker-a"
SYNC_MS = 1000  # slaveSynchronizeInterval
SYNCED_S = 15.0  # how long a change may take to reach a slave: a few syncs


@dataclass
class Group:
    namesrv: ServerProcess
    master: ServerProcess
    slave: ServerProcess  # slaveReadEnable=false
    reader: ServerProcess  # slaveReadEnable=true
    home: Path


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Group]:
    home = tmp_path_factory.mktemp("master-slave")
    with contextlib.ExitStack() as stack:
        namesrv = stack.enter_context(start_namesrv(home / "namesrv"))
        master = stack.enter_context(start_broker(home / "master", namesrv.addr, slaveSynchronizeInterval=SYNC_MS))
        slave = stack.enter_context(start_broker(home / "slave", namesrv.addr, brokerId=1, brokerRole="SLAVE",
                                                 slaveSynchronizeInterval=SYNC_MS))
        reader = stack.enter_context(start_broker(home / "reader", namesrv.addr, brokerId=2, brokerRole="SLAVE",
                                                  slaveReadEnable=True, slaveSynchronizeInterval=SYNC_MS))
        yield Group(namesrv, master, slave, reader, home)


def call(addr: str, request: RemotingCommand) -> RemotingCommand:
    with BlockingRemotingClient(addr) as client:
        return client.invoke(request, 5000)


def body(addr: str, code: RequestCode) -> dict:
    response = call(addr, create_request(code))
    assert response.code == ResponseCode.SUCCESS, response.remark
    return decode_json(response.body.decode())


def consumer_offset(addr: str, group_name: str, mq: MessageQueue) -> int | None:
    response = call(addr, query_consumer_offset_request(group_name, mq))
    return int(response.ext_fields["offset"]) if response.code == ResponseCode.SUCCESS else None


def create_on(addr: str, topic: str, queues: int = 2) -> None:
    assert call(addr, create_topic_request(TopicConfig(topic, queues, queues))).code == ResponseCode.SUCCESS


def create_group_on(addr: str, group_name: str) -> None:
    config = encode_json(SubscriptionGroupConfig(group_name, retry_max_times=5).to_json()).encode()
    created = call(addr, create_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=config))
    assert created.code == ResponseCode.SUCCESS


def send(addr: str, msg: Message, queue_id: int = 0, sys_flag: int = 0, *, v2: bool = True) -> RemotingCommand:
    header = send_message_header("producer", msg, MessageQueue(msg.topic, BROKER, queue_id), sys_flag, batch=False)
    return call(addr, send_message_request(header, msg.body, v2=v2))


def max_offset(addr: str, topic: str, queue_id: int) -> int:
    response = call(addr, create_request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)}))
    return int(response.ext_fields["offset"])


def has_topic(addr: str, topic: str) -> bool:
    return topic in body(addr, RequestCode.GET_ALL_TOPIC_CONFIG)["topicConfigTable"]


def has_group(addr: str, group_name: str) -> bool:
    return group_name in body(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)["subscriptionGroupTable"]


def commit_log_max_offset(addr: str) -> int:
    return int(body(addr, RequestCode.GET_BROKER_RUNTIME_INFO)["table"]["commitLogMaxOffset"])


# -- what a slave copies ----------------------------------------------------------------------------------------------


def test_topics_groups_and_offsets_made_on_the_master_reach_the_slaves(group: Group, request) -> None:
    topic = unique_topic(request.node, "Synced")
    readers = f"{topic}_readers"
    mq = MessageQueue(topic, BROKER, 1)
    create_on(group.master.addr, topic)
    create_group_on(group.master.addr, readers)
    assert call(group.master.addr, update_consumer_offset_request(readers, mq, 42)).code == ResponseCode.SUCCESS
    for addr in (group.slave.addr, group.reader.addr):
        wait_until(f"{topic} on {addr}", partial(has_topic, addr, topic), SYNCED_S)
        wait_until(f"{readers} on {addr}", partial(has_group, addr, readers), SYNCED_S)
        wait_until(f"the offset on {addr}", lambda a=addr: consumer_offset(a, readers, mq) == 42, SYNCED_S)
    deleted = call(group.master.addr, create_request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic}))
    assert deleted.code == ResponseCode.SUCCESS
    wait_until(f"{topic} deleted on the slave", lambda: not has_topic(group.slave.addr, topic), SYNCED_S)


def test_delay_offsets_reach_the_slave(group: Group, request) -> None:
    topic = unique_topic(request.node, "Delayed")
    create_on(group.master.addr, topic)
    sent = send(group.master.addr, Message(topic, b"later", properties={PROPERTY_DELAY_TIME_LEVEL: "1"}))
    assert sent.code == ResponseCode.SUCCESS
    wait_until("the master delivered it", lambda: max_offset(group.master.addr, topic, 0) == 1)
    wait_until("the slave's delayOffset.json is the master's", lambda: (
        body(group.slave.addr, RequestCode.GET_ALL_DELAY_OFFSET)["offsetTable"]
        == body(group.master.addr, RequestCode.GET_ALL_DELAY_OFFSET)["offsetTable"]), SYNCED_S)
    assert int(body(group.slave.addr, RequestCode.GET_ALL_DELAY_OFFSET)["offsetTable"]["1"]) >= 1
    assert (group.slave.home / "store" / "config" / "delayOffset.json").exists()


# -- what a slave refuses, and what it accepts -----------------------------------------------------------------------


def test_a_slave_refuses_every_write_with_apaches_answers_and_stores_nothing(group: Group, request) -> None:
    topic = unique_topic(request.node, "Refused")
    readers = f"{topic}_g"
    create_on(group.master.addr, topic)
    create_group_on(group.master.addr, readers)
    wait_until("the topic synced", partial(has_topic, group.slave.addr, topic), SYNCED_S)
    wait_until("the group synced", partial(has_group, group.slave.addr, readers), SYNCED_S)
    slave = group.slave.addr
    before = commit_log_max_offset(slave)
    busy = (ResponseCode.SYSTEM_BUSY, REJECT_REQUEST_REMARK)
    for v2 in (True, False):
        response = send(slave, Message(topic, b"no"), v2=v2)
        assert (response.code, response.remark) == busy
    never = f"{topic}_auto"  # no topic is auto-created either
    auto = send(slave, Message(never, b"no"))
    assert (auto.code, auto.remark) == busy
    header = send_message_header("producer", Message(topic, b""), MessageQueue(topic, BROKER, 0), 0, batch=True)
    batch = call(slave, send_message_request(header, b"", batch=True))
    assert (batch.code, batch.remark) == busy
    back = ConsumerSendMsgBackRequestHeader(offset=0, group="g", delay_level=0, origin_msg_id="0" * 32,
                                            origin_topic=topic, max_reconsume_times=16)
    sent_back = call(slave, create_request(RequestCode.CONSUMER_SEND_MSG_BACK, back.to_ext()))
    assert (sent_back.code, sent_back.remark) == busy
    end = call(slave, end_transaction_request("producer", topic=topic, broker_name=BROKER, msg_id="0" * 32,
                                              commit_log_offset=0, queue_offset=0, transaction_id=None,
                                              commit_or_rollback=TRANSACTION_COMMIT_TYPE))
    assert (end.code, end.remark) == (ResponseCode.SLAVE_NOT_AVAILABLE, None)
    assert commit_log_max_offset(slave) == before and max_offset(slave, topic, 0) == 0
    assert not has_topic(slave, never)
    # Consumer offsets are no messages: a slave takes a commit as Apache's does (the next sync may overwrite it).
    mq = MessageQueue(topic, BROKER, 0)
    assert call(slave, update_consumer_offset_request(readers, mq, 7)).code == ResponseCode.SUCCESS
    assert consumer_offset(slave, readers, mq) == 7


def test_pulls_on_a_slave_need_slave_read_enable_and_reads_keep_working(group: Group, request) -> None:
    topic = unique_topic(request.node, "Pulled")
    create_on(group.master.addr, topic)
    for addr in (group.slave.addr, group.reader.addr):
        wait_until("the topic synced", partial(has_topic, addr, topic), SYNCED_S)
    pull = pull_message_request(f"{topic}_g", MessageQueue(topic, BROKER, 0), 5, 32,
                                subscription=build_subscription_data(topic, "*"))
    refused = call(group.slave.addr, pull)
    assert (refused.code, refused.remark) == (ResponseCode.SYSTEM_BUSY, REJECT_REQUEST_REMARK)
    on_master = call(group.master.addr, pull)
    assert on_master.code == ResponseCode.PULL_OFFSET_MOVED
    assert PullMessageResponseHeader.from_ext(on_master.ext_fields).next_begin_offset == 0
    # The reader has nothing of this queue: it sends the consumer back to the master at once, offset unchanged.
    served = call(group.reader.addr, pull)
    header = PullMessageResponseHeader.from_ext(served.ext_fields)
    assert served.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert (header.suggest_which_broker_id, header.next_begin_offset) == (0, 5)
    query = {"topic": topic, "key": "nothing", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": str(2**62)}
    for slave in (group.slave, group.reader):
        found = call(slave.addr, create_request(RequestCode.QUERY_MESSAGE, query))
        assert found.code == ResponseCode.QUERY_NOT_FOUND  # answered, not rejected
        assert "commitLogMaxOffset" in mqadmin_ok("brokerStatus", "-n", group.namesrv.addr, "-b", slave.addr)


# -- services a slave does not run ------------------------------------------------------------------------------------


TX_GROUP = "slave_tx_producers"
SHORT_CHECKS = {"transactionTimeOut": 100, "transactionCheckInterval": 300, "messageDelayLevel": "5s"}


def test_a_slave_delivers_no_delayed_message_and_checks_no_transaction(group: Group, request) -> None:
    """A master's store, with a delayed message and an open transaction, copied under a slave: the slave neither
    delivers the one nor asks about the other; a master started on the same copy does both."""
    home = group.home / request.node.name
    topic, delayed = unique_topic(request.node, "Kept"), unique_topic(request.node, "Later")
    name = {"brokerName": "broker-c"}  # a group of its own: no master to sync from once the first one stops
    with start_broker(home / "m0", group.namesrv.addr, **name, **SHORT_CHECKS) as m0:
        for t in (topic, delayed):
            create_on(m0.addr, t, queues=1)
        kept = send(m0.addr, Message(topic, b"kept", keys="order-1"))
        assert send(m0.addr, Message(delayed, b"later", properties={PROPERTY_DELAY_TIME_LEVEL: "1"})).code == 0
        sent_at = time.monotonic()
        half = send(m0.addr, Message(topic, b"half", properties={PROPERTY_TRANSACTION_PREPARED: "true",
                                                                 PROPERTY_PRODUCER_GROUP: TX_GROUP}),
                    sys_flag=TRANSACTION_PREPARED_TYPE)
        assert (kept.code, half.code) == (ResponseCode.SUCCESS, ResponseCode.SUCCESS)
        m0.stop()
    store = home / "copy"
    shutil.copytree(m0.home / "store", store)
    _, kept_offset = decode_offset_msg_id(kept.ext_fields["msgId"])

    with start_broker(home / "slave", group.namesrv.addr, store_dir=store, brokerId=1, brokerRole="SLAVE",
                      slaveReadEnable=True, **name, **SHORT_CHECKS) as slave:
        assert max_offset(slave.addr, delayed, 0) == 0, "the master delivered before it stopped: retry"
        checks = run(_checks_heard(slave.addr, until=lambda _heard: time.monotonic() - sent_at > 5 + 1.5))
        assert checks == [] and max_offset(slave.addr, delayed, 0) == 0
        # Not merely refused by the slave's put guard (which would log it): neither service ran at all.
        for trace in ("putMessage is forbidden", "scheduled message", "transaction check", "half message"):
            assert trace not in slave.console()
        _reads_on_a_copy(slave.addr, topic, kept_offset)

    with start_broker(home / "m1", group.namesrv.addr, store_dir=store, **name, **SHORT_CHECKS) as m1:
        checks = run(_checks_heard(m1.addr, until=lambda heard: heard and max_offset(m1.addr, delayed, 0) == 1))
        assert checks[0].code == RequestCode.CHECK_TRANSACTION_STATE


async def _checks_heard(addr: str, *, until: Callable[[list[RemotingCommand]], object]) -> list[RemotingCommand]:
    """The requests (CHECK_TRANSACTION_STATE) a broker sends a producer of TX_GROUP that registered with it, from
    its heartbeat until ``until(heard)``."""
    heard: list[RemotingCommand] = []

    async def handler(conn, request: RemotingCommand) -> None:
        heard.append(request)

    async with RemotingClient(handler) as client:
        response = await client.invoke(addr, heartbeat_request("slave-test@1", [TX_GROUP], []))
        assert response.code == ResponseCode.SUCCESS
        await eventually("the end of the window", lambda: until(heard), 20, interval=0.2)
    return heard


def _reads_on_a_copy(addr: str, topic: str, kept_offset: int) -> None:
    """Queries and pulls a slave answers from what it holds."""
    query = {"topic": topic, "key": "order-1", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": str(2**62)}
    found = call(addr, create_request(RequestCode.QUERY_MESSAGE, query))
    assert found.code == ResponseCode.SUCCESS and decode_record(found.body).body == b"kept"
    viewed = call(addr, create_request(RequestCode.VIEW_MESSAGE_BY_ID, {"topic": topic, "offset": str(kept_offset)}))
    assert viewed.code == ResponseCode.SUCCESS and decode_record(viewed.body).commit_log_offset == kept_offset
    pulled = call(addr, pull_message_request("readers", MessageQueue(topic, "broker-c", 0), 0, 32,
                                             subscription=build_subscription_data(topic, "*")))
    assert pulled.code == ResponseCode.SUCCESS  # caught up (not behind by 30 % of memory): back to the master next
    assert PullMessageResponseHeader.from_ext(pulled.ext_fields).suggest_which_broker_id == 0
