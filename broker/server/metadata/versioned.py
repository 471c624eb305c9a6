"""VersionedTable: what the broker's topic and subscription-group tables share. Each is one JSON file (ConfigManager)
holding a table and the DataVersion that the NameServer and a slave compare to see whether it changed.

A slave's copy of its master's table (SlaveSynchronize) is the same for both, so it lives here once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

from broker.common.config_manager import ConfigManager
from broker.common.fastjson import DataVersion

C = TypeVar("C")  # one entry: TopicConfig, SubscriptionGroupConfig
T = TypeVar("T")  # what the file decodes to


class VersionedTable(ConfigManager[T], Generic[T, C]):
    """A name -> config table under one lock, with its DataVersion bumped on every change."""

    def __init__(self, path: str, state_version: Callable[[], int]) -> None:
        super().__init__(path)
        self._state_version = state_version
        self._lock = threading.RLock()
        self._table: dict[str, C] = {}
        self._data_version = DataVersion.new()

    @property
    def data_version(self) -> DataVersion:
        return self._data_version

    def _bump(self) -> None:
        """DataVersion.nextVersion with the store's state-machine version (0 without one)."""
        self._data_version = self._data_version.next_version(self._state_version())

    def _dropping(self, names: list[str]) -> None:
        """Called under the lock before a sync from the master replaces the table; ``names`` are ours now."""

    def sync_from_master(self, configs: Mapping[str, C], version: DataVersion) -> bool:
        """A slave's copy of its master's table (SlaveSynchronize.syncTopicConfig / syncSubscriptionGroupConfig):
        unless the DataVersions are equal (False), the master's entries replace ours, those it lacks deleted, and
        the file is persisted (raises OSError). Nothing is registered: the next periodic registration carries it.

        The DataVersion ends where Java's does: the master's, bumped once per entry of ours the master also has
        (Java's loop deletes every entry, then puts the master's back) and once per entry put. So it differs from
        the master's again, and every sync replaces the table, as on Apache's slave."""
        with self._lock:
            if self._data_version == version:
                return False
            bumps = sum(1 for name in self._table if name in configs) + len(configs)
            self._dropping(list(self._table))
            self._table = dict(configs)
            self._data_version = version
            for _ in range(bumps):
                self._bump()
        self.persist()
        return True
