"""A master and its slave (ours, as processes) under one NameServer, for the connector's fail-over tests: kill the
master, restart it on its port, wait for the slave to hold everything, create topics the slave knows too.

The slave reads (``slaveReadEnable=true``) and copies topics, groups and offsets from its master every second
(``slaveSynchronizeInterval``); it learns its master's HA address from the NameServer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from broker.client.blocking import BlockingRemotingClient, create_topic
from broker.client.message import MessageQueue
from broker.common.fastjson import decode_json
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from tests.connector.conftest import routed_queues
from tests.helpers import wait_until
from tests.integration.cluster import ServerProcess, start_broker, start_namesrv
from tests.integration.replication import wait_caught_up

BROKER = "broker-a"
SYNC_MS = 1000
SLAVE_CONF: dict[str, object] = {"brokerId": 1, "brokerRole": "SLAVE", "slaveReadEnable": True,
                                 "slaveSynchronizeInterval": SYNC_MS}


@dataclass
class Pair:
    """``master`` is replaced by ``restart_master``; ``conf`` holds the master's extra broker.conf keys."""

    home: Path
    namesrv: ServerProcess
    master: ServerProcess
    slave: ServerProcess
    conf: dict[str, object] = field(default_factory=dict)

    @property
    def namesrv_addr(self) -> str:
        return self.namesrv.addr

    def kill_master(self) -> None:
        """SIGKILL, then wait until the NameServer routes the slave alone (it drops a broker whose connection
        closes)."""
        self.master.kill()
        wait_until("the NameServer dropped the killed master", lambda: not self._master_routed(), 30)

    def restart_master(self) -> ServerProcess:
        """The master again, on its port and with its store (a crash recovery)."""
        self.master = start_broker(self.home / "master", self.namesrv.addr, port=self.master.port, **self.conf)
        wait_until("the NameServer routes the master again", self._master_routed, 30)
        return self.master

    def _master_routed(self) -> bool:
        with BlockingRemotingClient(self.namesrv.addr) as client:
            response = client.invoke(create_request(RequestCode.GET_BROKER_CLUSTER_INFO), 3000)
        table = decode_json(response.body.decode())["brokerAddrTable"]
        return "0" in {str(k) for k in table.get(BROKER, {}).get("brokerAddrs", {})}

    def caught_up(self) -> None:
        wait_caught_up(self.slave, self.master)

    def create_topic(self, topic: str, queues: int) -> list[MessageQueue]:
        """The topic on the master, routed, and known to the slave (which serves pulls of topics it knows)."""
        with BlockingRemotingClient(self.master.addr) as client:
            create_topic(client, topic, queue_nums=queues)
        wait_until(f"{topic} routed", lambda: len(routed_queues(self.namesrv.addr, topic)) == queues, 15)
        wait_until(f"the slave knows {topic}", lambda: topic in self._topics(self.slave.addr), 15)
        return routed_queues(self.namesrv.addr, topic)

    @staticmethod
    def _topics(addr: str) -> set[str]:
        with BlockingRemotingClient(addr) as client:
            response = client.invoke(create_request(RequestCode.GET_ALL_TOPIC_CONFIG), 3000)
        assert response.code == ResponseCode.SUCCESS, response.remark
        return set(decode_json(response.body.decode())["topicConfigTable"])

    def close(self) -> None:
        self.slave.close()
        self.master.close()
        self.namesrv.close()


def start_pair(home: Path, **master_conf: object) -> Pair:
    """A NameServer, a master (``master_conf`` added to its broker.conf; the slave gets the same keys) and its
    slave, ready."""
    namesrv = start_namesrv(home / "namesrv")
    master = start_broker(home / "master", namesrv.addr, **master_conf)
    slave = start_broker(home / "slave", namesrv.addr, **(master_conf | SLAVE_CONF))
    return Pair(home, namesrv, master, slave, dict(master_conf))
