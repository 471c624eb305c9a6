"""Which copy of a brokerName the connector reads from: its master, else a slave.

Rule 1: the source's pulls (connector/source.py) and the driver's offset questions (connector/offsets.py) choose
the address to read a brokerName from here, and nowhere else, so that broker.client's own choice (the broker a
pull answer suggests, fail-over when the master is gone) can replace this module in one place later.

Why reads may go to a slave: a slave holds a byte-for-byte copy of its master's CommitLog and builds the same
ConsumeQueues, so queue offsets mean the same on both; a slave serves pulls only with ``slaveReadEnable=true``, and
offset queries (min, max, search by time) always. Writes never go here: a slave refuses them (the sink waits for
the master instead, connector/sink_task.py).
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from broker.client.route import MASTER_ID, TopicRouteData

DOWN_S = 10.0  # an address that failed to answer goes after the other copies for this long


def broker_addrs(route: TopicRouteData, broker_name: str) -> dict[int, str]:
    """{brokerId: address} of ``broker_name`` in ``route`` (empty when the route does not name it)."""
    for broker in route.broker_datas:
        if broker.broker_name == broker_name:
            return dict(broker.broker_addrs)
    return {}


def read_addresses(addrs: Mapping[int, str]) -> list[str]:
    """The addresses to read a brokerName from, best first: the master, then its slaves by id (lowest first)."""
    return [addrs[broker_id] for broker_id in sorted(addrs)]


def read_address(addrs: Mapping[int, str]) -> str | None:
    """The address to read a brokerName from: the master, else the slave with the lowest id; None without any."""
    ordered = read_addresses(addrs)
    return ordered[0] if ordered else None


def is_master(addrs: Mapping[int, str], address: str) -> bool:
    return addrs.get(MASTER_ID) == address


class DownList:
    """Addresses that failed to answer lately. The NameServer drops a killed broker at once (its connection
    closes), but a host that vanished stays routed until the broker expires (2 minutes): meanwhile every question
    would wait for a connect timeout first, so a failed address is asked last for ``DOWN_S``."""

    def __init__(self, down_s: float = DOWN_S) -> None:
        self.down_s = down_s
        self._since: dict[str, float] = {}

    def mark(self, address: str) -> None:
        self._since[address] = time.monotonic()

    def clear(self, address: str) -> None:
        self._since.pop(address, None)

    def is_down(self, address: str) -> bool:
        since = self._since.get(address)
        return since is not None and time.monotonic() - since < self.down_s

    def order(self, addresses: list[str]) -> list[str]:
        """``addresses`` with the ones down lately moved to the end (the order is kept otherwise)."""
        return [a for a in addresses if not self.is_down(a)] + [a for a in addresses if self.is_down(a)]
