"""RouteInfoManager on its own: registration, DataVersion, routes, cluster info, deletion, liveness (fake clock)."""

from __future__ import annotations

import pytest

from broker.common.fastjson import DataVersion
from broker.common.topic import PERM_READ, PERM_WRITE, TopicConfig
from broker.namesrv.route_table import (
    DEFAULT_BROKER_CHANNEL_EXPIRED_TIME,
    BrokerAddrInfo,
    BrokerRegistration,
    RegisterBrokerResult,
    RouteInfoManager,
    UnregisterRequest,
)
from broker.remoting.route import QueueData, TopicConfigWrapper

RW = PERM_READ | PERM_WRITE
CLUSTER = "DefaultCluster"
A, A1, B = "127.0.0.1:10911", "127.0.0.1:10912", "127.0.0.1:10921"


class Clock:
    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class Channel:
    """A stand-in connection: the route table only compares channels by identity."""


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def routes(clock) -> RouteInfoManager:
    return RouteInfoManager(clock=clock)


def wrapper(*topics: str | TopicConfig, counter: int = 1, state: int = 0) -> TopicConfigWrapper:
    configs = [t if isinstance(t, TopicConfig) else TopicConfig(t, 4, 4, RW) for t in topics]
    return TopicConfigWrapper({c.topic_name: c for c in configs}, DataVersion(state, 1_700_000_000_000, counter))


def broker(name: str = "broker-a", addr: str = A, broker_id: int = 0, **kw) -> BrokerRegistration:
    return BrokerRegistration(kw.pop("cluster", CLUSTER), addr, name, broker_id, addr + "-ha", **kw)


def queue_data(routes: RouteInfoManager, topic: str) -> dict[str, QueueData]:
    route = routes.pickup_topic_route_data(topic)
    assert route is not None, topic
    return {q.broker_name: q for q in route.queue_datas}


# -- registration -------------------------------------------------------------------------------------------------


def test_register_master_then_route(routes):
    channel = Channel()
    result = routes.register_broker(broker(), wrapper("TopicTest", "TBW102"), [], channel)
    assert result == RegisterBrokerResult()
    route = routes.pickup_topic_route_data("TopicTest")
    assert route.queue_datas == [QueueData("broker-a", 4, 4, RW, 0)]
    assert [(b.cluster, b.broker_name, b.broker_addrs) for b in route.broker_datas] == [(CLUSTER, "broker-a", {0: A})]
    assert route.filter_server_table == {}
    assert routes.pickup_topic_route_data("Unknown") is None
    assert routes.broker_live_table[BrokerAddrInfo(CLUSTER, A)].channel is channel


def test_slave_learns_its_master(routes):
    routes.register_broker(broker(), wrapper("T1", "T2"), [], Channel())
    result = routes.register_broker(broker(addr=A1, broker_id=1), wrapper("T1", "T2"), [], Channel())
    assert result == RegisterBrokerResult(ha_server_addr=A + "-ha", master_addr=A)
    assert routes.pickup_topic_route_data("T1").broker_datas[0].broker_addrs == {0: A, 1: A1}


def test_slave_of_an_old_broker_does_not_touch_topics(routes):
    """Without enableActingMaster (pre-5.0) only the master's registration writes queue data."""
    routes.register_broker(broker(addr=A1, broker_id=1), wrapper("T1", "T2"), [], Channel())
    assert routes.pickup_topic_route_data("T1") is None
    assert routes.broker_addr_table["broker-a"].broker_addrs == {1: A1}


def test_single_topic_before_first_registration_is_refused(routes):
    assert routes.register_broker(broker(), wrapper("OnlyOne"), [], Channel()) is None
    assert routes.pickup_topic_route_data("OnlyOne") is None
    # As in Java, the group and cluster entries made before the check stay (empty).
    assert routes.get_all_cluster_info().broker_addr_table["broker-a"].broker_addrs == {}
    routes.register_broker(broker(), wrapper("T1", "T2"), [], Channel())
    assert routes.register_broker(broker(), wrapper("OnlyOne", counter=2), [], Channel()) == RegisterBrokerResult()
    assert "OnlyOne" in routes.get_all_topic_list()


