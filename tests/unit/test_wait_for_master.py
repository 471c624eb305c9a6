"""connector/replicas.wait_for_master: how the sink and the resolver wait for a brokerName's master. The resolver
asks with no wait while answering a check; after a failover its cached route still named the killed master, and every
check was answered UNKNOWN until the client's next route poll (30 s), which on a short check budget discarded
committed halves. A failed ask now refreshes the route even when it does not wait."""

from __future__ import annotations

import pytest

from broker.common.errors import ConnectorError, MQBrokerError, RemotingConnectError, broker_error
from broker.remoting.codes import ResponseCode
from connector.replicas import wait_for_master

DEAD, NEW = "127.0.0.1:1", "127.0.0.1:2"


class Route:
    """A cached route that names the dead master until refreshed."""

    def __init__(self) -> None:
        self.master, self.refreshes = DEAD, 0

    def refresh(self) -> None:
        self.refreshes += 1
        self.master = NEW

    def ask(self) -> str:
        if self.master == DEAD:
            raise RemotingConnectError(DEAD, "Connection refused")
        return self.master


def test_a_failed_ask_without_wait_refreshes_the_route_for_the_next_one() -> None:
    route = Route()
    with pytest.raises(ConnectorError, match="master of broker broker-a did not answer within 0 ms"):
        wait_for_master("reading", "broker-a", 0, route.ask, route.refresh)
    assert route.refreshes == 1
    assert wait_for_master("reading", "broker-a", 0, route.ask, route.refresh) == NEW


def test_a_wait_refreshes_and_asks_again_until_the_master_answers() -> None:
    route = Route()
    assert wait_for_master("sending", "broker-a", 5_000, route.ask, route.refresh) == NEW
    assert route.refreshes == 1


def test_an_error_that_is_not_about_the_master_is_raised_without_refresh() -> None:
    route = Route()

    def wrong() -> str:
        raise broker_error(ResponseCode.MESSAGE_ILLEGAL, "bad request", NEW)

    with pytest.raises(MQBrokerError, match="bad request"):
        wait_for_master("sending", "broker-a", 5_000, wrong, route.refresh)
    assert route.refreshes == 0
