"""What a NameServer stores and answers: QueueData, BrokerData, TopicRouteData, ClusterInfo, BrokerMemberGroup, the
register body.

Rule 1: the JSON shapes of the NameServer's bodies (remoting ``protocol/route`` and ``protocol/body`` classes) and
the binary form of a compressed RegisterBrokerBody are defined here and nowhere else. The JSON is fastjson2's, as
``broker.common.persist.encode_json`` writes it: bean properties in alphabetical order, nulls left out, Long map
keys bare (``{0:"127.0.0.1:10911"}``). Maps are written in Java's iteration order (``hash_order``).

TopicRouteData has two forms. Clients of 4.9.4 or later (and any that sends ``acceptStandardJsonOnly=true``) get
``BrowserCompatible`` + ``MapSortField`` JSON: every map sorted by key and Long keys quoted (``{"0":...}``), which
standard JSON parsers accept; older clients get the plain form.

Examples:
    >>> route = TopicRouteData(
    ...     queue_datas=[QueueData("broker-a", 4, 4, 6, 0)],
    ...     broker_datas=[BrokerData("DefaultCluster", "broker-a", {0: "127.0.0.1:10911"})],
    ... )
    >>> encode_topic_route_data(route, standard_json=False).decode()[:53]
    '{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},'
    >>> encode_topic_route_data(route, standard_json=True).decode()[:55]
    '{"brokerDatas":[{"brokerAddrs":{"0":"127.0.0.1:10911"},'
"""

from __future__ import annotations

import dataclasses
import json
import random
import struct
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from broker.common.fastjson import DataVersion, decode_json, encode_json
from broker.common.hash_order import concurrent_map_order, hash_map_copy_order, hash_map_order
from broker.common.topic import TopicConfig, TopicFilterType

# MQVersion.Version ordinals that change what a NameServer reads or writes.
V3_0_11 = 37  # from here on REGISTER_BROKER carries a RegisterBrokerBody, before it a bare TopicConfigSerializeWrapper
V4_9_4 = 401  # from here on clients get the standard-JSON TopicRouteData
V5_0_0 = 413  # from here on a compressed RegisterBrokerBody ends with the static-topic queue mappings

MASTER_ID = 0  # MixAll.MASTER_ID

# TopicSysFlag bits the NameServer's unit-topic lists look at.
FLAG_UNIT = 0x1 << 0
FLAG_UNIT_SUB = 0x1 << 1


class BodyError(ValueError):
    """A request body that is not what its code and header say (the message says what is wrong)."""


# -- route data -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueData:
    """One broker's queues of a topic (``route.QueueData``)."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerName": self.broker_name,
            "perm": self.perm,
            "readQueueNums": self.read_queue_nums,
            "topicSysFlag": self.topic_sys_flag,
            "writeQueueNums": self.write_queue_nums,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> QueueData:
        return cls(
            broker_name=str(data["brokerName"]),
            read_queue_nums=int(data.get("readQueueNums", 0)),
            write_queue_nums=int(data.get("writeQueueNums", 0)),
            perm=int(data.get("perm", 0)),
            topic_sys_flag=int(data.get("topicSysFlag", 0)),
        )


@dataclass(slots=True)
class BrokerData:
    """A broker group: its name, cluster and the address of each member by brokerId (0 is the master).

    Mutable, as Java's: the route table updates a group's members in place; routes and cluster info get copies."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)
    zone_name: str | None = None
    enable_acting_master: bool = False

    def copy(self) -> BrokerData:
        return dataclasses.replace(self, broker_addrs=dict(self.broker_addrs))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BrokerData:
        return cls(
            cluster=data.get("cluster", ""),
            broker_name=str(data["brokerName"]),
            broker_addrs={int(k): str(v) for k, v in (data.get("brokerAddrs") or {}).items()},
            zone_name=data.get("zoneName"),
            enable_acting_master=bool(data.get("enableActingMaster", False)),
        )

    def select_broker_addr(self) -> str | None:
        """BrokerData.selectBrokerAddr: the master, else any replica."""
        master = self.broker_addrs.get(MASTER_ID)
        if master is not None or not self.broker_addrs:
            return master
        return random.choice(list(self.broker_addrs.values()))

    def to_json(self, addr_order: Callable[[list[int]], list[int]] = hash_map_order) -> dict[str, Any]:
        return {
            "brokerAddrs": {
                broker_id: self.broker_addrs[broker_id] for broker_id in addr_order(list(self.broker_addrs))
            },
            "brokerName": self.broker_name,
            "cluster": self.cluster,
            "enableActingMaster": self.enable_acting_master,
            "zoneName": self.zone_name,
        }


