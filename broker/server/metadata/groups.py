"""SubscriptionGroupManager: consumer groups, persisted as config/subscriptionGroup.json (each group a
SubscriptionGroupConfig, ``broker.remoting.subscription``'s: mqadmin sends the same JSON).

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
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from broker.common import validation as v
from broker.common.errors import IllegalName
from broker.common.fastjson import DataVersion, encode_json_pretty
from broker.common.persist import persist_quietly
from broker.remoting.subscription import SubscriptionGroupConfig
from broker.server.metadata.paths import subscription_group_path
from broker.server.metadata.versioned import VersionedTable

if TYPE_CHECKING:
    from broker.server.config import BrokerConfig

log = logging.getLogger(__name__)


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


class SubscriptionGroupManager(VersionedTable[GroupTables, SubscriptionGroupConfig]):
    """broker.subscription.SubscriptionGroupManager."""

    def __init__(
        self, broker_config: BrokerConfig, store_path_root_dir: str, *, state_version: Callable[[], int] = lambda: 0
    ) -> None:
        super().__init__(subscription_group_path(store_path_root_dir), state_version)
        self.broker_config = broker_config
        self._table.update((g, SubscriptionGroupConfig(g)) for g in SYSTEM_GROUPS)
        self._forbidden: dict[str, dict[str, int]] = {}

    # -- reading ------------------------------------------------------------------------------------------------------

    def select_subscription_group_config(self, group: str) -> SubscriptionGroupConfig | None:
        """The group's config if it exists (never creates one)."""
        return self._table.get(group)

    def contains_subscription_group(self, group: str) -> bool:
        return bool(group and group.strip()) and group in self._table

    @property
    def subscription_group_table(self) -> Mapping[str, SubscriptionGroupConfig]:
        return MappingProxyType(dict(self._table))

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

    def _dropping(self, names: list[str]) -> None:
        """Java's sync loop also drops the forbidden bits of every group we had (the master's are not copied)."""
        for group in names:
            self._forbidden.pop(group, None)

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
