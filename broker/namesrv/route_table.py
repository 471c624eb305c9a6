"""RouteInfoManager: which brokers serve which topics, which brokers are alive, and the clusters they form.

Rule 1: every route-table rule of Java's RouteInfoManager lives here (registration and its DataVersion check,
unregistration, liveness expiry, topic deletion, the route a client gets), so the processors only parse and answer.
Synchronous and free of I/O: the clock is injected, a broker's connection is an opaque ``channel`` object, and
the scan returns the channels to close instead of closing them. One asyncio loop drives it, so there are no locks.

The tables keep Java's insertion order (Python dicts); ``hash_order`` turns that into Java's iteration order
wherever Java builds a list or a body from a hash table.

Examples:
    >>> routes = RouteInfoManager(clock=lambda: 1000)
    >>> broker = BrokerRegistration("DefaultCluster", "127.0.0.1:10911", "broker-a", 0, "127.0.0.1:10912")
    >>> topics = {n: TopicConfig(n, 4, 4) for n in ("TopicTest", "TBW102")}
    >>> routes.register_broker(broker, TopicConfigWrapper(topics, DataVersion(0, 1, 1)), [], channel=None)
    RegisterBrokerResult(ha_server_addr=None, master_addr=None)
    >>> [q.broker_name for q in routes.pickup_topic_route_data("TopicTest").queue_datas]
    ['broker-a']
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable
from typing import Any

from broker.common.clock import now_ms
from broker.common.fastjson import DataVersion
from broker.common.hash_order import concurrent_map_order, hash_map_copy_order, hash_map_order
from broker.common.topic import PERM_READ, PERM_WRITE, TopicConfig, is_writeable
from broker.namesrv.broker_info import (
    BrokerAddrInfo,
    BrokerLiveInfo,
    BrokerRegistration,
    Channel,
    RegisterBrokerResult,
    UnregisterRequest,
)
from broker.remoting.route import (
    BROKER_ADDR_TABLE_CAPACITY,
    CLUSTER_ADDR_TABLE_CAPACITY,
    FLAG_UNIT,
    FLAG_UNIT_SUB,
    MASTER_ID,
    TOPIC_QUEUE_TABLE_CAPACITY,
    BrokerData,
    BrokerMemberGroup,
    ClusterInfo,
    QueueData,
    TopicConfigWrapper,
    TopicRouteData,
)

log = logging.getLogger(__name__)

DEFAULT_BROKER_CHANNEL_EXPIRED_TIME = 1000 * 60 * 2  # ms without a registration before a broker is dropped
SYNC_BROKER_MEMBER_GROUP_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"  # TopicValidator: never rewritten for acting masters


class RouteInfoManager:
    def __init__(
        self,
        *,
        clock: Callable[[], int] = now_ms,
        support_acting_master: bool = False,
        delete_topic_with_broker_registration: bool = False,
    ) -> None:
        self.clock = clock
        self.support_acting_master = support_acting_master
        self.delete_topic_with_broker_registration = delete_topic_with_broker_registration
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, dict[str, None]] = {}  # cluster -> broker names (an ordered set)
        self.broker_live_table: dict[BrokerAddrInfo, BrokerLiveInfo] = {}
        self.filter_server_table: dict[BrokerAddrInfo, list[str]] = {}
        self.topic_queue_mapping_info_table: dict[str, dict[str, Any]] = {}

    # -- registration -------------------------------------------------------------------------------------------------

    def register_broker(
        self,
        broker: BrokerRegistration,
        wrapper: TopicConfigWrapper,
        filter_server_list: list[str] | None,
        channel: Channel,
    ) -> RegisterBrokerResult | None:
        """Record a broker and its topics. A DataVersion equal to the broker's previous one only refreshes its
        liveness (plus topics the table lacks). None when a broker's first registration carries a single topic
        (an increment before the full registration), as Java refuses it."""
        self.cluster_addr_table.setdefault(broker.cluster_name, {})[broker.broker_name] = None
        broker_data = self.broker_addr_table.get(broker.broker_name)
        register_first = broker_data is None
        if broker_data is None:
            broker_data = BrokerData(broker.cluster_name, broker.broker_name, {})
            self.broker_addr_table[broker.broker_name] = broker_data
        old_version_broker = broker.enable_acting_master is None
        broker_data.enable_acting_master = bool(broker.enable_acting_master)
        broker_data.zone_name = broker.zone_name
        addrs = broker_data.broker_addrs
        min_broker_id_changed = bool(addrs) and broker.broker_id < min(addrs)
        # A slave becoming master re-registers its address under a new id: one address, one id.
        for stale in [bid for bid, addr in addrs.items() if addr == broker.broker_addr and bid != broker.broker_id]:
            del addrs[stale]
        if self._conflicts_with_newer(broker, addrs.get(broker.broker_id), wrapper):
            self.broker_live_table.pop(BrokerAddrInfo(broker.cluster_name, broker.broker_addr), None)
            return RegisterBrokerResult()
        if broker.broker_id not in addrs and len(wrapper.topic_config_table) == 1:
            log.warning(
                "cannot register the single topic %s: broker[%s]=%s has not registered",
                list(wrapper.topic_config_table),
                broker.broker_id,
                broker.broker_addr,
            )
            return None
        old_addr = addrs.get(broker.broker_id)
        addrs[broker.broker_id] = broker.broker_addr
        register_first = register_first or not old_addr
        is_master = broker.broker_id == MASTER_ID
        is_prime_slave = not old_version_broker and not is_master and broker.broker_id == min(addrs)
        if is_master or is_prime_slave:
            self._update_topics(broker, broker_data, wrapper, register_first, is_prime_slave)
        self._refresh_liveness(broker, wrapper.data_version, filter_server_list, channel)
        if min_broker_id_changed:
            log.info("min broker id of %s changed to %s (brokers are not notified)", broker.broker_name, min(addrs))
        if is_master:
            return RegisterBrokerResult()
        master_addr = addrs.get(MASTER_ID)
        master_live = self.broker_live_table.get(BrokerAddrInfo(broker.cluster_name, master_addr or ""))
        if master_addr is None or master_live is None:
            return RegisterBrokerResult()
        return RegisterBrokerResult(master_live.ha_server_addr, master_addr)

    def _conflicts_with_newer(
        self, broker: BrokerRegistration, old_addr: str | None, wrapper: TopicConfigWrapper
    ) -> bool:
        """Another address already holds this brokerId with a larger stateVersion: the registration is ignored."""
        if old_addr is None or old_addr == broker.broker_addr:
            return False
        old_live = self.broker_live_table.get(BrokerAddrInfo(broker.cluster_name, old_addr))
        if old_live is None or old_live.data_version.state_version <= wrapper.data_version.state_version:
            return False
        log.warning(
            "registering broker conflicts with the existing one, ignored: cluster %s, broker %s, id %s, "
            "old %s (state version %s), new %s (state version %s)",
            broker.cluster_name,
            broker.broker_name,
            broker.broker_id,
            old_addr,
            old_live.data_version.state_version,
            broker.broker_addr,
            wrapper.data_version.state_version,
        )
        return True

    def _update_topics(
        self,
        broker: BrokerRegistration,
        broker_data: BrokerData,
        wrapper: TopicConfigWrapper,
        register_first: bool,
        is_prime_slave: bool,
    ) -> None:
        mappings = wrapper.topic_queue_mapping_info_map
        if self.delete_topic_with_broker_registration and not mappings:
            for topic in [t for t, q in self.topic_queue_table.items() if broker.broker_name in q]:
                if topic not in wrapper.topic_config_table:
                    self._remove_queue_data(topic, broker.broker_name)
        for config in wrapper.topic_config_table.values():
            if register_first or self.is_topic_config_changed(broker, wrapper.data_version, config.topic_name):
                if is_prime_slave and broker_data.enable_acting_master:
                    config = dataclasses.replace(config, perm=config.perm & ~PERM_WRITE)  # an acting master reads only
                self._create_and_update_queue_data(broker.broker_name, config)
        changed = self.is_broker_topic_config_changed(broker.cluster_name, broker.broker_addr, wrapper.data_version)
        if changed or register_first:
            for topic, info in mappings.items():
                self.topic_queue_mapping_info_table.setdefault(topic, {})[str(info.get("bname"))] = info

    def _create_and_update_queue_data(self, broker_name: str, config: TopicConfig) -> None:
        queue_data = QueueData(
            broker_name, config.read_queue_nums, config.write_queue_nums, config.perm, config.topic_sys_flag
        )
        queues = self.topic_queue_table.get(config.topic_name)
        if queues is None:
            self.topic_queue_table[config.topic_name] = {broker_name: queue_data}
            log.info("new topic registered, %s %s", config.topic_name, queue_data)
        elif queues.get(broker_name) != queue_data:
            if broker_name in queues:
                log.info("topic changed, %s OLD: %s NEW: %s", config.topic_name, queues[broker_name], queue_data)
            queues[broker_name] = queue_data

    def _refresh_liveness(
        self,
        broker: BrokerRegistration,
        data_version: DataVersion,
        filter_server_list: list[str] | None,
        channel: Channel,
    ) -> None:
        addr_info = BrokerAddrInfo(broker.cluster_name, broker.broker_addr)
        timeout = broker.heartbeat_timeout_millis
        live = BrokerLiveInfo(
            self.clock(),
            DEFAULT_BROKER_CHANNEL_EXPIRED_TIME if timeout is None else timeout,
            data_version,
            channel,
            broker.ha_server_addr,
        )
        if self.broker_live_table.get(addr_info) is None:
            log.info("new broker registered, %s HAService: %s", addr_info, broker.ha_server_addr)
        self.broker_live_table[addr_info] = live
        if filter_server_list is not None:
            if filter_server_list:
                self.filter_server_table[addr_info] = list(filter_server_list)
            else:
                self.filter_server_table.pop(addr_info, None)

    def register_topic(self, topic: str, queue_datas: list[QueueData]) -> None:
        """REGISTER_TOPIC_IN_NAMESRV: add or replace queue data of known brokers. As in Java, a new topic is
        registered all or nothing, while an existing one takes the entries before the first unknown broker."""
        if not queue_datas:
            return
        queues = self.topic_queue_table.get(topic)
        if queues is None:
            if any(q.broker_name not in self.broker_addr_table for q in queue_datas):
                log.warning("register topic %s names an unknown broker: %s", topic, queue_datas)
                return
            self.topic_queue_table[topic] = {q.broker_name: q for q in queue_datas}
            return
        for queue_data in queue_datas:
            if queue_data.broker_name not in self.broker_addr_table:
                log.warning("register topic %s names an unknown broker: %s", topic, queue_data)
                return
            queues[queue_data.broker_name] = queue_data

    # -- DataVersion and liveness ---------------------------------------------------------------------------------

    def query_broker_topic_config(self, cluster_name: str, broker_addr: str) -> DataVersion | None:
        live = self.broker_live_table.get(BrokerAddrInfo(cluster_name, broker_addr))
        return None if live is None else live.data_version

    def is_broker_topic_config_changed(
        self, cluster_name: str, broker_addr: str, data_version: DataVersion | None
    ) -> bool:
        """True unless the broker is registered with exactly ``data_version`` (None, a missing body, never is)."""
        previous = self.query_broker_topic_config(cluster_name, broker_addr)
        return previous is None or previous != data_version

    def is_topic_config_changed(self, broker: BrokerRegistration, data_version: DataVersion, topic: str) -> bool:
        if self.is_broker_topic_config_changed(broker.cluster_name, broker.broker_addr, data_version):
            return True
        return broker.broker_name not in self.topic_queue_table.get(topic, {})

    def update_broker_info_update_timestamp(self, cluster_name: str, broker_addr: str) -> None:
        """BROKER_HEARTBEAT and QUERY_DATA_VERSION keep a broker alive without a full registration."""
        live = self.broker_live_table.get(BrokerAddrInfo(cluster_name, broker_addr))
        if live is not None:
            live.last_update_timestamp = self.clock()

    def scan_not_active_broker(self) -> list[Channel]:
        """Unregister every broker silent for longer than its heartbeat timeout; returns their channels, which the
        caller closes."""
        now = self.clock()
        expired = [
            (addr_info, live)
            for addr_info, live in self.broker_live_table.items()
            if live.last_update_timestamp + live.heartbeat_timeout_millis < now
        ]
        for addr_info, live in expired:
            log.warning("the broker channel expired, %s %sms", addr_info, live.heartbeat_timeout_millis)
            self._on_broker_destroyed(addr_info)
        return [live.channel for _, live in expired]

    def on_channel_destroy(self, channel: Channel) -> None:
        """A connection closed: unregister the broker that registered over it, if any (BrokerHousekeepingService)."""
        if channel is None:
            return
        for addr_info, live in self.broker_live_table.items():
            if live.channel is channel:
                log.info("the broker's channel destroyed, %s", addr_info)
                self._on_broker_destroyed(addr_info)
                return

    def _on_broker_destroyed(self, addr_info: BrokerAddrInfo) -> None:
        for broker_data in self.broker_addr_table.values():
            if broker_data.cluster != addr_info.cluster_name:
                continue
            for broker_id, addr in broker_data.broker_addrs.items():
                if addr == addr_info.broker_addr:
                    request = UnregisterRequest(addr_info.cluster_name, addr, broker_data.broker_name, broker_id)
                    self.unregister_broker([request])
                    return
        # Its address was taken over under its id: nothing to unregister, but Java would keep the stale liveness
        # entry (and close its channel on every scan) forever.
        self.broker_live_table.pop(addr_info, None)
        self.filter_server_table.pop(addr_info, None)

    # -- unregistration -------------------------------------------------------------------------------------------

    def unregister_broker(self, requests: Iterable[UnregisterRequest]) -> None:
        """Remove brokers; a group left without members leaves its cluster and every topic route."""
        removed: set[str] = set()
        reduced: set[str] = set()
        for request in requests:
            addr_info = BrokerAddrInfo(request.cluster_name, request.broker_addr)
            live = self.broker_live_table.pop(addr_info, None)
            log.info("unregisterBroker, remove from brokerLiveTable %s, %s", "OK" if live else "Failed", addr_info)
            self.filter_server_table.pop(addr_info, None)
            broker_data = self.broker_addr_table.get(request.broker_name)
            group_gone = False
            if broker_data is not None:
                for broker_id in [b for b, a in broker_data.broker_addrs.items() if a == request.broker_addr]:
                    del broker_data.broker_addrs[broker_id]
                if not broker_data.broker_addrs:
                    del self.broker_addr_table[request.broker_name]
                    group_gone = True
            if group_gone:
                names = self.cluster_addr_table.get(request.cluster_name)
                if names is not None:
                    names.pop(request.broker_name, None)
                    if not names:
                        del self.cluster_addr_table[request.cluster_name]
                removed.add(request.broker_name)
            else:
                reduced.add(request.broker_name)
        self._clean_topics(removed, reduced)

    def _clean_topics(self, removed: set[str], reduced: set[str]) -> None:
        for topic in list(self.topic_queue_table):
            queues = self.topic_queue_table[topic]
            for broker_name in removed:
                queues.pop(broker_name, None)
            if not queues:
                del self.topic_queue_table[topic]
                continue
            for broker_name in reduced:
                queue_data = queues.get(broker_name)
                broker_data = self.broker_addr_table.get(broker_name)
                if queue_data is None or broker_data is None or not broker_data.enable_acting_master:
                    continue
                if not broker_data.broker_addrs or min(broker_data.broker_addrs) > MASTER_ID:  # the master left
                    queues[broker_name] = dataclasses.replace(queue_data, perm=queue_data.perm & ~PERM_WRITE)

    def _remove_queue_data(self, topic: str, broker_name: str) -> None:
        queues = self.topic_queue_table.get(topic)
        if queues is None:
            return
        removed = queues.pop(broker_name, None)
        if removed is not None:
            log.info("deleteTopic, remove one broker's topic %s %s %s", broker_name, topic, removed)
        if not queues:
            log.info("deleteTopic, remove the topic all queue %s", topic)
            del self.topic_queue_table[topic]

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        """DELETE_TOPIC_IN_NAMESRV: the whole topic, or only its queues on the brokers of ``cluster_name``."""
        if not cluster_name:
            self.topic_queue_table.pop(topic, None)
            return
        for broker_name in list(self.cluster_addr_table.get(cluster_name, {})):
            self._remove_queue_data(topic, broker_name)

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        """Make the broker's queues read-only (before taking it offline); returns how many topics changed."""
        return self._set_perm(broker_name, lambda perm: perm & ~PERM_WRITE)

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        return self._set_perm(broker_name, lambda perm: PERM_READ | PERM_WRITE)

    def _set_perm(self, broker_name: str, change: Callable[[int], int]) -> int:
        count = 0
        for queues in self.topic_queue_table.values():
            queue_data = queues.get(broker_name)
            if queue_data is not None:
                queues[broker_name] = dataclasses.replace(queue_data, perm=change(queue_data.perm))
                count += 1
        return count

    # -- queries --------------------------------------------------------------------------------------------------

    def pickup_topic_route_data(self, topic: str) -> TopicRouteData | None:
        """The route of ``topic``: its queues per broker and those brokers' addresses; None if no live broker
        serves it. Queues come in the order of Java's HashMap, broker groups in that of a HashSet copy of it."""
        queues = self.topic_queue_table.get(topic)
        if queues is None:
            return None
        broker_names = hash_map_order(list(queues))
        queue_datas = [queues[name] for name in broker_names]
        broker_datas: list[BrokerData] = []
        filter_servers: dict[str, list[str] | None] = {}
        for name in hash_map_copy_order(broker_names):
            broker_data = self.broker_addr_table.get(name)
            if broker_data is None:
                continue
            clone = broker_data.copy()
            broker_datas.append(clone)
            if self.filter_server_table:
                for broker_id in hash_map_copy_order(list(clone.broker_addrs)):
                    addr = clone.broker_addrs[broker_id]
                    filter_servers[addr] = self.filter_server_table.get(BrokerAddrInfo(clone.cluster, addr))
        if not broker_datas:
            return None
        route = TopicRouteData(
            queue_datas, broker_datas, filter_servers, None, self.topic_queue_mapping_info_table.get(topic)
        )
        if self.support_acting_master and not topic.startswith(SYNC_BROKER_MEMBER_GROUP_PREFIX):
            self._elect_acting_masters(route)
        return route

    @staticmethod
    def _elect_acting_masters(route: TopicRouteData) -> None:
        """A group without its master, whose queues are read-only, shows its smallest-id slave as id 0."""
        for broker_data in route.broker_datas:
            addrs = broker_data.broker_addrs
            if not addrs or MASTER_ID in addrs or not broker_data.enable_acting_master:
                continue
            queue_data = next((q for q in route.queue_datas if q.broker_name == broker_data.broker_name), None)
            if queue_data is not None and not is_writeable(queue_data.perm):
                addrs[MASTER_ID] = addrs.pop(min(addrs))

    def get_all_cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            {name: data.copy() for name, data in self.broker_addr_table.items()},
            {cluster: list(names) for cluster, names in self.cluster_addr_table.items()},
        )

    def _topics_in_java_order(self) -> list[str]:
        return concurrent_map_order(self.topic_queue_table, TOPIC_QUEUE_TABLE_CAPACITY)

    def get_all_topic_list(self) -> list[str]:
        return self._topics_in_java_order()

    def get_topics_by_cluster(self, cluster: str) -> list[str]:
        """Topics with queues on a broker of ``cluster``, in Java's order (a topic may repeat: TopicList dedups)."""
        topics: list[str] = []
        for broker_name in hash_map_order(list(self.cluster_addr_table.get(cluster, {}))):
            topics += [t for t in self._topics_in_java_order() if broker_name in self.topic_queue_table[t]]
        return topics

    def get_system_topic_list(self) -> tuple[list[str], str | None]:
        """Cluster and broker names (each is a system topic) and the address of one broker."""
        topics: list[str] = []
        for cluster in concurrent_map_order(self.cluster_addr_table, CLUSTER_ADDR_TABLE_CAPACITY):
            topics.append(cluster)
            topics += hash_map_order(list(self.cluster_addr_table[cluster]))
        broker_addr = None
        for name in concurrent_map_order(self.broker_addr_table, BROKER_ADDR_TABLE_CAPACITY):
            addrs = self.broker_addr_table[name].broker_addrs
            if addrs:
                broker_addr = addrs[hash_map_order(list(addrs))[0]]
                break
        return topics, broker_addr

    def get_unit_topics(self, *, unit: bool | None, unit_sub: bool | None) -> list[str]:
        """Topics whose (first broker's) topicSysFlag has the unit / unit-sub bits as asked (None: either)."""
        topics = []
        for topic in self._topics_in_java_order():
            queues = self.topic_queue_table[topic]
            if not queues:
                continue
            flag = queues[hash_map_order(list(queues))[0]].topic_sys_flag
            if unit is not None and bool(flag & FLAG_UNIT) != unit:
                continue
            if unit_sub is not None and bool(flag & FLAG_UNIT_SUB) != unit_sub:
                continue
            topics.append(topic)
        return topics

    def get_broker_member_group(self, cluster_name: str, broker_name: str) -> BrokerMemberGroup:
        broker_data = self.broker_addr_table.get(broker_name)
        return BrokerMemberGroup(cluster_name, broker_name, dict(broker_data.broker_addrs) if broker_data else {})
