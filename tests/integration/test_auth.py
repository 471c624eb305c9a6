"""ACL 2.0 on our broker as a process: requests refused before their processor (unsigned, badly signed, unknown
user, a topic the user's ACL does not allow or denies), answered NO_PERMISSION with Apache's remarks, and allowed
ones served; users and ACLs managed through the admin requests 3001-3010 by the super user the config creates; the
broker's own registration with the NameServer signed with innerClientAuthenticationCredentials (it registers)."""

from __future__ import annotations

import pytest

from broker.client import Message, MessageQueue
from broker.client.blocking_remoting import BlockingRemotingClient
from broker.client.protocol import send_message_header, send_message_request
from broker.common.fastjson import decode_json, encode_json
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.signing import SessionCredentials, sign_request
from tests.integration.auth_env import AUTH_CONF, SUPER
from tests.integration.cluster import Cluster, ClusterPool

ALICE = SessionCredentials("alice_it", "alicepw1")
OK = "not set any response code"


@pytest.fixture(scope="module")
def broker(clusters: ClusterPool) -> BlockingRemotingClient:
    cluster = clusters.shared(**AUTH_CONF)
    assert isinstance(cluster, Cluster)
    with BlockingRemotingClient(cluster.brokers[0].addr) as client:
        yield client


def call(client: BlockingRemotingClient, request: RemotingCommand,
         credentials: SessionCredentials | None = None) -> tuple[int, str | None, bytes]:
    response = client.invoke(sign_request(request, credentials) if credentials else request, 5000)
    return response.code, response.remark, bytes(response.body)


def send(topic: str) -> RemotingCommand:
    msg = Message(topic, b"hello")
    header = send_message_header("auth_it_producer", msg, MessageQueue(topic, "broker-a", 0), 0, batch=False)
    return send_message_request(header, msg.body)


def admin(code: int, fields: dict[str, str], body: object = None) -> RemotingCommand:
    return create_request(code, fields, b"" if body is None else encode_json(body).encode())


def test_requests_are_checked_before_their_processor(broker: BlockingRemotingClient) -> None:
    no = ResponseCode.NO_PERMISSION
    assert call(broker, send("AuthTopicA"))[:2] == (no, "username cannot be null.")
    assert call(broker, create_request(RequestCode.GET_BROKER_CONFIG))[:2] == (no, "username cannot be null.")
    assert call(broker, send("AuthTopicA"), SessionCredentials("nouser", "x"))[:2] == (no, "User:nouser is not found.")
    assert call(broker, send("AuthTopicA"), SessionCredentials("rocketmq", "wrong"))[:2] == (no,
                                                                                            "check signature failed.")
    assert call(broker, send("AuthTopicA"), SUPER)[0] == ResponseCode.SUCCESS  # the super user may do anything

    user = {"password": ALICE.secret_key, "userType": "Normal"}
    assert call(broker, admin(RequestCode.AUTH_CREATE_USER, {"username": ALICE.access_key}, user), SUPER)[:2] == (
        ResponseCode.SUCCESS, OK)
    assert call(broker, admin(RequestCode.AUTH_CREATE_USER, {"username": ALICE.access_key}, user), SUPER)[:2] == (
        no, "The user is existed")
    here = "from 127.0.0.1, no matched policies."
    assert call(broker, send("AuthTopicA"), ALICE)[:2] == (
        no, f"User:alice_it has no permission to access Topic:AuthTopicA {here}")
    acl = {"policies": [{"entries": [
        {"resource": "Topic:AuthTopic*", "actions": ["Pub", "Sub"], "decision": "Allow"},
        {"resource": "Topic:AuthTopicD*", "actions": ["Pub"], "decision": "Deny"}]}]}
    assert call(broker, admin(RequestCode.AUTH_CREATE_ACL, {"subject": "User:alice_it"}, acl), SUPER)[:2] == (
        ResponseCode.SUCCESS, OK)
    code, remark, _ = call(broker, send("AuthTopicA"), ALICE)
    assert (code, remark) == (ResponseCode.SUCCESS, None)
    assert call(broker, send("Other"), ALICE)[:2] == (
        no, f"User:alice_it has no permission to access Topic:Other {here}")
    assert call(broker, send("AuthTopicDX"), ALICE)[:2] == (
        no, "User:alice_it has no permission to access Topic:AuthTopicDX from 127.0.0.1, the decision is deny.")
    assert call(broker, admin(RequestCode.AUTH_CREATE_USER, {"username": "eve"}, user), ALICE)[:2] == (
        no, f"User:alice_it has no permission to access Cluster:DefaultCluster {here}")


def test_admin_requests_answer_apaches_bodies(broker: BlockingRemotingClient) -> None:
    body = {"password": "bobpw123", "userType": "Normal"}
    assert call(broker, admin(RequestCode.AUTH_CREATE_USER, {"username": "bob_it"}, body), SUPER)[0] == 0
    code, remark, got = call(broker, admin(RequestCode.AUTH_GET_USER, {"username": "bob_it"}), SUPER)
    assert (code, remark, got) == (0, OK, b'{"password":"bobpw123","userStatus":"enable","userType":"Normal",'
                                          b'"username":"bob_it"}')
    assert call(broker, admin(RequestCode.AUTH_GET_USER, {"username": "nobody"}), SUPER) == (0, OK, b"")
    assert call(broker, admin(RequestCode.AUTH_GET_USER, {}), SUPER)[:2] == (ResponseCode.INVALID_PARAMETER,
                                                                              "The username is blank")
    listed = decode_json(call(broker, admin(RequestCode.AUTH_LIST_USER, {"filter": "bob_"}), SUPER)[2].decode())
    assert [u["username"] for u in listed] == ["bob_it"]
    entry = {"resource": "Group:G9", "actions": ["Sub"], "sourceIps": ["10.0.0.0/8"], "decision": "Allow"}
    acl = {"subject": "User:bob_it", "policies": [{"entries": [entry]}]}
    assert call(broker, admin(RequestCode.AUTH_UPDATE_ACL, {"subject": "User:bob_it"}, acl), SUPER)[0] == 0
    assert call(broker, admin(RequestCode.AUTH_GET_ACL, {"subject": "User:bob_it"}), SUPER)[2] == (
        b'{"policies":[{"entries":[{"actions":["Sub"],"decision":"Allow","resource":"Group:G9",'
        b'"sourceIps":["10.0.0.0/8"]}],"policyType":"Custom"}],"subject":"User:bob_it"}')
    assert call(broker, admin(RequestCode.AUTH_CREATE_ACL, {"subject": "User:bob_it"}, {"policies": [
        {"entries": [entry | {"actions": ["Any"]}]}]}), SUPER)[:2] == (ResponseCode.NO_PERMISSION,
                                                                        "The actions can not be Any.")
    assert call(broker, admin(RequestCode.AUTH_DELETE_USER, {"username": "bob_it"}), SUPER)[:2] == (0, OK)
    assert call(broker, admin(RequestCode.AUTH_DELETE_ACL, {"subject": "User:bob_it"}), SUPER)[:2] == (
        ResponseCode.NO_PERMISSION, "The subject is not exist.")
    super_user = {"password": "x", "userType": "Super"}
    assert call(broker, admin(RequestCode.AUTH_CREATE_USER, {"username": "eve"}, super_user), ALICE)[0] == (
        ResponseCode.NO_PERMISSION)  # refused before: alice has no Cluster Update
