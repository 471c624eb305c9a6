"""ACL 1.0 against Apache's own: the same ``plain_acl.yml`` and the same requests (signed by
``broker.remoting.signing``) get the same codes and remarks from our broker and from Apache's 5.3.2 broker (the last
release with ACL 1.0, registered with the 5.5.0 NameServer; both clusters shared through ``plain_acl_cluster``):
each kind of refusal, with the Java frame in the remark, an accepted send, and the legacy admin requests 50-52. Then
ACL 1.0's mqadmin commands: Apache's 5.3.1 tool (the last with them) prints the same against Apache's broker and
ours as our mqadmin against ours, and each command leaves the same accounts and global white list in the broker's
``plain_acl.yml``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import pytest

from broker.auth.plain_config import PlainAccessData, read_acl_file
from broker.client import Message, MessageQueue
from broker.client.blocking_remoting import BlockingRemotingClient
from broker.client.protocol import send_message_header, send_message_request
from broker.common.fastjson import decode_json, encode_json
from broker.remoting.codes import AclV1RequestCode, RequestCode
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.signing import SessionCredentials, sign_request
from tests.apache import apache_mqadmin
from tests.helpers import mqadmin
from tests.integration.auth_env import PLAIN_ADMIN, PLAIN_USER, plain_acl_cluster
from tests.integration.cluster import ClusterPool, rocketmq_home

pytestmark = [pytest.mark.java, pytest.mark.slow]

TOOLS_VERSION = "5.3.1"  # rocketmq-tools 5.3.2 is not on Maven Central; 5.3.3 dropped ACL 1.0's commands
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


class AclBroker(NamedTuple):
    addr: str
    namesrv: str
    acl_file: Path  # its conf/plain_acl.yml


def acl_broker(clusters: ClusterPool, kind: str) -> AclBroker:
    cluster = plain_acl_cluster(clusters, kind)
    broker = cluster.brokers[0]
    return AclBroker(broker.addr, cluster.namesrv_addr, rocketmq_home(broker) / "conf" / "plain_acl.yml")


@pytest.fixture(scope="module")
def apache_broker(clusters: ClusterPool) -> AclBroker:
    return acl_broker(clusters, "apache")


@pytest.fixture(scope="module")
def our_broker(clusters: ClusterPool) -> AclBroker:
    return acl_broker(clusters, "rmq")


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


def test_the_same_requests_get_the_same_answers(apache_broker: AclBroker, our_broker: AclBroker) -> None:
    apache = answers(apache_broker.addr)
    assert apache["unsigned"][1].startswith("org.apache.rocketmq.acl.common.AclException: No accessKey")
    assert apache["allowed"][0] == 0  # the script does reach past the check on Apache's broker
    assert answers(our_broker.addr) == apache


# -- ACL 1.0's mqadmin commands -------------------------------------------------------------------------------------


def tool_script(broker: AclBroker) -> list[tuple[str, ...]]:
    """Every command and both ways of naming brokers; a refusal of each request that has one; the script deletes
    the account it made, so it can run again on the same broker."""
    b, c = ("-b", broker.addr), ("-c", "DefaultCluster")
    return [("updateAclConfig", *b, "-a", "toolUser1", "-s", "toolSecret1", "-i", "PUB", "-t", "TA=PUB,TB=SUB|PUB"),
            ("updateAclConfig", *c, "-a", "toolUser1", "-s", "toolSecret2", "-m", "true", "-w", "192.168.1.*",
             "-g", "GA=SUB"),
            ("updateAclConfig", *b, "-a", "toolUser2", "-s", "toolSecret2", "-t", "a=ALL"),
            ("updateGlobalWhiteAddr", *c, "-g", "10.10.103.*,192.168.0.*"),
            ("updateGlobalWhiteAddr", *b, "-g", "10.10.104.*", "-p", "/nonexistent/plain.yml"),
            ("clusterAclConfigVersion", *c),
            ("deleteAclConfig", *c, "-a", "toolUser1")]


def outcome(broker: AclBroker, out: str, err: str) -> str:
    """What a command printed, the broker's address masked, and how it failed: the broker's code and the first line
    of its remark (Apache's tool prints a stack trace, ours one line), or only that it did fail."""
    remark = re.search(r"CODE: (\d+)\s+DESC: ([^\n]*)", err)
    failed = f"CODE {remark[1]}: {remark[2]}" if remark else "failed" if err.strip() else "ok"
    return f"{out.replace(broker.addr, '<broker>')}\n=> {failed}"


def the_file(broker: AclBroker) -> tuple[object, ...]:
    """The accounts and global white list of the broker's plain_acl.yml (its data version's time differs)."""
    data = read_acl_file(broker.acl_file) or PlainAccessData()
    return data.accounts, data.global_white_remote_addresses


def apache_tool_run(broker: AclBroker, home: Path) -> list[tuple[str, tuple[object, ...]]]:
    tool = apache_mqadmin(home, TOOLS_VERSION)
    runs = []
    for args in tool_script(broker):
        done = tool.run(*args, "-n", broker.namesrv, check=False, timeout=60)
        err = "\n".join(line for line in done.stderr.decode(errors="replace").splitlines()
                        if "[warning][cds]" not in line)
        runs.append((outcome(broker, done.stdout.decode(), err), the_file(broker)))
    return runs


def our_tool_run(broker: AclBroker) -> list[tuple[str, tuple[object, ...]]]:
    runs = []
    for args in tool_script(broker):
        done = mqadmin(*args, "-n", broker.namesrv)
        assert (done.code == 0) == (not done.err), done
        runs.append((outcome(broker, done.out, done.err), the_file(broker)))
    return runs


def test_acl_commands_print_and_write_what_apaches_do(apache_broker: AclBroker, our_broker: AclBroker,
                                                      tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "tools.yml").write_text(f"accessKey: {ADMIN.access_key}\nsecretKey: {ADMIN.secret_key}\n")
    monkeypatch.setenv("ROCKETMQ_HOME", str(tmp_path))
    theirs = apache_tool_run(apache_broker, tmp_path)
    assert theirs[0][0].startswith("create or update plain access config to <broker> success.\nPlainAccessConfig{"
                                   "accessKey='toolUser1', whiteRemoteAddress='null', admin=false, "
                                   "defaultTopicPerm='PUB'")
    assert theirs[2][0].endswith("=> CODE 209: Parse resource permission error for a=ALL.")
    assert theirs[5][0].endswith("#AclLastUpdateTime    \n\n=> failed")  # a 5.3.2 broker sends no file versions
    assert theirs[6][0] == ("delete plain access config account from <broker> success.\naccount's accessKey is:"
                            "toolUser1\n=> ok")
    ours = our_tool_run(our_broker)
    assert [text for text, _ in ours] == [text for text, _ in theirs]
    for (command, *_), (_, their_file), (_, our_file) in zip(tool_script(our_broker), theirs, ours, strict=True):
        assert our_file == their_file, command
    apache_on_ours = apache_tool_run(our_broker, tmp_path)
    assert [text for text, _ in apache_on_ours] == [text for text, _ in theirs]
