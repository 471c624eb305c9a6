"""Differential ACL tests: one script run against our broker and against Apache's with the same configuration, the
outcome codes and remarks compared. ACL 1.0 (``plain_acl.yml``) is judged by Apache's 5.3.2 broker, the last release
that has it; ACL 2.0 by Apache's 5.5.0 broker. Both kinds of cluster are the session's shared ones (``auth_env``).

- The official Java clients, 4.9.8 (with rocketmq-acl's ``AclClientRPCHook``) and 5.5.0, each send, pull, commit an
  offset and create a topic (an admin call), allowed and denied (ClientDriver ``acl-calls``).
- Frames signed by ``broker.remoting.signing`` and then spoiled (unknown key, wrong secret, body or an ext field
  altered after signing, signature missing, no signature at all), and requests from a white-listed and a
  non-white-listed loopback address (127.0.0.2, 127.0.0.1): refused as Apache refuses them, nothing stored (the
  queue offsets of a neighbour's sends before and after them are consecutive), and the neighbour still served.
- A policy change (ACL 2.0's AUTH_UPDATE_ACL) and a ``plain_acl.yml`` edit take effect without a restart.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from broker.client import Message, MessageQueue
from broker.client.blocking_remoting import BlockingRemotingClient
from broker.client.protocol import send_message_header, send_message_request
from broker.common.fastjson import encode_json
from broker.remoting.codes import RequestCode
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.signing import SIGNATURE, SessionCredentials, sign_request
from tests.apache import ApacheClient, DriverSession, apache_client
from tests.integration.auth_env import (
    AUTH_CONF,
    PLAIN_ADMIN,
    PLAIN_USER,
    PLAIN_WHITE,
    SUPER,
    plain_acl_cluster,
)
from tests.integration.cluster import KINDS, ClusterPool, rocketmq_home

pytestmark = [pytest.mark.java, pytest.mark.slow]

WHITE_HOST, OTHER_HOST = "127.0.0.2", "127.0.0.1"
TIMEOUT_MS = 10_000
RELOAD_WAIT_S = 30.0  # both brokers look at plain_acl.yml's modification time every 5 s

# ACL 2.0: a normal user allowed one topic and group, and a topic only from WHITE_HOST
DIFF_USER = SessionCredentials("diffUser", "diffUser1")
DIFF_ACL = {"policies": [{"entries": [
    {"resource": "Topic:DiffTopicA", "actions": ["Pub", "Sub"], "decision": "Allow"},
    {"resource": "Group:DiffGroupA", "actions": ["Sub"], "decision": "Allow"},
    {"resource": "Topic:DiffTopicW", "actions": ["Pub"], "sourceIps": [WHITE_HOST], "decision": "Allow"}]}]}


@dataclasses.dataclass(frozen=True, slots=True)
class AclSetting:
    """One ACL configuration as both brokers run it: the cluster of a kind, who may do what on which names."""

    cluster: Callable[[ClusterPool, str], Any]
    user: SessionCredentials  # a normal account
    admin: SessionCredentials  # may do anything
    topic: str  # the user may send to and pull from it
    group: str  # the user may pull and commit with it
    denied_topic: str
    denied_group: str


PLAIN = AclSetting(plain_acl_cluster, PLAIN_USER, PLAIN_ADMIN, "InterTopicA", "InterGroupA", "InterTopicD",
                   "InterGroupX")
AUTH = AclSetting(lambda clusters, kind: clusters.shared(kind, **AUTH_CONF), DIFF_USER, SUPER, "DiffTopicA",
                  "DiffGroupA", "DiffTopicD", "DiffGroupD")


def call(addr: str, request: RemotingCommand, credentials: SessionCredentials | None = None,
         source_host: str | None = None) -> tuple[int, str | None]:
    with BlockingRemotingClient(addr, source_host=source_host) as client:
        response = client.invoke(sign_request(request, credentials) if credentials else request, TIMEOUT_MS)
    return response.code, response.remark


def send(topic: str, body: bytes = b"hello") -> RemotingCommand:
    msg = Message(topic, body)
    header = send_message_header("diff_producer", msg, MessageQueue(topic, "broker-a", 0), 0, batch=False)
    return send_message_request(header, msg.body)


def auth_admin(code: int, fields: dict[str, str], body: object) -> RemotingCommand:
    return create_request(code, fields, encode_json(body).encode())


@pytest.fixture(scope="module")
def auth_users(clusters: ClusterPool) -> dict[str, list[tuple[int, str | None]]]:
    """DIFF_USER and DIFF_ACL on both ACL 2.0 brokers, created by the super user: what each broker answered."""
    answers = {}
    for kind in KINDS:
        addr = AUTH.cluster(clusters, kind).brokers[0].addr
        answers[kind] = [
            call(addr, auth_admin(RequestCode.AUTH_CREATE_USER, {"username": DIFF_USER.access_key},
                                  {"password": DIFF_USER.secret_key, "userType": "Normal"}), SUPER),
            call(addr, auth_admin(RequestCode.AUTH_CREATE_ACL, {"subject": f"User:{DIFF_USER.access_key}"},
                                  {"subject": f"User:{DIFF_USER.access_key}", **DIFF_ACL}), SUPER)]
    return answers


# -- the official Java clients ----------------------------------------------------------------------------------------


def java_runs(acl: AclSetting) -> list[tuple[str, SessionCredentials, str, str, str]]:
    """(name, keys, topic, group, topic to create): allowed names, denied names, and the admin's turn."""
    return [("user allowed", acl.user, acl.topic, acl.group, acl.topic),
            ("user denied", acl.user, acl.denied_topic, acl.denied_group, "DiffCreatedByUser"),
            ("admin", acl.admin, acl.topic, acl.group, "DiffCreatedByAdmin")]


