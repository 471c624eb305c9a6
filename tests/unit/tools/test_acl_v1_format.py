"""What ACL 1.0's mqadmin commands print that the brokers of our tests cannot show: clusterAclConfigVersion's rows,
which only brokers before 5.0 answer (``allAclFileVersion``), and how updateAclConfig splits its perm lists."""

from __future__ import annotations

import pytest

from broker.common.errors import MQClientError
from broker.remoting.headers import GetBrokerAclConfigResponseHeader
from broker.tools.acl_v1_commands import AclConfigOptions, NoAclFileVersions, acl_version_rows
from broker.tools.cli import CommandLine, format_date
from tests.helpers import mqadmin


def header(all_versions: str | None) -> GetBrokerAclConfigResponseHeader:
    return GetBrokerAclConfigResponseHeader(version='{"counter":3,"timestamp":1}', broker_name="broker-a",
                                            broker_addr="10.0.0.1:10911", cluster_name="DefaultCluster",
                                            all_acl_file_version=all_versions)


def test_version_rows_per_acl_file() -> None:
    rows = acl_version_rows(header('{"/home/conf/plain_acl.yml":{"counter":3,"stateVersion":0,'
                                   '"timestamp":1700000000000}}'), "10.0.0.1:10911")
    assert [row.text() for row in rows] == [
        "DefaultCluster    broker-a                10.0.0.1:10911          /home/conf/plain_acl.yml  "
        f"3                       {format_date(1700000000000):<22}\n"]
    with pytest.raises(NoAclFileVersions, match="the broker 10.0.0.1:10911 lists no ACL file versions"):
        acl_version_rows(header(None), "10.0.0.1:10911")
    with pytest.raises(MQClientError, match="not a map of DataVersions"):
        acl_version_rows(header("[1]"), "10.0.0.1:10911")


@pytest.mark.parametrize(("given", "perms", "text"), [
    ("a=PUB,b=SUB|PUB", ("a=PUB", "b=SUB|PUB"), "[a=PUB, b=SUB|PUB]"),
    ("a=PUB,,b=SUB,,", ("a=PUB", "", "b=SUB"), "[a=PUB, , b=SUB]"),  # String.split drops only trailing empties
    (",,", (), "[]"),
    (None, None, "null"),
])
def test_perm_lists_split_as_java(given: str | None, perms: tuple[str, ...] | None, text: str) -> None:
    options = AclConfigOptions.parse(CommandLine({"a": "toolsUser1", "s": "toolsSecret1", "t": given}))
    assert options.topic_perms == perms
    assert f"topicPerms={text}," in options.java_text()
    assert options.header().topic_perms == (None if perms is None else ",".join(perms))


def test_help_and_alias_as_apaches_tool() -> None:
    """``mqadmin help deleteAclConfig`` as Apache's 5.3.1 tool prints it; the alias finds the same command."""
    assert mqadmin("help", "deleteAccessConfig").out == mqadmin("help", "deleteAclConfig").out == (
        "usage: mqadmin deleteAclConfig -a <arg> -b <arg> | -c <arg>  [-h] [-n <arg>]\n"
        " -a,--accessKey <arg>     set accessKey in acl config file for deleting which account\n"
        " -b,--brokerAddr <arg>    delete acl config account from which broker\n"
        " -c,--clusterName <arg>   delete acl config account from which cluster\n"
        " -h,--help                Print help\n"
        " -n,--namesrvAddr <arg>   Name server address list, eg: '192.168.0.1:9876;192.168.0.2:9876'\n")
    missing = mqadmin("updateAclConfig", "-a", "x")
    assert (missing.code, missing.err) == (1, "Missing required options: [-b update acl config file to which broker, "
                                              "-c update acl config file to which cluster], s\n")
