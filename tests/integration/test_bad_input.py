"""Bad input against our running broker and NameServer processes, over plain sockets.

What Java's servers do, and so ours must: bytes that are no remoting frame (random bytes, a negative or oversized
length field, a header longer than its frame, an unknown serialize type, a header that is not JSON, a ROCKETMQ
header whose lengths do not add up) close the connection (ours first answers SYSTEM_ERROR with opaque -1 or the
request's); a well-formed request that cannot be served gets an error response on a connection that stays open:
REQUEST_CODE_NOT_SUPPORTED for an unknown code, SYSTEM_ERROR for a header field of the wrong type or a missing one,
MESSAGE_ILLEGAL for a body over maxMessageSize, INVALID_PARAMETER with TopicValidator's remark for an illegal topic
name ('../x', 300 characters, control characters, empty).

``test_barrage_leaves_service_and_store_intact`` sends all of it while another client keeps sending and pulling
through the same servers; afterwards every message stored before is readable, no message of a truncated frame was
stored, and no directory named after an illegal topic exists under (or beside) the store root.
"""

from __future__ import annotations

import contextlib
import random
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from broker.client import BlockingClient, Message, MessageQueue
from broker.client.protocol import send_message_header, send_message_request
from broker.remoting import command
from broker.remoting.client import parse_address
from broker.remoting.codes import RequestCode, ResponseCode, SerializeType
from broker.remoting.command import ROCKETMQ_PREFIX, RemotingCommand, create_request
from broker.remoting.frame import DEFAULT_MAX_FRAME_LENGTH, FRAME_PREFIX, FrameDecoder, encode_frame, header_marker
from tests.integration.cluster import ServerProcess, start_broker, start_namesrv

TOPIC = "BadInputTopic"
GROUP = "bad_input_group"
SEEDED = 40
READ_TIMEOUT_S = 5.0
ILLEGAL_TOPICS = ["../x", "../../x", "a" * 300, "a\x01b", "tab\tname", ""]
LEGAL_TOPIC = re.compile(r"^[%|a-zA-Z0-9_-]{1,127}$")  # TopicValidator (longer only for %RETRY%/%DLQ%)
STORE_ENTRIES = {"abort", "checkpoint", "commitlog", "config", "consumequeue", "index", "lock"}
TRUNCATED_BODY = b"truncated-frame-never-stored"
STEPS_PER_BYSTANDER_OP = 10  # the barrage waits for one more round of the other client's work every this many steps


def topic_remark(topic: str) -> str:
    """TopicValidator.validateTopic's remark for an illegal topic (the broker answers INVALID_PARAMETER with it)."""
    if not topic:
        return "The specified topic is blank."
    if not re.fullmatch(r"[%|a-zA-Z0-9_-]+", topic):
        return f"The specified topic: {topic}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    return f"The specified topic: {topic}, is longer than topic max length: 127"


# -- a raw connection -------------------------------------------------------------------------------------------------


class RawConnection:
    """A plain socket, to see exactly what a server does with the bytes it gets."""

    def __init__(self, addr: str) -> None:
        self.sock = socket.create_connection(parse_address(addr), READ_TIMEOUT_S)
        self.decoder = FrameDecoder()
        self.received: list[RemotingCommand] = []
        self.closed = False

    def send(self, data: bytes) -> None:
        """Send ``data``; a server that closed on the first bad bytes may reset the rest: that counts as closed."""
        try:
            self.sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            self.closed = True

    def hang_up_writes(self) -> None:
        """Half-close: the server reads EOF after what was sent (and may well have closed already)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def _read(self, deadline: float) -> None:
        self.sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            data = b""
        except TimeoutError:
            return
        if not data:
            self.closed = True
            return
        self.received += [command.decode(frame) for frame in self.decoder.feed(data)]

    def response(self) -> RemotingCommand:
        """The next response; fails if the server closes or stays silent instead."""
        deadline = time.monotonic() + READ_TIMEOUT_S
        while not self.received:
            assert not self.closed, "the server closed the connection instead of answering"
            assert time.monotonic() < deadline, f"no response within {READ_TIMEOUT_S}s"
            self._read(deadline)
        return self.received.pop(0)

    def until_closed(self) -> list[RemotingCommand]:
        """Everything the server sends until it closes; fails if it keeps the connection open."""
        deadline = time.monotonic() + READ_TIMEOUT_S
        while not self.closed:
            assert time.monotonic() < deadline, f"the server kept the connection open for {READ_TIMEOUT_S}s"
            self._read(deadline)
        return self.received

    def request(self, request: RemotingCommand) -> RemotingCommand:
        self.send(command.encode(request))
        response = self.response()
        assert response.is_response and response.opaque == request.opaque, response
        return response

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def assert_errors_only(responses: list[RemotingCommand]) -> None:
    for response in responses:
        assert response.is_response and response.code != ResponseCode.SUCCESS, response


def still_serves(conn: RawConnection, probe: RemotingCommand | None = None) -> None:
    """The connection that just got an error answers an ordinary request (by default a broker's GET_MAX_OFFSET)."""
    response = conn.request(probe or max_offset_request(TOPIC, 0))
    assert response.code == ResponseCode.SUCCESS, response


# -- requests, good and bad -------------------------------------------------------------------------------------------


def max_offset_request(topic: str, queue_id: int | str) -> RemotingCommand:
    return create_request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)})


