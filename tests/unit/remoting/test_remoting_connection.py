"""RemotingConnection over socketpairs: request/response matching, peer requests, timeouts, closing, bad peers."""

from __future__ import annotations

import asyncio
import socket
import struct

import pytest

from broker.common.errors import ConnectionClosed, LocalProtocolError, RequestTimeout
from broker.remoting.codes import RequestCode, ResponseCode, SerializeType
from broker.remoting.command import CommandFlag, RemotingCommand, create_request, create_response, decode, encode
from broker.remoting.connection import (
    OVERLOAD_REMARK,
    READ_CHUNK,
    CloseReason,
    RemotingConnection,
    eager,
    exception_simple_desc,
    is_eager,
)
from broker.remoting.frame import FrameDecoder
from broker.remoting.stream import FrameProtocol, open_stream
from tests.unit.remoting.remoting_helpers import (
    connection_pair,
    raw_frame,
    raw_pair,
    read_frames,
    rocketmq_header,
    run,
)


def decode_raw(frame: bytes) -> RemotingCommand:
    (only,) = FrameDecoder().feed(frame)
    return decode(only)


async def echo(conn, request: RemotingCommand) -> RemotingCommand:
    delay = float(request.ext_fields.get("delay", "0"))
    if delay:
        await asyncio.sleep(delay)
    return create_response(request, ResponseCode.SUCCESS, request.ext_fields.get("remark"), body=request.body)


def test_responses_find_their_requests_by_opaque_even_out_of_order() -> None:
    async def scenario() -> None:
        gates = [asyncio.Event() for _ in range(5)]

        async def gated(conn, request):
            await gates[int(request.ext_fields["i"])].wait()
            return create_response(request, ResponseCode.SUCCESS, body=request.body)

        a, b = await connection_pair(handler_b=gated)
        try:
            requests = [create_request(RequestCode.SEND_MESSAGE, {"i": str(i)}, b"%d" % i) for i in range(5)]
            calls = [asyncio.ensure_future(a.invoke(request, 5000)) for request in requests]
            for i in reversed(range(5)):  # answer the last-sent first
                gates[i].set()
                response = await calls[i]
                assert (response.body, response.opaque, response.is_response) == (b"%d" % i, requests[i].opaque, True)
                assert not any(call.done() for call in calls[:i])
            assert a.pending_requests == 0
        finally:
            await a.close()
            await b.close()

    run(scenario())


def test_both_sides_send_requests_on_one_connection() -> None:
    async def broker_side(conn, request):
        # The broker answers a send by asking the producer first, as it does with CHECK_TRANSACTION_STATE.
        check = await conn.invoke(create_request(RequestCode.CHECK_TRANSACTION_STATE, {"msgId": "m1"}), 5000)
        return create_response(request, ResponseCode.SUCCESS, f"producer said {check.remark}")

    async def producer_side(conn, request):
        assert request.code == RequestCode.CHECK_TRANSACTION_STATE
        return create_response(request, ResponseCode.SUCCESS, f"commit {request.ext_fields['msgId']}")

    async def scenario() -> None:
        producer, broker = await connection_pair(producer_side, broker_side)
        try:
            response = await producer.invoke(create_request(RequestCode.END_TRANSACTION), 5000)
            assert response.remark == "producer said commit m1"
        finally:
            await producer.close()
            await broker.close()

    run(scenario())


def test_timeout_names_opaque_code_and_peer_and_a_late_response_is_dropped() -> None:
    async def scenario() -> None:
        a, b = await connection_pair(handler_b=echo)
        try:
            request = create_request(RequestCode.PULL_MESSAGE, {"delay": "0.3"})
            with pytest.raises(RequestTimeout) as raised:
                await a.invoke(request, 50)
            message = str(raised.value)
            assert f"opaque {request.opaque}" in message and "code 11" in message and "50 ms" in message
            assert (raised.value.opaque, raised.value.code) == (request.opaque, 11)
            assert isinstance(raised.value, TimeoutError)
            assert a.pending_requests == 0
            await asyncio.sleep(0.4)  # the late response arrives and matches nothing
            assert (await a.invoke(create_request(RequestCode.HEART_BEAT), 5000)).code == ResponseCode.SUCCESS
        finally:
            await a.close()
            await b.close()

    run(scenario())