@dataclass(frozen=True, slots=True)
class TopicRouteData:
    """What GET_ROUTEINFO_BY_TOPIC answers. The lists are in the order Java's RouteInfoManager builds them."""

    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[str, list[str] | None] = field(default_factory=dict)
    order_topic_conf: str | None = None
    topic_queue_mapping_by_broker: dict[str, Any] | None = None  # static topics: passed through as received

    @classmethod
    def decode(cls, body: bytes) -> TopicRouteData:
        return decode_topic_route_data(body)

    @property
    def static_topic(self) -> bool:
        """Logical queues (static topic mappings), which our client does not map."""
        return bool(self.topic_queue_mapping_by_broker)

    def broker(self, broker_name: str) -> BrokerData | None:
        return next((b for b in self.broker_datas if b.broker_name == broker_name), None)

    def with_queue_nums(self, queue_nums: int) -> TopicRouteData:
        """The default topic's route for a topic that does not exist yet: each broker offers at most
        ``queue_nums`` queues (MQClientInstance.updateTopicRouteInfoFromNameServer with isDefault)."""
        queues = [QueueData(q.broker_name, min(queue_nums, q.read_queue_nums), min(queue_nums, q.read_queue_nums),
                            q.perm, q.topic_sys_flag) for q in self.queue_datas]
        return dataclasses.replace(self, queue_datas=queues)


def encode_topic_route_data(route: TopicRouteData, *, standard_json: bool) -> bytes:
    """The TopicRouteData body: standard JSON (sorted maps, quoted keys) or the plain fastjson2 form."""
    if standard_json:
        brokers = [_standard(b.to_json()) for b in route.broker_datas]
        filter_servers = _standard(route.filter_server_table)
        mappings = _standard(route.topic_queue_mapping_by_broker)
    else:
        brokers = [b.to_json(hash_map_copy_order) for b in route.broker_datas]  # new BrokerData(brokerData)
        filter_servers = _in_order(route.filter_server_table, hash_map_order)
        mappings = route.topic_queue_mapping_by_broker
    body = {
        "brokerDatas": brokers,
        "filterServerTable": filter_servers,
        "orderTopicConf": route.order_topic_conf,
        "queueDatas": [q.to_json() for q in route.queue_datas],
        "topicQueueMappingByBroker": mappings,
    }
    return encode_json(body).encode()