def test_unchanged_data_version_only_refreshes_liveness(routes, clock):
    routes.register_broker(broker(), wrapper("T1", "T2", counter=3), [], Channel())
    changed_queues = TopicConfig("T1", 8, 8, RW)
    clock.now += 5000
    routes.register_broker(broker(), wrapper(changed_queues, "T2", "T3", counter=3), [], Channel())
    assert queue_data(routes, "T1")["broker-a"].write_queue_nums == 4  # same DataVersion: not re-read
    assert queue_data(routes, "T3")["broker-a"].write_queue_nums == 4  # but a topic the table lacks is added
    assert routes.broker_live_table[BrokerAddrInfo(CLUSTER, A)].last_update_timestamp == clock.now
    routes.register_broker(broker(), wrapper(changed_queues, "T2", "T3", counter=4), [], Channel())
    assert queue_data(routes, "T1")["broker-a"].write_queue_nums == 8


def test_data_version_queries(routes):
    assert routes.is_broker_topic_config_changed(CLUSTER, A, DataVersion(0, 1, 1))  # unknown broker
    routes.register_broker(broker(), wrapper("T1", "T2", counter=7), [], Channel())
    assert not routes.is_broker_topic_config_changed(CLUSTER, A, DataVersion(0, 1_700_000_000_000, 7))
    assert routes.is_broker_topic_config_changed(CLUSTER, A, DataVersion(0, 1_700_000_000_000, 8))
    assert routes.is_broker_topic_config_changed(CLUSTER, A, None)
    assert routes.query_broker_topic_config(CLUSTER, A).counter == 7


def test_newer_state_version_keeps_the_id(routes):
    """A second address for the same brokerId with an older stateVersion is ignored (controller mode)."""
    routes.register_broker(broker(), wrapper("T1", "T2", state=5), [], Channel())
    result = routes.register_broker(broker(addr=B), wrapper("T1", "T2", state=4), [], Channel())
    assert result == RegisterBrokerResult()
    assert routes.broker_addr_table["broker-a"].broker_addrs == {0: A}
    assert BrokerAddrInfo(CLUSTER, B) not in routes.broker_live_table
    routes.register_broker(broker(addr=B), wrapper("T1", "T2", state=6), [], Channel())
    assert routes.broker_addr_table["broker-a"].broker_addrs == {0: B}


def test_slave_promoted_to_master_keeps_one_entry_per_address(routes):
    routes.register_broker(broker(), wrapper("T1", "T2"), [], Channel())
    routes.register_broker(broker(addr=A1, broker_id=1, enable_acting_master=False), wrapper("T1", "T2"), [], Channel())
    routes.unregister_broker([UnregisterRequest(CLUSTER, A, "broker-a", 0)])
    routes.register_broker(broker(addr=A1, broker_id=0), wrapper("T1", "T2", counter=2), [], Channel())
    assert routes.broker_addr_table["broker-a"].broker_addrs == {0: A1}


def test_filter_servers_and_zone(routes):
    routes.register_broker(broker(zone_name="zone-1"), wrapper("T1", "T2"), ["127.0.0.1:9999"], Channel())
    route = routes.pickup_topic_route_data("T1")
    assert route.filter_server_table == {A: ["127.0.0.1:9999"]}
    assert route.broker_datas[0].zone_name == "zone-1"
    routes.register_broker(broker(), wrapper("T1", "T2"), [], Channel())
    assert routes.pickup_topic_route_data("T1").filter_server_table == {}


def test_route_lists_every_broker_of_the_topic_in_java_order(routes):
    routes.register_broker(broker("broker-a"), wrapper("Shared", "OnlyA"), [], Channel())
    routes.register_broker(broker("broker-b", B), wrapper("Shared", "OnlyB"), [], Channel())
    route = routes.pickup_topic_route_data("Shared")
    # "broker-b".hashCode() falls in an earlier HashMap bin than "broker-a"'s (the Java capture agrees).
    assert [q.broker_name for q in route.queue_datas] == ["broker-b", "broker-a"]
    assert [b.broker_name for b in route.broker_datas] == ["broker-b", "broker-a"]


def test_route_copies_are_independent(routes):
    routes.register_broker(broker(), wrapper("T1", "T2"), [], Channel())
    routes.pickup_topic_route_data("T1").broker_datas[0].broker_addrs[5] = "x"
    assert routes.broker_addr_table["broker-a"].broker_addrs == {0: A}


# -- queries ----------------------------------------------------------------------------------------------------------