def test_oneway_sets_the_flag_without_touching_the_callers_command_and_gets_no_answer() -> None:
    async def scenario() -> None:
        conn, reader, writer = await raw_pair()
        try:
            request = create_request(RequestCode.UNREGISTER_CLIENT, {"clientID": "c"})
            await conn.invoke_oneway(request)
            sent = decode_raw((await read_frames(reader, 1))[0])
            assert sent.is_oneway and not sent.is_response
            assert sent.flag == CommandFlag.ONEWAY and request.flag == 0
            assert conn.pending_requests == 0
        finally:
            await conn.close()
            writer.close()

    run(scenario())


def test_oneway_requests_from_the_peer_are_handled_but_not_answered() -> None:
    handled = []

    async def handler(conn, request):
        handled.append(request.code)
        if request.code == 2:
            raise ValueError("a oneway failure stays silent too")
        return create_response(request, ResponseCode.SUCCESS)

    async def scenario() -> None:
        conn, reader, writer = await raw_pair(handler)
        try:
            oneway = int(CommandFlag.ONEWAY)
            writer.write(encode(RemotingCommand(code=1, opaque=1, flag=oneway)))
            writer.write(encode(RemotingCommand(code=2, opaque=2, flag=oneway)))
            writer.write(encode(RemotingCommand(code=3, opaque=3)))
            (answer,) = [decode_raw(f) for f in await read_frames(reader, 1)]
            assert (answer.opaque, answer.code) == (3, ResponseCode.SUCCESS)
            assert sorted(handled) == [1, 2, 3]
        finally:
            await conn.close()
            writer.close()

    run(scenario())


def test_handler_failures_and_missing_handlers_answer_like_java() -> None:
    async def failing(conn, request):
        if request.code == 1:
            raise ValueError("boom")
        return RemotingCommand(code=ResponseCode.SUCCESS, opaque=12345)  # neither opaque nor flag set right

    async def scenario() -> None:
        a, b = await connection_pair(handler_b=failing)
        try:
            failed = await a.invoke(create_request(1), 5000)
            assert failed.code == ResponseCode.SYSTEM_ERROR
            assert failed.remark.startswith("ValueError: boom, failing(test_remoting_connection.py:")
            fixed = await a.invoke(request := create_request(2), 5000)
            assert (fixed.opaque, fixed.is_response) == (request.opaque, True)
            # b has no handler of its own for requests coming the other way
            unsupported = await b.invoke(create_request(777), 5000)
            assert (unsupported.code, unsupported.remark) == (3, " request type 777 not supported")
        finally:
            await a.close()
            await b.close()

    run(scenario())


def test_a_handler_may_answer_later_with_send_response() -> None:
    held: list[tuple] = []

    async def long_polling(conn, request):
        held.append((conn, request))
        return None

    async def scenario() -> None:
        a, b = await connection_pair(handler_b=long_polling)
        try:
            call = asyncio.ensure_future(a.invoke(create_request(RequestCode.PULL_MESSAGE), 5000))
            while not held:
                await asyncio.sleep(0.01)
            conn, request = held[0]
            await conn.send_response(create_response(request, ResponseCode.PULL_NOT_FOUND))
            assert (await call).code == ResponseCode.PULL_NOT_FOUND
            with pytest.raises(LocalProtocolError):
                await conn.send_response(request)
        finally:
            await a.close()
            await b.close()

    run(scenario())


