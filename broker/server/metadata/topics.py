"""TopicConfigManager: the broker's topic table (``broker.common.topic.TopicConfig`` values), persisted as
{storePathRootDir}/config/topics.json.

The file is Java's TopicConfigSerializeWrapper (``topicConfigTable`` + ``dataVersion``), so Apache's broker and
ours can open each other's store. Reads are lock-free (one dict lookup per sent message); changes take the lock,
bump the DataVersion and persist before returning, as Java does -- call them from the store executor when a few
milliseconds of fsync matter. A failed write after a change is logged, not raised (as in Java): the change is live
and the next persist writes it. ``persist()`` itself raises.

Examples:
    >>> from broker.server.config import BrokerConfig
    >>> import tempfile
    >>> manager = TopicConfigManager(BrokerConfig(broker_name="broker-a"), tempfile.mkdtemp())
    >>> manager.select_topic_config("TBW102").perm  # readable, writable, inheritable: the auto-create template
    7
    >>> manager.create_topic_in_send_message_method("TopicTest", "TBW102", "127.0.0.1:5000", 4).write_queue_nums
    4
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
from broker.common.topic import (
    DLQ_NUMS_PER_GROUP,
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    SCHEDULE_TOPIC_QUEUE_NUM,
    TopicConfig,
    is_inherited,
    is_readable,
    is_writeable,
    perm_to_string,
)
from broker.server.metadata.paths import topic_config_path
from broker.server.metadata.versioned import VersionedTable

if TYPE_CHECKING:
    from broker.server.config import BrokerConfig

log = logging.getLogger(__name__)


def _checked_name(topic: str) -> None:
    """Names become directories (consumequeue/{topic}); a processor should have validated already."""
    result = v.validate_topic(topic)
    if not result.valid:
        raise IllegalName(result.remark)


# What topics.json holds: the topic table and its DataVersion.
TopicTables = tuple[dict[str, TopicConfig], DataVersion]


class TopicConfigManager(VersionedTable[TopicTables, TopicConfig]):
    """broker.topic.TopicConfigManager: system topics at start, then topics.json on top (``load``).

    ``on_topic_created`` runs after a topic is created on the send path, outside the lock: the broker uses it to
    register the new topic with the NameServer at once (Java's registerBrokerData). ``state_version`` supplies the
    DataVersion.stateVersion (the store's state-machine version in Java, 0 without one).
    """

    def __init__(
        self,
        broker_config: BrokerConfig,
        store_path_root_dir: str,
        *,
        on_topic_created: Callable[[TopicConfig], None] | None = None,
        state_version: Callable[[], int] = lambda: 0,
    ) -> None:
        super().__init__(topic_config_path(store_path_root_dir), state_version)
        self.broker_config = broker_config
        self._on_topic_created = on_topic_created
        self._system_topics: set[str] = set()
        for config in self._system_topic_configs():
            self._system_topics.add(config.topic_name)
            self._table[config.topic_name] = config

    def _system_topic_configs(self) -> list[TopicConfig]:
        """TopicConfigManager.init, in Java's order. Not created: rmq_sys_wheel_timer (rmq has no timer store)."""
        bc = self.broker_config
        rw = PERM_READ | PERM_WRITE
        one = {"read_queue_nums": 1, "write_queue_nums": 1}
        configs = [TopicConfig(v.RMQ_SYS_SELF_TEST_TOPIC, **one)]
        if bc.auto_create_topic_enable:
            n = bc.default_topic_queue_nums
            configs.append(TopicConfig(v.AUTO_CREATE_TOPIC_KEY_TOPIC, n, n, PERM_INHERIT | rw))
        configs += [
            TopicConfig(v.RMQ_SYS_BENCHMARK_TOPIC, 1024, 1024),
            TopicConfig(bc.broker_cluster_name, perm=PERM_INHERIT | (rw if bc.cluster_topic_enable else 0)),
            TopicConfig(bc.broker_name, perm=PERM_INHERIT | (rw if bc.broker_topic_enable else 0), **one),
            TopicConfig(v.RMQ_SYS_OFFSET_MOVED_EVENT, **one),
            TopicConfig(v.RMQ_SYS_SCHEDULE_TOPIC, SCHEDULE_TOPIC_QUEUE_NUM, SCHEDULE_TOPIC_QUEUE_NUM),
        ]
        if bc.trace_topic_enable:
            configs.append(TopicConfig(bc.msg_trace_topic_name, **one))
        configs += [
            TopicConfig(v.reply_topic(bc.broker_cluster_name), **one),
            TopicConfig(v.revive_topic(bc.broker_cluster_name), bc.revive_queue_num, bc.revive_queue_num),
            TopicConfig(v.SYNC_BROKER_MEMBER_GROUP_PREFIX + bc.broker_name, perm=PERM_INHERIT, **one),
            TopicConfig(v.RMQ_SYS_TRANS_HALF_TOPIC, **one),
            TopicConfig(v.RMQ_SYS_TRANS_OP_HALF_TOPIC, **one),
            TopicConfig(v.RMQ_SYS_ROCKSDB_TRANS_HALF_TOPIC, **one),
            TopicConfig(v.RMQ_SYS_ROCKSDB_TRANS_OP_HALF_TOPIC, **one),
        ]
        return configs

    # -- reading (no lock: a dict lookup is atomic, and entries are immutable) ----------------------------------------

    def select_topic_config(self, topic: str) -> TopicConfig | None:
        return self._table.get(topic)

    def contains_topic(self, topic: str) -> bool:
        return topic in self._table

    def is_order_topic(self, topic: str) -> bool:
        config = self._table.get(topic)
        return config is not None and config.order

    def is_system_topic(self, topic: str) -> bool:
        """TopicValidator.isSystemTopic, including the cluster- and broker-named topics this manager created."""
        return v.is_system_topic(topic) or topic in self._system_topics

    @property
    def topic_config_table(self) -> Mapping[str, TopicConfig]:
        """A read-only snapshot."""
        return MappingProxyType(dict(self._table))

    # -- changes ------------------------------------------------------------------------------------------------------

    def bump_data_version(self) -> None:
        """A change the table does not show (brokerPermission, which masks every topic's perm in a registration): a
        new data version makes the NameServers take the broker's topics again at its next registration."""
        with self._lock:
            self._bump()

    def _changed(self) -> None:
        persist_quietly(self.persist, self.path)

    def _created(self, config: TopicConfig) -> TopicConfig:
        self._changed()
        if self._on_topic_created is not None:
            self._on_topic_created(config)
        return config

    def create_topic_in_send_message_method(
        self,
        topic: str,
        default_topic: str,
        remote_address: str,
        client_default_topic_queue_nums: int,
        topic_sys_flag: int = 0,
    ) -> TopicConfig | None:
        """A producer sent to a topic we do not have: copy the template ``default_topic`` (TBW102) if its perm is
        inheritable. Queue count is min(client's, template's write queues); perm is the template's without
        PERM_INHERIT. None when the template is missing or not inheritable (the send then fails)."""
        with self._lock:
            existing = self._table.get(topic)
            if existing is not None:
                return existing
            if not v.validate_topic(topic).valid:
                log.warning("not creating topic %r for producer %s: illegal name", topic, remote_address)
                return None
            template = self._table.get(default_topic)
            if template is None:
                log.warning(
                    "cannot create topic %s: default topic %s does not exist; producer %s",
                    topic,
                    default_topic,
                    remote_address,
                )
                return None
            perm = template.perm
            if default_topic == v.AUTO_CREATE_TOPIC_KEY_TOPIC and not self.broker_config.auto_create_topic_enable:
                perm = PERM_READ | PERM_WRITE  # a TBW102 left in topics.json must not template when auto-create is off
            if not is_inherited(perm):
                log.warning(
                    "cannot create topic %s: default topic %s has perm %s; producer %s",
                    topic,
                    default_topic,
                    perm_to_string(perm),
                    remote_address,
                )
                return None
            queue_nums = max(0, min(client_default_topic_queue_nums, template.write_queue_nums))
            config = TopicConfig(
                topic,
                queue_nums,
                queue_nums,
                perm & ~PERM_INHERIT,
                topic_filter_type=template.topic_filter_type,
                topic_sys_flag=topic_sys_flag,
            )
            log.info(
                "create topic %s from default topic %s for producer %s: %s",
                topic,
                default_topic,
                remote_address,
                config,
            )
            self._table[topic] = config
            self._bump()
        return self._created(config)

    def create_topic_in_send_message_back_method(
        self,
        topic: str,
        client_default_topic_queue_nums: int,
        perm: int,
        topic_sys_flag: int = 0,
        *,
        order: bool = False,
    ) -> TopicConfig:
        """Create a retry or DLQ topic if missing. Like Java, an existing topic whose ``order`` differs is updated
        (so a plain send-back turns an orderly retry topic back to unordered, as Apache's broker does)."""
        _checked_name(topic)
        with self._lock:
            existing = self._table.get(topic)
            if existing is not None:
                if existing.order == order:
                    return existing
                config = dataclasses.replace(existing, order=order)
                self._table[topic] = config
                self._bump()
                created = False
            else:
                config = TopicConfig(
                    topic,
                    client_default_topic_queue_nums,
                    client_default_topic_queue_nums,
                    perm,
                    topic_sys_flag=topic_sys_flag,
                    order=order,
                )
                log.info("create topic %s", config)
                self._table[topic] = config
                self._bump()
                created = True
        if created:
            return self._created(config)
        self._changed()
        return config

    def create_retry_topic(
        self, group: str, retry_queue_nums: int, topic_sys_flag: int = 0, *, order: bool = False
    ) -> TopicConfig:
        """%RETRY%{group}, readable and writable, with the group's retryQueueNums queues."""
        return self.create_topic_in_send_message_back_method(
            v.retry_topic(group), retry_queue_nums, PERM_READ | PERM_WRITE, topic_sys_flag, order=order
        )

    def create_dlq_topic(self, group: str) -> TopicConfig:
        """%DLQ%{group}: one queue, readable and writable (5.x; 4.x made it write-only), no sys flag."""
        return self.create_topic_in_send_message_back_method(
            v.dlq_topic(group), DLQ_NUMS_PER_GROUP, PERM_READ | PERM_WRITE, 0
        )

    def create_topic_of_tran_check_max_time(self, client_default_topic_queue_nums: int, perm: int) -> TopicConfig:
        """TRANS_CHECK_MAX_TIME_TOPIC, where half messages go after transactionCheckMax checks."""
        return self.create_topic_if_absent(
            TopicConfig(
                v.RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
                client_default_topic_queue_nums,
                client_default_topic_queue_nums,
                perm,
            )
        )

    def create_topic_if_absent(self, config: TopicConfig) -> TopicConfig:
        _checked_name(config.topic_name)
        with self._lock:
            existing = self._table.get(config.topic_name)
            if existing is not None:
                return existing
            log.info("create topic %s", config)
            self._table[config.topic_name] = config
            self._bump()
        return self._created(config)

    def update_topic_config(self, config: TopicConfig) -> None:
        """Create or replace (UPDATE_AND_CREATE_TOPIC). Attributes are stored as given: the admin processor resolves
        Java's "+key"/"-key" attribute edits before calling this."""
        self.update_topic_config_list([config])

    def update_topic_config_list(self, configs: Iterable[TopicConfig]) -> None:
        configs = list(configs)
        for config in configs:
            _checked_name(config.topic_name)
        with self._lock:
            for config in configs:
                old = self._table.get(config.topic_name)
                self._table[config.topic_name] = config
                log.info("%s topic config %s", "update" if old else "create", config)
                self._bump()
        self._changed()

    def update_order_topic_config(self, order_topics: Iterable[str]) -> None:
        """Mark topics the NameServer lists as orderly (ORDER_TOPIC_CONFIG KV table)."""
        changed = False
        with self._lock:
            for topic in order_topics:
                config = self._table.get(topic)
                if config is not None and not config.order:
                    self._table[topic] = dataclasses.replace(config, order=True)
                    changed = True
            if changed:
                self._bump()
        if changed:
            self._changed()

    def delete_topic_config(self, topic: str) -> bool:
        with self._lock:
            old = self._table.pop(topic, None)
            if old is None:
                log.warning("delete topic config: %s does not exist", topic)
                return False
            log.info("deleted topic config %s", old)
            self._bump()
        self._changed()
        return True

    # -- JSON ---------------------------------------------------------------------------------------------------------

    def build_serialize_wrapper(self) -> dict[str, Any]:
        """TopicConfigSerializeWrapper: what topics.json holds."""
        with self._lock:
            return {
                "dataVersion": self._data_version.to_json(),
                "topicConfigTable": {name: c.to_json() for name, c in self._table.items()},
            }

    def build_register_body(self) -> dict[str, Any]:
        """The TopicConfigAndMappingSerializeWrapper that REGISTER_BROKER carries (inside RegisterBrokerBody's
        ``topicConfigSerializeWrapper``). A broker that is not both readable and writable reports every topic with
        ``perm & brokerPermission`` (and Java's defaults for the other fields), as BrokerController does."""
        broker_perm = self.broker_config.broker_permission
        masked = not (is_readable(broker_perm) and is_writeable(broker_perm))
        with self._lock:
            table = {
                name: (TopicConfig(name, c.read_queue_nums, c.write_queue_nums, c.perm & broker_perm) if masked else c)
                for name, c in self._table.items()
            }
            version = self._data_version
        return {
            "dataVersion": version.to_json(),
            "mappingDataVersion": DataVersion.new().to_json(),
            "topicConfigTable": {name: c.to_json() for name, c in table.items()},
            "topicQueueMappingDetailMap": {},
            "topicQueueMappingInfoMap": {},
        }

    def encode(self) -> str:
        return encode_json_pretty(self.build_serialize_wrapper())

    def decode(self, data: Any) -> TopicTables:
        table = data.get("topicConfigTable") or {}
        configs = {name: TopicConfig.from_json(item, name) for name, item in table.items()}
        return configs, DataVersion.from_json(data.get("dataVersion"))

    def restore(self, loaded: TopicTables) -> None:
        """topics.json over the system topics: the file wins, as Java's putAll does."""
        table, version = loaded
        with self._lock:
            self._table.update(table)
            self._data_version = version
        log.info("loaded %d topic configs from %s", len(table), self.path)
