"""Our broker in DLedger mode in one group with two of Apache's DLedger brokers (5.5.0), on Apache's NameServer: it
registers as Apache's would (a follower n0 as brokerId 1, beside Apache's slaves 2 and 3 and their master 0), and
when Apache's master is killed the group's new master, whichever member it is, registers as brokerId 0.

No message is written: an entry from one implementation's leader reaching the other's followers needs DLedger's
replication, which is not in this slice."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.tools.local_cluster import free_port
from tests.apache.servers import start_apache_broker, start_apache_namesrv
from tests.helpers import broker_ids, wait_until
from tests.integration.cluster import start_broker

pytestmark = [pytest.mark.java, pytest.mark.slow]

GROUP = "broker-a"


def test_our_broker_registers_in_an_apache_group_as_apache_members_do(tmp_path: Path) -> None:
    peers = ";".join(f"{member}-127.0.0.1:{free_port()}" for member in ("n0", "n1", "n2"))
    keys = {"enableDLegerCommitLog": "true", "dLegerGroup": GROUP, "dLegerPeers": peers}
    with start_apache_namesrv(tmp_path / "namesrv") as namesrv:
        apache = {member: start_apache_broker(tmp_path / member, namesrv, tmp_path / member / "store",
                                              brokerName=GROUP, dLegerSelfId=member, **keys)
                  for member in ("n1", "n2")}
        ours = None
        try:
            ids: dict[int, str] = {}

            def apache_master() -> bool:
                nonlocal ids
                ids = broker_ids(namesrv.addr, GROUP)
                return 0 in ids and ids[0] in {p.addr for p in apache.values()}

            wait_until("the Apache members elect a master", apache_master, 60)
            ours = start_broker(tmp_path / "n0", namesrv.addr, brokerName=GROUP, dLegerSelfId="n0", **keys)
            wait_until("ours registers as slave 1", lambda: broker_ids(namesrv.addr, GROUP).get(1) == ours.addr, 30)
            ids = broker_ids(namesrv.addr, GROUP)
            master = next(p for p in apache.values() if p.addr == ids[0])
            other = next(p for p in apache.values() if p is not master)
            assert ids == {0: master.addr, 1: ours.addr, 2 if other is apache["n1"] else 3: other.addr}
            master.kill()
            wait_until("a new master registers", lambda: broker_ids(namesrv.addr, GROUP).get(0) in (ours.addr,
                                                                                                    other.addr), 60)
            after = broker_ids(namesrv.addr, GROUP)
            slave = ours if after[0] == other.addr else other
            slave_id = 1 if slave is ours else (2 if other is apache["n1"] else 3)
            assert after == {0: after[0], slave_id: slave.addr}
        finally:
            if ours is not None:
                ours.close()
            for proc in apache.values():
                proc.close()
