"""Which messages a pull returns: subscription expressions (RocketMQ's FilterAPI) and the tag filter the store applies
(broker/filter/ExpressionMessageFilter for TAG expressions).

Rule 1: the subscription-expression rules live here: "*" or an empty expression subscribes to every message,
otherwise tags are split at "||", trimmed, and matched by their String.hashCode against the ConsumeQueue tagsCode.
A SQL92 expression (``MessageSelector.bySql``) is compiled once (``sql92``) and evaluated on each record's
properties by ``SqlMessageFilter`` when the broker runs with enablePropertyFilter; ``ConsumerFilterManager`` keeps the
compiled expression of every SQL92 subscription a heartbeat registered (Java's ConsumerFilterData, without the bloom
filter bit maps, which need the ConsumeQueue extension rmq does not write).

Examples:
    >>> sub = parse_subscription("TopicTest", "TagA || TagB")
    >>> sub.tags_set, TagMessageFilter(sub).is_matched_by_consume_queue(java_hash("TagB"))
    (['TagA', 'TagB'], True)
    >>> TagMessageFilter(parse_subscription("TopicTest", "*")).is_matched_by_consume_queue(12345)
    True
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from broker.common.errors import CorruptRecord, FilterExpressionError
from broker.common.record import decode_record_properties
from broker.remoting.heartbeat import (
    EXPRESSION_SQL92,
    SUB_ALL,
    SubscriptionData,
    is_tag_type,
)
from broker.server.filter.sql92 import CompiledSelector, compile_selector

log = logging.getLogger(__name__)

def _int_value(tags_code: int) -> int:
    """Long.intValue(): the ConsumeQueue stores a long tagsCode, the subscription's codes are ints."""
    return ((tags_code + 0x80000000) & 0xFFFFFFFF) - 0x80000000


class TagMessageFilter:
    """The store-side MessageFilter of a TAG subscription (ExpressionMessageFilter): a message matches when the
    subscription is "*" or its tagsCode is one of the subscribed tags' hash codes. The CommitLog check always
    passes, since a tag filter decides on the ConsumeQueue alone. Other expression types pass everything here: they
    get a SqlMessageFilter instead."""

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


# -- SQL92 (ExpressionMessageFilter with ConsumerFilterData; ConsumerFilterManager) ------------------------------------


def compile_expression(expression_type: str | None, expression: str) -> CompiledSelector:
    """FilterFactory.INSTANCE.get(type).compile(expression); FilterExpressionError with the reason Java's broker
    puts in its remark. SQL92 is the only expression type besides TAG."""
    if expression_type != EXPRESSION_SQL92:
        raise FilterExpressionError(f"java.lang.NullPointerException: no filter for expression type {expression_type}")
    return compile_selector(expression)


class SqlMessageFilter:
    """The store-side MessageFilter of a SQL92 subscription: the ConsumeQueue cannot decide (its tagsCode says
    nothing about properties), so every unit passes there and each record is decided on its properties, decoded
    without its body.

    Examples:
        >>> message_filter = SqlMessageFilter(compile_selector("a > 5"))
        >>> message_filter.is_matched_by_consume_queue(12345)
        True
    """

    __slots__ = ("selector",)
    match_all = False

    def __init__(self, selector: CompiledSelector) -> None:
        self.selector = selector

    def is_matched_by_consume_queue(self, tags_code: int | None) -> bool:
        return True

    def is_matched_by_commit_log(self, record: bytes) -> bool:
        try:
            properties = decode_record_properties(record)
        except CorruptRecord:
            return False
        return self.selector.matches(properties)


@dataclass(slots=True)
class ConsumerFilterData:
    """The compiled expression of one group's SQL92 subscription to one topic."""

    topic: str
    consumer_group: str
    expression: str
    expression_type: str
    client_version: int  # the subscription's subVersion
    selector: CompiledSelector
    born_time: int = field(default_factory=lambda: time.time_ns() // 1_000_000)


class ConsumerFilterManager:
    """ConsumerFilterManager: filter data by topic and group, registered from full heartbeats. A newer
    subscription version with a changed expression replaces the data, or removes it when it does not compile (the
    pull then answers FILTER_DATA_NOT_EXIST, as Java's does: "let client report error"). Not persisted: after a
    restart the consumers' next heartbeats register it again, before which their pulls find no group anyway."""

    def __init__(self) -> None:
        self._by_topic: dict[str, dict[str, ConsumerFilterData]] = {}

    def register(self, group: str, subscriptions: Iterable[SubscriptionData]) -> None:
        for subscription in subscriptions:
            self.register_one(group, subscription)

    def register_one(self, group: str, subscription: SubscriptionData) -> bool:
        """FilterDataMapByTopic.register; True when the group's filter data for the topic is new or renewed."""
        expression_type, expression = subscription.expression_type, subscription.sub_string
        if is_tag_type(expression_type) or not expression:
            return False
        groups = self._by_topic.setdefault(subscription.topic, {})
        old = groups.get(group)
        if old is not None and subscription.sub_version <= old.client_version:
            return subscription.sub_version == old.client_version
        if old is not None and (old.expression, old.expression_type) == (expression, expression_type):
            old.client_version = subscription.sub_version
            return True
        try:
            selector = compile_expression(expression_type, expression)
        except FilterExpressionError as err:
            log.error("parse error: expr=%s, topic=%s, group=%s, error=%s", expression, subscription.topic, group, err)
            groups.pop(group, None)
            return False
        groups[group] = ConsumerFilterData(subscription.topic, group, expression, expression_type,
                                           subscription.sub_version, selector)
        return True

    def get(self, topic: str, group: str) -> ConsumerFilterData | None:
        return self._by_topic.get(topic, {}).get(group)
