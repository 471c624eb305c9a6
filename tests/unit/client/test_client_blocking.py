"""The blocking client: the transport (timeouts, late responses, reconnects, server requests) against raw sockets,
and the facade against the in-process fakes running on a loop in another thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from broker.client.blocking import BlockingClient, BlockingRemotingClient
from broker.client.message import Message, MessageQueue, PullStatus
from broker.client.protocol import get_route_request
from broker.common.errors import ConnectionClosed, MQClientError, RemotingConnectError, RequestTimeout
from broker.remoting import command
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_request, create_response
from broker.remoting.frame import FrameDecoder
from tests.helpers import LoopThread
from tests.unit.client.fakes import FakeBroker, FakeNamesrv

# -- a scripted raw server ---------------------------------------------------------------------------------------------


class ScriptedServer:
    """Accepts connections; for each request calls ``script(conn, request)`` in its own thread."""

    def __init__(self, script: Callable[[socket.socket, RemotingCommand], None]) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.script = script
        self.accepted = 0
        self.received: list[RemotingCommand] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.sock.getsockname()[1]}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        decoder = FrameDecoder()
        with conn:
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                if not data:
                    return
                for frame in decoder.feed(data):
                    cmd = command.decode(frame)
                    self.received.append(cmd)
                    if not cmd.is_response:
                        self.script(conn, cmd)

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() of the other thread
        except OSError:
            pass
        self.sock.close()


def reply(conn: socket.socket, request: RemotingCommand, code: int = ResponseCode.SUCCESS, **kw) -> None:
    conn.sendall(command.encode(create_response(request, code, **kw)))


def test_invoke_and_timeout_then_the_late_answer_is_dropped() -> None:
    def script(conn: socket.socket, request: RemotingCommand) -> None:
        if request.ext_fields.get("topic") == "slow":
            time.sleep(0.3)
        reply(conn, request, remark=request.ext_fields.get("topic"))

    server = ScriptedServer(script)
    with BlockingRemotingClient(server.addr) as client:
        with pytest.raises(RequestTimeout):
            client.invoke(get_route_request("slow"), 100)
        time.sleep(0.4)  # the slow answer is waiting in the socket now
        response = client.invoke(get_route_request("fast"), 1000)
        assert response.remark == "fast"
        assert server.accepted == 1
    server.close()


def test_a_big_frame_that_stalls_halfway_times_out_and_the_stream_stays_in_step() -> None:
    """A response bigger than the read chunk is read into one buffer: a timeout in its middle hands the bytes read
    so far back to the decoder, so the rest still completes it for the next call."""
    big = bytes(range(256)) * 4096  # 1 MiB body
    release = threading.Event()

    def script(conn: socket.socket, request: RemotingCommand) -> None:
        frame = command.encode(create_response(request, ResponseCode.SUCCESS, body=big))
        if request.ext_fields.get("topic") == "stall":
            conn.sendall(frame[:600_000])
            release.wait(5)
            conn.sendall(frame[600_000:])
        else:
            conn.sendall(frame)

    server = ScriptedServer(script)
    with BlockingRemotingClient(server.addr) as client:
        stalled = get_route_request("stall")
        client.send(stalled, 1000)
        with pytest.raises(RequestTimeout):
            client.receive(stalled, 300)
        release.set()
        after = client.invoke(get_route_request("after"), 2000)  # the stalled frame, then this one
        assert type(after.body) is bytes and after.body == big  # invoke gives bytes
        sent = get_route_request("sent")
        client.send(sent, 2000)
        received = client.receive(sent, 2000).body  # receive: a view of the buffer the frame was read into
        assert type(received) is memoryview and received == big
        assert server.accepted == 1
    server.close()


def test_send_then_receive_keeps_responses_that_arrive_early() -> None:
    server = ScriptedServer(lambda conn, request: reply(conn, request, remark=request.ext_fields.get("topic"),
                                                        body=b"x" * 300_000))
    with BlockingRemotingClient(server.addr) as client:
        first, second = get_route_request("first"), get_route_request("second")
        client.send(first, 1000)
        client.send(second, 1000)
        time.sleep(0.2)  # both answers are in the socket
        assert client.receive(second, 1000).remark == "second"  # read past the first one, which is kept
        assert client.receive(first, 1000).remark == "first"
        with pytest.raises(ConnectionClosed):
            client.receive(first, 1000)  # taken already: nothing is awaited under that opaque
    server.close()


def test_a_peer_closing_in_the_middle_of_a_big_frame_is_connection_closed() -> None:
    def script(conn: socket.socket, request: RemotingCommand) -> None:
        frame = command.encode(create_response(request, ResponseCode.SUCCESS, body=b"y" * 1_000_000))
        conn.sendall(frame[:500_000])
        conn.shutdown(socket.SHUT_RDWR)

    server = ScriptedServer(script)
    with BlockingRemotingClient(server.addr) as client, pytest.raises(ConnectionClosed):
        client.invoke(get_route_request("t"), 2000)
    server.close()


def test_reconnects_after_the_server_closed_the_connection() -> None:
    def script(conn: socket.socket, request: RemotingCommand) -> None:
        reply(conn, request)
        if request.ext_fields.get("topic") == "bye":
            conn.shutdown(socket.SHUT_RDWR)

    server = ScriptedServer(script)
    client = BlockingRemotingClient(server.addr)
    client.invoke(get_route_request("bye"), 1000)
    time.sleep(0.1)
    assert client.invoke(get_route_request("again"), 1000).code == ResponseCode.SUCCESS
    assert server.accepted == 2
    client.close()
    server.close()


def test_a_connection_dying_mid_call_is_connection_closed() -> None:
    def script(conn: socket.socket, request: RemotingCommand) -> None:
        conn.shutdown(socket.SHUT_RDWR)

    server = ScriptedServer(script)
    with BlockingRemotingClient(server.addr) as client, pytest.raises(ConnectionClosed):
        client.invoke(get_route_request("x"), 1000)
    server.close()


def test_server_requests_are_answered_not_supported() -> None:
    def script(conn: socket.socket, request: RemotingCommand) -> None:
        conn.sendall(command.encode(create_request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "g"})))
        time.sleep(0.1)
        reply(conn, request)

    server = ScriptedServer(script)
    with BlockingRemotingClient(server.addr) as client:
        assert client.invoke(get_route_request("x"), 1000).code == ResponseCode.SUCCESS
        time.sleep(0.1)
    answers = [c for c in server.received if c.is_response]
    assert answers and answers[0].code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    server.close()


def test_oneway_and_connect_failure() -> None:
    server = ScriptedServer(lambda conn, request: None)
    with BlockingRemotingClient(server.addr) as client:
        client.invoke_oneway(create_request(RequestCode.UPDATE_CONSUMER_OFFSET, {"a": "b"}))
        time.sleep(0.1)
    assert server.received and server.received[0].is_oneway
    server.close()
    with socket.socket() as unused:  # bound, never listening: connections are refused
        unused.bind(("127.0.0.1", 0))
        client = BlockingRemotingClient(f"127.0.0.1:{unused.getsockname()[1]}", connect_timeout_ms=500)
        with pytest.raises(RemotingConnectError):
            client.connect()
        assert not client.connected


# -- the facade on the fakes -------------------------------------------------------------------------------------------


@pytest.fixture
def fakes() -> Iterator[tuple[FakeNamesrv, FakeBroker, FakeBroker]]:
    loop = LoopThread()
    namesrv = loop.run(FakeNamesrv().start())
    a, b = loop.run(FakeBroker("broker-a").start()), loop.run(FakeBroker("broker-b").start())
    namesrv.routes["T"] = [a, b]
    namesrv.routes["TBW102"] = [a]
    yield namesrv, a, b
    for server in (a, b, namesrv):
        loop.run(server.stop())
    loop.close()


def test_facade_routes_offsets_pull_and_send(fakes) -> None:
    namesrv, a, b = fakes
    with BlockingClient(namesrv.addr) as client:
        queues = client.fetch_message_queues("T")
        assert [(q.broker_name, q.queue_id) for q in queues] == [("broker-a", i) for i in range(4)] + [
            ("broker-b", i) for i in range(4)]
        mq = MessageQueue("T", "broker-b", 2)
        result = client.send_batch([Message("T", b"m%d" % i) for i in range(3)], mq)
        assert result.message_queue == mq and result.queue_offset == 0
        assert client.send(Message("T", b"one"), mq).queue_offset == 3
        assert (client.get_min_offset(mq), client.get_max_offset(mq)) == (0, 4)
        raw = client.pull(mq, 1, 10)
        assert raw.status is PullStatus.FOUND and raw.messages == [] and raw.body == b"".join(b.queues[("T", 2)][1:])
        decoded = client.pull(mq, 0, 2, decode=True)
        assert [m.body for m in decoded.messages] == [b"m0", b"m1"] and decoded.next_begin_offset == 2
        assert client.pull(mq, 4, 2).status is PullStatus.NO_NEW_MSG
        assert client.search_offset(mq, 0) == 0
        assert len(namesrv.route_queries) == 1  # one route query, then the cache


def test_facade_send_without_queue_retries_elsewhere(fakes) -> None:
    namesrv, a, b = fakes
    a.fail_sends = ResponseCode.SYSTEM_BUSY
    with BlockingClient(namesrv.addr) as client:
        brokers = {client.send(Message("T", b"x")).message_queue.broker_name for _ in range(6)}
        assert brokers == {"broker-b"}
        assert len(a.requests_of(RequestCode.SEND_MESSAGE_V2)) == 1


def test_facade_unknown_topic(fakes) -> None:
    namesrv, a, b = fakes
    with BlockingClient(namesrv.addr) as client:
        assert client.send(Message("Fresh", b"x")).message_queue.broker_name == "broker-a"  # TBW102's broker
        assert a.requests_of(RequestCode.SEND_MESSAGE_V2)[-1].ext_fields["c"] == "TBW102"
        with pytest.raises(MQClientError) as info:
            client.fetch_message_queues("Fresh")  # the stand-in is for sending only
        assert info.value.code == ResponseCode.TOPIC_NOT_EXIST