def send_request(topic: str = TOPIC, body: bytes = b"hello", *, queue_id: int = 0, properties: dict[str, str] | None
                 = None) -> RemotingCommand:
    """SEND_MESSAGE_V2 as the client builds it, without the client's own checks (which would refuse most of ours)."""
    msg = Message(TOPIC, body, properties=properties)
    msg.topic = topic
    header = send_message_header("bad_input_producer", msg, MessageQueue(topic, "broker-a", queue_id), 0, batch=False)
    return send_message_request(header, body)


def pull_request(topic: str = TOPIC, queue_id: str = "0") -> RemotingCommand:
    return create_request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": GROUP, "topic": topic, "queueId": queue_id, "queueOffset": "0", "maxMsgNums": "1",
        "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*", "subVersion": "0"})


def create_topic_request(topic: str) -> RemotingCommand:
    return create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6",
        "topicFilterType": "SINGLE_TAG"})


def with_ext(request: RemotingCommand, **ext: str) -> RemotingCommand:
    return replace(request, ext_fields={**request.ext_fields, **ext})


def rocketmq_header(remark_length: int, remark: bytes, ext_length: int, ext: bytes) -> bytes:
    """A ROCKETMQ request header whose length fields say what the test wants, whatever follows them."""
    prefix = ROCKETMQ_PREFIX.pack(RequestCode.GET_MAX_OFFSET, 0, 0, 77, 0)
    return b"".join((prefix, remark_length.to_bytes(4, "big", signed=True), remark,
                     ext_length.to_bytes(4, "big", signed=True), ext))


def frame_with_length(length: int, marker: int, rest: bytes = b"") -> bytes:
    return FRAME_PREFIX.pack(length, marker) + rest


# Bytes that are no remoting frame: the server closes the connection without waiting for more.
MALFORMED: dict[str, bytes] = {
    "negative length": frame_with_length(-5, 0),
    "length below the marker": frame_with_length(3, 0),
    "oversized length": frame_with_length(2**31 - 1, 0),
    "one byte over the max frame": frame_with_length(DEFAULT_MAX_FRAME_LENGTH - 3, 0),
    "header length beyond the frame": frame_with_length(10, header_marker(SerializeType.JSON, 100), b"x" * 10),
    "unknown serialize type": frame_with_length(4, 7 << 24),
    "bad JSON": encode_frame(SerializeType.JSON, b'{"code":10,'),
    "JSON array header": encode_frame(SerializeType.JSON, b"[1,2,3]"),
    "JSON code not a number": encode_frame(SerializeType.JSON, b'{"code":"ten","opaque":1}'),
    "ROCKETMQ header too short": encode_frame(SerializeType.ROCKETMQ, b"\x00\x1e\x00"),
    "ROCKETMQ remark past the end": encode_frame(SerializeType.ROCKETMQ, rocketmq_header(1000, b"ab", 0, b"")),
    "ROCKETMQ extFields length wrong": encode_frame(SerializeType.ROCKETMQ, rocketmq_header(0, b"", 50, b"ab")),
    "ROCKETMQ negative key length": encode_frame(
        SerializeType.ROCKETMQ, rocketmq_header(0, b"", 6, b"\xff\xfe" + (1).to_bytes(4, "big"))),
}


@dataclass(frozen=True, slots=True)
class Refused:
    """A well-formed request the server must refuse with ``code`` (and ``remark``, when given), keeping the
    connection open."""

    request: RemotingCommand
    code: int
    remark: str | None = None
    namesrv: bool = False