def java_outcomes(sessions: dict[str, DriverSession], namesrv: str, acl: AclSetting) -> list[tuple[Any, ...]]:
    """(client, run, call, code, remark, status) for every client, run and call, in order."""
    rows = []
    for version, session in sessions.items():
        for name, keys, topic, group, created in java_runs(acl):
            out = session.call("acl-calls", namesrv=namesrv, topic=topic, group=group, admin_topic=created,
                               access_key=keys.access_key, secret_key=keys.secret_key)
            rows += [(version, name, r["call"], r["code"], r["remark"], r.get("status")) for r in out.records]
    return rows


@pytest.fixture(scope="module")
def java_sessions(client49_factory: Callable[..., ApacheClient],
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, DriverSession]]:
    """One JVM per client version for the whole module (each acl-calls run starts a client of its own in it)."""
    clients = {"4.9.8": client49_factory(tmp_path_factory.mktemp("acl-client49")),
               "5.5.0": apache_client(tmp_path_factory.mktemp("acl-client55"))}
    with contextlib.ExitStack() as stack:
        yield {version: stack.enter_context(client.session()) for version, client in clients.items()}


@pytest.mark.parametrize("acl", [PLAIN, AUTH], ids=["acl1-apache-5.3.2", "acl2-apache-5.5.0"])
def test_java_clients_get_apaches_outcomes(clusters: ClusterPool, java_sessions: dict[str, DriverSession],
                                           auth_users: dict[str, list[tuple[int, str | None]]],
                                           acl: AclSetting) -> None:
    assert auth_users["rmq"] == auth_users["apache"]
    found = {kind: java_outcomes(java_sessions, acl.cluster(clusters, kind).namesrv_addr, acl) for kind in KINDS}
    theirs = found["apache"]
    codes = {(client, run, name): code for client, run, name, code, _, _ in theirs}
    for client in java_sessions:  # the script does reach both sides of every check on Apache's broker
        assert [codes[client, "user allowed", name] for name in ("send", "pull", "commit")] == [0, 0, 0], theirs
        assert codes[client, "admin", "admin"] == 0, theirs
        assert all(codes[client, "user denied", name] != 0 for name in ("send", "pull", "commit", "admin")), theirs
        assert codes[client, "user allowed", "admin"] != 0, theirs
    assert found["rmq"] == theirs


# -- spoiled frames and addresses -------------------------------------------------------------------------------------


def spoiled(acl: AclSetting) -> list[tuple[str, RemotingCommand]]:
    """Sends to ``acl.topic``'s queue 0 that both brokers must refuse: a frame changed after it was signed (its body,
    or any one of its ext fields, AccessKey included) keeps its old signature."""
    good = sign_request(send(acl.topic), acl.user)
    fields = dict(good.ext_fields)
    wrong_secret = dataclasses.replace(acl.user, secret_key="wrong123")
    return [("unsigned", send(acl.topic)),
            ("unknown key", sign_request(send(acl.topic), SessionCredentials("nobody00", "nobody12"))),
            ("wrong secret", sign_request(send(acl.topic), wrong_secret)),
            ("body altered", dataclasses.replace(good, body=b"hellO")),
            *((f"ext field {key} altered", dataclasses.replace(good, ext_fields={**fields, key: value + "1"}))
              for key, value in fields.items() if key != SIGNATURE),
            ("signature missing", dataclasses.replace(
                good, ext_fields={key: value for key, value in fields.items() if key != SIGNATURE}))]


def from_two_addresses(acl: AclSetting) -> RemotingCommand:
    """A send that only WHITE_HOST may make: ACL 1.0's interWhite (its white address skips the signature, so a wrong
    secret does not matter there), ACL 2.0's DiffTopicW (allowed to DIFF_USER from WHITE_HOST only)."""
    if acl is PLAIN:
        return sign_request(send("InterTopicW"), dataclasses.replace(PLAIN_WHITE, secret_key="wrong123"))
    return sign_request(send("DiffTopicW"), DIFF_USER)


