"""The answers of the admin calls as dataclasses, read from the JSON bodies Java's classes write
(remoting/protocol/body/*.java, remoting/protocol/admin/*.java), plus MQVersion's names and the AttributeParser.

Rule 1: the field names of these bodies appear here and nowhere else in ``broker.tools``. A map keyed by a
MessageQueue arrives in fastjson's dialect (the key an object); ``broker.common.persist.decode_json`` hands such a
key over as its JSON text, which ``_mq_key`` reads back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from broker.client.message import MessageExt, MessageQueue
from broker.client.route import BrokerData
from broker.remoting.heartbeat import SubscriptionData

# -- MQVersion.Version -------------------------------------------------------------------------------------------------

_V3_0_0 = ["SNAPSHOT", "ALPHA1", "BETA1", "BETA2", "BETA3", "BETA4", "BETA5", "BETA6_SNAPSHOT", "BETA6",
           "BETA7_SNAPSHOT", "BETA7", "BETA8_SNAPSHOT", "BETA8", "BETA9_SNAPSHOT", "BETA9", "FINAL"]


def _version_names() -> list[str]:
    """MQVersion.Version in ordinal order: 3.0.0's milestones, then SNAPSHOT and release of every patch (3.3 to 3.9
    start at patch 1), up to V5_9_9."""
    names = [f"V3_0_0_{suffix}" for suffix in _V3_0_0]
    releases = [(3, 0, range(1, 16))]
    for major in (3, 4, 5):
        for minor in range(1 if major == 3 else 0, 10):
            releases.append((major, minor, range(1 if major == 3 and minor >= 3 else 0, 10)))
    for major, minor, patches in releases:
        for patch in patches:
            names += [f"V{major}_{minor}_{patch}_SNAPSHOT", f"V{major}_{minor}_{patch}"]
    return names


VERSION_NAMES = tuple(_version_names())


def version_desc(ordinal: int) -> str:
    """MQVersion.getVersionDesc: an ordinal past the table is the last version.

    Examples:
        >>> version_desc(515), version_desc(413), version_desc(2**31 - 1)
        ('V5_5_1', 'V5_0_0', 'V5_9_9')
    """
    return VERSION_NAMES[min(max(ordinal, 0), len(VERSION_NAMES) - 1)]


# -- bodies ------------------------------------------------------------------------------------------------------------


def mq_key(key: str) -> MessageQueue:
    """A MessageQueue map key, which fastjson writes as an object and decode_json hands back as its text."""
    return MessageQueue.from_json(json.loads(key))


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """GET_BROKER_CLUSTER_INFO: broker groups by name, and the broker names of each cluster."""

    broker_addr_table: dict[str, BrokerData]
    cluster_addr_table: dict[str, list[str]]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClusterInfo:
        brokers = {name: BrokerData.from_json(b) for name, b in (data.get("brokerAddrTable") or {}).items()}
        return cls(brokers, {name: list(v) for name, v in (data.get("clusterAddrTable") or {}).items()})


@dataclass(frozen=True, slots=True)
class TopicOffset:
    min_offset: int
    max_offset: int
    last_update_timestamp: int


@dataclass(slots=True)
class TopicStatsTable:
    """GET_TOPIC_STATS_INFO: each queue's offsets."""

    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)
    topic_put_tps: float = 0.0

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TopicStatsTable:
        table = {mq_key(k): TopicOffset(int(v.get("minOffset", 0)), int(v.get("maxOffset", 0)),
                                         int(v.get("lastUpdateTimestamp", 0)))
                 for k, v in (data.get("offsetTable") or {}).items()}
        return cls(table, float(data.get("topicPutTps", 0.0)))


@dataclass(frozen=True, slots=True)
class OffsetWrapper:
    broker_offset: int
    consumer_offset: int
    pull_offset: int
    last_timestamp: int


@dataclass(slots=True)
class ConsumeStats:
    """GET_CONSUME_STATS: a group's committed offset beside each queue's end."""

    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ConsumeStats:
        table = {mq_key(k): OffsetWrapper(int(v.get("brokerOffset", 0)), int(v.get("consumerOffset", 0)),
                                           int(v.get("pullOffset", 0)), int(v.get("lastTimestamp", 0)))
                 for k, v in (data.get("offsetTable") or {}).items()}
        return cls(table, float(data.get("consumeTps", 0.0)))

    def compute_total_diff(self) -> int:
        return sum(w.broker_offset - w.consumer_offset for w in self.offset_table.values())


@dataclass(frozen=True, slots=True)
class Connection:
    """remoting/protocol/body/Connection: one client of a group."""

    client_id: str
    client_addr: str
    language: str
    version: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Connection:
        return cls(str(data.get("clientId", "")), str(data.get("clientAddr", "")), str(data.get("language", "")),
                   int(data.get("version", 0)))


@dataclass(slots=True)
class ConsumerConnection:
    """GET_CONSUMER_CONNECTION_LIST: the group's clients, subscriptions and consume settings."""

    connection_set: list[Connection]
    subscription_table: dict[str, SubscriptionData]
    consume_type: str | None
    message_model: str | None
    consume_from_where: str | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ConsumerConnection:
        subs = {str(topic): SubscriptionData.from_json({"topic": str(topic), **s})
                for topic, s in (data.get("subscriptionTable") or {}).items()}
        return cls([Connection.from_json(c) for c in data.get("connectionSet") or ()], subs,
                   data.get("consumeType"), data.get("messageModel"), data.get("consumeFromWhere"))

    def compute_min_version(self) -> int:
        return min((c.version for c in self.connection_set), default=2**31 - 1)


@dataclass(frozen=True, slots=True)
class QueryResult:
    index_last_update_timestamp: int
    messages: list[MessageExt]


@dataclass(frozen=True, slots=True)
class RollbackStats:
    """What the pre-4.x offset reset did to one queue (ResetOffsetByTimeOldCommand's table)."""

    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    timestamp_offset: int
    rollback_offset: int


class TrackType(Enum):
    CONSUMED = "CONSUMED"
    CONSUMED_BUT_FILTERED = "CONSUMED_BUT_FILTERED"
    PULL = "PULL"
    NOT_CONSUME_YET = "NOT_CONSUME_YET"
    NOT_ONLINE = "NOT_ONLINE"
    CONSUME_BROADCASTING = "CONSUME_BROADCASTING"
    UNKNOWN = "UNKNOWN"


@dataclass(slots=True)
class MessageTrack:
    consumer_group: str
    track_type: TrackType = TrackType.UNKNOWN
    exception_desc: str | None = None

    def __str__(self) -> str:
        return (f"MessageTrack [consumerGroup={self.consumer_group}, trackType={self.track_type.value}, "
                f"exceptionDesc={'null' if self.exception_desc is None else self.exception_desc}]")


def attributes_to_string(attributes: Mapping[str, str]) -> str:
    """AttributeParser.parseToString."""
    return ",".join(f"{k}={v}" if v else k for k, v in attributes.items())
