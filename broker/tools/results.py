"""What MQAdminExt answers beside the wire bodies: QueryResult, RollbackStats, MessageTrack (the admin API's own
values, tools/admin/api/*.java); MQVersion's names, which the commands print, are ``broker.common.mq_version``'s.

The JSON bodies the admin calls read (TopicStatsTable, ConsumeStats, ConsumerConnection...) are
``broker.remoting.admin_bodies``'s, shared with the broker that writes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from broker.client.message import MessageExt

# -- results ---------------------------------------------------------------------------------------------------------


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
