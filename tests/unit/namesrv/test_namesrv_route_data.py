"""The NameServer's bodies: JSON shapes against Java's bytes, RegisterBrokerBody in all its forms, Java hash orders."""

from __future__ import annotations

import json
import struct
import zlib

import pytest

from broker.common import hash_order
from broker.common.fastjson import DataVersion
from broker.common.topic import TopicFilterType
from broker.remoting.codes import RequestCode
from broker.remoting.route import (
    BodyError,
    BrokerData,
    ClusterInfo,
    QueueData,
    TopicRouteData,
    decode_cluster_info,
    decode_register_broker_body,
    decode_topic_route_data,
    encode_cluster_info,
    encode_topic_list,
    encode_topic_route_data,
)
from tests.unit.namesrv.namesrv_scenario import SCENARIO, load_capture, register_body, topic_config, version

NEW, OLD = 515, 300


def java_bodies(code: int, *, standard: bool | None = None) -> list[bytes]:
    """Successful answers Java gave in the captured session to requests of ``code`` (and of one JSON form)."""
    bodies = []
    for step, answer in zip(SCENARIO, load_capture(), strict=True):
        if step.get("code") != code or answer["code"] != 0:
            continue
        is_standard = step["version"] >= 401 or step["extFields"].get("acceptStandardJsonOnly") == "true"
        if standard is None or standard == is_standard:
            bodies.append(answer["body"].encode())
    return bodies


# -- golden JSON shapes ---------------------------------------------------------------------------------------------


