"""RemotingServer on 127.0.0.1: processor routing, Java's answers for unknown codes and failures, concurrency, stop,
and a fuzzer that throws garbage at it while a well-behaved client keeps working."""

from __future__ import annotations

import asyncio
import random
import struct

import pytest

from broker.common.errors import ConnectionClosed
from broker.remoting.client import RemotingClient
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_request, create_response, encode
from broker.remoting.connection import CloseReason
from broker.remoting.server import RemotingServer
from tests.unit.remoting.remoting_helpers import raw_frame, rocketmq_header, run


async def heartbeat(conn, request: RemotingCommand) -> RemotingCommand:
    return create_response(request, ResponseCode.SUCCESS, "alive", body=request.body)


async def slow(conn, request: RemotingCommand) -> RemotingCommand:
    await asyncio.sleep(float(request.ext_fields.get("delay", "0.5")))
    return create_response(request, ResponseCode.SUCCESS, "slow")


async def failing(conn, request: RemotingCommand) -> RemotingCommand:
    raise RuntimeError("disk on fire")


def server(**options) -> RemotingServer:
    processors = {RequestCode.HEART_BEAT: heartbeat, RequestCode.PULL_MESSAGE: slow, RequestCode.SEND_MESSAGE: failing}
    return RemotingServer("127.0.0.1", 0, processors=processors, **options)


def test_requests_go_to_the_processor_for_their_code() -> None:
    async def scenario() -> None:
        async with server() as srv, RemotingClient() as client:
            assert srv.port > 0 and srv.address == f"127.0.0.1:{srv.port}"
            response = await client.invoke(srv.address, create_request(RequestCode.HEART_BEAT, body=b"x"))
            assert (response.code, response.remark, response.body) == (ResponseCode.SUCCESS, "alive", b"x")

    run(scenario())


def test_unknown_codes_get_javas_exact_not_supported_answer_until_a_default_processor_is_set() -> None:
    async def scenario() -> None:
        async with server() as srv, RemotingClient() as client:
            response = await client.invoke(srv.address, create_request(RequestCode.QUERY_MESSAGE))
            assert (response.code, response.remark) == (3, " request type 12 not supported")
            srv.register_default_processor(heartbeat)
            assert (await client.invoke(srv.address, create_request(4242))).remark == "alive"
            srv.register_processor(4242, slow)
            assert (await client.invoke(srv.address, create_request(4242, {"delay": "0"}))).remark == "slow"

    run(scenario())


def test_a_rejecting_processor_gets_javas_system_busy_answer_before_it_runs() -> None:
    async def scenario() -> None:
        rejecting = [True]
        seen: list[int] = []

        async def counted(conn, request: RemotingCommand) -> RemotingCommand:
            seen.append(request.code)
            return await heartbeat(conn, request)

        async with server() as srv, RemotingClient() as client:
            srv.register_processor(RequestCode.SEND_MESSAGE_V2, counted, lambda: rejecting[0])
            srv.register_default_processor(counted, lambda: rejecting[0])
            for code in (RequestCode.SEND_MESSAGE_V2, 4242):
                response = await client.invoke(srv.address, create_request(code, {"not": "parsed"}))
                assert (response.code, response.remark) == (
                    ResponseCode.SYSTEM_BUSY, "[REJECTREQUEST]system busy, start flow control for a while")
            assert seen == []
            rejecting[0] = False
            assert (await client.invoke(srv.address, create_request(RequestCode.SEND_MESSAGE_V2))).remark == "alive"
            srv.register_processor(RequestCode.SEND_MESSAGE_V2, counted)  # no reject_request: never rejected
            rejecting[0] = True
            assert (await client.invoke(srv.address, create_request(RequestCode.SEND_MESSAGE_V2))).remark == "alive"
            assert seen == [RequestCode.SEND_MESSAGE_V2] * 2

    run(scenario())


def test_a_processor_exception_becomes_system_error_with_its_text() -> None:
    async def scenario() -> None:
        async with server() as srv, RemotingClient() as client:
            response = await client.invoke(srv.address, create_request(RequestCode.SEND_MESSAGE))
            assert response.code == ResponseCode.SYSTEM_ERROR
            assert response.remark.startswith("RuntimeError: disk on fire, failing(test_remoting_server.py:")
            assert (await client.invoke(srv.address, create_request(RequestCode.HEART_BEAT))).code == 0

    run(scenario())


def test_a_slow_request_does_not_stall_the_connection() -> None:
    async def scenario() -> None:
        release = asyncio.Event()

        async def held(conn, request):
            await release.wait()
            return create_response(request, ResponseCode.SUCCESS, "held")

        async with server() as srv, RemotingClient() as client:
            srv.register_processor(RequestCode.PULL_MESSAGE, held)
            pull = asyncio.ensure_future(client.invoke(srv.address, create_request(RequestCode.PULL_MESSAGE)))
            for _ in range(20):  # would time out if the held pull blocked the connection
                await client.invoke(srv.address, create_request(RequestCode.HEART_BEAT))
            assert not pull.done()
            release.set()
            assert (await pull).remark == "held"

    run(scenario())