def refused_requests() -> dict[str, Refused]:
    not_supported = " request type 9999 not supported"
    cases = {
        "unknown code": Refused(create_request(9999), ResponseCode.REQUEST_CODE_NOT_SUPPORTED, not_supported),
        "unknown code, ROCKETMQ header": Refused(create_request(9999, serialize_type=SerializeType.ROCKETMQ),
                                                 ResponseCode.REQUEST_CODE_NOT_SUPPORTED, not_supported),
        "queueId abc in GET_MAX_OFFSET": Refused(max_offset_request(TOPIC, "abc"), ResponseCode.SYSTEM_ERROR),
        "queueId abc in PULL_MESSAGE": Refused(pull_request(queue_id="abc"), ResponseCode.SYSTEM_ERROR),
        "queueId abc in SEND_MESSAGE_V2": Refused(with_ext(send_request(), e="abc"), ResponseCode.SYSTEM_ERROR),
        "bornTimestamp 1e3 in SEND_MESSAGE_V2": Refused(with_ext(send_request(), g="1e3"), ResponseCode.SYSTEM_ERROR),
        "topic missing in GET_MAX_OFFSET": Refused(create_request(RequestCode.GET_MAX_OFFSET, {"queueId": "0"}),
                                                   ResponseCode.SYSTEM_ERROR),
        "body over maxMessageSize": Refused(send_request(body=b"b" * (4 * 1024 * 1024 + 1)),
                                            ResponseCode.MESSAGE_ILLEGAL),
        "properties over 32 KiB": Refused(send_request(properties={"KEYS": "k" * 40_000}),
                                          ResponseCode.MESSAGE_ILLEGAL),
        "heartbeat body not JSON": Refused(create_request(RequestCode.HEART_BEAT, body=b"{not json"),
                                           ResponseCode.SYSTEM_ERROR),
        "namesrv: unknown code": Refused(create_request(9999), ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                         not_supported, namesrv=True),
        "namesrv: topic missing": Refused(create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC),
                                          ResponseCode.SYSTEM_ERROR, namesrv=True),
        "namesrv: route of ../x": Refused(create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "../x"}),
                                          ResponseCode.TOPIC_NOT_EXIST, namesrv=True),
        "namesrv: brokerId abc": Refused(create_request(RequestCode.REGISTER_BROKER, {
            "brokerName": "b", "brokerAddr": "127.0.0.1:1", "clusterName": "C", "haServerAddr": "127.0.0.1:2",
            "brokerId": "abc"}), ResponseCode.SYSTEM_ERROR, namesrv=True),
        "namesrv: register body not JSON": Refused(create_request(RequestCode.REGISTER_BROKER, {
            "brokerName": "b", "brokerAddr": "127.0.0.1:1", "clusterName": "C", "haServerAddr": "127.0.0.1:2",
            "brokerId": "0"}, b"\x00junk"), ResponseCode.SYSTEM_ERROR, namesrv=True),
    }
    for topic in ILLEGAL_TOPICS:
        name = repr(topic[:12] + ("..." if len(topic) > 12 else ""))
        cases[f"send to {name}"] = Refused(send_request(topic), ResponseCode.INVALID_PARAMETER, topic_remark(topic))
        cases[f"create {name}"] = Refused(create_topic_request(topic), ResponseCode.INVALID_PARAMETER,
                                          topic_remark(topic))
        cases[f"pull from {name}"] = Refused(pull_request(topic), ResponseCode.TOPIC_NOT_EXIST)
    return cases


REFUSED = refused_requests()


# -- the servers ------------------------------------------------------------------------------------------------------


@dataclass
class Servers:
    root: Path
    namesrv: ServerProcess
    broker: ServerProcess
    seeded: list[tuple[MessageQueue, int, bytes]] = field(default_factory=list)

    @property
    def store(self) -> Path:
        return self.root / "store"

    def addr(self, case: Refused) -> str:
        return self.namesrv.addr if case.namesrv else self.broker.addr


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """One NameServer and one broker for the module, with SEEDED messages stored before any bad input."""
    root = tmp_path_factory.mktemp("bad-input")
    with start_namesrv(root / "namesrv") as namesrv, \
            start_broker(root / "broker", namesrv.addr, store_dir=root / "store") as broker:
        found = Servers(root, namesrv, broker)
        with BlockingClient(namesrv.addr) as client:
            for i in range(SEEDED):
                body = b"seeded-%d" % i
                result = client.send(Message(TOPIC, body, keys=f"seed{i}"))
                found.seeded.append((result.message_queue, result.queue_offset, body))
        yield found


