"""A DLedger group of three ``python -m broker`` processes (broker-a) and a NameServer, on short DLedger timings
(rmq's ``dLeger*`` keys: heartbeats every 200 ms, an election after 3 missed, votes 50-150 ms apart), each member
on fixed ports so that it restarts where it was, on its own store. Used by the failover tests and the Java
client's (tests/interop).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from broker.client.blocking import BlockingClient
from broker.client.blocking_api import create_topic
from broker.client.blocking_remoting import BlockingRemotingClient
from broker.client.message import Message
from broker.common.fastjson import decode_json
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from tests.helpers import broker_ids, wait_until
from tests.integration.cluster import ServerProcess, free_broker_port, free_port, start_broker, start_namesrv

GROUP = "broker-a"
QUEUES = 4
MEMBERS = ("n0", "n1", "n2")
HEART_BEAT_MS, LEAK, MIN_VOTE_MS, MAX_VOTE_MS = 200, 3, 50, 150
TIMINGS = {"dLegerHeartBeatTimeIntervalMs": HEART_BEAT_MS, "dLegerMaxHeartBeatLeak": LEAK,
           "dLegerMinVoteIntervalMs": MIN_VOTE_MS, "dLegerMaxVoteIntervalMs": MAX_VOTE_MS}
SLAVE_SYNC_MS = 500  # slaveSynchronizeInterval: a slave copies its master's topics this often


@dataclass
class Group:
    """The NameServer and the members; ``start(member)`` (re)starts one on its ports and store."""

    home: Path
    namesrv: ServerProcess
    ports: dict[str, int]
    peers: str
    conf: dict[str, object] = field(default_factory=dict)  # more broker.conf keys for every member
    procs: dict[str, ServerProcess] = field(default_factory=dict)
    starts: dict[str, int] = field(default_factory=dict)

    def start(self, member: str) -> ServerProcess:
        """Ready once registered: as a slave, or as master when it wins an election."""
        self.starts[member] = self.starts.get(member, 0) + 1
        proc = start_broker(self.home / member / f"run{self.starts[member]}", self.namesrv.addr,
                            store_dir=self.home / member / "store", port=self.ports[member], brokerName=GROUP,
                            enableDLegerCommitLog=True, dLegerGroup=GROUP, dLegerPeers=self.peers,
                            dLegerSelfId=member, defaultTopicQueueNums=QUEUES, slaveSynchronizeInterval=SLAVE_SYNC_MS,
                            **{**TIMINGS, **self.conf})
        self.procs[member] = proc
        return proc

    def ids(self) -> dict[int, str]:
        """broker-a's {brokerId: address} at the NameServer."""
        return broker_ids(self.namesrv.addr, GROUP)

    def member_at(self, addr: str) -> str:
        return next(m for m, proc in self.procs.items() if proc.addr == addr)

    def master(self) -> str:
        """The member registered as master, once all three are registered."""
        wait_until("three members registered, one as master", lambda: len(ids := self.ids()) == 3 and 0 in ids,
                   timeout=30)
        return self.member_at(self.ids()[0])


def holds_topic(addr: str, topic: str) -> bool:
    with BlockingRemotingClient(addr) as client:
        answer = client.invoke(create_request(RequestCode.GET_ALL_TOPIC_CONFIG), 3000)
    return answer.code == ResponseCode.SUCCESS and topic in decode_json(answer.body.decode())["topicConfigTable"]


@contextlib.contextmanager
def dledger_group(home: Path, topic: str, **conf: object) -> Iterator[Group]:
    """The group started, ``topic`` created on every member and sent a first message ("first"); ``conf``:
    more broker.conf keys for every member."""
    namesrv = start_namesrv(home / "namesrv")
    ports = {m: free_broker_port() for m in MEMBERS}
    group = Group(home, namesrv, ports, ";".join(f"{m}-127.0.0.1:{free_port()}" for m in MEMBERS), conf)
    try:
        with ThreadPoolExecutor(len(MEMBERS)) as pool:  # together: each is ready once the group elected
            list(pool.map(group.start, MEMBERS))
        for proc in group.procs.values():  # on each member: a topic made only on a master that loses its lead before
            with BlockingRemotingClient(proc.addr) as admin:  # its slaves copied it is gone from the group (as in
                create_topic(admin, topic, queue_nums=QUEUES)  # Apache's: topics are not in the DLedger log)
        with BlockingClient(namesrv.addr) as client:
            client.send(Message(topic, b"first"))
        wait_until(f"every member holds {topic}", lambda: all(holds_topic(p.addr, topic)
                                                                for p in group.procs.values()), timeout=30)
        yield group
    finally:
        for proc in group.procs.values():
            with contextlib.suppress(ProcessLookupError):  # a test may leave one SIGSTOPped
                os.kill(proc.popen.pid, signal.SIGCONT)
            proc.close()
        namesrv.close()
