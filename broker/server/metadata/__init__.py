"""Broker metadata: topics, subscription groups and consumer offsets, in Apache RocketMQ's config/*.json files.

    {storePathRootDir}/config/topics.json             TopicConfigManager        (topics.py)
    {storePathRootDir}/config/subscriptionGroup.json  SubscriptionGroupManager  (groups.py)
    {storePathRootDir}/config/consumerOffset.json     ConsumerOffsetManager     (offsets.py)

Where the files live is paths.py's; the JSON dialect and DataVersion are ``broker.common.fastjson``'s, the
crash-safe write ``broker.common.persist``'s and the load/persist of each file ``broker.common.config_manager``'s,
the values (TopicConfig) and name rules ``broker.common``'s. attributes.py says which topic and group attributes
exist and how an admin's edits apply to them.
"""

from broker.server.metadata.groups import SubscriptionGroupConfig, SubscriptionGroupManager
from broker.server.metadata.offsets import ConsumerOffsetManager
from broker.server.metadata.topics import TopicConfigManager

__all__ = ["ConsumerOffsetManager", "SubscriptionGroupConfig", "SubscriptionGroupManager", "TopicConfigManager"]
