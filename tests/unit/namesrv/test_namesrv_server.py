"""NamesrvController over real sockets (127.0.0.1, port 0), its config and KV store, and the answers the Java
session does not cover: refused headers, config updates, disabled lists, the wait-for-service window."""

from __future__ import annotations

import asyncio
import json

import pytest

from broker.common.errors import ConfigError
from broker.namesrv.config import NamesrvConfig, format_config, load_namesrv_config
from broker.namesrv.kv_config import KVConfigManager
from broker.namesrv.server import NamesrvController
from broker.remoting.client import RemotingClient
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request
from broker.remoting.route import decode_topic_route_data
from tests.unit.namesrv.namesrv_scenario import crc, register_body, topic_config, version
from tests.unit.remoting.remoting_helpers import run

CLUSTER, BROKER, ADDR = "DefaultCluster", "broker-a", "127.0.0.1:10911"


def config(tmp_path, **overrides: str) -> NamesrvConfig:
    base = {"listenPort": "0", "bindAddress": "127.0.0.1", "kvConfigPath": str(tmp_path / "kvConfig.json"),
            "configStorePath": str(tmp_path / "namesrv.properties")}
    return load_namesrv_config(None, {**base, **overrides})


def register_request(topics=("TopicTest", "TBW102"), **header: str):
    body = register_body([topic_config(t) for t in topics], version(1))
    ext = {
        "brokerName": BROKER,
        "brokerAddr": ADDR,
        "clusterName": CLUSTER,
        "haServerAddr": ADDR,
        "brokerId": "0",
        "bodyCrc32": crc(body),
        **header,
    }
    return create_request(RequestCode.REGISTER_BROKER, ext, body)


def route_request(topic: str = "TopicTest"):
    return create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})


async def serving(namesrv_config: NamesrvConfig, scenario) -> None:
    async with NamesrvController(namesrv_config) as namesrv, RemotingClient() as client:
        await scenario(namesrv, client, namesrv.address)


def test_closed_broker_connection_drops_its_routes(tmp_path):
    async def scenario(namesrv, client, addr):
        async with RemotingClient() as broker:
            assert (await broker.invoke(addr, register_request())).code == ResponseCode.SUCCESS
            assert (await client.invoke(addr, route_request())).code == ResponseCode.SUCCESS
        for _ in range(100):  # the close reaches the server asynchronously
            if (await client.invoke(addr, route_request())).code == ResponseCode.TOPIC_NOT_EXIST:
                break
            await asyncio.sleep(0.01)
        assert (await client.invoke(addr, route_request())).code == ResponseCode.TOPIC_NOT_EXIST

    run(serving(config(tmp_path), scenario))


def test_scan_expires_a_silent_broker_and_closes_its_connection(tmp_path):
    async def scenario(namesrv, client, addr):
        broker = RemotingClient()
        try:
            response = await broker.invoke(addr, register_request(heartbeatTimeoutMillis="200"))
            assert response.code == ResponseCode.SUCCESS
            conn = await broker.get_connection(addr)
            await asyncio.wait_for(conn.wait_closed(), 5)  # closed by the NameServer's scan
            assert (await client.invoke(addr, route_request())).code == ResponseCode.TOPIC_NOT_EXIST
        finally:
            await broker.close()

    run(serving(config(tmp_path, scanNotActiveBrokerInterval="50"), scenario))


def test_heartbeats_keep_a_broker_alive(tmp_path):
    async def scenario(namesrv, client, addr):
        async with RemotingClient() as broker:
            await broker.invoke(addr, register_request(heartbeatTimeoutMillis="150"))
            identity = {"clusterName": CLUSTER, "brokerName": BROKER, "brokerAddr": ADDR, "brokerId": "0"}
            for _ in range(8):
                await asyncio.sleep(0.05)
                heartbeat = await broker.invoke(addr, create_request(RequestCode.BROKER_HEARTBEAT, identity))
                assert heartbeat.code == ResponseCode.SUCCESS
            assert (await client.invoke(addr, route_request())).code == ResponseCode.SUCCESS

    run(serving(config(tmp_path, scanNotActiveBrokerInterval="20"), scenario))


def test_refused_headers_and_unknown_codes(tmp_path):
    async def scenario(namesrv, client, addr):
        missing = await client.invoke(addr, create_request(RequestCode.REGISTER_BROKER, {"brokerName": BROKER}))
        assert (missing.code, missing.remark) == (ResponseCode.SYSTEM_ERROR, "the custom field <brokerAddr> is null")
        bad = register_request(brokerId="zero")
        assert (await client.invoke(addr, bad)).code == ResponseCode.SYSTEM_ERROR
        garbled = create_request(RequestCode.REGISTER_BROKER, dict(register_request().ext_fields, bodyCrc32="0"), b"{")
        response = await client.invoke(addr, garbled)
        assert response.code == ResponseCode.SYSTEM_ERROR
        assert response.remark.startswith("Failed to decode RegisterBrokerBody")
        unknown = await client.invoke(addr, create_request(RequestCode.SEND_MESSAGE))
        assert (unknown.code, unknown.remark) == (
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
            " request type 10 not supported",
        )

    run(serving(config(tmp_path), scenario))


