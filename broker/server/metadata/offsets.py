"""ConsumerOffsetManager: committed consume offsets per "topic@group" and queue, in config/consumerOffset.json.

Commits arrive on every pull and UPDATE_CONSUMER_OFFSET, so they only touch memory; the broker calls ``persist()``
every flushConsumerOffsetInterval (5 s) and at shutdown, from its store executor. All methods are thread-safe.

The file is Java's serialized ConsumerOffsetManager: ``offsetTable`` (queue ids are bare integer keys, as fastjson
writes them), ``dataVersion``, and ``groupTopicMap``, a derived group -> topics view that Java writes because it
has a public getter; we write it too and ignore it on load.

Examples:
    >>> from broker.server.config import BrokerConfig
    >>> import tempfile
    >>> offsets = ConsumerOffsetManager(BrokerConfig(), tempfile.mkdtemp())
    >>> offsets.commit_offset("GID_orders", "TopicTest", 0, 250)
    >>> offsets.query_offset("GID_orders", "TopicTest", 0), offsets.query_offset("GID_orders", "TopicTest", 1)
    (250, -1)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Container
from typing import TYPE_CHECKING, Any

from broker.common.config_manager import ConfigManager
from broker.common.fastjson import DataVersion, encode_json_pretty
from broker.server.metadata.paths import consumer_offset_path

if TYPE_CHECKING:
    from broker.server.config import BrokerConfig

log = logging.getLogger(__name__)

TOPIC_GROUP_SEPARATOR = "@"


def topic_at_group(topic: str, group: str) -> str:
    return topic + TOPIC_GROUP_SEPARATOR + group


def split_topic_at_group(key: str) -> tuple[str, str] | None:
    """("topic", "group"), or None for a key that is not exactly two parts (Java skips those)."""
    parts = key.split(TOPIC_GROUP_SEPARATOR)
    return (parts[0], parts[1]) if len(parts) == 2 else None


# What consumerOffset.json holds: "topic@group" -> queueId -> offset, and the DataVersion.
OffsetTables = tuple[dict[str, dict[int, int]], DataVersion]


class ConsumerOffsetManager(ConfigManager[OffsetTables]):
    """broker.offset.ConsumerOffsetManager (without the pull-offset table, which only POP and lite pull use)."""

    def __init__(
        self, broker_config: BrokerConfig, store_path_root_dir: str, *, state_version: Callable[[], int] = lambda: 0
    ) -> None:
        super().__init__(consumer_offset_path(store_path_root_dir))
        self.broker_config = broker_config
        self._state_version = state_version
        self._lock = threading.Lock()
        self._offsets: dict[str, dict[int, int]] = {}
        # Offsets an admin reset (RESET_OFFSET with server-side reset): served until the client commits past them.
        self._reset_offsets: dict[str, dict[int, int]] = {}
        self._data_version = DataVersion.new()
        self._commits = 0

    @property
    def data_version(self) -> DataVersion:
        return self._data_version

    # -- commit and query ---------------------------------------------------------------------------------------------

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int, client_host: str = "") -> None:
        key = topic_at_group(topic, group)
        with self._lock:
            previous = self._offsets.setdefault(key, {}).get(queue_id)
            self._offsets[key][queue_id] = offset
            self._commits += 1
            if self._commits % max(1, self.broker_config.consumer_offset_update_version_step) == 0:
                self._data_version = self._data_version.next_version(self._state_version())
        if previous is not None and offset < previous:
            log.warning(
                "[NOTIFYME] consumer offset moved back: client=%s key=%s queueId=%d offset=%d stored=%d",
                client_host,
                key,
                queue_id,
                offset,
                previous,
            )

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset (or a pending server-side reset), -1 when the group never committed this queue."""
        key = topic_at_group(topic, group)
        if self.broker_config.use_server_side_reset_offset:
            reset = self._reset_offsets.get(key)
            if reset is not None and queue_id in reset:
                return reset[queue_id]
        return self._offsets.get(key, {}).get(queue_id, -1)

    def query_offsets(self, group: str, topic: str) -> dict[int, int] | None:
        """queueId -> offset for one topic@group, or None if it has none."""
        with self._lock:
            table = self._offsets.get(topic_at_group(topic, group))
            return dict(table) if table is not None else None

    @property
    def offset_table(self) -> dict[str, dict[int, int]]:
        """A deep snapshot of "topic@group" -> queueId -> offset."""
        with self._lock:
            return {key: dict(table) for key, table in self._offsets.items()}

    # -- who consumes what --------------------------------------------------------------------------------------------

    def _pairs(self) -> list[tuple[str, str]]:
        with self._lock:
            keys = list(self._offsets)
        return [pair for pair in map(split_topic_at_group, keys) if pair is not None]

    def which_topic_by_consumer(self, group: str) -> set[str]:
        return {topic for topic, g in self._pairs() if g == group}

    def which_group_by_topic(self, topic: str) -> set[str]:
        return {group for t, group in self._pairs() if t == topic}

    def group_topic_map(self) -> dict[str, set[str]]:
        result: dict[str, set[str]] = {}
        for topic, group in self._pairs():
            result.setdefault(group, set()).add(topic)
        return result

    # -- removal ------------------------------------------------------------------------------------------------------

    def _remove_where(self, keep: Callable[[str, str], bool]) -> list[str]:
        """Drop every topic@group key (offsets and resets) for which ``keep(topic, group)`` is false."""
        removed = []
        with self._lock:
            for table in (self._offsets, self._reset_offsets):
                for key in list(table):
                    pair = split_topic_at_group(key)
                    if pair is not None and not keep(*pair):
                        del table[key]
                        if table is self._offsets:
                            removed.append(key)
        for key in removed:
            log.warning("removed consumer offsets of %s", key)
        return removed

    def remove_offset(self, group: str) -> list[str]:
        """Forget every offset of ``group`` (DELETE_SUBSCRIPTIONGROUP with cleanOffset). Returns the removed keys."""
        return self._remove_where(lambda _topic, g: g != group)

    def clean_offset_by_topic(self, topic: str) -> list[str]:
        """Forget every group's offsets on ``topic`` (after DELETE_TOPIC_IN_BROKER)."""
        return self._remove_where(lambda t, _group: t != topic)

    def clean_offsets_of_deleted_topics(self, live_topics: Container[str]) -> list[str]:
        """Forget offsets on topics that no longer exist, e.g. ``manager.topic_config_table``."""
        return self._remove_where(lambda t, _group: t in live_topics)

    def clone_offset(self, src_group: str, dest_group: str, topic: str) -> None:
        with self._lock:
            table = self._offsets.get(topic_at_group(topic, src_group))
            if table is not None:
                self._offsets[topic_at_group(topic, dest_group)] = dict(table)

    def sync_from_master(self, table: dict[str, dict[int, int]], version: DataVersion) -> None:
        """A slave's copy of its master's offsets (SlaveSynchronize.syncConsumerOffset): each topic@group the master
        has replaces ours (Java's putAll; ours it lacks stay), its DataVersion is taken, and the file persisted
        (raises OSError)."""
        with self._lock:
            self._offsets.update({key: dict(queues) for key, queues in table.items()})
            self._data_version = version
        self.persist()

    # -- server-side reset --------------------------------------------------------------------------------------------

    def assign_reset_offset(self, topic: str, group: str, queue_id: int, offset: int) -> None:
        """Reset a queue: served by query_offset until taken with query_then_erase_reset_offset, and also written
        as the committed offset (a client that is offline picks it up when it comes back)."""
        if not topic or not group or queue_id < 0 or offset < 0:
            log.warning("ignoring reset offset topic=%r group=%r queueId=%d offset=%d", topic, group, queue_id, offset)
            return
        key = topic_at_group(topic, group)
        with self._lock:
            self._reset_offsets.setdefault(key, {})[queue_id] = offset
            self._offsets.setdefault(key, {})[queue_id] = offset

    def has_offset_reset(self, topic: str, group: str, queue_id: int) -> bool:
        return queue_id in self._reset_offsets.get(topic_at_group(topic, group), {})

    def query_then_erase_reset_offset(self, topic: str, group: str, queue_id: int) -> int | None:
        key = topic_at_group(topic, group)
        with self._lock:
            table = self._reset_offsets.get(key)
            if table is None:
                return None
            offset = table.pop(queue_id, None)
            if not table:
                del self._reset_offsets[key]
            return offset

    # -- JSON ---------------------------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        groups = self.group_topic_map()
        with self._lock:
            return {
                "dataVersion": self._data_version.to_json(),
                "groupTopicMap": {g: sorted(topics) for g, topics in groups.items()},
                "offsetTable": {key: dict(table) for key, table in self._offsets.items()},
            }

    def encode(self) -> str:
        return encode_json_pretty(self.to_json())

    def decode(self, data: Any) -> OffsetTables:
        table = {
            key: {int(queue_id): int(offset) for queue_id, offset in queues.items()}
            for key, queues in (data.get("offsetTable") or {}).items()
        }
        return table, DataVersion.from_json(data.get("dataVersion"))

    def restore(self, loaded: OffsetTables) -> None:
        """consumerOffset.json's table replaces ours."""
        table, version = loaded
        with self._lock:
            self._offsets = table
            self._data_version = version
        log.info("loaded consumer offsets of %d topic@group keys from %s", len(table), self.path)
