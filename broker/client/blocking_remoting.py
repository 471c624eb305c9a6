"""BlockingRemotingClient: one remoting connection over a plain socket, for code that cannot run an event loop.

Spark executors, jobs, the local cluster and the benchmarks call brokers and NameServers through it; the asyncio
twin is ``broker.remoting.connection``. Both drive the same sans-IO ``RemotingExchange`` (``remoting/exchange.py``):
it frames the requests and matches the responses; this module owns the socket, the deadlines and the reconnects.

One call at a time per connection (calls from several threads are serialized), with two ways to overlap work:
``send`` then ``receive`` (the source sends its next pull before decoding the last one), and requests framed
elsewhere written by ``send_frames`` and read back by ``read_responses`` (``pipeline.Pipeline``, the sink's).
A response that arrives after its call timed out is dropped when the next call reads. Requests the server sends (a
broker notifying consumers) are answered REQUEST_CODE_NOT_SUPPORTED: a blocking client registers no consumer, so
none should come.

Examples:
    >>> with BlockingRemotingClient("127.0.0.1:9876") as client:  # doctest: +SKIP
    ...     response = client.invoke(create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}))
"""

from __future__ import annotations

import logging
import select
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import replace

from broker.common.errors import ConnectionClosed, ProtocolError, RemotingConnectError
from broker.remoting.command import RemotingCommand
from broker.remoting.exchange import (
    DEFAULT_CONNECT_TIMEOUT_MS,
    DEFAULT_TIMEOUT_MS,
    CloseReason,
    RemotingExchange,
    RequestReceived,
    ResponseReceived,
    not_supported_response,
    parse_address,
    request_timeout,
)
from broker.remoting.frame import DEFAULT_MAX_FRAME_LENGTH
from broker.remoting.signing import SessionCredentials, sign_request

log = logging.getLogger(__name__)

READ_CHUNK = 256 * 1024


class BlockingRemotingClient:
    """One remoting connection to ``address``, used from any thread (calls are serialized).

    The connection's ``RemotingExchange`` (``remoting/exchange.py``) frames the requests and matches the responses;
    this class owns the socket, the deadlines and the reconnects. Each call waiting in the exchange carries who
    waits for it: ``invoke``, ``send`` (whose response ``receive`` takes) or a Pipeline (``send_frames``).

    Examples:
        >>> client = BlockingRemotingClient("127.0.0.1:9876")  # doctest: +SKIP
        >>> response = client.invoke(get_route_request("TopicTest"), 3000)  # client/protocol.py's  # doctest: +SKIP
        >>> client.close()  # doctest: +SKIP
    """

    def __init__(self, address: str, *, connect_timeout_ms: float = DEFAULT_CONNECT_TIMEOUT_MS,
                 max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
                 credentials: SessionCredentials | None = None, source_host: str | None = None) -> None:
        """``credentials``: every request is signed with them (AclClientRPCHook) just before it is framed.
        ``source_host``: the local address to connect from (the one a broker's address checks see), else the
        system's choice."""
        self.address = address
        self.credentials = credentials
        self.source_host = source_host
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
                source = (self.source_host, 0) if self.source_host else None
                sock = socket.create_connection((self.host, self.port), self.connect_timeout_ms / 1000, source)
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
            data = b"".join(exchange.send_request(self.signed(request), _INVOKED))
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
            data = b"".join(exchange.send_request(self.signed(request), _SENT))
            try:
                self._send(sock, data, deadline, request, timeout_ms)
            except BaseException:
                exchange.abandon(request.opaque)
                raise

    def receive(self, request: RemotingCommand, timeout_ms: float = DEFAULT_TIMEOUT_MS) -> RemotingCommand:
        """The response to a request given to ``send``. The body of a big one (a pull's records) is a memoryview of
        the buffer its frame was read into, not a copy; ``invoke`` always gives bytes."""
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
            self._send(sock, b"".join(self._exchange.send_oneway(self.signed(request))), deadline, request,
                       timeout_ms)

    def signed(self, request: RemotingCommand) -> RemotingCommand:
        """``request`` as it is framed: every ext field set, then signed when there are credentials (the signature
        covers what is sent, so nothing may change after this). A signed request keeps its opaque."""
        return request if self.credentials is None else sign_request(request, self.credentials)

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
        exchange = self._exchange
        receive = exchange.receive_data
        try:
            missing = exchange.missing()
            if missing > READ_CHUNK:
                data = self._read_frame_rest(sock, missing, deadline, request, timeout_ms)
                receive = exchange.receive_owned  # nothing else holds that buffer: bodies are views of it
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
        try:
            events = list(receive(data))
        except ProtocolError as err:  # MalformedFrame / MalformedCommand: the stream is lost
            self._drop()
            raise ConnectionClosed(CloseReason.PROTOCOL_ERROR, f"{self.address}: {err}") from err
        owned = []
        for event in events:
            if type(event) is ResponseReceived:
                if event.context is _SENT:  # ``receive`` hands out a body as it is, a view or bytes
                    self._early[event.response.opaque] = event.response
                elif event.context is owner:
                    owned.append(_with_bytes_body(event.response))
                else:
                    log.debug("dropping response opaque %s from %s: its call is over", event.response.opaque,
                              self.address)
            elif type(event) is RequestReceived:  # a oneway one (OnewayReceived) is not answered
                sock.sendall(b"".join(exchange.answer(event.request, not_supported_response(event.request))))
        return owned


def _with_bytes_body(response: RemotingCommand) -> RemotingCommand:
    """``response`` with its body as bytes: ``invoke`` and a Pipeline keep giving bytes (JSON decoders and message
    decoders take them), only ``receive`` hands out a view of the frame's buffer."""
    body = response.body
    return response if type(body) is not memoryview else replace(response, body=bytes(body))


_INVOKED = "invoke"  # who waits for a response, as the context of its call in the exchange; a Pipeline is itself
_SENT = "send"
