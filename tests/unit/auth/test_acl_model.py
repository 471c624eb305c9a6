"""ACL 2.0's model, table, store and evaluation against what Apache 5.5.0 does: the stored JSON read back from a live
Apache broker's RocksDB, the admin bodies its AdminBrokerProcessor wrote, the refusals it answered, and the
annotation table re-read from rocketmq-remoting's sources jar."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from broker.auth import actions
from broker.auth.config import (
    LOCAL_AUTHENTICATION_METADATA_PROVIDER,
    LOCAL_AUTHORIZATION_METADATA_PROVIDER,
    parse_auth_config,
)
from broker.auth.evaluate import AuthEvaluator
from broker.auth.metadata import AuthMetadataManager
from broker.auth.model import Acl, Resource, User, UserStatus, UserType
from broker.auth.store import AuthStore
from broker.common.errors import AuthenticationError, AuthorizationError, ConfigError
from broker.common.fastjson import encode_json
from broker.remoting.codes import RequestCode
from broker.remoting.command import create_request
from broker.remoting.signing import SessionCredentials, sign_request
from tests.javatools import ROCKETMQ_GROUP, sources_jar
from tests.unit.auth.annotations import extract

SOURCES = (ROCKETMQ_GROUP, "rocketmq-remoting", "5.5.0")  # the release whose annotations actions.py follows
ALICE_ACL = {"subject": "User:alice", "policies": [{"entries": [
    {"resource": "Topic:TopicA", "actions": ["Pub", "Sub"], "decision": "Allow"},
    {"resource": "Topic:Top*", "actions": ["Pub", "Sub"], "decision": "Allow"},
    {"resource": "Group:G1", "actions": ["Pub", "Sub", "Nonsense"], "decision": "Allow"},
    {"resource": "Group:G9", "actions": ["Sub"], "decision": "Allow", "sourceIps": ["10.0.0.0/8"]},
    {"resource": "Topic:TopicD*", "actions": ["Pub"], "decision": "Deny"}]}]}


@pytest.fixture
def evaluator(tmp_path: Path) -> AuthEvaluator:
    config = parse_auth_config({"authenticationEnabled": "true", "authorizationEnabled": "true",
                                "authenticationMetadataProvider": LOCAL_AUTHENTICATION_METADATA_PROVIDER,
                                "authorizationMetadataProvider": LOCAL_AUTHORIZATION_METADATA_PROVIDER},
                               "DefaultCluster")
    metadata = AuthMetadataManager(AuthStore(str(tmp_path / "config")))
    metadata.init_user("rocketmq", "12345678")
    metadata.create_user(User("alice", "alicepw1"))
    return AuthEvaluator(config, metadata)


def signed(code: int, fields: dict[str, str], user: str = "alice", secret: str = "alicepw1", body: bytes = b""):
    return sign_request(create_request(code, fields, body), SessionCredentials(user, secret))


def refusal(evaluator: AuthEvaluator, request, ip: str = "127.0.0.1") -> str | None:
    try:
        evaluator.check(request, ip)
    except (AuthenticationError, AuthorizationError) as err:
        return str(err)
    return None


def test_refusals_read_as_apaches(evaluator: AuthEvaluator) -> None:
    send = RequestCode.SEND_MESSAGE_V2
    assert refusal(evaluator, create_request(send, {"a": "PG", "b": "TopicA"})) == "username cannot be null."
    assert refusal(evaluator, create_request(RequestCode.GET_BROKER_CONFIG)) == "username cannot be null."
    assert refusal(evaluator, signed(send, {"b": "TopicA"}, "nouser")) == "User:nouser is not found."
    assert refusal(evaluator, signed(send, {"b": "TopicA"}, "rocketmq", "wrong")) == "check signature failed."
    assert refusal(evaluator, signed(send, {"b": "Anything"}, "rocketmq", "12345678")) is None  # super
    assert refusal(evaluator, signed(send, {"b": "TopicA"})) == (
        "User:alice has no permission to access Topic:TopicA from 127.0.0.1, no matched policies.")
    evaluator.metadata.create_acl(Acl.from_info(ALICE_ACL, None))
    assert refusal(evaluator, signed(send, {"b": "TopicA"})) is None
    assert refusal(evaluator, signed(send, {"b": "Other"})) == (
        "User:alice has no permission to access Topic:Other from 127.0.0.1, no matched policies.")
    assert refusal(evaluator, signed(send, {"b": "TopicDX"})) == (  # Top* allows, the longer TopicD* denies
        "User:alice has no permission to access Topic:TopicDX from 127.0.0.1, the decision is deny.")
    assert refusal(evaluator, signed(send, {"b": "%RETRY%G1"})) is None  # a retry topic needs its group's Sub
    pull = {"topic": "TopicA", "consumerGroup": "G2", "queueId": "0"}
    assert refusal(evaluator, signed(RequestCode.PULL_MESSAGE, pull)) == (
        "User:alice has no permission to access Group:G2 from 127.0.0.1, no matched policies.")
    assert refusal(evaluator, signed(RequestCode.PULL_MESSAGE, pull | {"consumerGroup": "G9"}), "10.1.2.3") is None
    assert refusal(evaluator, signed(RequestCode.PULL_MESSAGE, pull | {"consumerGroup": "G9"})) is not None
    assert refusal(evaluator, signed(RequestCode.AUTH_CREATE_USER, {"username": "bob"})) == (
        "User:alice has no permission to access Cluster:DefaultCluster from 127.0.0.1, no matched policies.")
    assert refusal(evaluator, signed(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {})) is None  # no header class
    bad_heartbeat = signed(RequestCode.HEART_BEAT, {}, body=b"not json")
    assert refusal(evaluator, bad_heartbeat) == "parse authorization context error."
    evaluator.metadata.update_user(User("alice", user_status=UserStatus.DISABLE))
    assert refusal(evaluator, signed(send, {"b": "TopicA"})) == "User:alice is disabled."


def test_stored_and_admin_json_match_apaches(tmp_path: Path) -> None:
    metadata = AuthMetadataManager(AuthStore(str(tmp_path)))
    metadata.create_user(User.from_info({"password": "alicepw1", "userType": "normal"}, "alice"))
    metadata.create_acl(Acl.from_info({"policies": [{"entries": [
        {"resource": "Topic:TopicA", "actions": ["Pub", "Sub"], "decision": "Allow"},
        {"resource": "Group:G9", "actions": ["Sub"], "sourceIps": ["10.0.0.0/8"], "decision": "Allow"}]}]},
        "User:alice"))
    users = json.loads((tmp_path / "users.json").read_text())
    assert encode_json(users["alice"]) == (
        '{"password":"alicepw1","subjectType":1,"userStatus":1,"userType":2,"username":"alice"}')
    acls = json.loads((tmp_path / "acls.json").read_text())
    assert encode_json(acls["User:alice"]) == (
        '{"policies":[{"entries":[{"actions":[3,4],"decision":1,"environment":{},"resource":{"resourceName":"TopicA",'
        '"resourcePattern":2,"resourceType":4}},{"actions":[4],"decision":1,"environment":{"sourceIps":["10.0.0.0/8"]},'
        '"resource":{"resourceName":"G9","resourcePattern":2,"resourceType":5}}],"policyType":1}],'
        '"subject":{"subjectType":1,"username":"alice"}}')
    assert encode_json(metadata.get_user("alice").to_info()) == (
        '{"password":"alicepw1","userStatus":"enable","userType":"Normal","username":"alice"}')
    reloaded = AuthMetadataManager(AuthStore(str(tmp_path)))
    assert encode_json(reloaded.get_acl("alice").to_info()) == (
        '{"policies":[{"entries":[{"actions":["Pub","Sub"],"decision":"Allow","resource":"Topic:TopicA"},'
        '{"actions":["Sub"],"decision":"Allow","resource":"Group:G9","sourceIps":["10.0.0.0/8"]}],'
        '"policyType":"Custom"}],"subject":"User:alice"}')
    assert Resource.from_stored(Resource.parse("*").to_stored()).key == "*"
    assert Resource.parse("*").to_stored() == {"resourcePattern": 1, "resourceType": 1}


def test_acl_changes_merge_and_delete_as_apaches(tmp_path: Path) -> None:
    metadata = AuthMetadataManager(AuthStore(str(tmp_path)))
    metadata.create_user(User("bob", "bobpw123"))
    entry = {"resource": "Topic:T1", "actions": ["Pub"], "decision": "Allow"}
    metadata.create_acl(Acl.from_info({"policies": [{"entries": [entry]}]}, "User:bob"))
    metadata.update_acl(Acl.from_info({"policies": [{"entries": [entry | {"actions": ["Sub"]},
                                                                 entry | {"resource": "Topic:T2"}]}]}, "User:bob"))
    keys = [(e.resource.key, [a.label for a in e.actions]) for e in metadata.get_acl("bob").policies[0].entries]
    assert keys == [("Topic:T1", ["Sub"]), ("Topic:T2", ["Pub"])]
    assert [a.username for a in metadata.list_acls("bo", "T2")] == ["bob"]
    assert metadata.list_acls(None, "T3") == []
    metadata.delete_acl("bob", None, Resource.parse("Topic:T1"))
    assert [e.resource.key for e in metadata.get_acl("bob").policies[0].entries] == ["Topic:T2"]
    metadata.delete_acl("bob", None, Resource.parse("Topic:T2"))
    assert metadata.get_acl("bob") is None  # no policy left: the ACL goes
    for bad, message in [({"policies": []}, "The policies is empty."),
                         ({"policies": [{"entries": [entry | {"resource": "Nope:x"}]}]}, "The resource is null."),
                         ({"policies": [{"entries": [entry | {"actions": ["Any"]}]}]}, "The actions can not be Any."),
                         ({"policies": [{"entries": [entry | {"actions": ["Bad"]}]}]}, "The actions is empty."),
                         ({"policies": [{"entries": [entry | {"sourceIps": ["1.2.3"]}]}]}, "The source ip is invalid."),
                         ({"policies": [{"entries": [entry | {"decision": "Maybe"}]}]},
                          "The decision is null or illegal."),
                         ({"subject": "User:nobody", "policies": [{"entries": [entry]}]},
                          "The subject of User:nobody is not exist.")]:
        with pytest.raises(AuthorizationError, match=f"^{re.escape(message)}$"):
            metadata.create_acl(Acl.from_info(bad, "User:bob"))
    with pytest.raises(AuthenticationError, match="^The user is existed$"):
        metadata.create_user(User("bob", "x"))
    with pytest.raises(AuthenticationError, match="^password can not be blank$"):
        metadata.create_user(User("carol", " "))
    metadata.init_user("bob", "ignored")  # an existing user stays as it is
    assert metadata.get_user("bob").password == "bobpw123" and metadata.get_user("bob").user_type is UserType.NORMAL


def test_the_annotation_table_is_apaches() -> None:
    """Re-read @RocketMQAction/@RocketMQResource from rocketmq-remoting 5.5.0's sources jar (Maven fetched it for
    the Java oracle) and compare with ``actions.ANNOTATED`` code by code."""
    extracted: dict[int, set[tuple[object, ...]]] = {}
    for header, (code, resource, names, fields) in extract(sources_jar(*SOURCES)).items():
        row = (header, resource, names, tuple((f, t, s, None if d is None else json.loads(d)) for f, t, s, d in fields))
        extracted.setdefault(RequestCode[code], set()).add(row)
    ours = {code: (rule.header, rule.class_resource.name if rule.class_resource else None,
                   tuple(a.name for a in rule.actions),
                   tuple((f.name, f.resource_type.name, f.splitter, f.default) for f in rule.fields))
            for code, rule in actions.ANNOTATED.items()}
    assert set(ours) == set(extracted)
    for code, row in ours.items():
        assert row in extracted[code], code


def test_config_refuses_what_rmq_cannot_do() -> None:
    with pytest.raises(ConfigError, match="authenticationMetadataProvider is blank"):
        parse_auth_config({"authenticationEnabled": "true"}, "C")
    with pytest.raises(ConfigError, match="authorizationProvider=com.example.Mine is refused"):
        parse_auth_config({"authorizationProvider": "com.example.Mine"}, "C")
    with pytest.raises(ConfigError, match="initAuthenticationUser"):
        parse_auth_config({"initAuthenticationUser": '{"username":"x"}'}, "C")
    with pytest.raises(ConfigError, match="authenticationWhitelist"):
        parse_auth_config({"authenticationWhitelist": "34,HEART_BEAT"}, "C")
    config = parse_auth_config({"innerClientAuthenticationCredentials": '{"accessKey":"a","secretKey":"s"}',
                                "authorizationWhitelist": "34, 11"}, "C")
    assert config.inner_client_credentials == SessionCredentials("a", "s")
    assert config.authorization_whitelist == {"34", "11"} and not config.enabled
