"""Which copy of a brokerName the connector talks to: reads go to its master, else a slave; writes wait for the
master.

Rule 1: the source's pulls (connector/source.py) and the driver's offset questions (connector/offsets.py) choose
the address to read a brokerName from here, and the sink (tasks, commit, decision log) waits for a master here,
and nowhere else. The first choice is the client's own (``find_broker_address_in_subscribe``); the order of the
others and the down list are the connector's, because a Spark task cannot wait for the client's next route poll.

Why reads may go to a slave: a slave holds a byte-for-byte copy of its master's CommitLog and builds the same
ConsumeQueues, so queue offsets mean the same on both; a slave serves pulls only with ``slaveReadEnable=true``, and
offset queries (min, max, search by time) always. Writes never go there: a slave refuses sends and END_TRANSACTION,
so the sink waits up to ``masterWaitTimeoutMs`` for the master (``wait_for_master``), then fails naming the broker.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from broker.client.route import MASTER_ID, TopicRouteData, find_broker_address_in_subscribe
from broker.common.errors import ClientErrorCode, ConnectorError, MQBrokerError, MQClientError, RemotingError

log = logging.getLogger(__name__)

DOWN_S = 10.0  # an address that failed to answer goes after the other copies for this long
RETRY_PAUSE_S = (0.2, 0.5, 1.0)  # between tries while waiting for a master, then 1 s each
T = TypeVar("T")


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
    """The address to read a brokerName from: the master, else the slave with the lowest id (the client's
    findBrokerAddressInSubscribe for the master); None without any."""
    found = find_broker_address_in_subscribe(addrs)
    return found.broker_addr if found else None


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


# -- writes: the master or nothing ------------------------------------------------------------------------------------


def master_unavailable(err: BaseException) -> bool:
    """``err`` says the master could not be reached or is not routed (worth waiting for), not that the request
    was wrong."""
    if isinstance(err, RemotingError):
        return True
    if isinstance(err, MQClientError):
        return err.retriable or err.code == ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION
    return isinstance(err, MQBrokerError) and err.retriable


def wait_for_master(what: str, broker_name: str, wait_ms: int, attempt: Callable[[], T],
                    before_retry: Callable[[], object] | None = None) -> T:
    """``attempt()`` until it succeeds, or until ``wait_ms`` passed while it failed for want of ``broker_name``'s
    master; then ConnectorError naming the broker and the option. Only for requests that may safely be sent
    again (nothing stored, or stored idempotently). ``before_retry`` refreshes what the attempt uses (a route)."""
    deadline = time.monotonic() + wait_ms / 1000
    tries = 0
    while True:
        try:
            return attempt()
        except (RemotingError, MQClientError, MQBrokerError) as err:
            if not master_unavailable(err):
                raise
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                _refresh(what, before_retry)  # the next call (a resolver's next check) asks the new route
                raise ConnectorError(f"rmq sink: {what}: the master of broker {broker_name} did not answer within "
                                     f"{wait_ms} ms (option masterWaitTimeoutMs; a slave takes no writes): "
                                     f"{err}") from err
            if tries == 0:
                log.warning("rmq sink: %s: the master of broker %s does not answer (%s); waiting up to %d ms",
                            what, broker_name, err, wait_ms)
            time.sleep(min(RETRY_PAUSE_S[min(tries, len(RETRY_PAUSE_S) - 1)], remaining))
            tries += 1
            _refresh(what, before_retry)


def _refresh(what: str, before_retry: Callable[[], object] | None) -> None:
    if before_retry is not None:
        try:
            before_retry()
        except (RemotingError, MQClientError) as err:
            log.debug("refresh after a failed %s failed: %s", what, err)
