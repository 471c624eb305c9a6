"""ACL 1.0 on our broker as a process (``aclEnable=true``, ``<rocketmqHome>/conf/plain_acl.yml``): requests signed
by ``broker.remoting.signing`` accepted, each kind of refusal answered SYSTEM_ERROR with Apache's remark, the file
reloaded when it changes, the legacy admin requests 50-53 answered as Apache 5.3.2 answers them, and our mqadmin's
ACL 1.0 commands signing them with the keys of tools.yml (what Apache's tool prints beside them: tests/interop)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from broker.client import Message, MessageQueue
from broker.client.blocking_remoting import BlockingRemotingClient
from broker.client.protocol import send_message_header, send_message_request
from broker.common.fastjson import decode_json
from broker.remoting.codes import AclV1RequestCode, AclV1ResponseCode, RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.signing import SessionCredentials, sign_request
from tests.helpers import mqadmin
from tests.integration.cluster import Cluster, ClusterPool

ACL = """\
accounts:
  - accessKey: plainUser
    secretKey: plainSecret1
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [PlainTopicA=PUB|SUB, PlainTopicD=DENY]
    groupPerms: [PlainGroupX=DENY]
  - accessKey: plainAdmin
    secretKey: plainAdmin1
    admin: true
"""
USER = SessionCredentials("plainUser", "plainSecret1")
ADMIN = SessionCredentials("plainAdmin", "plainAdmin1")
ERR = ResponseCode.SYSTEM_ERROR
EXC = "org.apache.rocketmq.acl.common.AclException: "
MANAGER = ", org.apache.rocketmq.acl.plain.PlainPermissionManager.validate(PlainPermissionManager.java:{})"
CHECKER = ", org.apache.rocketmq.acl.plain.PlainPermissionChecker.check(PlainPermissionChecker.java:{})"


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("plain-acl-home")
    (home / "conf").mkdir()
    (home / "conf" / "plain_acl.yml").write_text(ACL)
    return home


@pytest.fixture(scope="module")
def cluster(clusters: ClusterPool, home: Path) -> Cluster:
    cluster = clusters.shared(aclEnable="true", rocketmqHome=str(home))
    assert isinstance(cluster, Cluster)
    return cluster


@pytest.fixture(scope="module")
def broker(cluster: Cluster) -> BlockingRemotingClient:
    with BlockingRemotingClient(cluster.brokers[0].addr) as client:
        yield client


def call(client: BlockingRemotingClient, request: RemotingCommand,
         credentials: SessionCredentials | None = None) -> tuple[int, str | None]:
    response = client.invoke(sign_request(request, credentials) if credentials else request, 5000)
    return response.code, response.remark


def send(topic: str) -> RemotingCommand:
    msg = Message(topic, b"hello")
    header = send_message_header("plain_it_producer", msg, MessageQueue(topic, "broker-a", 0), 0, batch=False)
    return send_message_request(header, msg.body)


def pull(topic: str, group: str) -> RemotingCommand:
    return create_request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": "0", "maxMsgNums": "1",
        "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0"})


def test_accepted_and_each_kind_of_refusal(broker: BlockingRemotingClient) -> None:
    assert call(broker, send("PlainTopicA")) == (ERR, EXC + "No accessKey is configured" + MANAGER.format(604))
    assert call(broker, send("PlainTopicA"), SessionCredentials("nobody00", "x")) == (
        ERR, EXC + "No acl config for nobody00" + MANAGER.format(608))
    assert call(broker, send("PlainTopicA"), SessionCredentials("plainUser", "wrong")) == (
        ERR, EXC + "Check signature failed for accessKey=plainUser" + MANAGER.format(625))
    assert call(broker, send("PlainTopicA"), USER)[0] == ResponseCode.SUCCESS
    assert call(broker, send("PlainTopicD"), USER) == (ERR, EXC + "No permission for topic:PlainTopicD"
                                                       + CHECKER.format(62))
    assert call(broker, send("PlainOther"), USER) == (ERR, EXC + "No default permission for topic:PlainOther"
                                                      + CHECKER.format(57))
    assert call(broker, pull("PlainTopicA", "PlainGroupX"), USER) == (
        ERR, EXC + "No permission for group:PlainGroupX" + CHECKER.format(62))
    assert call(broker, send("RMQ_SYS_TRACE_TOPIC"), USER)[0] != ERR  # trace messages are exempt
    topic = create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": "PlainByAdmin", "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
        "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
    assert call(broker, topic, USER) == (
        ERR, EXC + "Need admin permission for request code=17, but accessKey=plainUser is not" + CHECKER.format(36))
    assert call(broker, topic, ADMIN)[0] == ResponseCode.SUCCESS
    assert call(broker, send("PlainByAdmin"), ADMIN)[0] == ResponseCode.SUCCESS  # an admin may do anything


def test_the_file_is_reloaded_when_it_changes(broker: BlockingRemotingClient, home: Path) -> None:
    assert call(broker, send("PlainTopicD"), USER)[0] == ERR
    (home / "conf" / "plain_acl.yml").write_text(ACL.replace("PlainTopicD=DENY", "PlainTopicD=PUB"))
    deadline = time.monotonic() + 30  # the watcher looks every 5 s
    while call(broker, send("PlainTopicD"), USER)[0] == ERR and time.monotonic() < deadline:
        time.sleep(0.5)
    assert call(broker, send("PlainTopicD"), USER)[0] == ResponseCode.SUCCESS


def test_the_legacy_admin_requests(broker: BlockingRemotingClient, home: Path) -> None:
    info = create_request(AclV1RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
    assert call(broker, info, USER) == (ERR, EXC + "Need admin permission for request code=52, but accessKey="
                                        "plainUser is not" + CHECKER.format(36))
    answer = broker.invoke(sign_request(info, ADMIN), 5000)
    assert (answer.code, answer.ext_fields["brokerName"], answer.ext_fields["clusterName"]) == (
        0, "broker-a", "DefaultCluster")
    before = decode_json(answer.ext_fields["version"])["counter"]
    create = create_request(AclV1RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {
        "accessKey": "plainNew1", "secretKey": "plainNew12", "admin": "false", "defaultTopicPerm": "PUB"})
    assert call(broker, create, ADMIN) == (ResponseCode.SUCCESS, None)
    assert call(broker, send("PlainAnything"), SessionCredentials("plainNew1", "plainNew12"))[0] == 0  # at once
    bad = create_request(AclV1RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {"accessKey": "short", "secretKey": "x"})
    assert call(broker, bad, ADMIN) == (AclV1ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED,
                                        "The accessKey=short and secretKey=x cannot be null and length should longer "
                                        "than 6")
    delete = create_request(AclV1RequestCode.DELETE_ACL_CONFIG, {"accessKey": "plainNew1"})
    assert call(broker, delete, ADMIN) == (ResponseCode.SUCCESS, None)
    assert call(broker, delete, ADMIN) == (AclV1ResponseCode.DELETE_ACL_CONFIG_FAILED, "The accessKey[plainNew1] "
                                           "corresponding to accessConfig has been deleted failed.")
    white = create_request(AclV1RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, {"globalWhiteAddrs": "10.9.9.*"})
    assert call(broker, white, USER) == (ResponseCode.SUCCESS, None)  # 53 is not an admin-only code in 5.3.2
    answer = broker.invoke(sign_request(info, ADMIN), 5000)
    assert decode_json(answer.ext_fields["version"])["counter"] == before + 3
    assert "10.9.9.*" in (home / "conf" / "plain_acl.yml").read_text()


def test_mqadmin_acl_commands_sign_with_the_tools_keys(cluster: Cluster, broker: BlockingRemotingClient,
                                                        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    addr, ns = cluster.brokers[0].addr, ("-n", cluster.namesrv_addr)
    create = ("updateAclConfig", "-b", addr, "-a", "toolsUser1", "-s", "toolsSecret1", "-i", "PUB", *ns)
    monkeypatch.setenv("ROCKETMQ_HOME", str(tmp_path))  # no conf/tools.yml there yet: unsigned, refused
    refused = mqadmin(*create)
    assert (refused.code, refused.out) == (1, "")
    assert refused.err == ("updateAclConfig command failed: CODE: 1  DESC: " + EXC + "No accessKey is configured"
                           + MANAGER.format(604) + "\n")
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "tools.yml").write_text(f"accessKey: {ADMIN.access_key}\nsecretKey: {ADMIN.secret_key}\n")
    assert mqadmin(*create) == (0, f"create or update plain access config to {addr} success.\nPlainAccessConfig{{"
                                "accessKey='toolsUser1', whiteRemoteAddress='null', admin=false, "
                                "defaultTopicPerm='PUB', defaultGroupPerm='null', topicPerms=null, "
                                "groupPerms=null}", "")
    assert call(broker, send("PlainAnyTopic"), SessionCredentials("toolsUser1", "toolsSecret1"))[0] == 0  # at once
    unknown = mqadmin("deleteAccessConfig", "-c", "NoSuchCluster", "-a", "toolsUser1", *ns)  # the alias
    assert unknown == (0, "[error] Make sure the specified clusterName exists or the name server connected to is "
                          "correct.account's accessKey is:toolsUser1", "")
    assert mqadmin("deleteAccessConfig", "-c", "DefaultCluster", "-a", "toolsUser1", *ns) == (
        0, f"delete plain access config account from {addr} success.\naccount's accessKey is:toolsUser1", "")
    assert call(broker, send("PlainAnyTopic"), SessionCredentials("toolsUser1", "toolsSecret1"))[1] == (
        EXC + "No acl config for toolsUser1" + MANAGER.format(608))
    version = mqadmin("clusterAclConfigVersion", "-b", addr, *ns)  # 5.x brokers list no file versions
    assert (version.code, version.out) == (1, "") and "lists no ACL file versions" in version.err
