"""RemotingExchange without any I/O: two exchanges talk through byte strings, as h11's tests pair two connections."""

from __future__ import annotations

import pytest

from broker.common.errors import LocalProtocolError, MalformedCommand, MalformedFrame
from broker.remoting.codes import RequestCode, ResponseCode
from broker.remoting.command import CommandFlag, RemotingCommand, create_request, create_response, decode, encode
from broker.remoting.exchange import (
    OnewayReceived,
    RemotingExchange,
    RequestReceived,
    ResponseReceived,
    not_supported_response,
    request_timeout,
)
from broker.remoting.frame import FrameDecoder
from tests.unit.remoting.remoting_helpers import raw_frame


def joined(parts) -> bytes:
    return b"".join(parts)


def test_a_response_comes_back_with_the_context_of_its_request() -> None:
    client, server = RemotingExchange(peer="server"), RemotingExchange(peer="client")
    request = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
    data = joined(client.send_request(request, context="call 1"))
    assert (client.pending, client.is_pending(request.opaque)) == (1, True)
    [event] = server.receive_data(data)
    assert type(event) is RequestReceived and event.request == request
    reply = joined(server.answer(event.request, create_response(event.request, ResponseCode.SUCCESS, "ok")))
    [event] = client.receive_data(reply)
    assert type(event) is ResponseReceived
    assert (event.context, event.response.remark, event.response.opaque) == ("call 1", "ok", request.opaque)
    assert client.pending == 0 and not client.is_pending(request.opaque)


def test_responses_find_their_requests_in_any_order_and_across_any_cut_of_the_bytes() -> None:
    client = RemotingExchange()
    requests = [create_request(RequestCode.PULL_MESSAGE, {"i": str(i)}) for i in range(5)]
    for i, request in enumerate(requests):
        client.send_request(request, context=i)
    answers = b"".join(encode(create_response(r, ResponseCode.SUCCESS, body=b"%d" % i * 300))
                       for i, r in reversed(list(enumerate(requests))))
    events = [event for byte in range(len(answers)) for event in client.receive_data(answers[byte:byte + 1])]
    assert [(e.context, e.response.body[:1]) for e in events] == [(i, b"%d" % i) for i in reversed(range(5))]
    assert client.pending == 0


def test_an_abandoned_call_drops_its_late_response() -> None:
    client = RemotingExchange()
    late, kept = create_request(RequestCode.PULL_MESSAGE), create_request(RequestCode.PULL_MESSAGE)
    client.send_request(late, "late")
    client.expect_response(kept.opaque, "kept")  # framed elsewhere (a RequestTemplate)
    assert client.abandon(late.opaque) == "late" and client.abandon(late.opaque) is None
    data = encode(create_response(late, ResponseCode.SUCCESS)) + encode(create_response(kept, ResponseCode.SUCCESS))
    assert [e.context for e in client.receive_data(data)] == ["kept"]


def test_abandon_all_hands_back_every_context_oldest_first() -> None:
    client = RemotingExchange()
    for i in range(3):
        client.send_request(create_request(RequestCode.HEART_BEAT), i)
    assert client.abandon_all() == [0, 1, 2] and client.pending == 0


def test_local_mistakes_are_refused_and_nothing_is_remembered() -> None:
    client = RemotingExchange(max_frame_length=1024)
    request = create_request(RequestCode.SEND_MESSAGE)
    client.send_request(request)
    with pytest.raises(LocalProtocolError, match=f"opaque {request.opaque} is already waiting"):
        client.send_request(request)
    with pytest.raises(LocalProtocolError, match=f"opaque {request.opaque} is already waiting"):
        client.expect_response(request.opaque)
    big = create_request(RequestCode.SEND_MESSAGE, body=bytes(2000))
    with pytest.raises(LocalProtocolError, match="exceeds the maximum frame length 1024"):
        client.send_request(big)
    assert not client.is_pending(big.opaque)
    response = create_response(request, ResponseCode.SUCCESS)
    with pytest.raises(LocalProtocolError, match="sends requests"):
        client.send_request(response)
    with pytest.raises(LocalProtocolError, match="sends requests"):
        client.send_oneway(response)
    with pytest.raises(LocalProtocolError, match="sends responses"):
        client.send_response(request)
    assert client.pending == 1


