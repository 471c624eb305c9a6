"""ACL 1.0 against Apache's own: the same ``plain_acl.yml`` and the same requests (signed by
``broker.remoting.signing``) get the same codes and remarks from our broker and from Apache's 5.3.2 broker (the last
release with ACL 1.0, registered with the 5.5.0 NameServer; both clusters shared through ``plain_acl_cluster``):
each kind of refusal, with the Java frame in the remark, an accepted send, and the legacy admin requests 50-52."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.client import Message, MessageQueue
from broker.client.blocking_remoting import BlockingRemotingClient
from broker.client.protocol import send_message_header, send_message_request
from broker.common.fastjson import decode_json, encode_json
from broker.remoting.codes import AclV1RequestCode, RequestCode
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.signing import SessionCredentials, sign_request
from tests.integration.auth_env import PLAIN_ADMIN, PLAIN_USER, plain_acl_cluster
from tests.integration.cluster import ClusterPool

pytestmark = [pytest.mark.java, pytest.mark.slow]

USER, ADMIN = PLAIN_USER, PLAIN_ADMIN


def send(topic: str) -> RemotingCommand:
    msg = Message(topic, b"hello")
    header = send_message_header("inter_producer", msg, MessageQueue(topic, "broker-a", 0), 0, batch=False)
    return send_message_request(header, msg.body)


def pull(topic: str, group: str) -> RemotingCommand:
    return create_request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "0", "maxMsgNums": "1",
        "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0"})


def heartbeat(group: str, topic: str) -> RemotingCommand:
    consumer = {"groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
                "subscriptionDataSet": [{"topic": topic, "subString": "*", "classFilterMode": False,
                                         "tagsSet": [], "codeSet": [], "subVersion": 0, "expressionType": "TAG"}]}
    body = {"clientID": "inter@1", "consumerDataSet": [consumer], "producerDataSet": []}
    return create_request(RequestCode.HEART_BEAT, None, encode_json(body).encode())


TOPIC = {"topic": "InterByAdmin", "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6",
         "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}
# (request, who signs it, whether the remark is compared: an accepted request's remark is the processor's)
SCRIPT: list[tuple[str, RemotingCommand, SessionCredentials | None, bool]] = [
    ("unsigned", send("InterTopicA"), None, True),
    ("unknown key", send("InterTopicA"), SessionCredentials("nobody00", "x"), True),
    ("bad signature", send("InterTopicA"), SessionCredentials("interUser", "wrong"), True),
    ("allowed", send("InterTopicA"), USER, False),
    ("listed topic denied", send("InterTopicD"), USER, True),
    ("default topic perm", send("InterOther"), USER, True),
    ("listed group denied", pull("InterTopicA", "InterGroupX"), USER, True),
    ("admin-only code", create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, TOPIC), USER, True),
    ("admin may", create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, TOPIC), ADMIN, False),
    ("acl info by a user", create_request(AclV1RequestCode.GET_BROKER_CLUSTER_ACL_INFO), USER, True),
    ("create, short key", create_request(AclV1RequestCode.UPDATE_AND_CREATE_ACL_CONFIG,
                                         {"accessKey": "short", "secretKey": "x"}), ADMIN, True),
    ("create, bad perm", create_request(AclV1RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {
        "accessKey": "interNew1", "secretKey": "interNew12", "topicPerms": "a=ALL"}), ADMIN, True),
    ("delete unknown", create_request(AclV1RequestCode.DELETE_ACL_CONFIG, {"accessKey": "nobody00"}), ADMIN, True),
    ("delete, no key", create_request(AclV1RequestCode.DELETE_ACL_CONFIG), ADMIN, True),
    ("heartbeat, group denied", heartbeat("InterGroupX", "InterTopicA"), USER, True),
    ("heartbeat, topic by default", heartbeat("InterGroupY", "InterOther"), USER, True),
    ("heartbeat, no body", create_request(RequestCode.HEART_BEAT, {"x": "y"}), USER, True),
    ("create", create_request(AclV1RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {
        "accessKey": "interNew1", "secretKey": "interNew12", "defaultTopicPerm": "PUB"}), ADMIN, True),
    ("new account at once", send("InterOther"), SessionCredentials("interNew1", "interNew12"), False),
    ("white list by a user", create_request(AclV1RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG,
                                            {"globalWhiteAddrs": "10.9.9.*"}), USER, True),
]


@pytest.fixture(scope="module")
def apache_broker_addr(clusters: ClusterPool) -> str:
    return plain_acl_cluster(clusters, "apache").brokers[0].addr


@pytest.fixture(scope="module")
def our_broker_addr(clusters: ClusterPool) -> str:
    return plain_acl_cluster(clusters, "rmq").brokers[0].addr


def answers(addr: str) -> dict[str, tuple[int, str | None]]:
    out = {}
    with BlockingRemotingClient(addr) as client:
        for name, request, credentials, remark in SCRIPT:
            response = client.invoke(sign_request(request, credentials) if credentials else request, 10_000)
            out[name] = (response.code, response.remark if remark else None)
        info = client.invoke(sign_request(create_request(AclV1RequestCode.GET_BROKER_CLUSTER_ACL_INFO), ADMIN),
                             10_000)
        version = decode_json(info.ext_fields["version"])
        out["acl info by the admin"] = (info.code, f"{sorted(version)} {info.ext_fields['clusterName']} "
                                                   f"{info.ext_fields['brokerName']}")
    return out


def test_the_same_requests_get_the_same_answers(apache_broker_addr: str, our_broker_addr: str,
                                                tmp_path: Path) -> None:
    apache = answers(apache_broker_addr)
    assert apache["unsigned"][1].startswith("org.apache.rocketmq.acl.common.AclException: No accessKey")
    assert apache["allowed"][0] == 0  # the script does reach past the check on Apache's broker
    assert answers(our_broker_addr) == apache
