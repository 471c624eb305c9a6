"""ACL 1.0: the yml model, the address patterns, the request table and the check's order (broker/auth/plain*.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.auth.plain import PlainPermissionManager
from broker.auth.plain_address import address_pattern
from broker.auth.plain_config import PlainAccessConfig, parse_acl_text, read_acl_file
from broker.auth.plain_resources import ADMIN_CODES, PUB, SUB, needed_resources
from broker.common.errors import AclException, ConfigError
from broker.common.fastjson import encode_json
from broker.remoting.codes import AclV1RequestCode, RequestCode
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.signing import SessionCredentials, sign_request

YML = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
  - accessKey: rocketmq2
    secretKey: "012345678"
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""
USER = SessionCredentials("RocketMQ", "12345678")
ADMIN = SessionCredentials("rocketmq2", "012345678")


def test_the_yml_keeps_scalars_as_written_and_refuses_unknown_keys() -> None:
    data = parse_acl_text(YML, "plain_acl.yml")
    assert data is not None
    user, admin = data.accounts
    assert (user.secret_key, user.white_remote_address, user.admin) == ("12345678", None, False)
    assert user.topic_perms == ("topicA=DENY", "topicB=PUB|SUB", "topicC=SUB")
    assert (admin.secret_key, admin.admin) == ("012345678", True)  # the leading zero stays: a string, as in Java
    assert data.global_white_remote_addresses == ("10.10.103.*",)
    assert parse_acl_text("", "x") is None  # an empty file holds nothing
    written = parse_acl_text("accounts:\n- accessKey: abcdefgh\n  topicPerms: null\n  groupPerms: ~\n"
                             "dataVersion: null\nglobalWhiteRemoteAddresses: null\n", "x")  # as Apache's broker writes
    assert written is not None and written.accounts[0].topic_perms == written.accounts[0].group_perms == ()
    with pytest.raises(ConfigError, match=r"accounts\[0\]: unknown key\(s\) \['secretkey'\]"):
        parse_acl_text("accounts:\n- accessKey: abcdefgh\n  secretkey: x\n", "x")
    with pytest.raises(ConfigError, match="admin: expected true or false"):
        parse_acl_text("accounts:\n- accessKey: abcdefgh\n  admin: maybe\n", "x")


@pytest.mark.parametrize("pattern, yes, no", [
    ("*", ["1.2.3.4", "::1"], []),
    ("", [], ["127.0.0.1"]),
    ("192.168.1.{1,2}", ["192.168.1.1", "192.168.1.2"], ["192.168.1.3"]),
    ("1.1.1.1,2.2.2.2", ["2.2.2.2"], ["3.3.3.3"]),
    ("192.168.*.*", ["192.168.0.1", "192.168.255.9"], ["192.169.0.1"]),
    ("192.168.1.1-100", ["192.168.1.1", "192.168.1.100"], ["192.168.1.101", "192.168.2.50"]),
    ("10.10.103.*", ["10.10.103.7"], ["10.10.104.7"]),
    ("127.0.0.1", ["127.0.0.1"], ["127.0.0.2"]),
    ("::1", ["0:0:0:0:0:0:0:1"], ["::2"]),
    ("1050:0:0:0:5:600:300c:*", ["1050::5:600:300c:326b"], ["1050::5:600:300d:1"]),
])
def test_address_patterns_match_as_apaches_strategies(pattern: str, yes: list[str], no: list[str]) -> None:
    compiled = address_pattern(pattern)
    assert [compiled.matches(ip) for ip in yes + no] == [True] * len(yes) + [False] * len(no)


@pytest.mark.parametrize("pattern, message", [
    ("192.168.1.1-", "examine"), ("192.168.1.-1", "examine scope"), ("192.168.1.200-100", "start is 200 , end is 100"),
    ("1.2.3.999", "NetAddress examine Exception netAddress is 1.2.3.999"), ("1.2.{3,4}", "wrong format"),
])
def test_bad_patterns_are_refused_with_apaches_messages(pattern: str, message: str) -> None:
    with pytest.raises(AclException, match=message):
        address_pattern(pattern)


def _request(code: int, fields: dict[str, str], body: bytes = b"") -> RemotingCommand:
    return create_request(code, fields, body)


def test_the_request_table() -> None:
    assert needed_resources(_request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "T"})) == {"T": PUB}
    assert needed_resources(_request(RequestCode.SEND_MESSAGE, {"topic": "%RETRY%G"})) == {"%RETRY%G": SUB}
    assert needed_resources(_request(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "G"})) == {"%RETRY%G": SUB}
    assert needed_resources(_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": "G", "topic": "T", "queueId": "0", "commitOffset": "1"})) == {"%RETRY%G": SUB, "T": SUB}
    heartbeat = {"clientID": "c", "producerDataSet": [{"groupName": "PG"}], "consumerDataSet": [{
        "groupName": "CG", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
        "subscriptionDataSet": [{"topic": "T1", "subString": "*"}]}]}
    assert needed_resources(_request(RequestCode.HEART_BEAT, {}, encode_json(heartbeat).encode())) == {
        "%RETRY%CG": SUB, "T1": SUB}
    assert needed_resources(_request(RequestCode.GET_BROKER_CONFIG, {"x": "y"})) == {}
    with pytest.raises(AclException) as raised:
        needed_resources(_request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"AccessKey": "k"}))
    assert raised.value.remark == (
        "org.apache.rocketmq.acl.common.AclException: the custom field <consumerGroup> is null, "
        "org.apache.rocketmq.acl.plain.PlainAccessResource.parse(PlainAccessResource.java:178)")
    assert {int(c) for c in ADMIN_CODES} == {17, 25, 215, 200, 207, 513, 50, 51, 52}  # 53 is not one: 5.3.2's table
    assert AclV1RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG not in ADMIN_CODES


@pytest.fixture()
def manager(tmp_path: Path) -> PlainPermissionManager:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "plain_acl.yml").write_text(YML)
    return PlainPermissionManager(tmp_path)


def _refusal(manager: PlainPermissionManager, request: RemotingCommand, ip: str = "127.0.0.1") -> str | None:
    try:
        manager.validate(request, ip)
    except AclException as err:
        return err.remark
    return None


M = "org.apache.rocketmq.acl.common.AclException: {}, org.apache.rocketmq.acl.plain.{}"


def test_the_check_runs_in_apaches_order(manager: PlainPermissionManager) -> None:
    send = _request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "topicB"}, b"x")
    assert _refusal(manager, send, "10.10.103.5") is None  # 1. global white list: nothing else is looked at
    assert _refusal(manager, send) == M.format("No accessKey is configured",
                                               "PlainPermissionManager.validate(PlainPermissionManager.java:604)")
    assert _refusal(manager, sign_request(send, SessionCredentials("nobody00", "12345678"))) == M.format(
        "No acl config for nobody00", "PlainPermissionManager.validate(PlainPermissionManager.java:608)")
    unsigned_admin = _request(RequestCode.UPDATE_AND_CREATE_TOPIC, {"AccessKey": "rocketmq2"})
    assert _refusal(manager, unsigned_admin, "192.168.1.9") is None  # 4. the account's own white address
    assert _refusal(manager, unsigned_admin) == M.format(
        "Check signature failed for accessKey=rocketmq2",
        "PlainPermissionManager.validate(PlainPermissionManager.java:625)")
    trace = _request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "RMQ_SYS_TRACE_TOPIC"})
    assert _refusal(manager, sign_request(trace, USER)) is None  # 6. trace exempt (defaultTopicPerm is DENY)
    assert _refusal(manager, sign_request(send, USER)) is None
    assert _refusal(manager, sign_request(unsigned_admin, ADMIN)) is None  # admin: anything
    checker = "PlainPermissionChecker.check(PlainPermissionChecker.java:{})"
    assert _refusal(manager, sign_request(_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {}), USER)) == M.format(
        "Need admin permission for request code=17, but accessKey=RocketMQ is not", checker.format(36))
    to_a = _request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "topicA"})
    assert _refusal(manager, sign_request(to_a, USER)) == M.format("No permission for topic:topicA",
                                                                   checker.format(62))
    to_other = _request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "other"})
    assert _refusal(manager, sign_request(to_other, USER)) == M.format("No default permission for topic:other",
                                                                       checker.format(57))
    pull = _request(RequestCode.PULL_MESSAGE, {"topic": "topicC", "consumerGroup": "groupA"})
    assert _refusal(manager, sign_request(pull, USER)) == M.format("No permission for group:groupA",
                                                                   checker.format(62))
    pull_b = _request(RequestCode.PULL_MESSAGE, {"topic": "topicC", "consumerGroup": "anyGroup"})
    assert _refusal(manager, sign_request(pull_b, USER)) is None  # defaultGroupPerm SUB


def test_a_changed_file_is_reloaded_and_a_broken_one_keeps_what_was_loaded(manager: PlainPermissionManager) -> None:
    path = manager.files.default_file
    send = sign_request(_request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "topicA"}), USER)
    assert _refusal(manager, send) is not None
    assert manager.poll() is False  # nothing changed
    path.write_text(YML.replace("topicA=DENY", "topicA=PUB"))
    assert manager.poll() is True
    assert _refusal(manager, send) is None
    path.write_text(YML.replace("whiteRemoteAddress: 192.168.1.*", "whiteRemoteAddress: 1.2.3.999"))
    assert manager.poll() is False
    assert _refusal(manager, send) is None  # the accounts loaded before stay
    (path.parent / "acl").mkdir()
    (path.parent / "acl" / "more.yml").write_text("accounts:\n- accessKey: another1\n  secretKey: another12\n"
                                                  "  defaultTopicPerm: PUB\n")
    path.write_text(YML)
    assert manager.poll() is True  # a new file and a fixed one: everything again
    other = sign_request(_request(RequestCode.SEND_MESSAGE_V2, {"a": "PG", "b": "x"}),
                         SessionCredentials("another1", "another12"))
    assert _refusal(manager, other) is None


def test_admin_changes_rewrite_the_file(manager: PlainPermissionManager) -> None:
    manager.update_access_config(PlainAccessConfig("newuser1", "newsecret1", default_topic_perm="PUB",
                                                   topic_perms=("t1=SUB",)))
    data = read_acl_file(manager.files.default_file)
    assert data is not None and data.data_version is not None and data.data_version.counter == 1
    assert [a.access_key for a in data.accounts] == ["RocketMQ", "rocketmq2", "newuser1"]
    assert manager.tables.accounts["newuser1"].perms == {"t1": SUB}
    manager.update_access_config(PlainAccessConfig("newuser1", "newsecret1", admin=True))  # perms not given: kept
    assert manager.tables.accounts["newuser1"].admin and manager.tables.accounts["newuser1"].perms == {"t1": SUB}
    with pytest.raises(AclException, match="Parse resource permission error for t2=ALL"):
        manager.update_access_config(PlainAccessConfig("newuser1", "newsecret1", topic_perms=("t2=ALL",)))
    with pytest.raises(AclException, match="The accessKey=short and secretKey=null cannot be null"):
        manager.update_access_config(PlainAccessConfig("short", None))
    assert manager.delete_access_config("newuser1") is True
    assert manager.delete_access_config("newuser1") is False
    assert manager.update_global_white_addrs(["1.2.3.*"], None) is True
    assert manager.update_global_white_addrs(["1.2.3.*"], "/etc/passwd") is False  # outside the home
    assert manager.data_version().counter == 4
