"""RemotingClient: one lazily opened connection per address, shared, replaced once closed; timeouts; errors."""

from __future__ import annotations

import asyncio

import pytest

from broker.common.errors import ConnectionClosed, RemotingConnectError, RequestTimeout
from broker.remoting.client import DEFAULT_TIMEOUT_MS, RemotingClient, parse_address
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import create_request, create_response
from broker.remoting.connection import CloseReason
from broker.remoting.server import RemotingServer
from tests.helpers import free_port
from tests.unit.remoting.remoting_helpers import run


async def echo(conn, request):
    delay = float(request.ext_fields.get("delay", "0"))
    if delay:
        await asyncio.sleep(delay)
    return create_response(request, ResponseCode.SUCCESS, body=request.body)


def echo_server() -> RemotingServer:
    return RemotingServer("127.0.0.1", 0, default_processor=echo)


def test_default_timeout_is_3000_ms() -> None:
    assert DEFAULT_TIMEOUT_MS == 3000
    assert RemotingClient().default_timeout_ms == 3000


def test_one_connection_per_address_opened_lazily_and_shared_by_concurrent_calls() -> None:
    async def scenario() -> None:
        async with echo_server() as first, echo_server() as second, RemotingClient() as client:
            assert first.connections == frozenset()  # nothing until the first call
            calls = [
                client.invoke(first.address, create_request(RequestCode.HEART_BEAT, body=b"%d" % i)) for i in range(20)
            ]  # noqa: E501
            responses = await asyncio.gather(*calls)
            assert [r.body for r in responses] == [b"%d" % i for i in range(20)]
            await client.invoke(second.address, create_request(RequestCode.HEART_BEAT))
            assert (len(first.connections), len(second.connections)) == (1, 1)
            assert await client.get_connection(first.address) is await client.get_connection(first.address)

    run(scenario())


def test_a_closed_connection_is_replaced_on_the_next_call() -> None:
    async def scenario() -> None:
        async with echo_server() as srv, RemotingClient() as client:
            await client.invoke(srv.address, create_request(RequestCode.HEART_BEAT))
            old = await client.get_connection(srv.address)
            (server_side,) = srv.connections
            await server_side.close()
            await old.wait_closed()
            assert old.close_reason is CloseReason.PEER_CLOSED
            response = await client.invoke(srv.address, create_request(RequestCode.HEART_BEAT, body=b"again"))
            assert response.body == b"again"
            assert (await client.get_connection(srv.address)) is not old

    run(scenario())


def test_timeouts_raise_request_timeout() -> None:
    async def scenario() -> None:
        async with echo_server() as srv, RemotingClient(default_timeout_ms=100) as client:
            with pytest.raises(RequestTimeout, match="within 100 ms"):
                await client.invoke(srv.address, create_request(RequestCode.PULL_MESSAGE, {"delay": "1"}))
            slow = create_request(RequestCode.PULL_MESSAGE, {"delay": "0.3"})
            assert (await client.invoke(srv.address, slow, timeout_ms=2000)).code == 0

    run(scenario())


def test_nobody_listening_is_a_connect_error_and_the_next_call_tries_again() -> None:
    async def scenario() -> None:
        port = free_port()
        async with RemotingClient() as client:
            with pytest.raises(RemotingConnectError, match=f"cannot connect to 127.0.0.1:{port}") as raised:
                await client.invoke(f"127.0.0.1:{port}", create_request(RequestCode.HEART_BEAT))
            assert raised.value.address == f"127.0.0.1:{port}"
            async with RemotingServer("127.0.0.1", port, default_processor=echo):
                assert (await client.invoke(f"127.0.0.1:{port}", create_request(1))).code == 0

    run(scenario())


def test_oneway_calls_reach_the_server() -> None:
    async def scenario() -> None:
        seen: asyncio.Queue = asyncio.Queue()

        async def record(conn, request):
            await seen.put(request)

        async with RemotingServer(default_processor=record) as srv, RemotingClient() as client:
            await client.invoke_oneway(srv.address, create_request(RequestCode.UNREGISTER_CLIENT, {"clientID": "c"}))
            request = await seen.get()
            assert request.is_oneway and request.ext_fields == {"clientID": "c"}

    run(scenario())


def test_server_requests_reach_the_client_handler() -> None:
    async def scenario() -> None:
        async def producer(conn, request):
            return create_response(request, ResponseCode.SUCCESS, "COMMIT_MESSAGE")

        async with echo_server() as srv, RemotingClient(producer) as client:
            await client.invoke(srv.address, create_request(RequestCode.HEART_BEAT))
            (conn,) = srv.connections
            check = await conn.invoke(create_request(RequestCode.CHECK_TRANSACTION_STATE), 3000)
            assert check.remark == "COMMIT_MESSAGE"

    run(scenario())


def test_close_fails_calls_in_flight_and_refuses_new_ones() -> None:
    async def scenario() -> None:
        async with echo_server() as srv:
            client = RemotingClient()
            call = asyncio.ensure_future(
                client.invoke(srv.address, create_request(RequestCode.PULL_MESSAGE, {"delay": "5"}))
            )
            await asyncio.sleep(0.1)
            await client.close()
            with pytest.raises(ConnectionClosed) as raised:
                await call
            assert raised.value.reason is CloseReason.LOCAL_CLOSE
            with pytest.raises(ConnectionClosed, match="RemotingClient is closed"):
                await client.invoke(srv.address, create_request(RequestCode.HEART_BEAT))

    run(scenario())


@pytest.mark.parametrize(
    ("address", "expected"),
    [("127.0.0.1:9876", ("127.0.0.1", 9876)), ("[::1]:10911", ("::1", 10911)), ("broker-a:10911", ("broker-a", 10911))],
)
def test_addresses_are_host_colon_port(address, expected) -> None:
    assert parse_address(address) == expected


@pytest.mark.parametrize("address", ["127.0.0.1", ":9876", "host:", "host:port", "host:70000", "host:0"])
def test_bad_addresses_are_refused(address) -> None:
    with pytest.raises(RemotingConnectError, match="not a host:port address"):
        parse_address(address)
