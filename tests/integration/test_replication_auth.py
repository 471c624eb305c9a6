"""Replication with access control on (ours, as processes): a master and its slave, both checking every request,
keep replicating. The slave registers with the NameServer, copies the master's topics and consumer offsets with
requests signed by ``innerClientAuthenticationCredentials`` (Apache's BrokerOuterAPI adds the same AclClientRPCHook
to every request it sends, whichever ACL is on), and receives the CommitLog over the HA port (no remoting, nothing
to sign). A signed consumer reads the rows from the slave; an unsigned pull there is refused.

ACL 2.0 (authenticationEnabled/authorizationEnabled) and ACL 1.0 (aclEnable with plain_acl.yml) run the same
scenario, one pair each."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker.client import BlockingClient, Message, MessageQueue, protocol
from broker.client.blocking_api import create_topic, pull
from broker.client.blocking_remoting import BlockingRemotingClient
from broker.common.errors import MQBrokerError
from broker.common.fastjson import decode_json, encode_json
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from broker.remoting.signing import SessionCredentials
from broker.remoting.subscription import SubscriptionGroupConfig
from tests.helpers import wait_until
from tests.integration.auth_env import AUTH_CONF, SUPER
from tests.integration.cluster import start_broker, start_namesrv, write_home_files
from tests.integration.replication import ha_address

TOPIC = "ReplicatedAclTopic"
GROUP = "ReplicatedAclGroup"
ROWS = 20
SYNC_MS = 1000  # slaveSynchronizeInterval: the slave copies metadata every second instead of every minute
PAIR = {"slaveSynchronizeInterval": SYNC_MS, "haSendHeartbeatInterval": 1000}

PLAIN_ACL = """\
accounts:
  - accessKey: replInner
    secretKey: replInner1
    admin: true
  - accessKey: replUser
    secretKey: replUser1
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [ReplicatedAclTopic=PUB|SUB]
    groupPerms: [ReplicatedAclGroup=SUB]
"""
PLAIN_INNER = SessionCredentials("replInner", "replInner1")
PLAIN_USER = SessionCredentials("replUser", "replUser1")


@dataclass(frozen=True)
class Acl:
    """One kind of access control: the broker.conf keys of both brokers, who the clients sign as, and how a broker
    answers an unsigned request."""

    conf: Callable[[Path], dict[str, object]]
    admin: SessionCredentials
    user: SessionCredentials
    refused: tuple[int, str]


def acl2_conf(home: Path) -> dict[str, object]:
    return dict(AUTH_CONF)


def acl1_conf(home: Path) -> dict[str, object]:
    rocketmq_home = write_home_files(home / "rocketmq-home", {"conf/plain_acl.yml": PLAIN_ACL})
    inner = f'{{"accessKey":"{PLAIN_INNER.access_key}","secretKey":"{PLAIN_INNER.secret_key}"}}'
    return {"aclEnable": "true", "rocketmqHome": str(rocketmq_home), "innerClientAuthenticationCredentials": inner}


ACLS = {
    "acl2": Acl(acl2_conf, SUPER, SUPER, (ResponseCode.NO_PERMISSION, "username cannot be null.")),
    "acl1": Acl(acl1_conf, PLAIN_INNER, PLAIN_USER,
                (ResponseCode.SYSTEM_ERROR, "org.apache.rocketmq.acl.common.AclException: No accessKey is configured")),
}


def topic_configs(addr: str, credentials: SessionCredentials) -> dict[str, object]:
    with BlockingRemotingClient(addr, credentials=credentials) as client:
        response = protocol.expect_success(client.invoke(create_request(RequestCode.GET_ALL_TOPIC_CONFIG), 3000),
                                           addr)
    return decode_json(response.body.decode())["topicConfigTable"]


def committed(addr: str, credentials: SessionCredentials, mq: MessageQueue) -> int:
    with BlockingRemotingClient(addr, credentials=credentials) as client:
        try:
            return protocol.parse_offset_response(client.invoke(protocol.query_consumer_offset_request(GROUP, mq),
                                                                3000), addr)
        except MQBrokerError:
            return -1


@pytest.mark.parametrize("kind", list(ACLS))
def test_slave_replicates_and_serves_with_acl_on(tmp_path: Path, kind: str) -> None:
    acl = ACLS[kind]
    conf = acl.conf(tmp_path)
    with contextlib.ExitStack() as stack:
        namesrv = stack.enter_context(start_namesrv(tmp_path / "namesrv"))
        master = stack.enter_context(start_broker(tmp_path / "master", namesrv.addr, **PAIR, **conf))
        slave = stack.enter_context(start_broker(tmp_path / "slave", namesrv.addr, brokerId=1, brokerRole="SLAVE",
                                                 haMasterAddress=ha_address(master), slaveReadEnable=True,
                                                 **PAIR, **conf))
        with BlockingRemotingClient(master.addr, credentials=acl.admin) as admin:
            create_topic(admin, TOPIC, queue_nums=1)
            group = encode_json(SubscriptionGroupConfig(GROUP).to_json()).encode()
            protocol.expect_success(admin.invoke(
                create_request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group), 3000), master.addr)
        mq = MessageQueue(TOPIC, "broker-a", 0)
        with BlockingClient(namesrv.addr, credentials=acl.user, consumer_group=GROUP) as client:
            sent = [client.send(Message(TOPIC, f"row-{i}".encode()), mq) for i in range(ROWS)]
            assert [r.queue_offset for r in sent] == list(range(ROWS))
            with BlockingRemotingClient(master.addr, credentials=acl.user) as on_master:
                protocol.expect_success(on_master.invoke(
                    protocol.update_consumer_offset_request(GROUP, mq, 7), 3000), master.addr)

            # The slave's registration reached the NameServer, and its signed syncs brought the topic and offsets.
            wait_until("the slave registered", lambda: 1 in {broker_id for data in client.get_route(
                TOPIC, refresh=True).broker_datas for broker_id in data.broker_addrs})
            wait_until("the slave copied the topic", lambda: TOPIC in topic_configs(slave.addr, acl.admin))
            wait_until("the slave copied the offset", lambda: committed(slave.addr, acl.user, mq) == 7)

        with BlockingRemotingClient(slave.addr, credentials=acl.user) as signed:
            # The CommitLog arrives over the HA port; the slave's runtime info is an admin read, so its own signed
            # pulls tell when it holds every row.
            wait_until("the slave holds every row",
                       lambda: len(pull(signed, GROUP, mq, 0, 32, decode=True).messages) == ROWS,
                       ignoring=(MQBrokerError,))
            result = pull(signed, GROUP, mq, 0, 32, decode=True)
            assert [m.body for m in result.messages] == [f"row-{i}".encode() for i in range(ROWS)]
            assert [m.msg_id for m in result.messages] == [r.msg_id for r in sent]
        with BlockingRemotingClient(slave.addr) as unsigned:
            answer = unsigned.invoke(protocol.pull_message_request(GROUP, mq, 0, 32), 3000)
            code, remark = acl.refused
            assert (answer.code, answer.remark.split(",")[0]) == (code, remark)