def test_oneway_sets_the_flag_on_the_frame_only_and_the_peer_sees_a_oneway_event() -> None:
    client, server = RemotingExchange(), RemotingExchange()
    request = create_request(RequestCode.UNREGISTER_CLIENT, {"clientID": "c"})
    [event] = server.receive_data(joined(client.send_oneway(request)))
    assert type(event) is OnewayReceived and event.request.is_oneway and request.flag == 0
    assert client.pending == 0


def test_answer_stamps_the_opaque_and_response_flag_of_the_request() -> None:
    server = RemotingExchange()
    request = RemotingCommand(code=RequestCode.HEART_BEAT, opaque=77)
    [frame] = FrameDecoder().feed(joined(server.answer(request, RemotingCommand(code=ResponseCode.SUCCESS))))
    answer = decode(frame)
    assert (answer.opaque, answer.is_response) == (77, True)


def test_requests_of_the_peer_come_out_in_order_with_responses() -> None:
    """A broker may ask its client (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED) between two responses."""
    client = RemotingExchange()
    mine = create_request(RequestCode.SEND_MESSAGE)
    client.send_request(mine, "send")
    check = create_request(RequestCode.CHECK_TRANSACTION_STATE, {"msgId": "m"})
    notify = RemotingCommand(code=RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, opaque=5, flag=int(CommandFlag.ONEWAY))
    data = encode(check) + encode(notify) + encode(create_response(mine, ResponseCode.SUCCESS))
    assert [type(e) for e in client.receive_data(data)] == [RequestReceived, OnewayReceived, ResponseReceived]
    unsupported = not_supported_response(check)
    assert (unsupported.code, unsupported.remark) == (ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                                      " request type 39 not supported")


def test_a_malformed_frame_raises_after_the_events_before_it() -> None:
    server = RemotingExchange()
    good = RemotingCommand(code=RequestCode.HEART_BEAT, opaque=40)
    seen = []
    with pytest.raises(MalformedFrame):
        for event in server.receive_data(encode(good) + b"\xde\xad\xbe\xef" * 4):
            seen.append(event.request.opaque)
    assert seen == [40]
    with pytest.raises(MalformedFrame):  # the stream has no frame boundary left: it stays broken
        list(server.receive_data(encode(good)))


def test_a_malformed_command_raises_with_its_opaque_after_the_events_before_it() -> None:
    server = RemotingExchange()
    good = RemotingCommand(code=RequestCode.HEART_BEAT, opaque=40)
    seen = []
    with pytest.raises(MalformedCommand) as raised:
        for event in server.receive_data(encode(good) + raw_frame(b'{"opaque":41,"code":"ten"}')):
            seen.append(event.request.opaque)
    assert seen == [40] and raised.value.opaque == 41


def test_a_big_frame_drained_and_restored_stays_in_step() -> None:
    """What a blocking reader does with a pull response: take the begun frame out, read the rest into one buffer,
    and on a timeout give back what it has."""
    client = RemotingExchange()
    request = create_request(RequestCode.PULL_MESSAGE)
    client.send_request(request, "pull")
    frame = encode(create_response(request, ResponseCode.SUCCESS, body=bytes(range(256)) * 4096))
    assert list(client.receive_data(frame[:1000])) == [] and client.missing() == len(frame) - 1000
    head = client.drain()
    client.restore(head + frame[1000:600_000])  # the read stopped there
    assert client.missing() == len(frame) - 600_000
    [event] = client.receive_data(frame[600_000:])
    assert event.context == "pull" and len(event.response.body) == 1 << 20


def test_request_timeout_names_code_opaque_peer_and_time() -> None:
    request = create_request(RequestCode.PULL_MESSAGE)
    error = request_timeout(request, "127.0.0.1:10911", 50)
    assert (error.opaque, error.code) == (request.opaque, RequestCode.PULL_MESSAGE)
    assert str(error) == (f"no response to request code 11 opaque {request.opaque} from 127.0.0.1:10911 "
                          "within 50 ms")
