"""Which messages a pull returns: subscription expressions (RocketMQ's FilterAPI) and the tag filter the store applies
(broker/filter/ExpressionMessageFilter for TAG expressions).

Rule 1: the subscription-expression rules live here: "*" or an empty expression subscribes to every message,
otherwise tags are split at "||", trimmed, and matched by their String.hashCode against the ConsumeQueue tagsCode.
SQL92 expressions are recognised here but not evaluated (the pull processor refuses them, as Java's broker does
without enablePropertyFilter).

Examples:
    >>> sub = build_subscription_data("TopicTest", "TagA || TagB")
    >>> sub.tags_set, TagMessageFilter(sub).is_matched_by_consume_queue(java_hash("TagB"))
    (['TagA', 'TagB'], True)
    >>> TagMessageFilter(build_subscription_data("TopicTest", "*")).is_matched_by_consume_queue(12345)
    True
"""

from __future__ import annotations

import time

from broker.client_manager import SubscriptionData
from broker.message import java_hash

SUB_ALL = "*"
TAG = "TAG"  # ExpressionType.TAG
SQL92 = "SQL92"  # ExpressionType.SQL92
TAG_SEPARATOR = "||"


def is_tag_type(expression_type: str | None) -> bool:
    """ExpressionType.isTagType: no type at all also means TAG."""
    return not expression_type or expression_type == TAG


def build_subscription_data(topic: str, sub_string: str | None,
                            expression_type: str | None = None) -> SubscriptionData | None:
    """FilterAPI.build: the SubscriptionData a pull with the SUBSCRIPTION flag carries; None when Java's would throw
    (an expression made only of separators, or an empty non-TAG expression), i.e. SUBSCRIPTION_PARSE_FAILED."""
    now_ms = time.time_ns() // 1_000_000  # SubscriptionData.subVersion defaults to the creation time
    if not is_tag_type(expression_type):
        if not sub_string:
            return None
        return SubscriptionData(topic, sub_string, expression_type, sub_version=now_ms)
    if not sub_string or sub_string == SUB_ALL:
        return SubscriptionData(topic, SUB_ALL, TAG, sub_version=now_ms)
    parts = sub_string.split(TAG_SEPARATOR)
    while parts and parts[-1] == "":  # String.split drops trailing empty strings; nothing left is an error
        parts.pop()
    if not parts:
        return None
    tags = list(dict.fromkeys(tag.strip() for tag in parts if tag.strip()))
    return SubscriptionData(topic, sub_string, TAG, tags_set=tags, code_set=[java_hash(t) for t in tags],
                            sub_version=now_ms)


def _int_value(tags_code: int) -> int:
    """Long.intValue(): the ConsumeQueue stores a long tagsCode, the subscription's codes are ints."""
    return ((tags_code + 0x80000000) & 0xFFFFFFFF) - 0x80000000


class TagMessageFilter:
    """The store-side MessageFilter of a TAG subscription (ExpressionMessageFilter): a message matches when the
    subscription is "*" or its tagsCode is one of the subscribed tags' hash codes. The CommitLog check always
    passes, since a tag filter decides on the ConsumeQueue alone; so does everything for other expression types,
    which need the property filter this broker does not run."""

    __slots__ = ("match_all", "codes")

    def __init__(self, subscription: SubscriptionData | None) -> None:
        self.match_all = (subscription is None or subscription.class_filter_mode
                          or not is_tag_type(subscription.expression_type)
                          or subscription.sub_string in (SUB_ALL, ""))
        self.codes = frozenset(subscription.code_set) if subscription is not None else frozenset()

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        """``tags_code`` None (a wake-up without a message at hand) matches, as in Java."""
        return self.match_all or tags_code is None or _int_value(tags_code) in self.codes

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        return True
