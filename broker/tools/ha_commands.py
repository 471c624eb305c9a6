"""The replication command of ``mqadmin`` (tools/command/ha/HAStatusSubCommand.java, on MQAdminExt): haStatus, the
HA runtime status of one broker (``-b``) or of every master of a cluster (``-c``), once or every ``-i`` seconds.

Rule 1: as in the other command modules, the output is written here as Java's printf formats (``%-32s`` is ``:<32``,
``%16.2f`` Java's half-up ``java_fixed`` right-aligned in 16), so a row of ours lines up with a row of Apache's tool.
"""

from __future__ import annotations

import asyncio
from typing import TextIO

from broker.remoting.ha_bodies import HARuntimeInfo
from broker.tools.admin import MQAdminExt
from broker.tools.cli import CommandLine, ShowHelp, cluster_addrs, human_time2, java_fixed, js

DEFAULT_INTERVAL_S = 3  # HAStatusSubCommand: -i with a blank value


async def ha_status(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    """HAStatusSubCommand.execute: with ``-i`` it prints again every interval until interrupted, as Java does."""
    if not line.has("i"):
        await _print_selected(admin, line, out)
        return
    interval_s = line.int_value("i", DEFAULT_INTERVAL_S) if line.value("i") else DEFAULT_INTERVAL_S
    while True:
        await _print_selected(admin, line, out)
        out.flush()
        await asyncio.sleep(interval_s)


async def _print_selected(admin: MQAdminExt, line: CommandLine, out: TextIO) -> None:
    """innerExec: ``-b`` wins over ``-c``; neither shows the help."""
    if line.has("b"):
        addr = line.required("b")
        print_status(addr, await admin.get_broker_ha_status(addr), out)
    elif line.has("c"):
        for addr in await cluster_addrs(admin, line.required("c"), out):
            print_status(addr, await admin.get_broker_ha_status(addr), out)
    else:
        raise ShowHelp


def print_status(broker_addr: str, info: HARuntimeInfo, out: TextIO) -> None:
    """printStatus: a master's table of slaves, or a slave's view of its master."""
    if info.master:
        out.write(f"\n#MasterAddr\t{broker_addr}\n#MasterCommitLogMaxOffset\t{info.master_commit_log_max_offset}\n"
                  f"#SlaveNum\t{len(info.ha_connection_info)}\n#InSyncSlaveNum\t{info.in_sync_slave_nums}\n")
        out.write(f"{'#SlaveAddr':<32}  {'#SlaveAckOffset':<16} {'#Diff':>16} {'#TransferSpeed(KB/s)':>16} "
                  f"{'#Status':>16} {'#TransferFromWhere':>16}\n")
        for c in info.ha_connection_info:
            speed = java_fixed(c.transferred_byte_in_second / 1024.0)
            out.write(f"{js(c.addr):<32}  {c.slave_ack_offset:<16d} {c.diff:>16d} {speed:>16} "
                      f"{'OK' if c.in_sync else 'Fall Behind':>16} {c.transfer_from_where:>16d}\n")
        return
    client = info.ha_client_runtime_info
    out.write(f"\n#MasterAddr\t{js(client.master_addr)}\n")
    out.write(f"#CommitLogMaxOffset\t{client.max_offset}\n")
    out.write(f"#TransferSpeed(KB/s)\t{java_fixed(client.transferred_byte_in_second / 1024.0)}\n")
    out.write(f"#LastReadTime\t{human_time2(client.last_read_timestamp)}\n")
    out.write(f"#LastWriteTime\t{human_time2(client.last_write_timestamp)}\n")
    out.write(f"#MasterFlushOffset\t{client.master_flush_offset}\n")
