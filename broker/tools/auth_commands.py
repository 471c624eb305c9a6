"""The ACL 2.0 commands of ``mqadmin`` (tools/command/auth/*SubCommand.java, 5.5.0) and the keys the tool signs with.

Commands: createUser updateUser deleteUser getUser listUser createAcl updateAcl deleteAcl getAcl listAcl copyUser
copyAcl, each on one broker (``-b``) or a cluster (``-c``: writes go to every master and slave, reads to the masters
until one has an answer), over the admin requests AUTH_CREATE_USER ... AUTH_LIST_ACL (3001-3010). Bodies are
Apache's UserInfo and AclInfo as JSON (``"userType":"Normal"``, ``"resource":"Topic:orders*"``): the tool never
interprets them, the broker does.

Keys: like Apache's tool (``AclUtils.getAclRPCHook``), every request is signed with ``accessKey``/``secretKey`` of
``<home>/conf/tools.yml``, ``home`` being the ``rocketmq.home.dir`` property (``mqadmin -Drocketmq.home.dir=DIR
...``) or else the ROCKETMQ_HOME variable. A missing file, or one without both keys, means unsigned requests.

Rule 1: as in the other command modules, the output is written here as Java's printf formats (``%-16s`` is
``:<16``), so a row of ours lines up with a row of Apache's tool.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import yaml

from broker.common.errors import MQClientError
from broker.common.fastjson import encode_json
from broker.remoting.codes import RequestCode
from broker.remoting.command import create_request
from broker.remoting.headers.auth import (
    AclRequestHeader,
    DeleteAclRequestHeader,
    ListAclsRequestHeader,
    ListUsersRequestHeader,
    UserRequestHeader,
)
from broker.remoting.signing import SessionCredentials
from broker.tools.admin import MQAdminExt
from broker.tools.admin_client import answer_json, check_answer
from broker.tools.cli import CommandLine, OptionGroup, ShowHelp, SubCommand, cluster_addrs, js, opt

log = logging.getLogger(__name__)

ROCKETMQ_HOME_PROPERTY = "rocketmq.home.dir"  # MixAll.ROCKETMQ_HOME_PROPERTY
ROCKETMQ_HOME_ENV = "ROCKETMQ_HOME"  # MixAll.ROCKETMQ_HOME_ENV
TOOLS_FILE = "conf/tools.yml"  # MixAll.ACL_CONF_TOOLS_FILE
USER_FORMAT = "{:<16}  {:<22}  {:<22}  {:<22}\n"  # %-16s  %-22s  %-22s  %-22s%n
ACL_FORMAT = "{:<16}  {:<10}  {:<22}  {:<20}  {:<24}  {:<10}\n"  # %-16s  %-10s  %-22s  %-20s  %-24s  %-10s%n


# -- the keys (AclUtils.getAclRPCHook) -----------------------------------------------------------------------------


def tools_home(properties: Mapping[str, str], environ: Mapping[str, str] = os.environ) -> str | None:
    """MixAll.ROCKETMQ_HOME_DIR: the ``rocketmq.home.dir`` property, else ROCKETMQ_HOME."""
    return properties.get(ROCKETMQ_HOME_PROPERTY) or environ.get(ROCKETMQ_HOME_ENV) or None


def tools_credentials(home: str | None) -> SessionCredentials | None:
    """The keys of ``<home>/conf/tools.yml``, or None (requests go unsigned) when there is no such file or it lacks
    one of the keys, as Apache's tool (which logs why, and goes on)."""
    if not home:
        return None
    path = Path(home) / TOOLS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        log.debug("no %s (%s): requests are not signed", path, err)
        return None
    try:
        keys = yaml.load(text, Loader=yaml.BaseLoader)  # every value the text written, as snakeyaml's Map load
    except yaml.YAMLError as err:
        log.warning("Failed to enable ACL: %s is not YAML (%s)", path, err)
        return None
    keys = keys if isinstance(keys, dict) else {}
    access_key, secret_key = str(keys.get("accessKey", "")).strip(), str(keys.get("secretKey", "")).strip()
    if not access_key or not secret_key:
        log.warning("Failed to enable ACL. Either AccessKey or secretKey is blank (%s)", path)
        return None
    return SessionCredentials(access_key, secret_key)


# -- the admin calls (MQClientAPIImpl.createUser ... listAcl) --------------------------------------------------------