# -- one case each ----------------------------------------------------------------------------------------------------


def run_malformed(addr: str, data: bytes) -> None:
    with RawConnection(addr) as conn:
        conn.send(data)
        assert_errors_only(conn.until_closed())


def run_refused(addr: str, case: Refused) -> None:
    with RawConnection(addr) as conn:
        response = conn.request(case.request)
        assert response.code == case.code, (response.code, response.remark)
        if case.remark is not None:
            assert response.remark == case.remark
        still_serves(conn, create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}) if case.namesrv
                     else None)


def run_random_bytes(addr: str, seed: int) -> None:
    """Random bytes, then our side hangs up its writes: any answer is an error, and the server closes."""
    rng = random.Random(seed)
    with RawConnection(addr) as conn:
        conn.send(rng.randbytes(rng.choice([1, 7, 8, 100, 4096, 65536])))
        conn.hang_up_writes()
        assert_errors_only(conn.until_closed())


def run_truncated(addr: str) -> None:
    """A SEND_MESSAGE_V2 frame cut 5 bytes short, then a hang-up: nothing to answer, and nothing may be stored."""
    frame = command.encode(send_request(body=TRUNCATED_BODY))
    with RawConnection(addr) as conn:
        conn.send(frame[: len(frame) - 5])


def run_valid_then_garbage(addr: str) -> None:
    """A request answered as usual, then bytes that are no frame on the same connection: closed."""
    with RawConnection(addr) as conn:
        still_serves(conn)
        conn.send(b"\xde\xad\xbe\xef" * 4)
        assert_errors_only(conn.until_closed())


def run_largest_frame(addr: str) -> None:
    """A frame of exactly the maximum length is read whole and refused for its body (MESSAGE_ILLEGAL)."""
    request = send_request(body=b"")
    size = len(command.encode(request))
    request = replace(request, body=b"b" * (DEFAULT_MAX_FRAME_LENGTH - size))
    with RawConnection(addr) as conn:
        response = conn.request(request)
        assert response.code == ResponseCode.MESSAGE_ILLEGAL, response
        still_serves(conn)


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_frame_closes_the_connection(servers: Servers, name: str) -> None:
    run_malformed(servers.broker.addr, MALFORMED[name])


@pytest.mark.parametrize("name", ["negative length", "oversized length", "bad JSON", "ROCKETMQ remark past the end"])
def test_namesrv_closes_on_malformed_frame(servers: Servers, name: str) -> None:
    run_malformed(servers.namesrv.addr, MALFORMED[name])


@pytest.mark.parametrize("name", list(REFUSED))
def test_bad_request_gets_an_error_response(servers: Servers, name: str) -> None:
    run_refused(servers.addr(REFUSED[name]), REFUSED[name])


@pytest.mark.parametrize("seed", range(6))
def test_random_bytes(servers: Servers, seed: int) -> None:
    run_random_bytes(servers.broker.addr, seed)
    run_random_bytes(servers.namesrv.addr, seed)


def test_truncated_frame_then_close(servers: Servers) -> None:
    run_truncated(servers.broker.addr)
    with RawConnection(servers.broker.addr) as conn:
        still_serves(conn)


def test_garbage_after_a_good_request(servers: Servers) -> None:
    run_valid_then_garbage(servers.broker.addr)


def test_frame_of_exactly_the_maximum_length(servers: Servers) -> None:
    run_largest_frame(servers.broker.addr)


# -- all of it at once ------------------------------------------------------------------------------------------------


