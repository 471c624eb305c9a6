"""Apache's own ``mqadmin haStatus`` and ``clusterList`` against a master and its slave: ours, and Apache's beside
them as the judge. Both pairs get the same story (4 MiB CommitLog files, the same 20 messages, the slave caught up;
ours follows haMasterAddress, Apache's the same address as its NameServer names it), so offsets are equal and only
addresses, times and speeds are masked before the outputs are compared line by line. The raw GET_BROKER_HA_STATUS
bodies are compared too (fastjson's property order), and our MQAdminExt reads Apache's. One pair of each serves the
module; each command runs once per pair.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field

import pytest

from broker.client import BlockingClient, Message, SendStatus
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from broker.remoting.ha_bodies import HARuntimeInfo
from broker.tools.admin import MQAdminExt
from tests.apache.servers import start_apache_broker, start_apache_namesrv
from tests.helpers import run, wait_until
from tests.integration.cluster import DEFAULT_CLUSTER, start_broker, start_namesrv
from tests.integration.replication import Broker, ha_address, max_offset, wait_caught_up
from tests.interop.test_official_mqadmin import Mqadmin, Run, build_mqadmin
from tests.javatools import JavaToolError

pytestmark = [pytest.mark.java, pytest.mark.slow]

TOPIC = "OfficialHaTopic"
FILE_SIZE = 4 * 1024 * 1024  # both sides must cut the CommitLog alike
SLAVE = {"brokerId": 1, "brokerRole": "SLAVE", "mappedFileSizeCommitLog": FILE_SIZE}
ACK_TIMEOUT_S = 30.0


@dataclass
class Pair:
    """One master and its slave (``rmq`` or ``apache``) and the mqadmin outputs seen on them so far."""

    kind: str
    namesrv_addr: str
    master: Broker
    slave: Broker
    mqadmin: Mqadmin
    outputs: dict[tuple[str, ...], Run] = field(default_factory=dict)

    def ok(self, *args: str) -> str:
        """``mqadmin args... -n <namesrv>``, run once per pair; its stdout, which must show no failure."""
        if args not in self.outputs:
            self.outputs[args] = self.mqadmin.run(*args, "-n", self.namesrv_addr)
        failure = self.outputs[args].failure()
        assert failure is None, f"[{self.kind}] {failure}"
        return self.outputs[args].out


def admin_call(call: Callable[[MQAdminExt], object]) -> object:
    async def go() -> object:
        async with MQAdminExt() as admin:
            return await call(admin)  # type: ignore[misc]

    return run(go())


def ha_info(addr: str) -> HARuntimeInfo:
    return admin_call(lambda admin: admin.get_broker_ha_status(addr))  # type: ignore[return-value]


def populate(pair: Pair) -> None:
    """20 messages, the slave caught up, and its acknowledgement of all of them seen by the master."""
    with BlockingClient(pair.namesrv_addr) as client:
        sent = [client.send(Message(TOPIC, f"replicated {i}".encode() * 8, keys=f"k{i}")) for i in range(20)]
    assert {r.send_status for r in sent} == {SendStatus.SEND_OK}
    wait_caught_up(pair.slave, pair.master)
    end = max_offset(pair.master)
    wait_until(f"[{pair.kind}] the master sees the slave's acknowledgement of {end}",
               lambda: [c.slave_ack_offset for c in ha_info(pair.master.addr).ha_connection_info] == [end],
               ACK_TIMEOUT_S)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Pair]]:
    home = tmp_path_factory.mktemp("official-ha")
    try:
        mqadmin = build_mqadmin(home / "mqadmin-home")
    except JavaToolError as err:
        pytest.fail(f"cannot build Apache's mqadmin: {err}", pytrace=False)
    with ExitStack() as stack:
        namesrv = stack.enter_context(start_namesrv(home / "rmq" / "namesrv"))
        master = stack.enter_context(start_broker(home / "rmq" / "master", namesrv.addr,
                                                  mappedFileSizeCommitLog=FILE_SIZE))
        slave = stack.enter_context(start_broker(home / "rmq" / "slave", namesrv.addr,
                                                 haMasterAddress=ha_address(master), **SLAVE))
        ours = Pair("rmq", namesrv.addr, master, slave, mqadmin)
        apache_namesrv = stack.enter_context(start_apache_namesrv(home / "apache" / "namesrv"))
        apache_master = stack.enter_context(start_apache_broker(home / "apache" / "master", apache_namesrv,
                                                                mappedFileSizeCommitLog=FILE_SIZE))
        # Apache 5.3.3's slave drops a configured haMasterAddress (its HA client does not exist yet when the broker
        # passes it on) and then never asks the NameServer: it must learn the address from its registration.
        apache_slave = stack.enter_context(start_apache_broker(home / "apache" / "slave", apache_namesrv, **SLAVE))
        apache = Pair("apache", apache_namesrv.addr, apache_master, apache_slave, mqadmin)
        for pair in (ours, apache):
            populate(pair)
        yield {"rmq": ours, "apache": apache}


# -- masking what must differ ----------------------------------------------------------------------------------------

SPEED = re.compile(r"([ \t]) *\d+\.\d\d(?=\s)")  # haStatus #TransferSpeed(KB/s), right-aligned or after a tab


def masked(pair: Pair, text: str) -> str:
    """Addresses (with the padding after them: a port may have 4 or 5 digits), times, rates, the release."""
    names = {pair.master.addr: "<master>", pair.slave.addr: "<slave>", ha_address(pair.master): "<master-ha>",
             pair.namesrv_addr: "<namesrv>"}
    for addr, name in names.items():
        text = re.sub(re.escape(addr) + r"(?!\d) *", name + " ", text)
    for pattern, replacement in (
            (r"127\.0\.0\.1:\d+ *", "<host> "),  # the slave's end of its HA connection
            (r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}", "<time>"),
            (r"V5_\d+_\d+", "<version>"),
            (r"\d+\.\d\d +\d\.\d{4}", "<hours> <space>"),  # clusterList #Hour #SPACE
            (r" *\d+\.\d\d\(", " <tps>(")):  # clusterList #InTPS #OutTPS
        text = re.sub(pattern, replacement, text)
    return SPEED.sub(r"\1<speed>", text)


def both(pairs: dict[str, Pair], *args: str | Callable[[Pair], str]) -> tuple[str, str]:
    """The masked outputs of ``mqadmin args...`` on our pair and on Apache's; a callable argument is filled in per
    pair (its master's or slave's address)."""
    ours, apache = (masked(pair, pair.ok(*(a(pair) if callable(a) else a for a in args)))
                    for pair in (pairs["rmq"], pairs["apache"]))
    return ours, apache


def master_addr(pair: Pair) -> str:
    return pair.master.addr


def slave_addr(pair: Pair) -> str:
    return pair.slave.addr


# -- the commands -----------------------------------------------------------------------------------------------------

def test_ha_status_of_the_master(pairs: dict[str, Pair]) -> None:
    ours, apache = both(pairs, "haStatus", "-b", master_addr)
    assert ours == apache
    assert "#SlaveNum\t1\n#InSyncSlaveNum\t1\n" in ours and " OK " in ours


def test_ha_status_of_the_slave(pairs: dict[str, Pair]) -> None:
    ours, apache = both(pairs, "haStatus", "-b", slave_addr)
    assert ours == apache
    assert ours.startswith("\n#MasterAddr\t<master-ha> \n") and "#MasterFlushOffset\t0\n" in ours


def test_ha_status_of_the_cluster(pairs: dict[str, Pair]) -> None:
    ours, apache = both(pairs, "haStatus", "-c", DEFAULT_CLUSTER)
    assert ours == apache
    assert ours == both(pairs, "haStatus", "-b", master_addr)[0]


def test_cluster_list_of_the_pair(pairs: dict[str, Pair]) -> None:
    ours, apache = both(pairs, "clusterList")
    assert ours == apache
    assert [line.split()[-1] for line in ours.splitlines()[1:]] == ["true", "false"]  # #ACTIVATED
    ours, apache = both(pairs, "clusterList", "-m")
    assert ours == apache
    # #InTotalToday: what clients sent to the broker (BrokerStatsManager), none to the slave
    assert [line.split()[4] for line in ours.splitlines()[1:]] == ["20", "0"]


@pytest.mark.parametrize("which", ["master", "slave"])
def test_bodies_are_fastjsons_as_apaches(pairs: dict[str, Pair], which: str) -> None:
    """The same properties in the same order; and each side's body reads as the other's."""
    bodies = {}
    for kind, pair in pairs.items():
        addr = getattr(pair, which).addr
        response = admin_call(lambda admin, a=addr: admin.invoke(a, create_request(RequestCode.GET_BROKER_HA_STATUS)))
        assert response.code == ResponseCode.SUCCESS and response.remark is None  # type: ignore[attr-defined]
        bodies[kind] = response.body.decode()  # type: ignore[attr-defined]
    keys = {kind: re.findall(r'"(\w+)":', body) for kind, body in bodies.items()}
    assert keys["rmq"] == keys["apache"], bodies
    ours, apache = (comparable(ha_info(getattr(pair, which).addr)) for pair in (pairs["rmq"], pairs["apache"]))
    assert ours == apache


def comparable(info: HARuntimeInfo) -> HARuntimeInfo:
    """What must be equal on the two pairs: addresses, times and speeds cleared."""
    client = dataclasses.replace(info.ha_client_runtime_info, master_addr=None, last_read_timestamp=0,
                                 last_write_timestamp=0, transferred_byte_in_second=0)
    connections = [dataclasses.replace(c, addr="", transferred_byte_in_second=0) for c in info.ha_connection_info]
    return dataclasses.replace(info, ha_client_runtime_info=client, ha_connection_info=connections)