def test_cluster_info_and_topic_lists(routes):
    routes.register_broker(broker("broker-a"), wrapper("Shared", "OnlyA"), [], Channel())
    routes.register_broker(broker("broker-b", B, cluster="Other"), wrapper("Shared", "OnlyB"), [], Channel())
    info = routes.get_all_cluster_info()
    assert info.cluster_addr_table == {CLUSTER: ["broker-a"], "Other": ["broker-b"]}
    assert {name: data.broker_addrs for name, data in info.broker_addr_table.items()} == {
        "broker-a": {0: A},
        "broker-b": {0: B},
    }
    assert sorted(routes.get_all_topic_list()) == ["OnlyA", "OnlyB", "Shared"]
    assert sorted(routes.get_topics_by_cluster("Other")) == ["OnlyB", "Shared"]
    assert routes.get_topics_by_cluster("NoSuchCluster") == []
    topics, addr = routes.get_system_topic_list()
    assert sorted(topics) == ["DefaultCluster", "Other", "broker-a", "broker-b"]
    assert addr in (A, B)


def test_unit_topic_lists(routes):
    configs = [TopicConfig(name, 4, 4, RW, topic_sys_flag=flag) for name, flag in [("U", 1), ("S", 2), ("US", 3)]]
    routes.register_broker(broker(), wrapper(*configs, "Plain"), [], Channel())
    assert sorted(routes.get_unit_topics(unit=True, unit_sub=None)) == ["U", "US"]
    assert sorted(routes.get_unit_topics(unit=None, unit_sub=True)) == ["S", "US"]
    assert routes.get_unit_topics(unit=False, unit_sub=True) == ["S"]


def test_broker_member_group(routes):
    routes.register_broker(broker(), wrapper("T1", "T2"), [], Channel())
    routes.register_broker(broker(addr=A1, broker_id=1), wrapper("T1", "T2"), [], Channel())
    group = routes.get_broker_member_group(CLUSTER, "broker-a")
    assert (group.cluster, group.broker_name, group.broker_addrs) == (CLUSTER, "broker-a", {0: A, 1: A1})
    assert routes.get_broker_member_group(CLUSTER, "nobody").broker_addrs == {}


# -- changes ----------------------------------------------------------------------------------------------------------


def test_delete_topic_everywhere_or_per_cluster(routes):
    routes.register_broker(broker("broker-a"), wrapper("Shared", "OnlyA"), [], Channel())
    routes.register_broker(broker("broker-b", B, cluster="Other"), wrapper("Shared", "OnlyB"), [], Channel())
    routes.delete_topic("Shared", "Other")
    assert list(queue_data(routes, "Shared")) == ["broker-a"]
    routes.delete_topic("Shared", "NoSuchCluster")
    assert list(queue_data(routes, "Shared")) == ["broker-a"]
    routes.delete_topic("Shared", "")
    assert routes.pickup_topic_route_data("Shared") is None
    routes.delete_topic("OnlyB", CLUSTER)  # not on that cluster's brokers: kept
    assert list(queue_data(routes, "OnlyB")) == ["broker-b"]


def test_delete_topic_with_broker_registration(clock):
    routes = RouteInfoManager(clock=clock, delete_topic_with_broker_registration=True)
    routes.register_broker(broker(), wrapper("Kept", "Dropped"), [], Channel())
    routes.register_broker(broker(), wrapper("Kept", "New", counter=2), [], Channel())
    assert sorted(routes.get_all_topic_list()) == ["Kept", "New"]


def test_write_permission(routes):
    routes.register_broker(broker(), wrapper("T1", "T2"), [], Channel())
    assert routes.wipe_write_perm_of_broker("broker-a") == 2
    assert queue_data(routes, "T1")["broker-a"].perm == PERM_READ
    assert routes.add_write_perm_of_broker("broker-a") == 2
    assert queue_data(routes, "T1")["broker-a"].perm == RW
    assert routes.wipe_write_perm_of_broker("nobody") == 0


def test_register_topic(routes):
    routes.register_broker(broker(), wrapper("T1", "T2"), [], Channel())
    routes.register_topic("New", [QueueData("broker-a", 2, 2, RW)])
    assert queue_data(routes, "New") == {"broker-a": QueueData("broker-a", 2, 2, RW)}
    routes.register_topic("Rejected", [QueueData("broker-a", 2, 2, RW), QueueData("ghost", 1, 1, RW)])
    assert routes.pickup_topic_route_data("Rejected") is None


def test_unregister_slave_then_master(routes):
    routes.register_broker(broker(), wrapper("T1", "T2"), [], Channel())
    routes.register_broker(broker(addr=A1, broker_id=1), wrapper("T1", "T2"), [], Channel())
    routes.unregister_broker([UnregisterRequest(CLUSTER, A1, "broker-a", 1)])
    assert routes.pickup_topic_route_data("T1").broker_datas[0].broker_addrs == {0: A}
    routes.unregister_broker([UnregisterRequest(CLUSTER, A, "broker-a", 0)])
    assert routes.pickup_topic_route_data("T1") is None
    assert routes.get_all_cluster_info().cluster_addr_table == {}
    assert routes.get_all_topic_list() == []
    assert routes.broker_live_table == {}