def test_closing_fails_every_pending_call_with_the_reason() -> None:
    async def never(conn, request):
        await asyncio.sleep(60)

    async def scenario() -> None:
        a, b = await connection_pair(handler_b=never)
        try:
            calls = [asyncio.ensure_future(a.invoke(create_request(RequestCode.HEART_BEAT), 5000)) for _ in range(3)]
            await asyncio.sleep(0.05)
            assert a.pending_requests == 3
            await a.close()
            for call in calls:
                with pytest.raises(ConnectionClosed) as raised:
                    await call
                assert raised.value.reason is CloseReason.LOCAL_CLOSE
            with pytest.raises(ConnectionClosed, match="LOCAL_CLOSE"):
                await a.invoke(create_request(RequestCode.HEART_BEAT), 5000)
            while not b.closed:
                await asyncio.sleep(0.01)
            assert b.close_reason is CloseReason.PEER_CLOSED  # the peer saw EOF...
            await asyncio.sleep(0.05)
            assert not b.finished  # ...and left its stuck handler running, as Java's executors would
        finally:
            await a.close()
            await b.close()
        assert b.finished  # close() cancelled it

    run(scenario())


def test_peer_going_away_fails_pending_calls_with_peer_closed() -> None:
    async def scenario() -> None:
        conn, reader, writer = await raw_pair()
        try:
            call = asyncio.ensure_future(conn.invoke(create_request(RequestCode.HEART_BEAT), 5000))
            await read_frames(reader, 1)
            writer.close()
            with pytest.raises(ConnectionClosed) as raised:
                await call
            assert raised.value.reason is CloseReason.PEER_CLOSED
            await conn.wait_closed()
        finally:
            await conn.close()

    run(scenario())


def test_handlers_already_running_finish_after_the_peer_left() -> None:
    stored = asyncio.Event

    async def scenario() -> None:
        done = stored()

        async def slow_store(conn, request):
            await asyncio.sleep(0.1)
            done.set()

        conn, reader, writer = await raw_pair(slow_store)
        try:
            writer.write(encode(RemotingCommand(code=RequestCode.SEND_MESSAGE, flag=int(CommandFlag.ONEWAY))))
            await asyncio.sleep(0.02)
            writer.close()
            await conn.wait_closed()
            assert done.is_set()
        finally:
            await conn.close()

    run(scenario())


@pytest.mark.parametrize(
    ("bad", "opaque", "fragment"),
    [
        (raw_frame(b'{"opaque":41,"code":"ten"}'), 41, "'code' is 'ten'"),
        (raw_frame(rocketmq_header(10, 0, 0, 42, 0) + b"\x00", serialize_type=1), 42, "extFields length 0"),
        (raw_frame(b"not json"), -1, "not valid JSON"),
        (struct.pack(">i", 2**30), -1, "exceeds the maximum frame length"),
        (struct.pack(">ii", 8, 5 << 24), -1, "unknown serialize type 5"),
    ],
)
def test_a_malformed_frame_is_answered_with_system_error_then_the_connection_closes(bad, opaque, fragment) -> None:
    async def scenario() -> None:
        seen = []

        async def recording(conn, request):
            seen.append(request.opaque)
            return create_response(request, ResponseCode.SUCCESS)

        conn, reader, writer = await raw_pair(recording)
        try:
            good = RemotingCommand(code=RequestCode.HEART_BEAT, opaque=40)
            writer.write(encode(good) + bad)  # in one write: the good request before it is still handled
            rest = await reader.read()  # everything until EOF
            frames = [decode(f) for f in FrameDecoder().feed(rest)]
            # As in Java, the good request's answer may be lost to the close; the error response is the last word.
            assert [f.opaque for f in frames[:-1]] in ([], [40])
            assert (frames[-1].opaque, frames[-1].code, frames[-1].is_response) == (opaque, 1, True)
            assert fragment in frames[-1].remark
            await conn.wait_closed()
            assert conn.close_reason is CloseReason.PROTOCOL_ERROR
            assert seen == [40]
        finally:
            await conn.close()
            writer.close()

    run(scenario())