def test_topic_route_data_shape_is_javas():
    """Built from the same inputs, our TopicRouteData JSON is the bytes Java's fastjson2 wrote (both forms)."""
    route = TopicRouteData(
        queue_datas=[QueueData("broker-a", 4, 4, 6, 0)],
        broker_datas=[BrokerData("DefaultCluster", "broker-a", {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"})],
        order_topic_conf="broker-a:4",
    )
    broker = '"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}'
    queues = '"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
    assert encode_topic_route_data(route, standard_json=True).decode() == (
        '{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911","1":"127.0.0.1:10921"},'
        + broker
        + '],"filterServerTable":{},"orderTopicConf":"broker-a:4",'
        + queues
    )
    assert encode_topic_route_data(route, standard_json=False).decode() == (
        '{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},'
        + broker
        + '],"filterServerTable":{},"orderTopicConf":"broker-a:4",'
        + queues
    )
    # The same route, as Apache's NameServer answered it in the captured session (standard JSON).
    answers = zip(SCENARIO, load_capture(), strict=True)
    (java,) = [a["body"] for s, a in answers if s.get("extFields", {}).get("topic") == "OrderTopic"]
    assert encode_topic_route_data(route, standard_json=True).decode() == java


@pytest.mark.parametrize("standard", [True, False], ids=["standard", "plain"])
def test_every_java_route_body_round_trips_byte_for_byte(standard):
    bodies = java_bodies(RequestCode.GET_ROUTEINFO_BY_TOPIC, standard=standard)
    assert len(bodies) >= 5
    for body in bodies:
        assert encode_topic_route_data(decode_topic_route_data(body), standard_json=standard) == body


def test_cluster_info_shape_is_javas():
    info = ClusterInfo(
        {
            "broker-a": BrokerData("DefaultCluster", "broker-a", {0: "127.0.0.1:10911"}),
            "broker-b": BrokerData("DefaultCluster", "broker-b", {}, zone_name="z1", enable_acting_master=True),
        },
        {"DefaultCluster": ["broker-a", "broker-b"]},
    )
    assert encode_cluster_info(info).decode() == (
        '{"brokerAddrTable":{'
        '"broker-b":{"brokerAddrs":{},"brokerName":"broker-b","cluster":"DefaultCluster","enableActingMaster":true,'
        '"zoneName":"z1"},'
        '"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster",'
        '"enableActingMaster":false}},'
        '"clusterAddrTable":{"DefaultCluster":["broker-b","broker-a"]}}'
    )
    for body in java_bodies(RequestCode.GET_BROKER_CLUSTER_INFO):
        assert encode_cluster_info(decode_cluster_info(body)) == body


def test_topic_list_is_a_java_concurrent_key_set():
    """Java answered ["中文","TopicA","Shared"] for these three topics (the key set's bins, not insertion order)."""
    expected = '{"topicList":["中文","TopicA","Shared"]}'.encode()
    assert encode_topic_list(["TopicA", "Shared", "中文", "Shared"]) == expected
    assert encode_topic_list([], "127.0.0.1:10911") == b'{"brokerAddr":"127.0.0.1:10911","topicList":[]}'


# -- Java hash orders -------------------------------------------------------------------------------------------------


def test_long_hash_is_javas():
    assert [hash_order.long_hash(v) for v in (0, 17, -1, 1 << 32, (1 << 63) - 1)] == [0, 17, 0, 1, -(1 << 31)]


def test_hash_map_order_grows_like_java():
    """Ids 1 and 17 share a bin of 16 (insertion order within it); 13 entries make the table 32 long."""
    assert hash_order.hash_map_order([17, 1, 0]) == [0, 17, 1]
    assert hash_order.hash_map_order(list(range(12)) + [17]) == [*range(12), 17]
    assert hash_order.hash_map_order([17, *range(11)]) == [0, 17, *range(1, 11)]
    assert hash_order.hash_map_order([17, *range(13)]) == [*range(13), 17]


def test_concurrent_map_resize_reverses_the_moved_prefix():
    """ConcurrentHashMap.transfer keeps the last run of a bin and prepends the nodes before it: 0, 32, 16 (bin 0
    of 16; 0 and 32 stay in bin 0 of 32, 16 moves to bin 16) iterate as 32, 0, ..., 16 after the resize."""
    keys = [0, 32, 16, *range(1, 10)]  # the 12th put triggers the resize
    assert hash_order.concurrent_map_order(keys[:11]) == [0, 32, 16, *range(1, 9)]
    assert hash_order.concurrent_map_order(keys + [10]) == [32, 0, *range(1, 11), 16]


def test_java_topic_list_orders_are_reproduced():
    """The captured GET_ALL_TOPIC_LIST answers hold 20+ topics: their order exercises the key set's resizes."""
    bodies = java_bodies(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    topics = json.loads(bodies[0])["topicList"]
    assert len(topics) > 20
    assert hash_order.concurrent_map_order(hash_order.concurrent_map_order(topics, 1024)) == topics


# -- RegisterBrokerBody ---------------------------------------------------------------------------------------------


def test_json_register_body():
    body = register_body([topic_config("T1", 8), topic_config("T2", sys_flag=1, order=True)], version(3, 2), ["fs"])
    decoded = decode_register_broker_body(body, compressed=False, version=NEW)
    wrapper = decoded.topic_config_wrapper
    assert wrapper.data_version == DataVersion(2, 1_700_000_000_003, 3)
    assert wrapper.topic_config_table["T1"].write_queue_nums == 8
    assert wrapper.topic_config_table["T2"].topic_sys_flag == 1
    assert wrapper.topic_config_table["T2"].order
    assert decoded.filter_server_list == ["fs"]


def test_empty_and_minimal_register_bodies():
    empty = decode_register_broker_body(b"", compressed=False, version=NEW)
    assert empty.topic_config_wrapper.data_version == DataVersion(0, 0, 0)
    assert empty.topic_config_wrapper.topic_config_table == {}
    bare = decode_register_broker_body(b"{}", compressed=False, version=NEW)
    assert bare.filter_server_list == []
    assert bare.topic_config_wrapper.data_version.counter == 0


def test_pre_3_0_11_body_is_a_bare_wrapper():
    body = json.dumps({"dataVersion": version(1), "topicConfigTable": {"T": topic_config("T")}}).encode()
    decoded = decode_register_broker_body(body, compressed=False, version=30)
    assert list(decoded.topic_config_wrapper.topic_config_table) == ["T"]
    assert decoded.filter_server_list is None


def deflate(*parts: bytes) -> bytes:
    return zlib.compress(b"".join(parts), 9)


def part(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def test_compressed_register_body():
    """RegisterBrokerBody.encode(true): topicSysFlag and order are not carried; unparsable attributes are dropped."""
    data = deflate(
        part(json.dumps(version(9)).encode()),
        struct.pack(">i", 2),
        part(b'T1 8 4 6 MULTI_TAG {"+a":"1"}'),
        part(b'T2 2 2 4 SINGLE_TAG {"k":"has space"}'),
        part(b'["127.0.0.1:9999"]'),
        struct.pack(">i", 1),
        part(b'{"bname":"broker-a","epoch":1,"topic":"Static","totalQueues":4}'),
    )
    decoded = decode_register_broker_body(data, compressed=True, version=NEW)
    table = decoded.topic_config_wrapper.topic_config_table
    assert (table["T1"].read_queue_nums, table["T1"].write_queue_nums, table["T1"].perm) == (8, 4, 6)
    assert table["T1"].topic_filter_type is TopicFilterType.MULTI_TAG
    assert table["T1"].attributes == {"+a": "1"}
    assert table["T2"].attributes == {}
    assert decoded.topic_config_wrapper.data_version.counter == 9
    assert decoded.filter_server_list == ["127.0.0.1:9999"]
    assert decoded.topic_config_wrapper.topic_queue_mapping_info_map["Static"]["bname"] == "broker-a"
    # A 4.x broker's compressed body ends after the filter servers.
    older = decode_register_broker_body(data, compressed=True, version=OLD)
    assert older.topic_config_wrapper.topic_queue_mapping_info_map == {}


@pytest.mark.parametrize(
    ("body", "compressed", "reason"),
    [
        (b"not zlib", True, "does not inflate"),
        (deflate(part(b"{}"), struct.pack(">i", 1)), True, "ends at byte"),
        (deflate(part(b"{}"), struct.pack(">i", 1), part(b"T1 8 4")), True, "of the 5"),
        (deflate(part(b"{}"), struct.pack(">i", 1), part(b"T1 8 4 6 NO_SUCH_TYPE")), True, "NO_SUCH_TYPE"),
        (deflate(struct.pack(">i", 99)), True, "runs past its end"),
        (b"[1, 2]", False, "not an object"),
        (b"{oops", False, "not JSON"),
        (b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"readQueueNums":"x"}}}}', False, "Wrapper"),
    ],
)
def test_bad_register_bodies(body, compressed, reason):
    with pytest.raises(BodyError, match=reason):
        decode_register_broker_body(body, compressed=compressed, version=NEW)
