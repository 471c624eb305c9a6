"""ConfigAdminClient: the admin calls that change how the cluster runs rather than what it stores (the config half
of client/impl/MQClientAPIImpl.java and tools/admin/DefaultMQAdminExtImpl.java): a broker's config, the NameServers'
config and KV entries, a broker's write permission in the NameServers' routes, and a broker's stats items.

Rule 1: what these calls send and how they read the answer is written here once; MQAdminExt inherits them. A config
travels as Java's properties text both ways: MixAll.properties2String ("key=value" lines, unescaped, as Java sends
them) to the servers, java.util.Properties back (``java_properties``: the keys in the order of Properties'
ConcurrentHashMap, which is the order Java's tool prints them in).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from broker.common.errors import MQClientError
from broker.common.hash_order import concurrent_map_order
from broker.common.properties import parse_properties
from broker.remoting.admin_bodies import BrokerStatsData
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_request
from broker.remoting.headers import (
    AddWritePermOfBrokerResponseHeader,
    BrokerNameHeader,
    KVConfigKeyHeader,
    ViewBrokerStatsDataRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from broker.tools.admin_client import AdminClient, answer_json, check_answer

PROPERTIES_CAPACITY = 8  # new Properties(): a ConcurrentHashMap of initial capacity 8


def java_properties(text: str) -> dict[str, str]:
    """MixAll.string2Properties: the keys in java.util.Properties' iteration order."""
    props = parse_properties(text)
    return {key: props[key] for key in concurrent_map_order(list(props), PROPERTIES_CAPACITY)}


def properties_text(props: Mapping[str, str]) -> str:
    """MixAll.properties2String: "key=value" lines, not escaped (as Java sends a config update)."""
    return "".join(f"{key}={value}\n" for key, value in props.items())


class ConfigAdminClient(AdminClient):
    """Broker and NameServer config, KV entries, write permission and stats items, over AdminClient's transport.

    Examples:
        >>> async with ConfigAdminClient("127.0.0.1:9876") as admin:  # doctest: +SKIP
        ...     await admin.update_broker_config("127.0.0.1:10911", {"fileReservedTime": "48"})
        ...     print((await admin.get_broker_config("127.0.0.1:10911"))["fileReservedTime"])
    """

    # -- a broker's config ------------------------------------------------------------------------------------------

    async def get_broker_config(self, addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG: every setting of the broker at ``addr`` (MQBrokerError on a refusal)."""
        response = check_answer(await self.invoke(addr, create_request(RequestCode.GET_BROKER_CONFIG)), addr)
        return java_properties((response.body or b"").decode("utf-8"))

    async def update_broker_config(self, addr: str, props: Mapping[str, str]) -> None:
        """UPDATE_BROKER_CONFIG: the broker applies ``props`` and writes them to its config file, or refuses them
        all (MQBrokerError with its code and remark)."""
        request = create_request(RequestCode.UPDATE_BROKER_CONFIG, body=properties_text(props).encode("utf-8"))
        check_answer(await self.invoke(addr, request), addr)

    async def view_broker_stats_data(self, addr: str, stats_name: str, stats_key: str) -> BrokerStatsData:
        """VIEW_BROKER_STATS_DATA: one stats item (TOPIC_PUT_NUMS of a topic, GROUP_GET_NUMS of "topic@group"...);
        MQClientError when the broker has no such item."""
        header = ViewBrokerStatsDataRequestHeader(stats_name, stats_key)
        request = create_request(RequestCode.VIEW_BROKER_STATS_DATA, header.to_ext())
        response = check_answer(await self.invoke(addr, request), broker=False)
        return BrokerStatsData.from_json(answer_json(response, "broker stats data"))

    # -- the NameServers ----------------------------------------------------------------------------------------

    async def wipe_write_perm_of_broker(self, namesrv_addr: str, broker_name: str) -> int:
        """WIPE_WRITE_PERM_OF_BROKER to one NameServer: how many topics of the broker lost their write permission."""
        response = await self._invoke_broker_name(namesrv_addr, RequestCode.WIPE_WRITE_PERM_OF_BROKER, broker_name)
        return WipeWritePermOfBrokerResponseHeader.from_ext(dict(response.ext_fields)).wipe_topic_count

    async def add_write_perm_of_broker(self, namesrv_addr: str, broker_name: str) -> int:
        """ADD_WRITE_PERM_OF_BROKER to one NameServer: how many topics of the broker are read-write again."""
        response = await self._invoke_broker_name(namesrv_addr, RequestCode.ADD_WRITE_PERM_OF_BROKER, broker_name)
        return AddWritePermOfBrokerResponseHeader.from_ext(dict(response.ext_fields)).add_topic_count

    async def _invoke_broker_name(self, namesrv_addr: str, code: RequestCode, broker_name: str) -> RemotingCommand:
        request = create_request(code, BrokerNameHeader(broker_name).to_ext())
        return check_answer(await self.invoke(namesrv_addr, request), broker=False)

    async def delete_kv_config(self, namespace: str, key: str) -> None:
        """DELETE_KV_CONFIG to every NameServer; the last refusal is raised after all were asked."""
        refusal = None
        for addr in self.namesrv_list():
            request = create_request(RequestCode.DELETE_KV_CONFIG, KVConfigKeyHeader(namespace, key).to_ext())
            response = await self.invoke(addr, request)
            if response.code != ResponseCode.SUCCESS:
                refusal = response
        if refusal is not None:
            raise MQClientError(refusal.code, refusal.remark or "")

    async def get_name_server_config(self, addrs: Sequence[str] | None = None) -> dict[str, dict[str, str]]:
        """GET_NAMESRV_CONFIG from ``addrs`` (every configured NameServer when None or empty): address -> config."""
        configs: dict[str, dict[str, str]] = {}
        for addr in addrs or self.namesrv_list():
            response = check_answer(await self.invoke(addr, create_request(RequestCode.GET_NAMESRV_CONFIG)),
                                    broker=False)
            configs[addr] = java_properties((response.body or b"").decode("utf-8"))
        return configs

    async def update_name_server_config(self, props: Mapping[str, str], addrs: Sequence[str] | None = None) -> None:
        """UPDATE_NAMESRV_CONFIG to ``addrs`` (every configured NameServer when None or empty), stopping at the first
        refusal as Java does."""
        body = properties_text(props).encode("utf-8")
        for addr in addrs or self.namesrv_list():
            request = create_request(RequestCode.UPDATE_NAMESRV_CONFIG, body=body)
            check_answer(await self.invoke(addr, request), broker=False)