def test_a_malformed_response_closes_without_an_answer() -> None:
    async def scenario() -> None:
        conn, reader, writer = await raw_pair()
        try:
            writer.write(raw_frame(b'{"opaque":3,"flag":1,"code":[]}'))
            assert await reader.read() == b""
            assert conn.close_reason is CloseReason.PROTOCOL_ERROR
        finally:
            await conn.close()
            writer.close()

    run(scenario())


def test_concurrent_large_calls_never_interleave_frames() -> None:
    async def scenario() -> None:
        a, b = await connection_pair(handler_b=echo)
        try:
            bodies = [bytes([i]) * (150_000 + i) for i in range(64)]
            requests = [create_request(RequestCode.SEND_MESSAGE, {"i": str(i)}, body) for i, body in enumerate(bodies)]
            responses = await asyncio.gather(*(a.invoke(r, 10_000) for r in requests))
            assert [r.body for r in responses] == bodies
        finally:
            await a.close()
            await b.close()

    run(scenario())


def test_writes_wait_for_a_peer_that_does_not_read() -> None:
    async def scenario() -> None:
        conn, reader, writer = await raw_pair()
        try:
            big = create_request(RequestCode.SEND_MESSAGE, body=bytes(1 << 20))

            async def flood() -> None:
                for _ in range(256):  # 256 MiB: far beyond any socket buffer
                    await conn.invoke_oneway(big)

            with pytest.raises(TimeoutError):
                await asyncio.wait_for(flood(), 0.5)
            assert conn._writer.transport.get_write_buffer_size() < 64 << 20  # drain held us back
        finally:
            await conn.close()
            writer.close()

    run(scenario())


def test_frames_go_straight_to_the_socket_while_the_transport_holds_nothing() -> None:
    """Responses are written with os.writev (the GIL released) while the socket takes them; the rest of a frame the
    socket cannot take yet goes through the transport, after what was written, and the peer reads it all in order."""
    async def scenario() -> None:
        a, b = await connection_pair(handler_b=echo)
        through_transport: list[int] = []
        write, writelines = b._writer.write, b._writer.writelines
        b._writer.write = lambda data: (through_transport.append(len(data)), write(data))[1]
        b._writer.writelines = lambda parts: (through_transport.append(sum(map(len, parts))), writelines(parts))[1]
        try:
            small = await a.invoke(create_request(RequestCode.SEND_MESSAGE, {"remark": "hi"}, b"x"), 3000)
            assert small.remark == "hi" and through_transport == []
            big = bytes(range(256)) * 40_000  # 10 MB: more than the socket buffer takes at once
            response = await a.invoke(create_request(RequestCode.SEND_MESSAGE, body=big), 10_000)
            assert response.body == big
            assert through_transport and sum(through_transport) < len(big)
        finally:
            await a.close()
            await b.close()

    run(scenario())


def test_too_many_requests_in_flight_get_system_busy() -> None:
    async def scenario() -> None:
        release = asyncio.Event()

        async def slow(conn, request):
            await release.wait()
            return create_response(request, ResponseCode.SUCCESS)

        a, b = await connection_pair(handler_b=slow, max_concurrent_requests=2)
        try:
            calls = [asyncio.ensure_future(a.invoke(create_request(RequestCode.SEND_MESSAGE), 5000)) for _ in range(3)]
            busy = await asyncio.wait_for(asyncio.shield(calls[2]), 5)
            assert (busy.code, busy.remark) == (ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)
            release.set()
            assert [(await c).code for c in calls[:2]] == [0, 0]
        finally:
            await a.close()
            await b.close()

    run(scenario())


