"""SubscriptionGroupConfig and SubscriptionGroupManager: consumer groups, persisted as config/subscriptionGroup.json.

The file is Java's serialized SubscriptionGroupManager: ``subscriptionGroupTable``, ``forbiddenTable`` (group ->
topic -> forbidden bits) and ``dataVersion``. As in topics.py, reads are lock-free and changes persist before they
return (a failed write is logged, not raised).

Examples:
    >>> from broker.server.config import BrokerConfig
    >>> import tempfile
    >>> manager = SubscriptionGroupManager(BrokerConfig(), tempfile.mkdtemp())
    >>> manager.find_subscription_group_config("GID_orders").retry_max_times  # auto-created with Java's defaults
    16
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from broker.common import validation as v
from broker.common.config_manager import ConfigManager
from broker.common.errors import IllegalName
from broker.common.fastjson import DataVersion, encode_json_pretty
from broker.common.persist import persist_quietly
from broker.server.metadata.paths import subscription_group_path

if TYPE_CHECKING:
    from broker.server.config import BrokerConfig

log = logging.getLogger(__name__)


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

# SubscriptionGroupManager.init: groups every broker has. CID_ONS-HTTP-PROXY and the CID_ONSAPI_* groups set
# consumeBroadcastEnable=true, which is already the default.
SYSTEM_GROUPS = (
    v.TOOLS_CONSUMER_GROUP,
    v.FILTERSRV_CONSUMER_GROUP,
    v.SELF_TEST_CONSUMER_GROUP,
    v.ONS_HTTP_PROXY_GROUP,
    v.CID_ONSAPI_PULL_GROUP,
    v.CID_ONSAPI_PERMISSION_GROUP,
    v.CID_ONSAPI_OWNER_GROUP,
    v.CID_SYS_RMQ_TRANS,
)


# What subscriptionGroup.json holds: the groups, the forbidden bits (group -> topic -> bits), the DataVersion.
GroupTables = tuple[dict[str, SubscriptionGroupConfig], dict[str, dict[str, int]], DataVersion]


class SubscriptionGroupManager(ConfigManager[GroupTables]):
    """broker.subscription.SubscriptionGroupManager."""

    def __init__(
        self, broker_config: BrokerConfig, store_path_root_dir: str, *, state_version: Callable[[], int] = lambda: 0
    ) -> None:
        super().__init__(subscription_group_path(store_path_root_dir))
        self.broker_config = broker_config
        self._state_version = state_version
        self._lock = threading.RLock()
        self._table: dict[str, SubscriptionGroupConfig] = {g: SubscriptionGroupConfig(g) for g in SYSTEM_GROUPS}
        self._forbidden: dict[str, dict[str, int]] = {}
        self._data_version = DataVersion.new()

    # -- reading ------------------------------------------------------------------------------------------------------

    def select_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config if it exists (never creates one)."""
        return self._table.get(group)

    def contains_subscription_group(self, group: str) -> bool:
        return bool(group and group.strip()) and group in self._table

    @property
    def subscription_group_table(self) -> Mapping[str, SubscriptionGroupConfig]:
        return MappingProxyType(dict(self._table))

    @property
    def data_version(self) -> DataVersion:
        return self._data_version

    def find_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config, auto-created with defaults when autoCreateSubscriptionGroup is on (or, with
        enableCreateSysGroup, for CID_RMQ_SYS_* groups). None when missing and not creatable, or when the name is
        illegal."""
        config = self._table.get(group)
        if config is not None:
            return config
        bc = self.broker_config
        if not (bc.auto_create_subscription_group or (bc.enable_create_sys_group and v.is_sys_consumer_group(group))):
            return None
        if not v.validate_group(group).valid:
            return None
        with self._lock:
            config = self._table.setdefault(group, SubscriptionGroupConfig(group))
            log.info("auto-created subscription group %s", group)
            self._bump()
        self._changed()
        return config

    # -- changes ------------------------------------------------------------------------------------------------------

    def _bump(self) -> None:
        self._data_version = self._data_version.next_version(self._state_version())

    def _changed(self) -> None:
        persist_quietly(self.persist, self.path)

    def update_subscription_group_config(self, config: SubscriptionGroupConfig) -> None:
        """Create or replace (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP); attributes are stored as given."""
        self.update_subscription_group_config_list([config])

    def update_subscription_group_config_list(self, configs: Iterable[SubscriptionGroupConfig]) -> None:
        configs = list(configs)
        if not configs:
            return
        for config in configs:
            result = v.validate_group(config.group_name)
            if not result.valid:
                raise IllegalName(result.remark)
        with self._lock:
            for config in configs:
                old = self._table.get(config.group_name)
                self._table[config.group_name] = config
                log.info("%s subscription group %s", "update" if old else "create", config)
                self._bump()
        self._changed()

    def disable_consume(self, group: str) -> None:
        """Java changes the version but does not persist here; neither do we."""
        with self._lock:
            config = self._table.get(group)
            if config is not None:
                self._table[group] = dataclasses.replace(config, consume_enable=False)
                self._bump()

    def delete_subscription_group_config(self, group: str) -> bool:
        with self._lock:
            old = self._table.pop(group, None)
            self._forbidden.pop(group, None)
            if old is None:
                log.warning("delete subscription group: %s does not exist", group)
                return False
            log.info("deleted subscription group %s", old)
            self._bump()
        self._changed()
        return True

    # -- forbidden bits (a group may be barred from a topic, one bit per reason) --------------------------------------

    def get_forbidden(self, group: str, topic: str) -> int:
        value = self._forbidden.get(group, {}).get(topic, 0)
        return max(value, 0)

    def is_forbidden(self, group: str, topic: str, forbidden_index: int) -> bool:
        bit = 1 << forbidden_index
        return self.get_forbidden(group, topic) & bit == bit

    def set_forbidden(self, group: str, topic: str, forbidden_index: int) -> None:
        self._update_forbidden(group, topic, lambda bits: bits | (1 << forbidden_index))

    def clear_forbidden(self, group: str, topic: str, forbidden_index: int) -> None:
        self._update_forbidden(group, topic, lambda bits: bits & ~(1 << forbidden_index))

    def _update_forbidden(self, group: str, topic: str, change: Callable[[int], int]) -> None:
        with self._lock:
            value = change(self.get_forbidden(group, topic))
            if value <= 0:
                # Java drops the whole group's entry here, not just this topic's, and does not persist: kept, so
                # both brokers agree.
                self._forbidden.pop(group, None)
                return
            self._forbidden.setdefault(group, {})[topic] = value
            self._bump()
        self._changed()

    # -- JSON ---------------------------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            return {
                "dataVersion": self._data_version.to_json(),
                "forbiddenTable": {g: dict(topics) for g, topics in self._forbidden.items()},
                "subscriptionGroupTable": {name: c.to_json() for name, c in self._table.items()},
            }

    def encode(self) -> str:
        return encode_json_pretty(self.to_json())

    def decode(self, data: Any) -> GroupTables:
        table = {
            name: SubscriptionGroupConfig.from_json(item, name)
            for name, item in (data.get("subscriptionGroupTable") or {}).items()
        }
        forbidden = {
            group: {topic: int(bits) for topic, bits in topics.items()}
            for group, topics in (data.get("forbiddenTable") or {}).items()
        }
        return table, forbidden, DataVersion.from_json(data.get("dataVersion"))

    def restore(self, loaded: GroupTables) -> None:
        """subscriptionGroup.json over the system groups."""
        table, forbidden, version = loaded
        with self._lock:
            self._table.update(table)
            self._forbidden.update(forbidden)
            self._data_version = version
        log.info("loaded %d subscription groups from %s", len(table), self.path)