async def _call(admin: MQAdminExt, addr: str, code: int, ext: dict[str, str], body: Any = None) -> Any:
    """One admin request; its JSON answer (None when it has no body: a user or ACL that does not exist)."""
    request = create_request(code, ext, b"" if body is None else encode_json(body).encode("utf-8"))
    response = check_answer(await admin.invoke(addr, request), addr)
    return answer_json(response, RequestCode(code).name) if response.body else None


def user_info(username: str | None, password: str | None, user_type: str | None,
              user_status: str | None = None) -> dict[str, str]:
    """UserInfo.of: the fields given (fastjson leaves nulls out)."""
    info = {"password": password, "userStatus": user_status, "userType": user_type, "username": username}
    return {k: v for k, v in info.items() if v is not None}


def acl_info(subject: str | None, resources: list[str], actions: list[str] | None, source_ips: list[str] | None,
             decision: str | None) -> dict[str, Any]:
    """AclInfo.of: one policy (no type: the broker takes Custom) with an entry per resource."""
    def entry(resource: str) -> dict[str, Any]:
        fields = {"actions": actions, "decision": decision, "resource": resource, "sourceIps": source_ips}
        return {k: v for k, v in fields.items() if v is not None}

    info: dict[str, Any] = {"policies": [{"entries": [entry(r) for r in resources]}]}
    if subject is not None:
        info["subject"] = subject
    return info


def _subject(info: Mapping[str, Any]) -> str | None:
    return info.get("subject")


# -- Java's text forms ------------------------------------------------------------------------------------------------


def _java_list(value: object) -> str:
    """List.toString: ``[a, b]``; a missing list is ``null``."""
    return js(value) if not isinstance(value, list) else "[" + ", ".join(js(v) for v in value) + "]"


def _split(value: str | None) -> list[str] | None:
    """StringUtils.split(value, ',') then trim each: empty tokens are dropped."""
    return None if value is None else [part.strip() for part in value.split(",") if part]


def print_users(users: list[Mapping[str, Any]], out: TextIO) -> None:
    out.write(USER_FORMAT.format("#UserName", "#Password", "#UserType", "#UserStatus"))
    for user in users:
        out.write(USER_FORMAT.format(js(user.get("username")), js(user.get("password")), js(user.get("userType")),
                                     js(user.get("userStatus"))))


def print_acls(acls: list[Mapping[str, Any]], out: TextIO) -> None:
    """printAcl: one row per policy entry; an ACL without policies gets a row of its subject alone."""
    out.write(ACL_FORMAT.format("#Subject", "#PolicyType", "#Resource", "#Actions", "#SourceIp", "#Decision"))
    for acl in acls:
        subject = js(acl.get("subject"))
        policies = acl.get("policies") or []
        if not policies:
            out.write(ACL_FORMAT.format(subject, "", "", "", "", ""))
        for policy in policies:
            for entry in policy.get("entries") or []:
                out.write(ACL_FORMAT.format(subject, js(policy.get("policyType")), js(entry.get("resource")),
                                            _java_list(entry.get("actions")), _java_list(entry.get("sourceIps")),
                                            js(entry.get("decision"))))


# -- the commands -----------------------------------------------------------------------------------------------------


async def _writes(admin: MQAdminExt, line: CommandLine, out: TextIO) -> list[str]:
    """Where a write goes: ``-b``, or every master and slave of ``-c`` (fetchMasterAndSlaveAddrByClusterName)."""
    if line.has("b"):
        return [line.required("b")]
    if line.has("c"):
        return await cluster_addrs(admin, line.required("c"), out, slaves=True)
    raise ShowHelp


async def _reads(admin: MQAdminExt, line: CommandLine, out: TextIO, command: str) -> list[str]:
    """Where a read goes: ``-b``, or the masters of ``-c``; a cluster without any is an error, as Java."""
    if line.has("b"):
        return [line.required("b")]
    if not line.has("c"):
        raise ShowHelp
    masters = await cluster_addrs(admin, line.required("c"), out)
    if not masters:
        raise MQClientError(-1, f"{command} command failed, there is no broker in cluster.")
    return masters


