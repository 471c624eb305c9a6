"""ConsumerLagCalculator: what each online consumer group has left to consume, per subscribed topic, for the lag
gauges (Apache's broker/metrics/ConsumerLagCalculator, without pop).

Which groups: those of the subscription group table with clients online, each topic they subscribe to (not their
%RETRY% topic) that this broker has and may read or write. Per queue of the topic (its writeQueueNums): the lag is
the queue's max offset minus the group's committed offset (a queue without one counts nothing), and its latency
is how old the first unconsumed message is. Apache's in-flight and ready counts measure against a pull offset
that only pop consumers advance; for the others it is the committed offset, so in-flight is 0 and ready equals the
lag, as Apache reports them. Apache's ``estimateAccumulation`` counts only the messages a TAG subscription
matches; rmq counts every message (the same unless the group filters).

Examples:
    >>> calculator = ConsumerLagCalculator(broker_config, topics, groups, consumers, offsets, store)  # doctest: +SKIP
    >>> [(lag.group, lag.topic, lag.lag) for lag in calculator.calculate()]  # doctest: +SKIP
    [('GID_orders', 'Orders', 12)]
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.common.topic import PERM_READ, PERM_WRITE
from broker.common.validation import is_retry_topic

if TYPE_CHECKING:
    from broker.server.config import BrokerConfig
    from broker.server.consumer_manager import ConsumerManager
    from broker.server.metadata.groups import SubscriptionGroupManager
    from broker.server.metadata.offsets import ConsumerOffsetManager
    from broker.server.metadata.topics import TopicConfigManager
    from broker.store.message_store import MessageStore


@dataclass(frozen=True, slots=True)
class GroupLag:
    """One group on one topic: messages not yet consumed, and the store time of the oldest of them (0: none)."""

    group: str
    topic: str
    lag: int
    earliest_unconsumed_timestamp: int


class ConsumerLagCalculator:
    def __init__(self, broker_config: BrokerConfig, topic_config_manager: TopicConfigManager,
                 subscription_group_manager: SubscriptionGroupManager, consumer_manager: ConsumerManager,
                 consumer_offset_manager: ConsumerOffsetManager, store: MessageStore) -> None:
        self.broker_config = broker_config
        self.topics = topic_config_manager
        self.groups = subscription_group_manager
        self.consumers = consumer_manager
        self.offsets = consumer_offset_manager
        self.store = store

    def _group_topics(self) -> Iterator[tuple[str, str, int]]:
        """(group, topic, writeQueueNums) of every online group's subscribed topic this broker serves."""
        permission = self.broker_config.broker_permission
        for group in list(self.groups.subscription_group_table):
            info = self.consumers.get(group)
            if info is None:
                continue
            for topic in list(info.subscriptions):
                if is_retry_topic(topic):
                    continue
                config = self.topics.select_topic_config(topic)
                if config is None or not config.perm & permission & (PERM_READ | PERM_WRITE):
                    continue
                yield group, topic, config.write_queue_nums

    def calculate(self) -> list[GroupLag]:
        """Every online group's lag per subscribed topic (getConsumerLagStats summed over the queues)."""
        return [self._lag(group, topic, queues) for group, topic, queues in self._group_topics()]

    def _lag(self, group: str, topic: str, queues: int) -> GroupLag:
        total, earliest = 0, 0
        for queue_id in range(queues):
            max_offset = max(self.store.max_offset_in_queue(topic, queue_id), 0)
            consumer_offset = self.offsets.query_offset(group, topic, queue_id)
            if consumer_offset < 0:
                consumer_offset = max_offset
            total += max(max_offset - consumer_offset, 0)
            stored = self.store.message_store_timestamp(topic, queue_id, consumer_offset)
            if stored > 0 and (earliest == 0 or stored < earliest):
                earliest = stored
        return GroupLag(group, topic, total, earliest)