def decode_topic_route_data(body: bytes) -> TopicRouteData:
    """Either form of TopicRouteData (REGISTER_TOPIC_IN_NAMESRV carries one; tests read answers with it)."""
    data = _parse(body, "TopicRouteData")
    try:
        return TopicRouteData(
            queue_datas=[QueueData.from_json(q) for q in data.get("queueDatas") or []],
            broker_datas=[BrokerData.from_json(b) for b in data.get("brokerDatas") or []],
            filter_server_table=dict(data.get("filterServerTable") or {}),
            order_topic_conf=data.get("orderTopicConf"),
            topic_queue_mapping_by_broker=data.get("topicQueueMappingByBroker"),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise BodyError(f"not a TopicRouteData: {err}") from err


def _standard(value: Any) -> Any:
    """fastjson2 BrowserCompatible + MapSortField: every map sorted by key (Long keys as numbers, String keys by
    UTF-16 code units, as TreeMap compares them) and written with quoted keys."""
    if isinstance(value, Mapping):
        keys = sorted(value, key=lambda k: (0, k, b"") if isinstance(k, int) else (1, 0, k.encode("utf-16-be")))
        return {str(k): _standard(value[k]) for k in keys}
    if isinstance(value, list):
        return [_standard(item) for item in value]
    return value


def _in_order(mapping: Mapping[Any, Any] | None, order: Callable[[list[Any]], list[Any]]) -> dict[Any, Any] | None:
    if mapping is None:
        return None
    return {key: mapping[key] for key in order(list(mapping))}


# -- cluster info, topic lists, member groups, KV tables -------------------------------------------------------------

BROKER_ADDR_TABLE_CAPACITY = 128  # RouteInfoManager: new ConcurrentHashMap<>(128)
CLUSTER_ADDR_TABLE_CAPACITY = 32  # new ConcurrentHashMap<>(32)
TOPIC_QUEUE_TABLE_CAPACITY = 1024  # new ConcurrentHashMap<>(1024)


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """GET_BROKER_CLUSTER_INFO: every broker group by name, and the group names of each cluster (insertion order)."""

    broker_addr_table: dict[str, BrokerData]
    cluster_addr_table: dict[str, list[str]]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ClusterInfo:
        brokers = {name: BrokerData.from_json(b) for name, b in (data.get("brokerAddrTable") or {}).items()}
        return cls(brokers, {name: list(v) for name, v in (data.get("clusterAddrTable") or {}).items()})


def encode_cluster_info(info: ClusterInfo) -> bytes:
    def brokers(order: list[str]) -> dict[str, Any]:
        return {name: info.broker_addr_table[name].to_json() for name in order}

    body = {
        "brokerAddrTable": brokers(concurrent_map_order(info.broker_addr_table, BROKER_ADDR_TABLE_CAPACITY)),
        "clusterAddrTable": {
            cluster: hash_map_order(info.cluster_addr_table[cluster])  # each a HashSet
            for cluster in concurrent_map_order(info.cluster_addr_table, CLUSTER_ADDR_TABLE_CAPACITY)
        },
    }
    return encode_json(body).encode()


def decode_cluster_info(body: bytes) -> ClusterInfo:
    data = _parse(body, "ClusterInfo")
    try:
        return ClusterInfo.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise BodyError(f"not a ClusterInfo: {err}") from err


def encode_topic_list(topics: Iterable[str], broker_addr: str | None = None) -> bytes:
    """TopicList: ``topics`` in the order Java adds them to its ConcurrentHashMap key set (duplicates are fine)."""
    unique = list(dict.fromkeys(topics))
    return encode_json({"brokerAddr": broker_addr, "topicList": concurrent_map_order(unique)}).encode()


def decode_topic_list(body: bytes) -> list[str]:
    return list(_parse(body, "TopicList").get("topicList") or [])


def encode_kv_table(table: Mapping[str, str]) -> bytes:
    """KVTable: ``{"table":{...}}`` in HashMap order."""
    return encode_json({"table": _in_order(table, hash_map_order)}).encode()


@dataclass(frozen=True, slots=True)
class BrokerMemberGroup:
    """GET_BROKER_MEMBER_GROUP: the members of one broker group, by brokerId."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"brokerAddrs": _in_order(self.broker_addrs, hash_map_order), "brokerName": self.broker_name,
                "cluster": self.cluster}


def encode_broker_member_group(group: BrokerMemberGroup) -> bytes:
    """GetBrokerMemberGroupResponseBody around a BrokerMemberGroup."""
    return encode_json({"brokerMemberGroup": group.to_json()}).encode()


def encode_data_version(version: DataVersion) -> bytes:
    return encode_json(version.to_json()).encode()


def decode_data_version(body: bytes) -> DataVersion:
    data = _parse(body, "DataVersion")
    return DataVersion.from_json(data if isinstance(data, Mapping) else None)


def _parse(body: bytes, what: str) -> Any:
    try:
        data = decode_json(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise BodyError(f"{what} body is not JSON: {err}") from err
    if not isinstance(data, dict):
        raise BodyError(f"{what} body is a JSON {type(data).__name__}, not an object")
    return data


# -- RegisterBrokerBody -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicConfigWrapper:
    """TopicConfigAndMappingSerializeWrapper as the NameServer uses it: the broker's topics (in the order Java
    iterates its ConcurrentHashMap), the DataVersion they belong to, and static-topic queue mappings by topic."""

    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=lambda: DataVersion(0, 0, 0))
    topic_queue_mapping_info_map: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RegisterBrokerBody:
    topic_config_wrapper: TopicConfigWrapper = field(default_factory=TopicConfigWrapper)
    filter_server_list: list[str] | None = field(default_factory=list)


def decode_register_broker_body(body: bytes, *, compressed: bool, version: int) -> RegisterBrokerBody:
    """REGISTER_BROKER's body as DefaultRequestProcessor reads it. An empty body is an empty wrapper with
    DataVersion 0/0/0; brokers older than 3.0.11 send a bare TopicConfigSerializeWrapper (no filter servers)."""
    if not body:
        return RegisterBrokerBody()
    if version < V3_0_11:
        return RegisterBrokerBody(_wrapper_from_json(_parse(body, "TopicConfigSerializeWrapper")), None)
    if compressed:
        return _decode_compressed(body, version)
    data = _parse(body, "RegisterBrokerBody")
    try:
        wrapper = _wrapper_from_json(data.get("topicConfigSerializeWrapper") or {})
        filter_servers = data.get("filterServerList")
        return RegisterBrokerBody(wrapper, [] if filter_servers is None else [str(s) for s in filter_servers])
    except (TypeError, AttributeError) as err:
        raise BodyError(f"not a RegisterBrokerBody: {err}") from err


def _wrapper_from_json(data: Mapping[str, Any]) -> TopicConfigWrapper:
    try:
        table = data.get("topicConfigTable") or {}
        configs = {name: TopicConfig.from_json(item, name) for name, item in table.items()}
        mappings = data.get("topicQueueMappingInfoMap") or {}
        version = data.get("dataVersion")
        return TopicConfigWrapper(
            topic_config_table={name: configs[name] for name in concurrent_map_order(configs)},
            data_version=DataVersion.from_json(version) if version else DataVersion.new(),
            topic_queue_mapping_info_map=dict(mappings),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise BodyError(f"not a TopicConfigSerializeWrapper: {err}") from err


# The compressed RegisterBrokerBody (RegisterBrokerBody.encode(true)): one zlib stream (Deflater, BEST_COMPRESSION)
# of length-prefixed parts, every length a big-endian int::
#
#     int n, n bytes    DataVersion JSON
#     int count         then per topic: int n, n bytes of TopicConfig.encode() text
#                       "<topicName> <readQueueNums> <writeQueueNums> <perm> <topicFilterType> <attributes JSON>"
#     int n, n bytes    filterServerList JSON array
#     int count         (brokers 5.0.0+) then per static topic: int n, n bytes of TopicQueueMappingInfo JSON
_LENGTH = struct.Struct(">i")


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def int(self) -> int:
        if self._pos + _LENGTH.size > len(self._data):
            raise BodyError(f"compressed RegisterBrokerBody ends at byte {len(self._data)} inside a length")
        (value,) = _LENGTH.unpack_from(self._data, self._pos)
        self._pos += _LENGTH.size
        return value

    def part(self) -> bytes:
        length = self.int()
        if length < 0 or self._pos + length > len(self._data):
            raise BodyError(
                f"compressed RegisterBrokerBody part of {length} bytes at byte {self._pos} runs past its end"
            )
        self._pos += length
        return self._data[self._pos - length : self._pos]


def _decode_compressed(body: bytes, version: int) -> RegisterBrokerBody:
    try:
        reader = _Reader(zlib.decompress(body))
    except zlib.error as err:
        raise BodyError(f"compressed RegisterBrokerBody does not inflate: {err}") from err
    data_version = decode_data_version(reader.part())
    configs: dict[str, TopicConfig] = {}
    for _ in range(reader.int()):
        config = _decode_topic_config_text(reader.part().decode("utf-8", "replace"))
        configs[config.topic_name] = config
    try:
        filter_servers = [str(s) for s in json.loads(reader.part().decode("utf-8", "replace"))]
    except (ValueError, TypeError):
        filter_servers = []  # Java logs the parse error and goes on with an empty list
    mappings: dict[str, dict[str, Any]] = {}
    if version >= V5_0_0:
        for _ in range(reader.int()):
            info = _parse(reader.part(), "TopicQueueMappingInfo")
            mappings[str(info.get("topic"))] = info
    wrapper = TopicConfigWrapper(
        {name: configs[name] for name in concurrent_map_order(configs)}, data_version, mappings
    )
    return RegisterBrokerBody(wrapper, filter_servers)


def _decode_topic_config_text(text: str) -> TopicConfig:
    """TopicConfig.decode: fields split at single spaces; topicSysFlag and order are not carried (0 and false).
    Attributes that do not parse (a space inside them splits the JSON) are dropped, as Java does."""
    parts = text.split(" ")
    while parts and not parts[-1]:
        parts.pop()  # String.split drops trailing empty strings
    if len(parts) < 5:
        raise BodyError(f"topic config {text!r} has {len(parts)} of the 5 space-separated fields")
    try:
        name, read, write, perm, filter_type = parts[0], int(parts[1]), int(parts[2]), int(parts[3]), parts[4]
        topic_filter_type = TopicFilterType(filter_type)
    except ValueError as err:
        raise BodyError(f"topic config {text!r}: {err}") from err
    attributes: dict[str, str] = {}
    if len(parts) >= 6:
        try:
            parsed = json.loads(parts[5])
            if isinstance(parsed, dict):
                attributes = {str(k): str(v) for k, v in parsed.items()}
        except ValueError:
            pass
    return TopicConfig(name, read, write, perm, topic_filter_type, attributes=attributes)
