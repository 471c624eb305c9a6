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
from broker.remoting.signing import SessionCredentials, sign_request, signature_matches
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


def test_a_signed_template_frame_is_the_frame_of_the_request_the_hook_signs() -> None:
    """What RequestTemplate signs from its spliced values is what ``sign_request`` (AclClientRPCHook) signs, for a
    fixed field sorting between the open ones, a security token and a body; the unsigned frame is unchanged."""
    fields = {"producerGroup": "g", "msgId": None, "b": "fixed", "transactionId": None}
    for credentials in (SessionCredentials("ak", "sk"), SessionCredentials("ak2", "sk2", "token")):
        template = RequestTemplate(RequestCode.END_TRANSACTION, fields, credentials)
        assert template.open_fields == ["msgId", "transactionId", "Signature"]
        values = ("0A0B", "tx-é")
        opaque, frame = template.frame(values, b"body")
        plain = replace(create_request(RequestCode.END_TRANSACTION, {"producerGroup": "g", "msgId": values[0],
                                                                     "b": "fixed", "transactionId": values[1]},
                                       b"body"), opaque=opaque)
        signed = sign_request(plain, credentials)
        assert frame == command.encode(signed)
        assert signature_matches(signed, credentials.secret_key)
    assert RequestTemplate(RequestCode.END_TRANSACTION, fields).open_fields == ["msgId", "transactionId"]


def test_the_blocking_client_signs_what_it_frames_and_nothing_without_keys() -> None:
    """invoke, invoke_oneway and a Pipeline's submit all go out signed with the client's credentials."""
    seen: list[RemotingCommand] = []

    def script(conn: socket.socket, request: RemotingCommand) -> None:
        seen.append(request)
        if not request.is_oneway:
            reply(conn, request)

    server = ScriptedServer(script)
    keys = SessionCredentials("ak", "sk")
    with BlockingRemotingClient(server.addr, credentials=keys) as client:
        client.invoke(get_route_request("T1"), 2000)
        client.invoke_oneway(get_route_request("T2"), 2000)
        pipe = Pipeline(client, window=2, timeout_ms=2000)
        pipe.submit(get_route_request("T3"), "t3")
        pipe.drain()
    with BlockingRemotingClient(server.addr) as client:
        client.invoke(get_route_request("T4"), 2000)
    server.close()
    seen.sort(key=lambda r: r.ext_fields["topic"])
    assert [r.ext_fields["topic"] for r in seen] == ["T1", "T2", "T3", "T4"]
    assert all(r.ext_fields["AccessKey"] == "ak" and signature_matches(r, "sk") for r in seen[:3])
    assert "AccessKey" not in seen[3].ext_fields and "Signature" not in seen[3].ext_fields


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
