"""Broker metadata: topics, subscription groups and consumer offsets, in Apache RocketMQ's config/*.json files.

    {storePathRootDir}/config/topics.json             TopicConfigManager        (topics.py)
    {storePathRootDir}/config/subscriptionGroup.json  SubscriptionGroupManager  (groups.py)
    {storePathRootDir}/config/consumerOffset.json     ConsumerOffsetManager     (offsets.py)

The JSON dialect, DataVersion and the crash-safe write are persist.py's; the name rules are validation.py's.
"""

from broker.metadata.groups import SubscriptionGroupConfig, SubscriptionGroupManager
from broker.metadata.offsets import ConsumerOffsetManager
from broker.metadata.persist import DataVersion
from broker.metadata.topics import TopicConfig, TopicConfigManager, TopicFilterType
from broker.metadata.validation import ValidateResult, validate_group, validate_topic

__all__ = [
    # managers
    "TopicConfigManager",
    "SubscriptionGroupManager",
    "ConsumerOffsetManager",
    # values
    "TopicConfig",
    "TopicFilterType",
    "SubscriptionGroupConfig",
    "DataVersion",
    # name rules
    "ValidateResult",
    "validate_topic",
    "validate_group",
]
