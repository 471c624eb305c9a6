"""Who registers with a NameServer, and what it keeps about each broker: the records RouteInfoManager's tables hold
(BrokerAddrInfo, BrokerLiveInfo) and the requests it is given and answers (BrokerRegistration, UnregisterRequest,
RegisterBrokerResult). Sans-IO values: a broker's connection is an opaque ``channel``.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import NamedTuple

from broker.common.fastjson import DataVersion

Channel = Hashable | None
"""A broker's connection, as the route table sees it: compared by identity, never used."""


class BrokerAddrInfo(NamedTuple):
    """A broker instance: its cluster and address (BrokerAddrInfo keys the liveness and filter-server tables)."""

    cluster_name: str
    broker_addr: str


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update_timestamp: int
    heartbeat_timeout_millis: int
    data_version: DataVersion
    channel: Channel
    ha_server_addr: str | None


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """Who registers, from RegisterBrokerRequestHeader (``zone_name`` is the ``__ZONE_NAME`` extField)."""

    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int
    ha_server_addr: str | None = None
    zone_name: str | None = None
    heartbeat_timeout_millis: int | None = None  # None: DEFAULT_BROKER_CHANNEL_EXPIRED_TIME
    enable_acting_master: bool | None = None  # None: a broker older than 5.0


@dataclass(frozen=True, slots=True)
class RegisterBrokerResult:
    """For a slave: its master's address and HA address, once the master is registered."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(frozen=True, slots=True)
class UnregisterRequest:
    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int
