"""``mqadmin haStatus``'s printing (HAStatusSubCommand.printStatus): Java's printf formats, written out literally
here; tests/interop/test_official_mqadmin_ha.py compares whole outputs with Apache's tool."""

from __future__ import annotations

import io
import time

from broker.remoting.ha_bodies import HAClientRuntimeInfo, HAConnectionRuntimeInfo, HARuntimeInfo
from broker.tools.cli import java_fixed
from broker.tools.ha_commands import print_status


def printed(addr: str, info: HARuntimeInfo) -> str:
    out = io.StringIO()
    print_status(addr, info, out)
    return out.getvalue()


def test_a_master_prints_its_slaves() -> None:
    info = HARuntimeInfo(master=True, master_commit_log_max_offset=2048, in_sync_slave_nums=1, ha_connection_info=[
        HAConnectionRuntimeInfo("127.0.0.1:50001", 2048, 0, True, 128, 2048),
        HAConnectionRuntimeInfo("127.0.0.1:50002", 12, 2036, False, 0, -1)])
    assert printed("127.0.0.1:10911", info) == (
        "\n#MasterAddr\t127.0.0.1:10911\n#MasterCommitLogMaxOffset\t2048\n#SlaveNum\t2\n#InSyncSlaveNum\t1\n"
        "#SlaveAddr                        #SlaveAckOffset             #Diff #TransferSpeed(KB/s)          #Status "
        "#TransferFromWhere\n"
        "127.0.0.1:50001                   2048                            0             0.13               OK "
        "            2048\n"
        "127.0.0.1:50002                   12                           2036             0.00      Fall Behind "
        "              -1\n")


def test_a_master_without_slaves_prints_the_header_only() -> None:
    text = printed("127.0.0.1:10911", HARuntimeInfo(master=True, master_commit_log_max_offset=0))
    assert text.splitlines()[-1].startswith("#SlaveAddr") and "#SlaveNum\t0\n#InSyncSlaveNum\t0\n" in text


def test_a_slave_prints_its_view_of_the_master() -> None:
    read_ms, write_ms = 1_700_000_000_007, 1_700_000_001_250
    info = HARuntimeInfo(ha_client_runtime_info=HAClientRuntimeInfo("127.0.0.1:10912", 2060, 4096, read_ms, write_ms))
    local = [time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms // 1000)) for ms in (read_ms, write_ms)]
    assert printed("127.0.0.1:10921", info) == (
        "\n#MasterAddr\t127.0.0.1:10912\n#CommitLogMaxOffset\t4096\n#TransferSpeed(KB/s)\t2.01\n"
        f"#LastReadTime\t{local[0]},007\n#LastWriteTime\t{local[1]},250\n#MasterFlushOffset\t0\n")


def test_a_slave_that_knows_no_master_prints_null() -> None:
    text = printed("127.0.0.1:10921", HARuntimeInfo())
    assert text.startswith("\n#MasterAddr\tnull\n#CommitLogMaxOffset\t0\n")


def test_java_rounds_half_up() -> None:
    """128 B/s is 0.125 KB/s: Java prints 0.13, Python's own format 0.12."""
    assert (java_fixed(128 / 1024), f"{128 / 1024:.2f}") == ("0.13", "0.12")
    assert [java_fixed(v) for v in (0.0, 0.004999, 0.005, 1.0, 2060 / 1024, 123456.785)] == [
        "0.00", "0.00", "0.01", "1.00", "2.01", "123456.79"]
