"""The NameServer commands of ``mqadmin`` (tools/command/namesrv/*.java, on MQAdminExt): wipeWritePerm and
addWritePerm (a broker's write permission in every NameServer's routes, before and after taking it offline),
updateKvConfig and deleteKvConfig (the NameServers' KV config), getNamesrvConfig and updateNamesrvConfig.

Rule 1: as in the other command modules, the output is written here as Java's printf formats.
"""

from __future__ import annotations

from typing import TextIO

from broker.common.errors import RmqError
from broker.common.hash_order import hash_map_order
from broker.tools.admin import MQAdminExt
from broker.tools.cli import CommandLine, SubCommand, opt


class WritePermFailed(RmqError):
    """A NameServer refused to change a broker's write permission (the others were still asked)."""


async def wipe_write_perm(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    await _write_perm(admin, line, out, wipe=True)


async def add_write_perm(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    await _write_perm(admin, line, out, wipe=False)


async def _write_perm(admin: MQAdminExt, line: CommandLine, out: TextIO, *, wipe: bool) -> None:
    """Each NameServer of ``-n`` in turn: "OK" and how many of the broker's topics changed, or "Failed", then the
    next one; the failures' reasons end the command (exit 1; Java prints stack traces and exits 0)."""
    broker_name, verb = line.required("b"), "wipe" if wipe else "add"
    failed = []
    for addr in admin.namesrv_list():
        try:
            count = await (admin.wipe_write_perm_of_broker(addr, broker_name) if wipe
                           else admin.add_write_perm_of_broker(addr, broker_name))
        except (RmqError, OSError) as err:
            out.write(f"{verb} write perm of broker[{broker_name}] in name server[{addr}] Failed\n")
            failed.append(f"{addr}: {err}")
            continue
        out.write(f"{verb} write perm of broker[{broker_name}] in name server[{addr}] OK, {count}\n")
    if failed:
        raise WritePermFailed(f"{verb} write perm of broker[{broker_name}] failed: {'; '.join(failed)}")


async def update_kv_config(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    await admin.put_kv_config(line.required("s"), line.required("k"), line.required("v"))
    out.write("create or update kv config to namespace success.\n")


async def delete_kv_config(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    await admin.delete_kv_config(line.required("s"), line.required("k"))
    out.write("delete kv config from namespace success.\n")


def _servers(line: CommandLine) -> list[str] | None:
    """The NameServers of ``-n`` as Java lists them (split on ";", not trimmed each); None without ``-n``."""
    servers = line.value("n")
    return servers.split(";") if servers else None


async def get_namesrv_config(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    configs = await admin.get_name_server_config(_servers(line))
    for addr in hash_map_order(list(configs), 4):  # a HashMap of initial capacity 4
        out.write(f"============{addr}============\n")
        for key, value in configs[addr].items():
            out.write(f"{key:<50}=  {value}\n")


async def update_namesrv_config(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    key, value, servers = line.required("k"), line.required("v"), _servers(line)
    await admin.update_name_server_config({key: value}, servers)
    listed = "" if servers is None else "[" + ", ".join(servers) + "]"
    out.write(f"update name server config success!{listed}\n{key} : {value}\n")


SUB_COMMANDS: tuple[SubCommand, ...] = (
    SubCommand("wipeWritePerm", "Wipe write perm of broker in all name server you defined in the -n param.", (
        opt("b", "brokerName", "broker name", required=True),
    ), wipe_write_perm),
    SubCommand("addWritePerm", "Add write perm of broker in all name server you defined in the -n param.", (
        opt("b", "brokerName", "broker name", required=True),
    ), add_write_perm),
    SubCommand("updateKvConfig", "Create or update KV config.", (
        opt("s", "namespace", "set the namespace", required=True),
        opt("k", "key", "set the key name", required=True),
        opt("v", "value", "set the key value", required=True),
    ), update_kv_config),
    SubCommand("deleteKvConfig", "Delete KV config.", (
        opt("s", "namespace", "set the namespace", required=True),
        opt("k", "key", "set the key name", required=True),
    ), delete_kv_config),
    SubCommand("getNamesrvConfig", "Get configs of name server.", (), get_namesrv_config),
    SubCommand("updateNamesrvConfig", "Update configs of name server.", (
        opt("k", "key", "config key", required=True),
        opt("v", "value", "config value", required=True),
    ), update_namesrv_config),
)