def answer(addr: str, request: RemotingCommand, source_host: str | None = None) -> tuple[int, str | None]:
    """The code and, for a refusal, the remark (an accepted request's remark is its processor's)."""
    code, remark = call(addr, request, source_host=source_host)
    return code, remark if code else None


def refusals(addr: str, acl: AclSetting) -> dict[str, Any]:
    """The answers, and what was stored between the neighbour's two sends on its own connection: the queue offsets
    its sends were given bracket the spoiled ones (a broker gives the offset when it appends, so nothing in between
    means nothing stored), and its second send shows the broker still serving it."""
    with BlockingRemotingClient(addr, credentials=acl.user) as neighbour:
        first = neighbour.invoke(send(acl.topic), TIMEOUT_MS)
        found: dict[str, Any] = {name: answer(addr, frame) for name, frame in spoiled(acl)}
        second = neighbour.invoke(send(acl.topic), TIMEOUT_MS)
    found["neighbour"] = (first.code, second.code)
    found["stored"] = int(second.ext_fields["queueOffset"]) - int(first.ext_fields["queueOffset"]) - 1
    found["from the white address"] = answer(addr, from_two_addresses(acl), WHITE_HOST)
    found["from another address"] = answer(addr, from_two_addresses(acl), OTHER_HOST)
    return found


@pytest.mark.parametrize("acl", [PLAIN, AUTH], ids=["acl1-apache-5.3.2", "acl2-apache-5.5.0"])
def test_spoiled_requests_and_addresses_are_answered_as_apache_answers_them(
        clusters: ClusterPool, auth_users: dict[str, list[tuple[int, str | None]]], acl: AclSetting) -> None:
    found = {kind: refusals(acl.cluster(clusters, kind).brokers[0].addr, acl) for kind in KINDS}
    theirs = found["apache"]
    assert all(theirs[name][0] != 0 for name, _ in spoiled(acl)), theirs
    assert (theirs["stored"], theirs["neighbour"]) == (0, (0, 0)), theirs
    assert theirs["from the white address"] == (0, None) and theirs["from another address"][0] != 0, theirs
    assert found["rmq"] == theirs


# -- changes without a restart ----------------------------------------------------------------------------------------

EDITED = SessionCredentials("interEdit", "interEdit1")


def add_account(home: Path, credentials: SessionCredentials) -> None:
    """plain_acl.yml with one more account, everything else as the broker last wrote it."""
    path = home / "conf" / "plain_acl.yml"
    data = yaml.safe_load(path.read_text()) or {}
    data.setdefault("accounts", []).append({"accessKey": credentials.access_key, "secretKey": credentials.secret_key,
                                            "defaultTopicPerm": "PUB", "defaultGroupPerm": "SUB"})
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def answer_once_changed(addr: str, credentials: SessionCredentials, topic: str,
                        before: tuple[int, str | None]) -> tuple[int, str | None]:
    """The answer to a send, asked again until it differs from ``before`` (or RELOAD_WAIT_S passed)."""
    deadline = time.monotonic() + RELOAD_WAIT_S
    while (now := answer(addr, sign_request(send(topic), credentials))) == before and time.monotonic() < deadline:
        time.sleep(0.5)
    return now


def test_policy_change_and_file_edit_take_effect_without_restart(
        clusters: ClusterPool, auth_users: dict[str, list[tuple[int, str | None]]]) -> None:
    grant = {"subject": f"User:{DIFF_USER.access_key}", "policies": [{"entries": [
        {"resource": "Topic:DiffTopicP", "actions": ["Pub"], "decision": "Allow"}]}]}
    found: dict[str, list[tuple[int, str | None]]] = {}
    for kind in KINDS:
        addr = AUTH.cluster(clusters, kind).brokers[0].addr
        found[kind] = [answer(addr, sign_request(send("DiffTopicP"), DIFF_USER)),
                       call(addr, auth_admin(RequestCode.AUTH_UPDATE_ACL, {"subject": grant["subject"]}, grant),
                            SUPER),
                       answer(addr, sign_request(send("DiffTopicP"), DIFF_USER))]
    plain = {kind: plain_acl_cluster(clusters, kind).brokers[0] for kind in KINDS}
    unknown = {kind: answer(broker.addr, sign_request(send("InterTopicE"), EDITED)) for kind, broker in plain.items()}
    for broker in plain.values():
        add_account(rocketmq_home(broker), EDITED)
    for kind, broker in plain.items():  # the two brokers' watchers run at once
        found[kind] += [unknown[kind], answer_once_changed(broker.addr, EDITED, "InterTopicE", unknown[kind])]
    theirs = found["apache"]
    assert theirs[0][0] != 0 and theirs[2] == (0, None), theirs  # updateAcl: refused, then allowed
    assert theirs[3][0] != 0 and theirs[4] == (0, None), theirs  # the new account: unknown, then allowed
    assert found["rmq"] == theirs
