"""The synchronous client for code that cannot run an event loop: Spark executors, scripts, the connector.

Plain sockets, one request in flight per connection, on the same sans-IO pieces as the asyncio client: frames from
``remoting/frame.py``, commands from ``remoting/command.py``, requests and responses from ``client/protocol.py``.

* ``BlockingRemotingClient``: one connection to one address; ``invoke`` with a timeout, reconnecting when the peer
  closed it since the last call. A response that arrives after its call timed out is dropped when the next call
  reads. Requests the server sends (a broker notifying consumers) are answered REQUEST_CODE_NOT_SUPPORTED: a
  blocking client registers no consumer, so none should come.
* Functions for one call each (``get_route``, ``get_min_offset``, ``get_max_offset``, ``search_offset``, ``pull``,
  ``send_one``, ``send_batch``), given a client for the right address.
* ``BlockingClient``: the facade the connector uses, with NameServer addresses, a route cache (30 s) and one
  connection per broker.

Examples:
    >>> with BlockingClient("127.0.0.1:9876") as client:  # doctest: +SKIP
    ...     queues = client.fetch_message_queues("TopicTest")
    ...     end = client.get_max_offset(queues[0])
    ...     result = client.pull(queues[0], 0, 32)  # result.body: the stored records, undecoded
    ...     client.send_batch([Message("TopicTest", b"a"), Message("TopicTest", b"b")], queues[0])
"""

from __future__ import annotations

import logging
import select
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import orjson

from broker.client import protocol
from broker.client.fault import MQFaultStrategy
from broker.client.message import (
    Message,
    MessageBatch,
    MessageQueue,
    PullResult,
    SendResult,
    check_message,
    compress_body,
    set_uniq_id,
)
from broker.client.route import TopicPublishInfo, TopicRouteData, subscribe_queues
from broker.common.errors import (
    ClientErrorCode,
    ConnectionClosed,
    MQBrokerError,
    MQClientError,
    ProtocolError,
    RemotingConnectError,
    RemotingError,
)
from broker.common.validation import AUTO_CREATE_TOPIC_KEY_TOPIC, DEFAULT_CONSUMER_GROUP, DEFAULT_PRODUCER_GROUP
from broker.remoting import command
from broker.remoting.client import DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_TIMEOUT_MS, parse_address
from broker.remoting.codes import ResponseCode, SerializeType
from broker.remoting.command import RemotingCommand
from broker.remoting.connection import CloseReason
from broker.remoting.exchange import (
    RemotingExchange,
    RequestReceived,
    ResponseReceived,
    not_supported_response,
    request_timeout,
)
from broker.remoting.frame import DEFAULT_MAX_FRAME_LENGTH, PREFIX_SIZE, encode_frame

log = logging.getLogger(__name__)

READ_CHUNK = 256 * 1024
ROUTE_TTL_S = 30.0  # pollNameServerInterval