def test_local_mistakes_are_refused_before_sending() -> None:
    async def scenario() -> None:
        a, b = await connection_pair(handler_b=echo, max_frame_length=1024)
        try:
            with pytest.raises(LocalProtocolError, match="exceeds the maximum frame length 1024"):
                await a.invoke(create_request(RequestCode.SEND_MESSAGE, body=bytes(2000)), 5000)
            response = create_response(create_request(1), ResponseCode.SUCCESS)
            with pytest.raises(LocalProtocolError, match="sends requests"):
                await a.invoke(response, 5000)
            with pytest.raises(LocalProtocolError, match="sends requests"):
                await a.invoke_oneway(response)
            slow = create_request(RequestCode.SEND_MESSAGE, {"delay": "0.2"})
            first = asyncio.ensure_future(a.invoke(slow, 5000))
            await asyncio.sleep(0)
            with pytest.raises(LocalProtocolError, match=f"opaque {slow.opaque} is already waiting"):
                await a.invoke(slow, 5000)
            assert (await first).code == ResponseCode.SUCCESS
            assert not a.closed  # none of that closed the connection
        finally:
            await a.close()
            await b.close()

    run(scenario())


def test_responses_keep_the_requests_serialize_type() -> None:
    async def scenario() -> None:
        a, b = await connection_pair(handler_b=echo)
        try:
            request = create_request(RequestCode.HEART_BEAT, {"k": "v"}, serialize_type=SerializeType.ROCKETMQ)
            response = await a.invoke(request, 5000)
            assert response.serialize_type is SerializeType.ROCKETMQ
        finally:
            await a.close()
            await b.close()

    run(scenario())


def test_exception_simple_desc_reads_like_javas() -> None:
    def fail() -> None:
        raise KeyError("topic")

    try:
        fail()
    except KeyError as err:
        text = exception_simple_desc(err)
    assert text.startswith("KeyError: 'topic', fail(test_remoting_connection.py:")
    assert exception_simple_desc(ConnectionClosed(CloseReason.SHUTDOWN)) == (
        "broker.common.errors.ConnectionClosed: connection closed (SHUTDOWN)"
    )


def test_an_unencodable_response_is_replaced_by_system_error() -> None:
    async def sloppy(conn, request):
        return create_response(request, ResponseCode.SUCCESS, ext_fields={"queueOffset": 42})  # not a str

    async def scenario() -> None:
        a, b = await connection_pair(handler_b=sloppy)
        try:
            response = await a.invoke(create_request(RequestCode.QUERY_CONSUMER_OFFSET), 5000)
            assert response.code == ResponseCode.SYSTEM_ERROR
            assert response.remark == "response not encodable: extFields entry 'queueOffset': 42 is not str: str"
        finally:
            await a.close()
            await b.close()

    run(scenario())


def test_a_bug_while_reading_closes_the_connection_instead_of_leaving_it_unread(monkeypatch) -> None:
    from broker.remoting import command as command_module  # the exchange decodes through it

    def broken_decode(frame):
        raise TypeError("bug")

    async def scenario() -> None:
        a, b = await connection_pair(handler_b=echo)
        try:
            monkeypatch.setattr(command_module, "decode", broken_decode)
            with pytest.raises(ConnectionClosed) as raised:
                await b.invoke(create_request(RequestCode.HEART_BEAT), 5000)  # a dies reading it; b sees EOF
            assert raised.value.reason is CloseReason.PEER_CLOSED
            assert a.close_reason is CloseReason.INTERNAL_ERROR
        finally:
            monkeypatch.undo()
            await a.close()
            await b.close()

    run(scenario())