def test_route_for_old_clients_and_order_topics(tmp_path):
    async def scenario(namesrv, client, addr):
        await client.invoke(addr, register_request())
        old = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}, version=300)
        assert b'{0:"127.0.0.1:10911"}' in (await client.invoke(addr, old)).body
        put = {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicTest", "value": "broker-a:4"}
        await client.invoke(addr, create_request(RequestCode.PUT_KV_CONFIG, put))
        route = decode_topic_route_data((await client.invoke(addr, route_request())).body)
        assert route.order_topic_conf == "broker-a:4"
        assert route.broker_datas[0].broker_addrs == {0: ADDR}

    run(serving(config(tmp_path, orderMessageEnable="true"), scenario))


def test_wait_for_service(tmp_path):
    async def scenario(namesrv, client, addr):
        response = await client.invoke(addr, route_request())
        assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "name server not ready")

    run(serving(config(tmp_path, needWaitForService="true", waitSecondsForService="30"), scenario))


def test_disabled_topic_lists(tmp_path):
    async def scenario(namesrv, client, addr):
        for code, ext in [
            (RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {}),
            (RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": CLUSTER}),
            (RequestCode.GET_UNIT_TOPIC_LIST, {}),
        ]:
            response = await client.invoke(addr, create_request(code, ext))
            assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "disable")

    run(serving(config(tmp_path, enableAllTopicList="false", enableTopicList="false"), scenario))


def test_get_and_update_namesrv_config(tmp_path):
    async def scenario(namesrv, client, addr):
        text = (await client.invoke(addr, create_request(RequestCode.GET_NAMESRV_CONFIG))).body.decode()
        lines = text.splitlines()
        assert lines == sorted(lines)
        assert "enableAllTopicList=true" in lines and "scanNotActiveBrokerInterval=5000" in lines
        update = create_request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"enableAllTopicList=false\nsomeKey=1\n")
        assert (await client.invoke(addr, update)).code == ResponseCode.SUCCESS
        assert namesrv.config.enable_all_topic_list is False
        listed = await client.invoke(addr, create_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        assert listed.remark == "disable"
        refused = create_request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"kvConfigPath=/etc/passwd\n")
        response = await client.invoke(addr, refused)
        assert (response.code, response.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        bad = create_request(RequestCode.UPDATE_NAMESRV_CONFIG, body=b"enableTopicList=maybe\n")
        assert (await client.invoke(addr, bad)).code == ResponseCode.SYSTEM_ERROR
        assert namesrv.config.enable_topic_list is True
        # only the accepted update reached configStorePath (Java's Configuration.persist)
        assert (tmp_path / "namesrv.properties").read_text() == "enableAllTopicList=false\nsomeKey=1\n"

    run(serving(config(tmp_path), scenario))


# -- config and KV store --------------------------------------------------------------------------------------------


def test_config_file(tmp_path):
    conf = tmp_path / "namesrv.conf"
    conf.write_text("listenPort = 19876\norderMessageEnable=true\nserverWorkerThreads=8\n")
    loaded = load_namesrv_config(conf)
    assert (loaded.listen_port, loaded.order_message_enable) == (19876, True)
    assert loaded.config_store_path == str(conf)
    assert loaded.extra == {"serverWorkerThreads": "8"}
    assert "serverWorkerThreads=8\n" in format_config(loaded)
    assert NamesrvConfig().listen_port == 9876
    with pytest.raises(ConfigError, match="listenPort"):
        load_namesrv_config(None, {"listenPort": "70000"})
    with pytest.raises(ConfigError, match="orderMessageEnable"):
        load_namesrv_config(None, {"orderMessageEnable": "yes"})


def test_kv_config_survives_a_restart(tmp_path):
    path = str(tmp_path / "namesrv" / "kvConfig.json")
    kv = KVConfigManager(path)
    assert not kv.load()
    kv.put_kv_config("ns", "k1", "v1")
    kv.put_kv_config("ns", "k2", "v2")
    kv.delete_kv_config("ns", "k1")
    kv.delete_kv_config("nothing", "k")
    again = KVConfigManager(path)
    assert again.load()
    assert again.get_kv_list_by_namespace("ns") == {"k2": "v2"}
    assert again.get_kv_list_by_namespace("nothing") is None
    assert json.loads((tmp_path / "namesrv" / "kvConfig.json").read_text()) == {"configTable": {"ns": {"k2": "v2"}}}
