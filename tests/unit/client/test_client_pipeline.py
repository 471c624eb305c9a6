"""RequestTemplate's frames against command.encode's, and Pipeline's window, order keys and timeouts against a raw
server (the sink's path: connector/sink.py sends half messages and END_TRANSACTIONs this way)."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import replace

import pytest

from broker.client.blocking import BlockingRemotingClient, Pipeline, RequestTemplate
from broker.client.protocol import get_route_request
from broker.common.errors import RequestTimeout
from broker.remoting import command
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import RemotingCommand, create_request
from tests.unit.client.test_client_blocking import ScriptedServer, reply


def test_a_template_frame_is_the_frame_command_encode_writes() -> None:
    template = RequestTemplate(RequestCode.END_TRANSACTION, {"producerGroup": "g%", "msgId": None, "k": "v",
                                                             "transactionId": None})
    assert template.open_fields == ["msgId", "transactionId"]
    values = ("0A0B", 'quote " and \\ and \n and é')
    opaque, frame = template.frame(values, b"body")
    expected = replace(create_request(RequestCode.END_TRANSACTION, {"producerGroup": "g%", "msgId": values[0],
                                                                    "k": "v", "transactionId": values[1]},
                                      b"body"), opaque=opaque)
    assert frame == command.encode(expected)
    assert template.frame(values)[0] != opaque  # a fresh opaque each time


def answering(delays: dict[str, float], log: list[str]) -> ScriptedServer:
    """Answers each request after ``delays[topic]`` seconds (in a thread of its own), logging what it saw when."""

    def script(conn: socket.socket, request: RemotingCommand) -> None:
        topic = request.ext_fields.get("topic", "")
        log.append(f"received {topic}")

        def later() -> None:
            time.sleep(delays.get(topic, 0))
            log.append(f"answered {topic}")
            reply(conn, request, remark=topic)

        threading.Thread(target=later, daemon=True).start()

    return ScriptedServer(script)


def test_requests_of_one_order_key_are_in_flight_one_at_a_time() -> None:
    log: list[str] = []
    server = answering({"a1": 0.2}, log)
    with BlockingRemotingClient(server.addr) as client:
        pipe = Pipeline(client, window=8, timeout_ms=2000)
        done = pipe.submit(get_route_request("a1"), "a1", order_key="queue a")
        done += pipe.submit(get_route_request("b1"), "b1", order_key="queue b")  # another key: sent at once
        done += pipe.submit(get_route_request("a2"), "a2", order_key="queue a")  # waits for a1's answer
        done += pipe.drain()
        assert sorted((context, response.remark) for context, response in done) == [
            ("a1", "a1"), ("a2", "a2"), ("b1", "b1")]
        assert pipe.in_flight == 0
    assert log.index("received a2") > log.index("answered a1")
    assert log.index("received b1") < log.index("answered a1")
    server.close()


def test_the_window_bounds_the_requests_in_flight() -> None:
    log: list[str] = []
    server = answering({f"t{i}": 0.05 for i in range(12)}, log)
    with BlockingRemotingClient(server.addr) as client:
        pipe = Pipeline(client, window=4, timeout_ms=2000)
        template = RequestTemplate(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": None})
        frames = [(*template.frame((f"t{i}",)), i) for i in range(12)]
        done = []
        for start in range(0, 12, 2):
            done += pipe.submit_frames(frames[start:start + 2])
            assert pipe.in_flight <= 4
        done += pipe.drain()
        assert sorted(context for context, _ in done) == list(range(12))
        assert all(response.remark == f"t{context}" for context, response in done)
        with pytest.raises(ValueError, match="do not fit a window of 4"):
            pipe.submit_frames(frames[:5])
    in_flight = peak = 0
    for line in log:
        in_flight += 1 if line.startswith("received") else -1
        peak = max(peak, in_flight)
    assert peak <= 4
    server.close()


def test_a_pipeline_times_out_naming_the_oldest_request() -> None:
    server = ScriptedServer(lambda conn, request: None)  # never answers
    with BlockingRemotingClient(server.addr) as client:
        pipe = Pipeline(client, window=2, timeout_ms=200)
        first = get_route_request("first")
        pipe.submit(first, "first")
        began = time.monotonic()
        with pytest.raises(RequestTimeout) as raised:
            pipe.drain()
        assert raised.value.opaque == first.opaque and 0.1 < time.monotonic() - began < 2
    server.close()


def test_responses_to_send_read_by_a_pipeline_are_kept_for_receive() -> None:
    """One connection, two users: the responses each one reads for the other are not lost."""
    server = ScriptedServer(lambda conn, request: reply(conn, request, remark=request.ext_fields.get("topic")))
    with BlockingRemotingClient(server.addr) as client:
        pull = get_route_request("pull")
        client.send(pull, 1000)
        time.sleep(0.1)  # its answer is in the socket before the pipeline's
        pipe = Pipeline(client, window=4, timeout_ms=1000)
        pipe.submit(get_route_request("piped"), "piped")
        assert [(c, r.remark) for c, r in pipe.drain()] == [("piped", "piped")]
        assert client.receive(pull, 1000).remark == "pull"
        assert client.invoke(get_route_request("after"), 1000).code == ResponseCode.SUCCESS
    server.close()
