"""A topic's settings as every side sees them: TopicConfig (common.TopicConfig) and its permission bits (PermName).

The broker's topic table (TopicConfigManager) keeps these in topics.json; the NameServer carries them in route data,
the client reads the permission bits to choose queues, and mqadmin sends a TopicConfig to create a topic.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

# -- PermName ---------------------------------------------------------------------------------------------------------
PERM_PRIORITY = 0x1 << 3
PERM_READ = 0x1 << 2
PERM_WRITE = 0x1 << 1
PERM_INHERIT = 0x1 << 0  # the topic is a template that auto-created topics copy (TBW102)


def is_readable(perm: int) -> bool:
    return perm & PERM_READ == PERM_READ


def is_writeable(perm: int) -> bool:
    return perm & PERM_WRITE == PERM_WRITE


def is_inherited(perm: int) -> bool:
    return perm & PERM_INHERIT == PERM_INHERIT


def is_valid_perm(perm: int) -> bool:
    return 0 <= perm < PERM_PRIORITY


def perm_to_string(perm: int) -> str:
    """PermName.perm2String: 7 -> "RWX"."""
    return (
        ("R" if is_readable(perm) else "-")
        + ("W" if is_writeable(perm) else "-")
        + ("X" if is_inherited(perm) else "-")
    )


class TopicFilterType(StrEnum):
    SINGLE_TAG = "SINGLE_TAG"
    MULTI_TAG = "MULTI_TAG"


DEFAULT_QUEUE_NUMS = 16  # TopicConfig.defaultReadQueueNums / defaultWriteQueueNums
CLEANUP_POLICY = "cleanup.policy"  # TopicAttributes.CLEANUP_POLICY_ATTRIBUTE
SCHEDULE_TOPIC_QUEUE_NUM = 18  # one queue per delay level
DLQ_NUMS_PER_GROUP = 1


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """common.TopicConfig. ``extra`` keeps JSON properties this version does not know, so they survive a rewrite."""

    topic_name: str
    read_queue_nums: int = DEFAULT_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_QUEUE_NUMS
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: TopicFilterType = TopicFilterType.SINGLE_TAG
    topic_sys_flag: int = 0
    order: bool = False
    attributes: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def compacted(self) -> bool:
        """cleanup.policy=COMPACTION: a message sent to the topic must carry KEYS."""
        return self.attributes.get(CLEANUP_POLICY) == "COMPACTION"

    def to_json(self) -> dict[str, Any]:
        """The properties fastjson writes, in its (alphabetical) order."""
        data = {
            **self.extra,
            "attributes": dict(self.attributes),
            "order": self.order,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicFilterType": str(self.topic_filter_type),
            "topicName": self.topic_name,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }
        return dict(sorted(data.items()))

    @classmethod
    def from_json(cls, data: Mapping[str, Any], topic_name: str | None = None) -> TopicConfig:
        """Missing properties take Java's defaults; ``topic_name`` (the table key) wins over a missing name."""
        known = {
            "attributes",
            "order",
            "perm",
            "readQueueNums",
            "topicFilterType",
            "topicName",
            "topicSysFlag",
            "writeQueueNums",
        }
        name = data.get("topicName") or topic_name
        if not isinstance(name, str):
            raise ValueError(f"topic config without a topicName: {dict(data)!r}")
        return cls(
            topic_name=name,
            read_queue_nums=int(data.get("readQueueNums", DEFAULT_QUEUE_NUMS)),
            write_queue_nums=int(data.get("writeQueueNums", DEFAULT_QUEUE_NUMS)),
            perm=int(data.get("perm", PERM_READ | PERM_WRITE)),
            topic_filter_type=TopicFilterType(data.get("topicFilterType") or TopicFilterType.SINGLE_TAG),
            topic_sys_flag=int(data.get("topicSysFlag", 0)),
            order=bool(data.get("order", False)),
            attributes={str(k): str(val) for k, val in (data.get("attributes") or {}).items()},
            extra={k: val for k, val in data.items() if k not in known},
        )
