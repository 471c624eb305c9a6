"""ACL 1.0's commands of ``mqadmin`` (legacy: rocketmq-tools up to 5.3.1, ``tools/command/acl/``): updateAclConfig,
deleteAclConfig (alias deleteAccessConfig), updateGlobalWhiteAddr and clusterAclConfigVersion, which change and read
a broker's ``plain_acl.yml`` through requests 50-53.

Rule 1: as in the other command modules, the output is written here as Java's printf formats, so what ours prints is
what Apache's 5.3.1 tool prints, including the lines it ends without a newline (the account after updateAclConfig,
the access key after deleteAclConfig). With ``-c`` a command goes to every broker of the cluster, slaves too, in the
order of Java's HashSet; clusterAclConfigVersion asks the masters only.

The requests are signed as every command's, with the keys of ``conf/tools.yml`` (``auth_commands``): requests 50-52
are admin-only, so a broker with ``aclEnable=true`` refuses them from anyone but an admin account.

clusterAclConfigVersion prints one row per ACL file from the answer's ``allAclFileVersion``, which a 4.9 broker
sends and Apache's 5.3.2 broker (and ours, answering as it) does not: Apache's tool then fails with a
NullPointerException after printing the header, ours fails with an error that says so, after the same header.

Examples:
    $ mqadmin updateAclConfig -n 127.0.0.1:9876 -c DefaultCluster -a RocketMQ -s 12345678 -i PUB -t "a=PUB,b=SUB"
    $ mqadmin deleteAclConfig -n 127.0.0.1:9876 -b 127.0.0.1:10911 -a RocketMQ
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TextIO

from broker.common.errors import MQClientError, RmqError, broker_error
from broker.common.fastjson import decode_json
from broker.common.hash_order import hash_map_order
from broker.remoting.codes import AclV1RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.headers import (
    CreateAccessConfigRequestHeader,
    DeleteAccessConfigRequestHeader,
    GetBrokerAclConfigResponseHeader,
    UpdateGlobalWhiteAddrsConfigRequestHeader,
)
from broker.remoting.headers.base import HeaderError
from broker.tools.admin import MQAdminExt
from broker.tools.cli import CommandLine, OptionGroup, SubCommand, cluster_addrs, format_date, js, opt

VERSION_FORMAT = "{:<16}  {:<22}  {:<22}  {:<20}  {:<22}  {:<22}\n"  # %-16s  %-22s  %-22s  %-20s  %-22s  %-22s%n


# -- the admin calls (MQClientAPIImpl.createPlainAccessConfig ... getBrokerClusterAclInfo, 5.3.1) --------------------


async def _call(admin: MQAdminExt, addr: str, request: RemotingCommand) -> RemotingCommand:
    """One signed request to ``addr``; a refusal raises MQClientError with the broker's code and remark (Java's
    MQClientException for requests 50, 51 and 53)."""
    response = await admin.invoke(addr, request)
    if response.code != ResponseCode.SUCCESS:
        raise MQClientError(response.code, js(response.remark))
    return response


@dataclass(frozen=True, slots=True)
class AclVersionRow:
    """One line of clusterAclConfigVersion: an ACL file of a broker and its DataVersion."""

    cluster_name: str
    broker_name: str
    broker_addr: str
    file: str
    counter: int
    timestamp: int

    def text(self) -> str:
        return VERSION_FORMAT.format(self.cluster_name, self.broker_name, self.broker_addr, self.file,
                                     str(self.counter), format_date(self.timestamp))


class NoAclFileVersions(RmqError):
    """A broker answered GET_BROKER_CLUSTER_ACL_INFO without ``allAclFileVersion`` (5.3.2's and ours do)."""


def acl_version_rows(header: GetBrokerAclConfigResponseHeader, addr: str) -> list[AclVersionRow]:
    """ClusterAclVersionInfo's ``allAclConfigDataVersion`` as rows, in the order of Java's HashMap."""
    if header.all_acl_file_version is None:
        raise NoAclFileVersions(f"the broker {addr} lists no ACL file versions (no allAclFileVersion in its answer: "
                                "4.9 brokers send it, 5.3.2 and ours do not; Apache's 5.3.1 tool fails on it too)")
    try:
        versions = decode_json(header.all_acl_file_version)
        rows = [(str(name), int(v.get("counter", 0)), int(v.get("timestamp", 0))) for name, v in versions.items()]
    except (ValueError, AttributeError, TypeError) as err:
        raise MQClientError(ResponseCode.SYSTEM_ERROR, f"the broker {addr} sent an allAclFileVersion that is not a "
                            f"map of DataVersions: {header.all_acl_file_version!r}") from err
    by_file = {name: (counter, timestamp) for name, counter, timestamp in rows}
    return [AclVersionRow(header.cluster_name, header.broker_name, header.broker_addr, name, *by_file[name])
            for name in hash_map_order(by_file, max(len(by_file), 1))]


async def examine_broker_cluster_acl_version_info(admin: MQAdminExt, addr: str) -> list[AclVersionRow]:
    response = await admin.invoke(addr, create_request(AclV1RequestCode.GET_BROKER_CLUSTER_ACL_INFO))
    if response.code != ResponseCode.SUCCESS:
        raise broker_error(response.code, response.remark, addr)  # Java's MQBrokerException for request 52
    try:
        header = GetBrokerAclConfigResponseHeader.from_ext(dict(response.ext_fields))
    except HeaderError as err:
        raise MQClientError(ResponseCode.SYSTEM_ERROR, f"the broker {addr} answered a bad ACL info header: {err}") \
            from err
    return acl_version_rows(header, addr)


# -- updateAclConfig ---------------------------------------------------------------------------------------------------


def _java_split(text: str) -> tuple[str, ...]:
    """String.split(","): trailing empty items dropped (an empty text stays one empty item)."""
    items = text.split(",")
    while len(items) > 1 and not items[-1]:
        items.pop()
    return () if items == [""] and text else tuple(items)


def _java_list(items: tuple[str, ...] | None) -> str:
    return "null" if items is None else "[" + ", ".join(items) + "]"


@dataclass(frozen=True, slots=True)
class AclConfigOptions:
    """updateAclConfig's options: the account to create or update (Java's PlainAccessConfig as the tool fills it;
    what is not given stays None, and the broker keeps the stored value)."""

    access_key: str
    secret_key: str | None
    white_remote_address: str | None
    admin: bool
    default_topic_perm: str | None
    default_group_perm: str | None
    topic_perms: tuple[str, ...] | None
    group_perms: tuple[str, ...] | None

    @classmethod
    def parse(cls, line: CommandLine) -> AclConfigOptions:
        topics, groups = line.value("t"), line.value("g")
        return cls(access_key=line.required("a"), secret_key=line.value("s"),
                   white_remote_address=line.value("w"), admin=line.bool_value("m", False),
                   default_topic_perm=line.value("i"), default_group_perm=line.value("u"),
                   topic_perms=None if topics is None else _java_split(topics),
                   group_perms=None if groups is None else _java_split(groups))

    def header(self) -> CreateAccessConfigRequestHeader:
        """The request's header: the perms joined with "," (UtilAll.join)."""
        return CreateAccessConfigRequestHeader(
            access_key=self.access_key, secret_key=self.secret_key, white_remote_address=self.white_remote_address,
            admin=self.admin, default_topic_perm=self.default_topic_perm, default_group_perm=self.default_group_perm,
            topic_perms=None if self.topic_perms is None else ",".join(self.topic_perms),
            group_perms=None if self.group_perms is None else ",".join(self.group_perms))

    def java_text(self) -> str:
        """PlainAccessConfig.toString (the secret left out, as Java's)."""
        return (f"PlainAccessConfig{{accessKey='{self.access_key}', "
                f"whiteRemoteAddress='{js(self.white_remote_address)}', admin={js(self.admin)}, "
                f"defaultTopicPerm='{js(self.default_topic_perm)}', defaultGroupPerm='{js(self.default_group_perm)}', "
                f"topicPerms={_java_list(self.topic_perms)}, groupPerms={_java_list(self.group_perms)}}}")


async def _targets(admin: MQAdminExt, line: CommandLine, out: TextIO) -> list[str]:
    """``-b``'s broker, or every broker (masters and slaves) of ``-c``'s cluster."""
    if line.has("b"):
        return [line.required("b")]
    return await cluster_addrs(admin, line.required("c"), out, slaves=True)


async def update_acl_config(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    config = AclConfigOptions.parse(line)
    request = create_request(AclV1RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, config.header().to_ext())
    for addr in await _targets(admin, line, out):
        await _call(admin, addr, request)
        out.write(f"create or update plain access config to {addr} success.\n")
    out.write(config.java_text())


# -- deleteAclConfig ---------------------------------------------------------------------------------------------------


async def delete_acl_config(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    access_key = line.required("a")
    request = create_request(AclV1RequestCode.DELETE_ACL_CONFIG, DeleteAccessConfigRequestHeader(access_key).to_ext())
    for addr in await _targets(admin, line, out):
        await _call(admin, addr, request)
        out.write(f"delete plain access config account from {addr} success.\n")
    out.write(f"account's accessKey is:{access_key}")


# -- updateGlobalWhiteAddr ---------------------------------------------------------------------------------------------


async def update_global_white_addr(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    """The global white list of the default ACL file, or of ``-p``'s file (a path on the broker, under its home)."""
    header = UpdateGlobalWhiteAddrsConfigRequestHeader(line.required("g"), line.value("p"))
    request = create_request(AclV1RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, header.to_ext())
    for addr in await _targets(admin, line, out):
        await _call(admin, addr, request)
        out.write(f"update global white remote addresses to {addr} success.\n")


# -- clusterAclConfigVersion -------------------------------------------------------------------------------------------


async def cluster_acl_config_version(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    if line.has("b"):
        addr = line.required("b")
        out.writelines(row.text() for row in await examine_broker_cluster_acl_version_info(admin, addr))
        out.write(f"get broker's plain access config version success. Address:{addr} \n")
        return
    masters = await cluster_addrs(admin, line.required("c"), out)
    out.write(VERSION_FORMAT.format("#Cluster Name", "#Broker Name", "#Broker Addr", "#AclFilePath",
                                    "#AclConfigVersionNum", "#AclLastUpdateTime"))
    for addr in masters:
        out.writelines(row.text() for row in await examine_broker_cluster_acl_version_info(admin, addr))
    out.write("get cluster's plain access config version success.\n")


def _where(verb: str, what: str) -> OptionGroup:
    return OptionGroup((opt("b", "brokerAddr", f"{verb} {what} which broker"),
                        opt("c", "clusterName", f"{verb} {what} which cluster")))


SUB_COMMANDS: tuple[SubCommand, ...] = (
    SubCommand("updateAclConfig", "Update acl config yaml file in broker.", (
        _where("update acl config file", "to"),
        opt("a", "accessKey", "set accessKey in acl config file", required=True),
        opt("s", "secretKey", "set secretKey in acl config file", required=True),
        opt("w", "whiteRemoteAddress", "set white ip Address for account in acl config file"),
        opt("i", "defaultTopicPerm", "set default topicPerm in acl config file"),
        opt("u", "defaultGroupPerm", "set default GroupPerm in acl config file"),
        opt("t", "topicPerms", "set topicPerms list,eg: topicA=DENY,topicD=SUB"),
        opt("g", "groupPerms", "set groupPerms list,eg: groupD=DENY,groupD=SUB"),
        opt("m", "admin", "set admin flag in acl config file"),
    ), update_acl_config),
    SubCommand("deleteAclConfig", "Delete Acl Config Account in broker.", (
        _where("delete acl config account", "from"),
        opt("a", "accessKey", "set accessKey in acl config file for deleting which account", required=True),
    ), delete_acl_config, alias="deleteAccessConfig"),
    SubCommand("clusterAclConfigVersion", "List all of acl config version information in cluster.", (
        OptionGroup((opt("b", "brokerAddr", "query acl config version for which broker"),
                     opt("c", "clusterName", "query acl config version for specified cluster"))),
    ), cluster_acl_config_version),
    SubCommand("updateGlobalWhiteAddr", "Update global white address for acl Config File in broker.", (
        _where("update global white address", "to"),
        opt("g", "globalWhiteRemoteAddresses", "set globalWhiteRemoteAddress list,eg: 10.10.103.*,192.168.0.*",
            required=True),
        opt("p", "aclFileFullPath", "update global white address of specified acl file,eg: /xxx/plain_test.yml"),
    ), update_global_white_addr),
)