class Bystander(threading.Thread):
    """Another client at ordinary work the whole time: send one message, pull it back, refresh the route."""

    def __init__(self, namesrv_addr: str) -> None:
        super().__init__(name="bystander", daemon=True)
        self.namesrv_addr = namesrv_addr
        self.sent: list[tuple[MessageQueue, int, bytes]] = []
        self.errors: list[Exception] = []
        self.done = threading.Event()

    def run(self) -> None:
        mq = MessageQueue(TOPIC, "broker-a", 3)
        with BlockingClient(self.namesrv_addr, consumer_group=GROUP) as client:
            i = 0
            while not self.done.is_set():
                body = b"bystander-%d" % i
                try:
                    result = client.send(Message(TOPIC, body), mq)
                    assert self.pull_back(client, mq, result.queue_offset) == body
                    if i % 10 == 0:
                        client.get_route(TOPIC, refresh=True)
                except Exception as err:  # reported by the test thread
                    self.errors.append(err)
                    return
                self.sent.append((mq, result.queue_offset, body))
                i += 1
                time.sleep(0.002)


    def wait_for(self, ops: int) -> None:
        deadline = time.monotonic() + READ_TIMEOUT_S
        while len(self.sent) < ops and not self.errors:
            assert self.is_alive() and time.monotonic() < deadline, f"the bystander is stuck at {len(self.sent)} ops"
            time.sleep(0.001)

    @staticmethod
    def pull_back(client: BlockingClient, mq: MessageQueue, offset: int) -> bytes:
        """The body at ``offset``: the ConsumeQueue is written just after the ack (Java's ReputMessageService
        dispatches asynchronously too), so a pull right after the send may still find nothing."""
        deadline = time.monotonic() + READ_TIMEOUT_S
        while True:
            pulled = client.pull(mq, offset, 1, decode=True)
            if pulled.messages or time.monotonic() > deadline:
                return pulled.messages[0].body if pulled.messages else b""
            time.sleep(0.002)


def barrage(servers: Servers) -> list[Callable[[], None]]:
    broker, namesrv = servers.broker.addr, servers.namesrv.addr
    steps: list[Callable[[], None]] = []
    for data in MALFORMED.values():
        steps += [lambda d=data: run_malformed(broker, d), lambda d=data: run_malformed(namesrv, d)]
    steps += [lambda c=case: run_refused(servers.addr(c), c) for case in REFUSED.values()]
    steps += [lambda a=addr, s=seed: run_random_bytes(a, s) for seed in range(20) for addr in (broker, namesrv)]
    steps += [lambda: run_truncated(broker), lambda: run_truncated(namesrv), lambda: run_valid_then_garbage(broker),
              lambda: run_largest_frame(broker)]
    # Reads of illegal topics are answered (offset 0, nothing found, as Java does) but must create nothing.
    for topic in ILLEGAL_TOPICS:
        steps.append(lambda t=topic: run_read(broker, max_offset_request(t, 0)))
        steps.append(lambda t=topic: run_read(broker, create_request(RequestCode.QUERY_MESSAGE, {
            "topic": t, "key": "k", "maxNum": "32", "beginTimestamp": "0", "endTimestamp": str(2**62)})))
    return steps


def run_read(addr: str, request: RemotingCommand) -> None:
    with RawConnection(addr) as conn:
        conn.request(request)


def test_barrage_leaves_service_and_store_intact(servers: Servers) -> None:
    beside_store = set(servers.root.iterdir())
    bystander = Bystander(servers.namesrv.addr)
    bystander.start()
    try:
        for i, step in enumerate(barrage(servers)):
            step()
            assert not bystander.errors, bystander.errors
            if i % STEPS_PER_BYSTANDER_OP == 0:
                bystander.wait_for(len(bystander.sent) + 1)  # it works while the bad input flows, not just after
        bystander.wait_for(len(bystander.sent) + 5)
    finally:
        bystander.done.set()
        bystander.join(30)
    assert not bystander.errors, bystander.errors
    assert servers.broker.alive() and servers.namesrv.alive()

    with BlockingClient(servers.namesrv.addr, consumer_group=GROUP) as client:
        stored: dict[tuple[MessageQueue, int], bytes] = {}
        for mq in client.fetch_message_queues(TOPIC):
            offset = 0
            while offset < client.get_max_offset(mq):
                result = client.pull(mq, offset, 32, decode=True)
                stored |= {(mq, m.queue_offset): m.body for m in result.messages}
                offset = result.next_begin_offset
    for mq, offset, body in servers.seeded + bystander.sent:
        assert stored.get((mq, offset)) == body, (mq, offset, body)
    assert TRUNCATED_BODY not in stored.values()

    assert set(servers.root.iterdir()) == beside_store, "something was created beside the store"
    assert {p.name for p in servers.store.iterdir()} <= STORE_ENTRIES
    for topic_dir in (servers.store / "consumequeue").iterdir():
        assert LEGAL_TOPIC.fullmatch(topic_dir.name), topic_dir
        assert all(q.name.isdigit() for q in topic_dir.iterdir()), topic_dir
    for path in servers.root.rglob("*"):
        assert path.name != "x" and path.name.isprintable(), f"{path} is named after an illegal topic"
