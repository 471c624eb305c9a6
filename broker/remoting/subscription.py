"""SubscriptionGroupConfig (remoting ``protocol/subscription``): a consumer group's settings. The broker persists
them in config/subscriptionGroup.json, answers them to GET_ALL_SUBSCRIPTIONGROUP_CONFIG, and ``mqadmin
updateSubGroup`` sends one as UPDATE_AND_CREATE_SUBSCRIPTIONGROUP's body: one JSON shape for all three.

Rule 1: the JSON names of SubscriptionGroupConfig are defined here and nowhere else.

Examples:
    >>> config = SubscriptionGroupConfig("GID_orders", retry_max_times=3)
    >>> config.to_json()["retryMaxTimes"], SubscriptionGroupConfig.from_json(config.to_json()) == config
    (3, True)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class SubscriptionGroupConfig:
    """remoting.protocol.subscription.SubscriptionGroupConfig with Java's defaults.

    ``group_retry_policy`` and ``subscription_data_set`` are kept as the JSON Java wrote (rmq does not interpret
    them yet); ``extra`` keeps properties this version does not know, so a rewrite loses nothing.
    """

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    group_retry_policy: Mapping[str, Any] = field(default_factory=lambda: {"type": "CUSTOMIZED"})
    broker_id: int = 0  # MixAll.MASTER_ID: which broker serves pulls by default
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15
    subscription_data_set: tuple[Mapping[str, Any], ...] | None = None
    attributes: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            **self.extra,
            "attributes": dict(self.attributes),
            "brokerId": self.broker_id,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "consumeMessageOrderly": self.consume_message_orderly,
            "consumeTimeoutMinute": self.consume_timeout_minute,
            "groupName": self.group_name,
            "groupRetryPolicy": dict(self.group_retry_policy),
            "groupSysFlag": self.group_sys_flag,
            "notifyConsumerIdsChangedEnable": self.notify_consumer_ids_changed_enable,
            "retryMaxTimes": self.retry_max_times,
            "retryQueueNums": self.retry_queue_nums,
            "whichBrokerWhenConsumeSlowly": self.which_broker_when_consume_slowly,
        }
        if self.subscription_data_set is not None:
            data["subscriptionDataSet"] = [dict(item) for item in self.subscription_data_set]
        return dict(sorted(data.items()))

    @classmethod
    def from_json(cls, data: Mapping[str, Any], group_name: str | None = None) -> SubscriptionGroupConfig:
        name = data.get("groupName") or group_name
        if not isinstance(name, str):
            raise ValueError(f"subscription group config without a groupName: {dict(data)!r}")
        defaults = cls(name)
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            key = _JSON_KEYS.get(f.name)
            if key is None or key not in data:
                continue
            raw = data[key]
            default = getattr(defaults, f.name)
            values[f.name] = bool(raw) if isinstance(default, bool) else int(raw) if isinstance(default, int) else raw
        if "subscriptionDataSet" in data and data["subscriptionDataSet"] is not None:
            values["subscription_data_set"] = tuple(data["subscriptionDataSet"])
        if "groupRetryPolicy" in data and data["groupRetryPolicy"] is not None:
            values["group_retry_policy"] = dict(data["groupRetryPolicy"])
        values["attributes"] = {str(k): str(val) for k, val in (data.get("attributes") or {}).items()}
        values["extra"] = {k: val for k, val in data.items() if k not in _KNOWN_KEYS}
        return dataclasses.replace(defaults, **values)


_JSON_KEYS = {
    "consume_enable": "consumeEnable",
    "consume_from_min_enable": "consumeFromMinEnable",
    "consume_broadcast_enable": "consumeBroadcastEnable",
    "consume_message_orderly": "consumeMessageOrderly",
    "retry_queue_nums": "retryQueueNums",
    "retry_max_times": "retryMaxTimes",
    "broker_id": "brokerId",
    "which_broker_when_consume_slowly": "whichBrokerWhenConsumeSlowly",
    "notify_consumer_ids_changed_enable": "notifyConsumerIdsChangedEnable",
    "group_sys_flag": "groupSysFlag",
    "consume_timeout_minute": "consumeTimeoutMinute",
}
_KNOWN_KEYS = frozenset(_JSON_KEYS.values()) | {"groupName", "groupRetryPolicy", "subscriptionDataSet", "attributes"}