class BlockingRemotingClient:
    """One remoting connection to ``address``, used from any thread (calls are serialized).

    The connection's ``RemotingExchange`` (``remoting/exchange.py``) frames the requests and matches the responses;
    this class owns the socket, the deadlines and the reconnects. Each call waiting in the exchange carries who
    waits for it: ``invoke``, ``send`` (whose response ``receive`` takes) or a Pipeline (``send_frames``).

    Examples:
        >>> client = BlockingRemotingClient("127.0.0.1:9876")  # doctest: +SKIP
        >>> response = client.invoke(protocol.get_route_request("TopicTest"), 3000)  # doctest: +SKIP
        >>> client.close()  # doctest: +SKIP
    """

    def __init__(self, address: str, *, connect_timeout_ms: float = DEFAULT_CONNECT_TIMEOUT_MS,
                 max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        self.address = address
        self.host, self.port = parse_address(address)
        self.connect_timeout_ms = connect_timeout_ms
        self.max_frame_length = max_frame_length
        self._sock: socket.socket | None = None
        self._exchange = RemotingExchange(max_frame_length, peer=address)
        self._lock = threading.Lock()
        self._early: dict[int, RemotingCommand] = {}  # responses to ``send`` read while waiting for another one

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def connect(self) -> None:
        with self._lock:
            self._ensure_connected()

    def _ensure_connected(self) -> socket.socket:
        if self._sock is not None and self._peer_closed(self._sock):
            self._drop()
        if self._sock is None:
            try:
                sock = socket.create_connection((self.host, self.port), self.connect_timeout_ms / 1000)
            except OSError as err:
                raise RemotingConnectError(self.address, str(err) or type(err).__name__) from err
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            # the calls of the old connection went with it
            self._sock, self._exchange = sock, RemotingExchange(self.max_frame_length, peer=self.address)
            self._early.clear()
        return self._sock

    @staticmethod
    def _peer_closed(sock: socket.socket) -> bool:
        """True when the peer closed (or reset) the connection since our last call: a readable socket with no bytes.
        Bytes waiting (a late response) are left for the next read."""
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            return bool(readable) and not sock.recv(1, socket.MSG_PEEK)
        except (OSError, ValueError):
            return True

    def _drop(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None

    def close(self) -> None:
        with self._lock:
            self._drop()

    def __enter__(self) -> BlockingRemotingClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def invoke(self, request: RemotingCommand, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> RemotingCommand:
        """Send ``request`` and wait for its response. Raises RemotingConnectError, RequestTimeout or
        ConnectionClosed; after a ConnectionClosed the next call reconnects."""
        deadline = time.monotonic() + timeout_ms / 1000
        with self._lock:
            sock = self._ensure_connected()
            exchange = self._exchange
            data = b"".join(exchange.send_request(request, _INVOKED))
            try:
                self._send(sock, data, deadline, request, timeout_ms)
                return self._receive(sock, request, deadline, timeout_ms)
            finally:
                exchange.abandon(request.opaque)  # after a timeout: its late response is dropped

    def send(self, request: RemotingCommand, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> None:
        """The first half of ``invoke``: the caller works while the peer answers, then takes the response with
        ``receive`` (the source sends its next pull before decoding the last one)."""
        deadline = time.monotonic() + timeout_ms / 1000
        with self._lock:
            sock = self._ensure_connected()
            exchange = self._exchange
            data = b"".join(exchange.send_request(request, _SENT))
            try:
                self._send(sock, data, deadline, request, timeout_ms)
            except BaseException:
                exchange.abandon(request.opaque)
                raise

    def receive(self, request: RemotingCommand, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> RemotingCommand:
        """The response to a request given to ``send``."""
        deadline = time.monotonic() + timeout_ms / 1000
        with self._lock:
            try:
                early = self._early.pop(request.opaque, None)
                if early is not None:
                    return early
                if self._sock is None or not self._exchange.is_pending(request.opaque):
                    raise ConnectionClosed(CloseReason.CONNECTION_BROKEN,
                                           f"{self.address}: the connection that sent request {request.opaque} "
                                           "is gone")
                return self._receive(self._sock, request, deadline, timeout_ms)
            finally:
                self._exchange.abandon(request.opaque)

    def _receive(self, sock: socket.socket, request: RemotingCommand, deadline: float,
                 timeout_ms: float) -> RemotingCommand:
        """Read until the response to ``request`` (an ``invoke``'s, or a ``send``'s kept with the early ones)."""
        while True:
            invoked = self._read(sock, _INVOKED, deadline, request, timeout_ms)
            if invoked:
                return invoked[0]  # one invoke at a time: it is ``request``'s
            early = self._early.pop(request.opaque, None)
            if early is not None:
                return early

    def invoke_oneway(self, request: RemotingCommand, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> None:
        deadline = time.monotonic() + timeout_ms / 1000
        with self._lock:
            sock = self._ensure_connected()
            self._send(sock, b"".join(self._exchange.send_oneway(request)), deadline, request, timeout_ms)

    # -- for callers that frame their own requests (Pipeline) ------------------------------------------------------

    def send_frames(self, data: bytes, opaques: Sequence[int], owner: object,
                    timeout_ms: float = DEFAULT_TIMEOUT_MS) -> float:
        """Write requests framed already (``RequestTemplate.frame``), one or many back to back, whose responses
        ``read_responses(owner, ...)`` will return. Returns their deadline (``time.monotonic()`` seconds)."""
        deadline = time.monotonic() + timeout_ms / 1000
        with self._lock:
            sock = self._ensure_connected()
            exchange = self._exchange
            for opaque in opaques:
                exchange.expect_response(opaque, owner)
            try:
                self._send(sock, data, deadline, RemotingCommand(code=0, opaque=opaques[0]), timeout_ms)
            except BaseException:
                for opaque in opaques:
                    exchange.abandon(opaque)
                raise
        return deadline

    def read_responses(self, owner: object, deadline: float, waiting_for: RemotingCommand,
                       timeout_ms: float) -> list[RemotingCommand]:
        """The responses to ``owner``'s requests among the next bytes from the peer (maybe none); blocks until
        some bytes come, or raises RequestTimeout naming ``waiting_for`` once ``deadline`` has passed."""
        with self._lock:
            sock = self._sock
            if sock is None:
                raise ConnectionClosed(CloseReason.CONNECTION_BROKEN, f"{self.address}: not connected")
            return self._read(sock, owner, deadline, waiting_for, timeout_ms)

    # -- the socket ------------------------------------------------------------------------------------------------

    def _send(self, sock: socket.socket, data: bytes, deadline: float, request: RemotingCommand,
              timeout_ms: float) -> None:
        try:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            sock.sendall(data)
        except TimeoutError:
            self._drop()  # part of a frame may be out: the stream is no longer in sync
            raise request_timeout(request, self.address, timeout_ms) from None
        except OSError as err:
            self._drop()
            raise ConnectionClosed(CloseReason.CONNECTION_BROKEN, f"{self.address}: {err}") from err

    def _read_frame_rest(self, sock: socket.socket, missing: int, deadline: float, request: RemotingCommand,
                         timeout_ms: float) -> bytearray:
        """The exchange's partial frame and its ``missing`` bytes, read into one buffer; on a timeout the bytes
        read so far go back to the exchange, so the stream stays in step for the next call."""
        head = self._exchange.drain()
        data = bytearray(len(head) + missing)
        data[:len(head)] = head
        received = len(head)
        view = memoryview(data)
        try:
            while received < len(data):
                sock.settimeout(self._remaining(deadline, request, timeout_ms))
                got = sock.recv_into(view[received:])
                if not got:
                    view.release()
                    self._drop()
                    raise ConnectionClosed(CloseReason.PEER_CLOSED, f"{self.address} (in the middle of a frame)")
                received += got
        except TimeoutError:
            view.release()
            del data[received:]
            self._exchange.restore(data)
            raise
        view.release()
        del data[received:]
        return data

    @staticmethod
    def _remaining(deadline: float, request: RemotingCommand, timeout_ms: float) -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        return remaining

    def _read(self, sock: socket.socket, owner: object, deadline: float, request: RemotingCommand,
              timeout_ms: float) -> list[RemotingCommand]:
        """The responses to ``owner``'s calls in the next chunk of bytes. Responses to ``send`` are kept for
        ``receive`` whoever reads them; those of calls that are over are dropped; requests of the server are
        answered REQUEST_CODE_NOT_SUPPORTED on the way. The rest of a frame bigger than READ_CHUNK (a pull
        response) is read straight into one buffer of its size, which the decoder cuts without collecting it
        first."""
        try:
            missing = self._exchange.missing()
            if missing > READ_CHUNK:
                data = self._read_frame_rest(sock, missing, deadline, request, timeout_ms)
            else:
                sock.settimeout(self._remaining(deadline, request, timeout_ms))
                data = sock.recv(READ_CHUNK)
        except TimeoutError:
            raise request_timeout(request, self.address, timeout_ms) from None
        except OSError as err:
            self._drop()
            raise ConnectionClosed(CloseReason.CONNECTION_BROKEN, f"{self.address}: {err}") from err
        if not data:
            self._drop()
            raise ConnectionClosed(CloseReason.PEER_CLOSED, self.address)
        exchange = self._exchange
        try:
            events = list(exchange.receive_data(data))
        except ProtocolError as err:  # MalformedFrame / MalformedCommand: the stream is lost
            self._drop()
            raise ConnectionClosed(CloseReason.PROTOCOL_ERROR, f"{self.address}: {err}") from err
        owned = []
        for event in events:
            if type(event) is ResponseReceived:
                if event.context is owner:
                    owned.append(event.response)
                elif event.context is _SENT:
                    self._early[event.response.opaque] = event.response
                else:
                    log.debug("dropping response opaque %s from %s: its call is over", event.response.opaque,
                              self.address)
            elif type(event) is RequestReceived:  # a oneway one (OnewayReceived) is not answered
                sock.sendall(b"".join(exchange.answer(event.request, not_supported_response(event.request))))
        return owned


_INVOKED = "invoke"  # who waits for a response, as the context of its call in the exchange; a Pipeline is itself
_SENT = "send"


# -- one call each -----------------------------------------------------------------------------------------------------


def get_route(namesrv_addr: str | Sequence[BlockingRemotingClient], topic: str,
              timeout_ms: float = DEFAULT_TIMEOUT_MS) -> TopicRouteData:
    """GET_ROUTEINFO_BY_TOPIC from the first NameServer that answers ("a:9876;b:9876", or open clients).
    MQClientError with the NameServer's code (TOPIC_NOT_EXIST) when the topic has no route."""
    if isinstance(namesrv_addr, str):
        clients = [BlockingRemotingClient(a.strip()) for a in namesrv_addr.split(";") if a.strip()]
        try:
            return get_route(clients, topic, timeout_ms)
        finally:
            for client in clients:
                client.close()
    if not namesrv_addr:
        raise MQClientError(ClientErrorCode.NO_NAME_SERVER_EXCEPTION, "No name server address, please set it.")
    error: Exception | None = None
    for client in namesrv_addr:
        try:
            return protocol.parse_route_response(client.invoke(protocol.get_route_request(topic), timeout_ms))
        except RemotingError as err:
            error = err
    raise MQClientError(ClientErrorCode.NO_NAME_SERVER_EXCEPTION, f"no NameServer answered: {error}") from error


def get_min_offset(client: BlockingRemotingClient, mq: MessageQueue, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> int:
    return protocol.parse_offset_response(client.invoke(protocol.min_offset_request(mq), timeout_ms), client.address)


def get_max_offset(client: BlockingRemotingClient, mq: MessageQueue, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> int:
    """The queue's max offset: one past its last message (what a consumer reads up to)."""
    return protocol.parse_offset_response(client.invoke(protocol.max_offset_request(mq), timeout_ms), client.address)


def search_offset(client: BlockingRemotingClient, mq: MessageQueue, timestamp_ms: int, boundary_type: str = "LOWER",
                  timeout_ms: float = DEFAULT_TIMEOUT_MS) -> int:
    request = protocol.search_offset_request(mq, timestamp_ms, boundary_type)
    return protocol.parse_offset_response(client.invoke(request, timeout_ms), client.address)


def pull(client: BlockingRemotingClient, group: str, mq: MessageQueue, offset: int, max_nums: int, *,
         sub_expression: str = "*", timeout_ms: float = DEFAULT_TIMEOUT_MS, decode: bool = False) -> PullResult:
    """One PULL_MESSAGE without suspending; ``result.body`` holds the records, ``result.messages`` is filled only
    with ``decode`` (then tag collisions are filtered out as Java's client does)."""
    subscription = protocol.build_subscription_data(mq.topic, sub_expression)
    request = protocol.pull_message_request(group, mq, offset, max_nums, subscription=subscription)
    result = protocol.parse_pull_response(client.invoke(request, timeout_ms), client.address)
    if decode:
        protocol.decode_pull_result(result, mq, subscription)
    return result


def send_one(client: BlockingRemotingClient, producer_group: str, msg: Message, mq: MessageQueue, *,
             timeout_ms: float = DEFAULT_TIMEOUT_MS, compress_over: int = 4096) -> SendResult:
    """SEND_MESSAGE_V2 of one message to ``mq`` (the client must be connected to its broker's master)."""
    check_message(msg)
    set_uniq_id(msg)
    body, sys_flag = msg.body, 0
    if len(body) >= compress_over:
        body, sys_flag = compress_body(body)
    header = protocol.send_message_header(producer_group, msg, mq, sys_flag, batch=False)
    response = client.invoke(protocol.send_message_request(header, body), timeout_ms)
    return protocol.parse_send_response(response, mq.topic, mq.broker_name, client.address, [msg.uniq_id or ""])


def send_batch(client: BlockingRemotingClient, producer_group: str, msgs: Sequence[Message] | MessageBatch,
               mq: MessageQueue, *, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> SendResult:
    """SEND_BATCH_MESSAGE: all of ``msgs`` into ``mq`` with consecutive offsets."""
    batch = msgs if isinstance(msgs, MessageBatch) else MessageBatch(msgs)
    check_message(batch)
    header = protocol.send_message_header(producer_group, batch, mq, 0, batch=True)
    response = client.invoke(protocol.send_message_request(header, batch.body, batch=True), timeout_ms)
    return protocol.parse_send_response(response, mq.topic, mq.broker_name, client.address,
                                        protocol.uniq_ids_of(batch.messages))


# -- the facade --------------------------------------------------------------------------------------------------------


class BlockingClient:
    """NameServers, a route cache and one connection per broker, for synchronous callers. Thread-safe.

    Arguments:
        namesrv_addr: "host:port;host:port".
        timeout_ms: the default timeout of every call.
        producer_group / consumer_group: the groups named in send and pull requests.
    """

    def __init__(self, namesrv_addr: str, *, timeout_ms: float = DEFAULT_TIMEOUT_MS,
                 producer_group: str = DEFAULT_PRODUCER_GROUP, consumer_group: str = DEFAULT_CONSUMER_GROUP,
                 retry_times_when_send_failed: int = 2, default_topic_queue_nums: int = 4,
                 route_ttl_s: float = ROUTE_TTL_S) -> None:
        self.namesrv_addrs = [a.strip() for a in namesrv_addr.split(";") if a.strip()]
        self.timeout_ms = timeout_ms
        self.producer_group = producer_group
        self.consumer_group = consumer_group
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.default_topic_queue_nums = default_topic_queue_nums
        self.route_ttl_s = route_ttl_s
        self.fault_strategy = MQFaultStrategy()
        self._routes: dict[str, tuple[float, TopicRouteData]] = {}
        self._publish: dict[str, TopicPublishInfo] = {}
        self._default_publish: dict[str, tuple[float, TopicPublishInfo]] = {}
        self._broker_addrs: dict[str, dict[int, str]] = {}
        self._clients: dict[str, BlockingRemotingClient] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def client(self, address: str) -> BlockingRemotingClient:
        with self._lock:
            client = self._clients.get(address)
            if client is None:
                client = self._clients[address] = BlockingRemotingClient(address)
            return client

    # -- routes -------------------------------------------------------------------------------------------------

    def get_route(self, topic: str, *, refresh: bool = False) -> TopicRouteData:
        """The topic's route, from the cache while younger than ``route_ttl_s``."""
        cached = self._routes.get(topic)
        if cached is not None and not refresh and time.monotonic() - cached[0] < self.route_ttl_s:
            return cached[1]
        route = get_route([self.client(a) for a in self.namesrv_addrs], topic, self.timeout_ms)
        self._cache_route(topic, route)
        return route

    def _publish_info(self, topic: str) -> TopicPublishInfo:
        """The queues to send to. For a topic the NameServer does not know: TBW102's brokers with
        ``default_topic_queue_nums`` queues each, so the broker creates the topic (as the producer does); that
        stand-in is kept for ``route_ttl_s`` and never shown as the topic's route."""
        stand_in = self._default_publish.get(topic)
        if stand_in is not None and time.monotonic() - stand_in[0] < self.route_ttl_s:
            return stand_in[1]
        try:
            self.get_route(topic)
            return self._publish[topic]
        except MQClientError as err:
            if err.code != ResponseCode.TOPIC_NOT_EXIST:
                raise
        default = self.get_route(AUTO_CREATE_TOPIC_KEY_TOPIC).with_queue_nums(self.default_topic_queue_nums)
        info = TopicPublishInfo.from_route(topic, default)
        self._default_publish[topic] = (time.monotonic(), info)
        return info

    def _cache_route(self, topic: str, route: TopicRouteData) -> None:
        with self._lock:
            self._routes[topic] = (time.monotonic(), route)
            self._publish[topic] = TopicPublishInfo.from_route(topic, route)
            for broker in route.broker_datas:
                self._broker_addrs[broker.broker_name] = dict(broker.broker_addrs)

    def fetch_message_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic``, sorted."""
        return subscribe_queues(topic, self.get_route(topic))

    def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        return list(self._publish_info(topic).message_queues)

    def broker_addr(self, mq: MessageQueue) -> str:
        """The master address of ``mq``'s broker, refreshing the route once if the broker is unknown."""
        for refresh in (False, True):
            if refresh or mq.broker_name not in self._broker_addrs:
                self.get_route(mq.topic, refresh=refresh)
            addr = self._broker_addrs.get(mq.broker_name, {}).get(0)
            if addr is not None:
                return addr
        raise MQClientError(ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION, f"The broker[{mq.broker_name}] not exist")

    def _broker(self, mq: MessageQueue) -> BlockingRemotingClient:
        return self.client(self.broker_addr(mq))

    # -- reads --------------------------------------------------------------------------------------------------

    def get_min_offset(self, mq: MessageQueue) -> int:
        return get_min_offset(self._broker(mq), mq, self.timeout_ms)

    def get_max_offset(self, mq: MessageQueue) -> int:
        return get_max_offset(self._broker(mq), mq, self.timeout_ms)

    def search_offset(self, mq: MessageQueue, timestamp_ms: int, boundary_type: str = "LOWER") -> int:
        return search_offset(self._broker(mq), mq, timestamp_ms, boundary_type, self.timeout_ms)

    def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, *, sub_expression: str = "*",
             group: str | None = None, decode: bool = False, timeout_ms: float | None = None) -> PullResult:
        return pull(self._broker(mq), group or self.consumer_group, mq, offset, max_nums,
                    sub_expression=sub_expression, timeout_ms=timeout_ms or self.timeout_ms, decode=decode)

    # -- writes -------------------------------------------------------------------------------------------------

    def send(self, msg: Message, mq: MessageQueue | None = None) -> SendResult:
        """One message, to ``mq`` or (without it) to a queue chosen as the producer does, with its retries."""
        return self._send(msg, mq, lambda client, queue: send_one(client, self.producer_group, msg, queue,
                                                                   timeout_ms=self.timeout_ms))

    def send_batch(self, msgs: Sequence[Message], mq: MessageQueue | None = None) -> SendResult:
        batch = MessageBatch(msgs)
        return self._send(batch, mq, lambda client, queue: send_batch(client, self.producer_group, batch, queue,
                                                                       timeout_ms=self.timeout_ms))

    def _send(self, msg: Message, mq: MessageQueue | None,
              call: Callable[[BlockingRemotingClient, MessageQueue], SendResult]) -> SendResult:
        if mq is not None:
            return call(self._broker(mq), mq)
        info = self._publish_info(msg.topic)
        if not info.ok():
            raise MQClientError(ClientErrorCode.NOT_FOUND_TOPIC_EXCEPTION, f"No route info of this topic: {msg.topic}")
        last: MessageQueue | None = None
        error: Exception | None = None
        for attempt in range(1 + self.retry_times_when_send_failed):
            queue = self.fault_strategy.select_one_message_queue(info, last.broker_name if last else None,
                                                                 attempt > 0)
            if queue is None:
                break
            last, begin = queue, time.monotonic()
            try:
                result = call(self._broker(queue), queue)
            except (RemotingError, MQClientError, MQBrokerError) as err:
                failed_broker = isinstance(err, (RemotingError, MQBrokerError))
                self.fault_strategy.update_fault_item(queue.broker_name, int((time.monotonic() - begin) * 1000),
                                                      isolation=failed_broker,
                                                      reachable=not isinstance(err, MQBrokerError))
                if isinstance(err, MQBrokerError) and not err.retriable:
                    raise
                error = err
                continue
            self.fault_strategy.update_fault_item(queue.broker_name, int((time.monotonic() - begin) * 1000),
                                                  isolation=False, reachable=True)
            return result
        raise MQClientError(ClientErrorCode.CONNECT_BROKER_EXCEPTION,
                            f"Send failed, Topic: {msg.topic}, last error: {error}") from error


# -- pipelined requests and topic creation (the Spark sink, connector/sink.py) ---------------------------------------


class RequestTemplate:
    """A request whose frame is written once, with some extFields left open: for callers that send many requests
    alike (the sink's half messages and END_TRANSACTIONs). ``command.encode`` writes the JSON header of a sample
    with a mark in each open field; each request then splices its opaque and its open values (JSON strings) in with
    one ``%`` format, about 3 us instead of the 30 us of building, checking and encoding a RemotingCommand.

    Examples:
        >>> template = RequestTemplate(RequestCode.END_TRANSACTION, {"producerGroup": "g", "msgId": None})
        >>> opaque, frame = template.frame(("0A0B",))  # doctest: +SKIP
    """

    def __init__(self, code: int, ext_fields: dict[str, str | None]) -> None:
        self.code = int(code)
        self.open_fields = [name for name, value in ext_fields.items() if value is None]
        marks = {name: f"@@open{i}@@" for i, name in enumerate(self.open_fields)}
        sample = replace(command.create_request(code, {k: marks.get(k, v) for k, v in ext_fields.items()}),
                         opaque=_OPAQUE_MARK)
        header = command.encode(sample)[PREFIX_SIZE:]
        cuts = [b'"' + marks[name].encode() + b'"' for name in self.open_fields] + [b"%d" % _OPAQUE_MARK]
        fmt, pos = [], 0
        for cut in cuts:  # the header writes extFields (in insertion order) before opaque
            at = header.index(cut, pos)
            fmt += (header[pos:at].replace(b"%", b"%%"), b"%d" if cut[0] != 34 else b"%b")
            pos = at + len(cut)
        fmt.append(header[pos:].replace(b"%", b"%%"))
        self._format = b"".join(fmt)

    def frame(self, values: Sequence[str], body: bytes = b"") -> tuple[int, bytes]:
        """A fresh opaque and the whole frame with ``values`` (the open fields, in order) and ``body``."""
        opaque = command.next_opaque()
        header = self._format % (*map(_dumps_str, values), opaque)
        return opaque, encode_frame(SerializeType.JSON, header, body)


_OPAQUE_MARK = -2147480647  # an opaque no sample ever gets: what RequestTemplate cuts the header at


def _dumps_str(value: str) -> bytes:
    """A JSON string as the header encoder writes it (orjson: raw UTF-8, control characters escaped)."""
    return orjson.dumps(value)


class Pipeline:
    """Up to ``window`` requests in flight on one connection: ``submit`` sends at once and returns the calls that
    completed meanwhile; ``drain`` waits for the rest. Requests that must not overtake each other (END_TRANSACTION
    of one queue, which the broker may run on several threads) share an ``order_key``: one of them is in flight at
    a time. ``submit_frames`` writes many framed requests (RequestTemplate) with one ``sendall`` once the window has
    room for all of them, so the broker reads them in one chunk too. Half messages cannot be batched (RocketMQ
    refuses transactional batches), so this is how a sink keeps a broker busy without a thread per request.
    Single-threaded: one Pipeline per connection and caller.

    Examples:
        >>> pipe = Pipeline(client.client(addr), window=64)  # doctest: +SKIP
        >>> done = pipe.submit(request, context="row 1")  # [(context, response), ...] of finished calls
        >>> done += pipe.submit_frames([(opaque, frame, "row 2"), ...])
        >>> done += pipe.drain()
    """

    def __init__(self, client: BlockingRemotingClient, *, window: int = 64,
                 timeout_ms: float = DEFAULT_TIMEOUT_MS) -> None:
        self.client = client
        self.window = max(1, window)
        self.timeout_ms = timeout_ms
        self._pending: dict[int, tuple[object, object | None, float]] = {}  # opaque -> (context, order key, deadline)
        self._busy_keys: set[object] = set()

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def submit(self, request: RemotingCommand, context: object = None,
               order_key: object | None = None) -> list[tuple[object, RemotingCommand]]:
        return self.submit_frame(request.opaque, command.encode(request), context, order_key)

    def submit_frame(self, opaque: int, frame: bytes, context: object = None,
                     order_key: object | None = None) -> list[tuple[object, RemotingCommand]]:
        """``submit`` of a request framed already (RequestTemplate.frame)."""
        done: list[tuple[object, RemotingCommand]] = []
        while len(self._pending) >= self.window or (order_key is not None and order_key in self._busy_keys):
            done += self._read_some()
        deadline = self.client.send_frames(frame, (opaque,), self, self.timeout_ms)
        self._pending[opaque] = (context, order_key, deadline)
        if order_key is not None:
            self._busy_keys.add(order_key)
        return done

    def submit_frames(self, frames: Sequence[tuple[int, bytes, object]]) -> list[tuple[object, RemotingCommand]]:
        """``(opaque, frame, context)`` each, unordered, written together (at most ``window`` of them)."""
        if not frames:
            return []
        if len(frames) > self.window:
            raise ValueError(f"{len(frames)} frames do not fit a window of {self.window}")
        done: list[tuple[object, RemotingCommand]] = []
        while len(self._pending) + len(frames) > self.window:
            done += self._read_some()
        data = frames[0][1] if len(frames) == 1 else b"".join([frame for _, frame, _ in frames])
        deadline = self.client.send_frames(data, [opaque for opaque, _, _ in frames], self, self.timeout_ms)
        pending = self._pending
        for opaque, _, context in frames:
            pending[opaque] = (context, None, deadline)
        return done

    def drain(self) -> list[tuple[object, RemotingCommand]]:
        done: list[tuple[object, RemotingCommand]] = []
        while self._pending:
            done += self._read_some()
        return done

    def _read_some(self) -> list[tuple[object, RemotingCommand]]:
        opaque = next(iter(self._pending))
        _, _, deadline = self._pending[opaque]
        client = self.client
        if not client.connected:
            raise ConnectionClosed(CloseReason.CONNECTION_BROKEN, f"{client.address}: closed with "
                                                                   f"{len(self._pending)} requests in flight")
        stub = RemotingCommand(code=0, opaque=opaque)  # what a timeout names
        responses = client.read_responses(self, deadline, stub, self.timeout_ms)
        done = []
        pending, busy = self._pending, self._busy_keys
        for response in responses:
            entry = pending.pop(response.opaque, None)
            if entry is None:  # sent before a reconnect: its entry timed out already
                log.debug("dropping response opaque %s from %s: not in this pipeline", response.opaque, client.address)
                continue
            context, order_key, _ = entry
            if order_key is not None:
                busy.discard(order_key)
            done.append((context, response))
        return done


def create_topic(client: BlockingRemotingClient, topic: str, *, queue_nums: int = 1, perm: int = 6,
                 timeout_ms: float = DEFAULT_TIMEOUT_MS) -> None:
    """UPDATE_AND_CREATE_TOPIC on the broker ``client`` talks to (as mqadmin updateTopic -b does); the broker then
    registers the topic with its NameServers."""
    from broker.remoting.codes import RequestCode
    from broker.remoting.headers import CreateTopicRequestHeader

    header = CreateTopicRequestHeader(topic=topic, default_topic=AUTO_CREATE_TOPIC_KEY_TOPIC,
                                      read_queue_nums=queue_nums, write_queue_nums=queue_nums, perm=perm,
                                      topic_filter_type="SINGLE_TAG")
    request = command.create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
    protocol.expect_success(client.invoke(request, timeout_ms), client.address)
