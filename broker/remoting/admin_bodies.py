"""The JSON bodies of the admin answers (remoting ``protocol/admin`` and ``protocol/body``): TopicStatsTable,
ConsumeStats, Connection, ConsumerConnection and BrokerStatsData. The broker writes them, ``mqadmin`` reads them.

Rule 1: the field names of these bodies appear here and nowhere else. fastjson writes bean properties in
alphabetical order, so ``to_json`` lists them that way, and a map keyed by a MessageQueue with each key a JSON
object (``broker.common.fastjson``'s "object map keys"); ``decode_json`` hands such a key back as its JSON text,
which ``mq_key`` reads. Doubles are JavaDouble, so they are written as Java prints them ("0.0").

Examples:
    >>> from broker.common.fastjson import decode_json, encode_json
    >>> stats = TopicStatsTable({MessageQueue("T", "broker-a", 0): TopicOffset(0, 5, 1700000000000)})
    >>> text = encode_json(stats.to_json())
    >>> text[:65]
    '{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}'
    >>> TopicStatsTable.from_json(decode_json(text)) == stats
    True
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.common.fastjson import JavaDouble
from broker.common.message import MessageQueue
from broker.remoting.heartbeat import SubscriptionData


def mq_key(key: str) -> MessageQueue:
    """A MessageQueue map key, which fastjson writes as an object and decode_json hands back as its text."""
    return MessageQueue.from_json(json.loads(key))


# -- GET_TOPIC_STATS_INFO ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicOffset:
    """One queue's offsets and the store time of its last message."""

    min_offset: int
    max_offset: int
    last_update_timestamp: int

    def to_json(self) -> dict[str, int]:
        return {"lastUpdateTimestamp": self.last_update_timestamp, "maxOffset": self.max_offset,
                "minOffset": self.min_offset}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TopicOffset:
        return cls(int(data.get("minOffset", 0)), int(data.get("maxOffset", 0)),
                   int(data.get("lastUpdateTimestamp", 0)))


@dataclass(slots=True)
class TopicStatsTable:
    """GET_TOPIC_STATS_INFO: each queue's offsets."""

    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)
    topic_put_tps: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"offsetTable": {mq: offset.to_json() for mq, offset in self.offset_table.items()},
                "topicPutTps": JavaDouble(self.topic_put_tps)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TopicStatsTable:
        table = {mq_key(k): TopicOffset.from_json(v) for k, v in (data.get("offsetTable") or {}).items()}
        return cls(table, float(data.get("topicPutTps", 0.0)))


# -- GET_CONSUME_STATS -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetWrapper:
    """A group's committed offset of one queue beside the queue's end."""

    broker_offset: int
    consumer_offset: int
    pull_offset: int
    last_timestamp: int

    @property
    def diff(self) -> int:
        """The group's lag on this queue: messages stored past its committed offset (consumerProgress's #Diff)."""
        return self.broker_offset - self.consumer_offset

    @property
    def inflight(self) -> int:
        """Pulled but not yet committed (consumerProgress's #Inflight)."""
        return self.pull_offset - self.consumer_offset

    def to_json(self) -> dict[str, int]:
        return {"brokerOffset": self.broker_offset, "consumerOffset": self.consumer_offset,
                "lastTimestamp": self.last_timestamp, "pullOffset": self.pull_offset}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OffsetWrapper:
        return cls(int(data.get("brokerOffset", 0)), int(data.get("consumerOffset", 0)),
                   int(data.get("pullOffset", 0)), int(data.get("lastTimestamp", 0)))


@dataclass(slots=True)
class ConsumeStats:
    """GET_CONSUME_STATS: a group's committed offset beside each queue's end."""

    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"consumeTps": JavaDouble(self.consume_tps),
                "offsetTable": {mq: wrapper.to_json() for mq, wrapper in self.offset_table.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ConsumeStats:
        table = {mq_key(k): OffsetWrapper.from_json(v) for k, v in (data.get("offsetTable") or {}).items()}
        return cls(table, float(data.get("consumeTps", 0.0)))

    def compute_total_diff(self) -> int:
        return sum(w.diff for w in self.offset_table.values())


# -- GET_CONSUMER_CONNECTION_LIST, GET_PRODUCER_CONNECTION_LIST --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Connection:
    """One client of a group: its id, address, language name and MQVersion ordinal."""

    client_id: str
    client_addr: str
    language: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"clientAddr": self.client_addr, "clientId": self.client_id, "language": self.language,
                "version": self.version}

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

    def to_json(self) -> dict[str, Any]:
        return {
            "connectionSet": [c.to_json() for c in self.connection_set],
            "consumeFromWhere": self.consume_from_where,
            "consumeType": self.consume_type,
            "messageModel": self.message_model,
            "subscriptionTable": {topic: sub.to_json() for topic, sub in self.subscription_table.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ConsumerConnection:
        """A subscription without a topic of its own takes its table key."""
        subs = {str(topic): SubscriptionData.from_json({"topic": str(topic), **s})
                for topic, s in (data.get("subscriptionTable") or {}).items()}
        return cls([Connection.from_json(c) for c in data.get("connectionSet") or ()], subs,
                   data.get("consumeType"), data.get("messageModel"), data.get("consumeFromWhere"))

    def compute_min_version(self) -> int:
        return min((c.version for c in self.connection_set), default=2**31 - 1)


# -- VIEW_BROKER_STATS_DATA --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerStatsItem:
    """One window of a broker stats item: the sum added in it, per second, and per call (avgpt)."""

    sum: int = 0
    tps: float = 0.0
    avgpt: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"avgpt": JavaDouble(self.avgpt), "sum": self.sum, "tps": JavaDouble(self.tps)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> BrokerStatsItem:
        data = data or {}
        return cls(int(data.get("sum", 0)), float(data.get("tps", 0.0)), float(data.get("avgpt", 0.0)))


@dataclass(frozen=True, slots=True)
class BrokerStatsData:
    """A stats item (BrokerStatsManager's TOPIC_PUT_NUMS of a topic...) over its last minute, hour and day."""

    stats_minute: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_hour: BrokerStatsItem = field(default_factory=BrokerStatsItem)
    stats_day: BrokerStatsItem = field(default_factory=BrokerStatsItem)

    def to_json(self) -> dict[str, Any]:
        return {"statsDay": self.stats_day.to_json(), "statsHour": self.stats_hour.to_json(),
                "statsMinute": self.stats_minute.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BrokerStatsData:
        return cls(BrokerStatsItem.from_json(data.get("statsMinute")), BrokerStatsItem.from_json(data.get("statsHour")),
                   BrokerStatsItem.from_json(data.get("statsDay")))