def test_the_server_can_call_its_clients() -> None:
    async def client_handler(conn, request):
        return create_response(request, ResponseCode.SUCCESS, f"client saw {request.ext_fields['consumerGroup']}")

    async def scenario() -> None:
        async with server() as srv, RemotingClient(client_handler) as client:
            await client.invoke(srv.address, create_request(RequestCode.HEART_BEAT))
            (conn,) = srv.connections
            notify = create_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "g"})
            assert (await conn.invoke(notify, 3000)).remark == "client saw g"

    run(scenario())


def test_stop_closes_every_connection_and_fails_its_calls() -> None:
    async def scenario() -> None:
        srv = await server().start()
        async with RemotingClient() as client:
            pending = asyncio.ensure_future(
                client.invoke(srv.address, create_request(RequestCode.PULL_MESSAGE, {"delay": "30"}), 10_000)
            )
            await asyncio.sleep(0.1)
            (conn,) = srv.connections
            port = srv.port
            await srv.stop()
            assert conn.close_reason is CloseReason.SHUTDOWN and conn.finished
            assert srv.connections == frozenset()
            with pytest.raises(ConnectionClosed) as raised:
                await pending
            assert raised.value.reason is CloseReason.PEER_CLOSED
            with pytest.raises(OSError):
                await asyncio.open_connection("127.0.0.1", port)

    run(scenario())


def test_the_closed_listener_hears_of_every_connection_once() -> None:
    closed = []

    async def scenario() -> None:
        srv = RemotingServer(default_processor=heartbeat, on_connection_closed=closed.append)
        async with srv:
            async with RemotingClient() as client:
                await client.invoke(srv.address, create_request(RequestCode.HEART_BEAT))
                (first,) = srv.connections
            await first.wait_closed()  # the client left
            assert closed == [first] and first.close_reason is CloseReason.PEER_CLOSED
            async with RemotingClient() as client:
                await client.invoke(srv.address, create_request(RequestCode.HEART_BEAT))
                (second,) = srv.connections
        assert closed == [first, second] and second.close_reason is not None

    run(scenario())


def test_port_is_known_only_after_start() -> None:
    with pytest.raises(RuntimeError, match="after start"):
        _ = server().port


# -- fuzzing --------------------------------------------------------------------------------------------------


def garbage_inputs(rng: random.Random) -> list[bytes]:
    """Byte strings a broken or hostile peer might send; each goes down its own connection."""
    valid = encode(create_request(RequestCode.HEART_BEAT, {"k": "v"}, b"body"))
    inputs = [
        b"",
        b"\x00",
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
        struct.pack(">i", 2**31 - 1),  # a 2 GiB frame
        struct.pack(">i", -5) + bytes(8),
        struct.pack(">ii", 4, 0),  # an empty JSON header
        struct.pack(">ii", 4, 1 << 24),  # an empty ROCKETMQ header
        struct.pack(">ii", 100, 200) + bytes(100),  # header longer than the frame
        struct.pack(">ii", 20, 7 << 24) + bytes(16),  # unknown serialize type
        valid[: len(valid) // 2],  # truncated, then the peer leaves
        raw_frame(b"{bad json"),
        raw_frame(b'{"code":"x","opaque":1}'),
        raw_frame(b'{"code":10,"extFields":[1,2]}'),
        raw_frame(b'{"code":10,"language":{"x":1}}'),
        raw_frame(b"[1,2,3]"),
        raw_frame(b"\xff\xfe\x00"),
        raw_frame(rocketmq_header(10, 0, 0, 1, 0)[:-2], serialize_type=1),
        raw_frame(rocketmq_header(10, 0, 0, 1, 0, ext=[(b"k", b"v")]) + b"junk", serialize_type=1),
        valid + valid[:7],
    ]
    for _ in range(40):
        size = rng.choice([1, 3, 8, 50, 500, 5000])
        inputs.append(rng.randbytes(size))
    for _ in range(20):  # a valid frame with a few flipped bytes
        data = bytearray(valid)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        inputs.append(bytes(data))
    return inputs


def test_the_server_survives_garbage_and_other_connections_keep_working() -> None:
    rng = random.Random(20240611)

    async def throw(address: tuple[str, int], data: bytes) -> None:
        reader, writer = await asyncio.open_connection(*address)
        try:
            writer.write(data)
            await writer.drain()
            writer.write_eof()
            async with asyncio.timeout(5):
                while await reader.read(65536):  # whatever the server answers, until it closes
                    pass
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def scenario() -> None:
        async with server(max_frame_length=1 << 20) as srv, RemotingClient() as client:
            before = await client.invoke(srv.address, create_request(RequestCode.HEART_BEAT))
            first = await client.get_connection(srv.address)
            inputs = garbage_inputs(rng)
            for batch in range(0, len(inputs), 10):
                await asyncio.gather(*(throw(("127.0.0.1", srv.port), data) for data in inputs[batch : batch + 10]))
                response = await client.invoke(srv.address, create_request(RequestCode.HEART_BEAT, body=b"%d" % batch))
                assert (response.code, response.body) == (ResponseCode.SUCCESS, b"%d" % batch)
            assert before.code == 0
            assert await client.get_connection(srv.address) is first  # never dropped
            assert len([conn for conn in srv.connections if not conn.closed]) == 1  # every garbage one closed

    run(scenario(), timeout=60)