def test_requests_read_before_the_connection_starts_are_answered_first_and_in_order() -> None:
    """A peer may write as soon as it connects: what the protocol read before ``start`` is taken before anything
    read after it, so the responses come back in the requests' order."""
    async def scenario() -> None:
        sock_a, sock_b = socket.socketpair()
        reader_a, writer_a = await open_stream(sock=sock_a, limit=READ_CHUNK)
        reader_b, writer_b = await asyncio.open_connection(sock=sock_b)
        requests = [create_request(RequestCode.HEART_BEAT, body=f"r{i}".encode()) for i in range(3)]
        protocol = writer_a.transport.get_protocol()
        writer_b.write(encode(requests[0]) + encode(requests[1]))
        while not protocol._early:  # read by the protocol, with nobody attached yet
            await asyncio.sleep(0)
        conn = RemotingConnection(reader_a, writer_a, echo).start()
        writer_b.write(encode(requests[2]))
        answers = [decode_raw(frame) for frame in await read_frames(reader_b, 3)]
        assert [(a.opaque, a.body) for a in answers] == [(r.opaque, r.body) for r in requests]
        await conn.close()
        writer_b.close()

    run(scenario())


def test_frame_protocol_keeps_early_bytes_for_the_first_attach_then_hands_each_read_over() -> None:
    async def scenario() -> None:
        protocol = FrameProtocol(asyncio.StreamReader())
        protocol.data_received(b"one")
        protocol.data_received(b"two")
        got: list[bytes] = []
        assert protocol.attach(got.append) == [b"one", b"two"]
        protocol.data_received(b"three")
        assert got == [b"three"]

    run(scenario())


def test_eager_requests_are_answered_in_the_reads_callback_and_the_rest_in_a_task() -> None:
    """An eager code's handler runs in the read's callback: answered at once, it needs no task, and the answers to one
    read's requests go out in one write; one that waits (or is cancelled by close) carries on in a task as before;
    one that raises is answered SYSTEM_ERROR. The peer sees the same answers either way."""
    async def scenario() -> None:
        gate = asyncio.Event()
        seen_tasks: list[asyncio.Task | None] = []

        @eager
        async def handler(conn, request):
            seen_tasks.append(asyncio.current_task())
            mode = request.ext_fields.get("mode")
            if mode == "wait":
                await gate.wait()
            elif mode == "sleep":
                await asyncio.sleep(0.01)
                await asyncio.sleep(0)
            elif mode == "fail":
                raise ValueError("bad")
            return create_response(request, ResponseCode.SUCCESS, mode, body=request.body)

        assert is_eager(handler) and not is_eager(echo)
        conn, reader, writer = await raw_pair(handler, eager_codes={int(RequestCode.SEND_MESSAGE)})
        writes: list[int] = []
        write_directly = conn._write_directly
        conn._write_directly = lambda out: (writes.append(len(out)), write_directly(out))[1]
        try:
            requests = [create_request(RequestCode.SEND_MESSAGE, {"mode": mode}, b"%d" % i)
                        for i, mode in enumerate(["now", "now", "fail", "sleep", "now"])]
            writer.write(b"".join(encode(request) for request in requests))
            answers = [decode_raw(frame) for frame in await read_frames(reader, 5)]
            by_opaque = {answer.opaque: answer for answer in answers}
            for request in requests:
                answer = by_opaque[request.opaque]
                mode = request.ext_fields["mode"]
                assert answer.code == (ResponseCode.SYSTEM_ERROR if mode == "fail" else ResponseCode.SUCCESS)
                assert answer.body == (b"" if mode == "fail" else request.body)
            assert [answer.opaque for answer in answers[:4]] == [requests[i].opaque for i in (0, 1, 2, 4)]
            assert seen_tasks == [None] * 5 and writes[0] == 1  # the four answered at once: one write, no task
            held = create_request(RequestCode.SEND_MESSAGE, {"mode": "wait"})
            writer.write(encode(held))
            await asyncio.sleep(0.05)
            assert len(conn._request_tasks) == 1
        finally:
            await conn.close()
            writer.close()
        await asyncio.wait_for(conn.wait_closed(), 2)  # the held one was cancelled with the connection
        assert not conn._request_tasks

    run(scenario())
