"""What MQAdminExt answers beside the wire bodies: QueryResult, RollbackStats, MessageTrack (the admin API's own
values, tools/admin/api/*.java), and MQVersion's names, which the commands print.

The JSON bodies the admin calls read (TopicStatsTable, ConsumeStats, ConsumerConnection...) are
``broker.remoting.admin_bodies``'s, shared with the broker that writes them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from broker.client.message import MessageExt

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