async def create_user(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    info = user_info(line.value("u"), line.value("p"), line.value("t"))
    for addr in await _writes(admin, line, out):
        await _call(admin, addr, RequestCode.AUTH_CREATE_USER, UserRequestHeader(info.get("username")).to_ext(), info)
        out.write(f"create user to {addr} success.\n")


async def update_user(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    info = user_info(line.value("u"), line.value("p"), line.value("t"), line.value("s"))
    for addr in await _writes(admin, line, out):
        await _call(admin, addr, RequestCode.AUTH_UPDATE_USER, UserRequestHeader(info.get("username")).to_ext(), info)
        out.write(f"update user to {addr} success.\n")


async def delete_user(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    for addr in await _writes(admin, line, out):
        await _call(admin, addr, RequestCode.AUTH_DELETE_USER, UserRequestHeader(line.value("u")).to_ext())
        out.write(f"delete user to {addr} success.\n")


async def get_user(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    for addr in await _reads(admin, line, out, "GetUserSubCommand"):
        user = await _call(admin, addr, RequestCode.AUTH_GET_USER, UserRequestHeader(line.value("u")).to_ext())
        if user is not None:
            print_users([user], out)
            return


async def list_user(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    header = ListUsersRequestHeader(line.value("f")).to_ext()
    for addr in await _reads(admin, line, out, "ListUserSubCommand"):
        users = await _call(admin, addr, RequestCode.AUTH_LIST_USER, header)
        if users:
            print_users(users, out)
            if line.has("c"):
                out.write(f"get user from {addr} success.\n")
            return


async def _write_acl(admin: MQAdminExt, line: CommandLine, out: TextIO, code: int, verb: str) -> None:
    info = acl_info(line.value("s"), _split(line.value("r")) or [], _split(line.value("a")), _split(line.value("i")),
                    line.value("d"))
    for addr in await _writes(admin, line, out):
        await _call(admin, addr, code, AclRequestHeader(_subject(info)).to_ext(), info)
        out.write(f"{verb} acl to {addr} success.\n")


async def create_acl(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    await _write_acl(admin, line, out, RequestCode.AUTH_CREATE_ACL, "create")


async def update_acl(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    await _write_acl(admin, line, out, RequestCode.AUTH_UPDATE_ACL, "update")


async def delete_acl(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    header = DeleteAclRequestHeader(subject=line.value("s"), resource=line.value("r")).to_ext()
    for addr in await _writes(admin, line, out):
        await _call(admin, addr, RequestCode.AUTH_DELETE_ACL, header)
        out.write(f"delete acl to {addr} success.\n")


async def get_acl(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    """Unlike getUser, Java prints the ACL of every master of a cluster that has one."""
    for addr in await _reads(admin, line, out, "GetAclSubCommand"):
        acl = await _call(admin, addr, RequestCode.AUTH_GET_ACL, AclRequestHeader(line.value("s")).to_ext())
        if acl is not None:
            print_acls([acl], out)


async def list_acl(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    header = ListAclsRequestHeader(subject_filter=line.value("s"), resource_filter=line.value("r")).to_ext()
    for addr in await _reads(admin, line, out, "ListAclSubCommand"):
        acls = await _call(admin, addr, RequestCode.AUTH_LIST_ACL, header)
        if acls:
            print_acls(acls, out)


async def copy_user(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    """CopyUsersSubCommand: the named users (or all) of ``-f`` created on ``-t``, or updated where they exist."""
    source, target, names = line.required("f"), line.required("t"), line.value("u")
    if names:
        found = [await _call(admin, source, RequestCode.AUTH_GET_USER, UserRequestHeader(n).to_ext())
                 for n in _split(names) or []]
        users = [user for user in found if user is not None]
    else:
        users = await _call(admin, source, RequestCode.AUTH_LIST_USER, {}) or []
    for user in users:
        name = user.get("username")
        there = await _call(admin, target, RequestCode.AUTH_GET_USER, UserRequestHeader(name).to_ext())
        code = RequestCode.AUTH_CREATE_USER if there is None else RequestCode.AUTH_UPDATE_USER
        await _call(admin, target, code, UserRequestHeader(name).to_ext(), user)
        out.write(f"copy user of {js(name)} from {source} to {target} success.\n")


async def copy_acl(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    """CopyAclsSubCommand: the named subjects' ACLs (or all) of ``-f`` created on ``-t``, or updated there."""
    source, target, subjects = line.required("f"), line.required("t"), line.value("s")
    if subjects:
        found = [await _call(admin, source, RequestCode.AUTH_GET_ACL, AclRequestHeader(s).to_ext())
                 for s in _split(subjects) or []]
        acls = [acl for acl in found if acl is not None]
    else:
        acls = await _call(admin, source, RequestCode.AUTH_LIST_ACL, {}) or []
    for acl in acls:
        header = AclRequestHeader(_subject(acl)).to_ext()
        there = await _call(admin, target, RequestCode.AUTH_GET_ACL, header)
        code = RequestCode.AUTH_CREATE_ACL if there is None else RequestCode.AUTH_UPDATE_ACL
        await _call(admin, target, code, header, acl)
        out.write(f"copy acl of {js(_subject(acl))} from {source} to {target} success.\n")


def _group(cluster: str, broker: str, *, broker_first: bool = False) -> OptionGroup:
    """The required -c/-b group, with each command's own descriptions (Apache words them one by one)."""
    c, b = opt("c", "clusterName", cluster), opt("b", "brokerAddr", broker)
    return OptionGroup((b, c) if broker_first else (c, b))


SUB_COMMANDS: tuple[SubCommand, ...] = (
    SubCommand("createUser", "Create user to cluster.", (
        _group("create user to which cluster", "create user to which broker"),
        opt("u", "username", "the username of user to create.", required=True),
        opt("p", "password", "the password of user to create", required=True),
        opt("t", "userType", "the userType of user to create"),
    ), create_user),
    SubCommand("updateUser", "Update user to cluster.", (
        _group("update user to which cluster", "update user to which broker"),
        opt("u", "username", "the username of user to update.", required=True),
        OptionGroup((opt("p", "password", "the password of user to update"),
                     opt("t", "userType", "the userType of user to update"),
                     opt("s", "userStatus", "the userStatus of user to update"))),
    ), update_user),
    SubCommand("deleteUser", "Delete user from cluster.", (
        _group("delete acl from which cluster", "delete user from which broker"),
        opt("u", "username", "the username of user to delete.", required=True),
    ), delete_user),
    SubCommand("getUser", "Get user from cluster.", (
        _group("get user for specified cluster", "get user for which broker", broker_first=True),
        opt("u", "username", "the username of user to get"),
    ), get_user),
    SubCommand("listUser", "List user from cluster.", (
        _group("list user for specified cluster", "list user for which broker", broker_first=True),
        opt("f", "filter", "the filter to list users"),
    ), list_user),
    SubCommand("createAcl", "Create acl to cluster.", (
        _group("create acl to which cluster", "create acl to which broker"),
        opt("s", "subject", "the subject of acl to create.", required=True),
        opt("r", "resources", "the resources of acl to create", required=True),
        opt("a", "actions", "the actions of acl to create", required=True),
        opt("i", "sourceIp", "the sourceIps of acl to create"),
        opt("d", "decision", "the decision of acl to create", required=True),
    ), create_acl),
    SubCommand("updateAcl", "Update acl to cluster.", (
        _group("update acl to which cluster", "update acl to which broker"),
        opt("s", "subject", "the subject of acl to update.", required=True),
        opt("r", "resources", "the resources of acl to update", required=True),
        opt("a", "actions", "the actions of acl to update", required=True),
        opt("d", "decision", "the decision of acl to update", required=True),
        opt("i", "sourceIp", "the sourceIps of acl to update"),
    ), update_acl),
    SubCommand("deleteAcl", "Delete acl from cluster.", (
        _group("delete acl from which cluster", "delete acl from which broker"),
        opt("s", "subject", "the subject of acl to delete.", required=True),
        opt("r", "resources", "the resources of acl to delete"),
    ), delete_acl),
    SubCommand("getAcl", "Get acl from cluster.", (
        _group("get acl for specified cluster", "get acl for which broker", broker_first=True),
        opt("s", "subject", "the subject of acl to get"),
    ), get_acl),
    SubCommand("listAcl", "List acl from cluster.", (
        _group("list acl for specified cluster.", "list acl for which broker.", broker_first=True),
        opt("s", "subject", "the subject of acl to filter."),
        opt("r", "resource", "the resource of acl to filter."),
    ), list_acl),
    SubCommand("copyUser", "Copy user to cluster.", (
        opt("f", "fromBroker", "the source broker that the users copy from", required=True),
        opt("t", "toBroker", "the target broker that the users copy to", required=True),
        opt("u", "usernames", "the username list of user to copy."),
    ), copy_user),
    SubCommand("copyAcl", "Copy acl to cluster.", (
        opt("f", "fromBroker", "the source broker that the acls copy from", required=True),
        opt("t", "toBroker", "the target broker that the acls copy to", required=True),
        opt("s", "subjects", "the subject list of acl to copy."),
    ), copy_acl),
)
