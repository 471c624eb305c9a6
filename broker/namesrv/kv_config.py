"""KVConfigManager: the NameServer's namespaced key/value store, persisted as kvConfigPath (kvConfig.json).

The file is Java's KVConfigSerializeWrapper, compact fastjson2 JSON ``{"configTable":{namespace:{key:value}}}``,
so Apache's NameServer and ours read each other's file. Every change is written before the call returns, as in
Java (a failed write is logged: the change is live and the next write carries it). The ORDER_TOPIC_CONFIG
namespace holds the order-topic settings that routes and broker registrations hand out.

Examples:
    >>> import tempfile, os
    >>> kv = KVConfigManager(os.path.join(tempfile.mkdtemp(), "kvConfig.json"))
    >>> kv.put_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, "TopicTest", "broker-a:4")
    >>> kv.get_kv_config(NAMESPACE_ORDER_TOPIC_CONFIG, "TopicTest")
    'broker-a:4'
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from broker.common.config_manager import ConfigManager
from broker.common.fastjson import encode_json
from broker.common.hash_order import hash_map_order
from broker.common.persist import persist_quietly

log = logging.getLogger(__name__)

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG


# What the file holds: namespace -> key -> value.
KVTable = dict[str, dict[str, str]]


class KVConfigManager(ConfigManager[KVTable]):
    """``load`` reads the file (or its backup); False when there is none, MetadataCorrupt when it cannot be read:
    Java's NameServer fails to start then too."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self._table: KVTable = {}

    def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        table = self._table.setdefault(namespace, {})
        previous = table.get(key)
        table[key] = value
        log.info(
            "putKVConfig %s config item, Namespace: %s Key: %s Value: %s",
            "update" if previous is not None else "create new",
            namespace,
            key,
            value,
        )
        self._persist()

    def delete_kv_config(self, namespace: str, key: str) -> None:
        table = self._table.get(namespace)
        if table is not None:
            value = table.pop(key, None)
            log.info("deleteKVConfig delete a config item, Namespace: %s Key: %s Value: %s", namespace, key, value)
        self._persist()

    def get_kv_config(self, namespace: str, key: str) -> str | None:
        return self._table.get(namespace, {}).get(key)

    def get_kv_list_by_namespace(self, namespace: str) -> Mapping[str, str] | None:
        """The namespace's table (a copy), None for a namespace never written (an emptied one is {})."""
        table = self._table.get(namespace)
        return None if table is None else dict(table)

    def encode(self) -> str:
        ordered = {
            namespace: {key: self._table[namespace][key] for key in hash_map_order(list(self._table[namespace]))}
            for namespace in hash_map_order(list(self._table))
        }
        return encode_json({"configTable": ordered})

    def decode(self, data: Any) -> KVTable:
        table = data.get("configTable") or {}
        return {str(ns): {str(k): str(v) for k, v in (items or {}).items()} for ns, items in table.items()}

    def restore(self, loaded: KVTable) -> None:
        self._table.update(loaded)
        log.info("loaded KV config table from %s", self.path)

    def _persist(self) -> None:
        persist_quietly(self.persist, self.path)