def test_acting_master(clock):
    """With supportActingMaster, a group whose master left shows its smallest slave as id 0, read-only."""
    routes = RouteInfoManager(clock=clock, support_acting_master=True)
    for broker_id, addr in [(0, A), (1, A1), (2, B)]:
        routes.register_broker(
            broker(addr=addr, broker_id=broker_id, enable_acting_master=True), wrapper("T1", "T2"), [], Channel()
        )
    routes.unregister_broker([UnregisterRequest(CLUSTER, A, "broker-a", 0)])
    route = routes.pickup_topic_route_data("T1")
    assert route.queue_datas[0].perm == PERM_READ
    assert route.broker_datas[0].broker_addrs == {0: A1, 2: B}
    assert routes.broker_addr_table["broker-a"].broker_addrs == {1: A1, 2: B}  # only the answer is rewritten


# -- liveness ---------------------------------------------------------------------------------------------------------


def test_scan_expires_silent_brokers(routes, clock):
    quiet, chatty = Channel(), Channel()
    routes.register_broker(broker("broker-a"), wrapper("T1", "T2"), [], quiet)
    routes.register_broker(broker("broker-b", B), wrapper("T1", "T3"), [], chatty)
    clock.now += DEFAULT_BROKER_CHANNEL_EXPIRED_TIME
    routes.update_broker_info_update_timestamp(CLUSTER, B)  # BROKER_HEARTBEAT / QUERY_DATA_VERSION
    assert routes.scan_not_active_broker() == []  # exactly 120 s is not yet expired
    clock.now += 1
    assert routes.scan_not_active_broker() == [quiet]
    assert list(queue_data(routes, "T1")) == ["broker-b"]
    assert routes.pickup_topic_route_data("T2") is None
    assert "broker-a" not in routes.get_all_cluster_info().broker_addr_table
    assert routes.scan_not_active_broker() == []


def test_heartbeat_timeout_of_the_registration_overrides(routes, clock):
    channel = Channel()
    routes.register_broker(broker(heartbeat_timeout_millis=3000), wrapper("T1", "T2"), [], channel)
    clock.now += 3001
    assert routes.scan_not_active_broker() == [channel]
    assert routes.pickup_topic_route_data("T1") is None


def test_closed_channel_unregisters_its_broker_only(routes):
    a_channel, b_channel = Channel(), Channel()
    routes.register_broker(broker("broker-a"), wrapper("T1", "T2"), [], a_channel)
    routes.register_broker(broker("broker-b", B), wrapper("T1", "T3"), [], b_channel)
    routes.on_channel_destroy(Channel())  # a client's connection: nothing registered over it
    routes.on_channel_destroy(None)
    assert len(routes.broker_live_table) == 2
    routes.on_channel_destroy(a_channel)
    assert list(queue_data(routes, "T1")) == ["broker-b"]
    assert BrokerAddrInfo(CLUSTER, A) not in routes.broker_live_table


def test_reconnected_broker_survives_its_old_channel_closing(routes):
    old, new = Channel(), Channel()
    routes.register_broker(broker(), wrapper("T1", "T2"), [], old)
    routes.register_broker(broker(), wrapper("T1", "T2"), [], new)
    routes.on_channel_destroy(old)
    assert routes.pickup_topic_route_data("T1") is not None


def test_stale_liveness_entry_of_a_replaced_address_is_dropped(routes, clock):
    """An address replaced under its id (a newer stateVersion) has nothing to unregister when it expires; Java
    would keep its liveness entry forever, we drop it."""
    routes.register_broker(broker(), wrapper("T1", "T2", state=1), [], Channel())
    routes.register_broker(broker(addr=B), wrapper("T1", "T2", state=2), [], Channel())
    clock.now += DEFAULT_BROKER_CHANNEL_EXPIRED_TIME + 1
    routes.update_broker_info_update_timestamp(CLUSTER, B)
    assert len(routes.scan_not_active_broker()) == 1
    assert list(routes.broker_live_table) == [BrokerAddrInfo(CLUSTER, B)]
    assert routes.pickup_topic_route_data("T1").broker_datas[0].broker_addrs == {0: B}
