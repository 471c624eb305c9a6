"""Headers of the NameServer's requests and answers: broker registration, topics, KV config (the route lookup, which
every client sends, is ``route``'s)."""

from __future__ import annotations

from dataclasses import dataclass

from broker.remoting.headers.base import Header

# -- namesrv ---------------------------------------------------------------------------------------------------------
# remoting/protocol/header/namesrv/*.java (plus GetBrokerMemberGroupRequestHeader and GetTopicsByClusterRequestHeader,
# which live one package up): what brokers, clients and admin tools send a NameServer.


@dataclass(slots=True)
class RegisterBrokerRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: int
    heartbeat_timeout_millis: int | None = None
    enable_acting_master: bool | None = None  # absent: a broker older than 5.0 (no acting master)
    compressed: bool = False  # the body is RegisterBrokerBody's deflated binary form, not JSON
    body_crc32: int = 0  # UtilAll.crc32 of the body (CRC32 & 0x7FFFFFFF); 0: not checked


@dataclass(slots=True)
class RegisterBrokerResponseHeader(Header):
    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(slots=True)
class UnRegisterBrokerRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@dataclass(slots=True)
class BrokerHeartbeatRequestHeader(Header):
    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int | None = None
    epoch: int | None = None
    max_offset: int | None = None
    confirm_offset: int | None = None
    heartbeat_timeout_mills: int | None = None  # sic: Java's field name
    election_priority: int | None = None


@dataclass(slots=True)
class QueryDataVersionRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@dataclass(slots=True)
class QueryDataVersionResponseHeader(Header):
    changed: bool


@dataclass(slots=True)
class DeleteTopicFromNamesrvRequestHeader(Header):
    topic: str
    cluster_name: str | None = None


@dataclass(slots=True)
class RegisterTopicRequestHeader(Header):
    topic: str


@dataclass(slots=True)
class GetTopicsByClusterRequestHeader(Header):
    cluster: str


@dataclass(slots=True)
class GetBrokerMemberGroupRequestHeader(Header):
    cluster_name: str
    broker_name: str


@dataclass(slots=True)
class BrokerNameHeader(Header):
    """WIPE_WRITE_PERM_OF_BROKER and ADD_WRITE_PERM_OF_BROKER requests."""

    broker_name: str


@dataclass(slots=True)
class WipeWritePermOfBrokerResponseHeader(Header):
    wipe_topic_count: int


@dataclass(slots=True)
class AddWritePermOfBrokerResponseHeader(Header):
    add_topic_count: int


@dataclass(slots=True)
class PutKVConfigRequestHeader(Header):
    namespace: str
    key: str
    value: str


@dataclass(slots=True)
class KVConfigKeyHeader(Header):
    """GET_KV_CONFIG and DELETE_KV_CONFIG requests."""

    namespace: str
    key: str


@dataclass(slots=True)
class GetKVConfigResponseHeader(Header):
    value: str | None = None


@dataclass(slots=True)
class GetKVListByNamespaceRequestHeader(Header):
    namespace: str
