"""RemotingServer: accepts remoting connections and dispatches each request to the processor for its code.

The role of Java's ``NettyRemotingServer``: a processor table keyed by request code, a default processor, the
REQUEST_CODE_NOT_SUPPORTED answer when neither applies, and the SYSTEM_BUSY answer when the processor rejects requests
for now (``NettyRequestProcessor.rejectRequest``: a slave's send processor always does). Each request runs in its own
task (``connection.py``), the asyncio stand-in for Java's per-processor executors. The server keeps every live
connection, so the broker can send requests to clients (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED) and so
``stop()`` closes them all.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any

from broker.remoting.codes import ResponseCode
from broker.remoting.command import RemotingCommand, create_response
from broker.remoting.connection import (
    DEFAULT_MAX_CONCURRENT_REQUESTS,
    READ_CHUNK,
    CloseReason,
    RemotingConnection,
    is_eager,
    not_supported_response,
)
from broker.remoting.frame import DEFAULT_MAX_FRAME_LENGTH
from broker.remoting.stream import start_server

log = logging.getLogger(__name__)

Processor = Callable[[RemotingConnection, RemotingCommand], Awaitable[RemotingCommand | None]]
"""``NettyRequestProcessor.processRequest``: the response, or None when there is none to write (yet)."""

RequestPipeline = Callable[[RemotingConnection, RemotingCommand], RemotingCommand | None]
"""Java's ``RequestPipeline``: runs before the processor; a response it returns (a refusal) is the answer and the
processor never sees the request (the broker's ACL checks, ``AbortProcessException``)."""

RequestObserver = Callable[[RemotingCommand, RemotingCommand, int], None]
"""Told of each answered request: (request, response, ``time.monotonic_ns()`` when the server took it up). The
broker's and the NameServer's rpc latency metric (broker/metrics/remoting.py)."""

RejectRequest = Callable[[], bool]
"""``NettyRequestProcessor.rejectRequest``: True turns the processor's requests away before it sees them."""

REJECT_REQUEST_REMARK = "[REJECTREQUEST]system busy, start flow control for a while"  # NettyRemotingAbstract's


def run_server(main: Coroutine[Any, Any, Any]) -> Any:
    """Run a server's main coroutine on uvloop: it cuts the broker's CPU per sync send by about a third
    (bench/broker_throughput.py). ``RMQ_EVENT_LOOP=asyncio`` keeps the standard loop, e.g. for debugging."""
    if os.environ.get("RMQ_EVENT_LOOP", "uvloop") == "asyncio":
        return asyncio.run(main)
    import uvloop

    return uvloop.run(main)


class RemotingServer:
    """A remoting server on ``host:port`` (port 0 picks a free one; read ``.port`` after ``start()``).

    Examples:
        >>> async def heartbeat(conn, request):
        ...     return create_response(request, ResponseCode.SUCCESS)
        >>> server = RemotingServer("127.0.0.1", 0, processors={RequestCode.HEART_BEAT: heartbeat})
        >>> async with server:  # doctest: +SKIP
        ...     print(server.address)  # "127.0.0.1:41234"
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        processors: Mapping[int, Processor] | None = None,
        default_processor: Processor | None = None,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS,
        on_connection_closed: Callable[[RemotingConnection], None] | None = None,
        also_on: Sequence[int] = (),
    ) -> None:
        """``on_connection_closed`` is Java's ``ChannelEventListener.onChannelClose``: called once per connection,
        synchronously, as it closes for any reason (the broker drops that client's registrations there).
        ``also_on``: more ports served alike (a broker's VIP channel, listenPort - 2)."""
        self.host = host
        self._requested_port = port
        self._also_on = tuple(also_on)
        self._extra_servers: list[asyncio.Server] = []
        self._processors: dict[int, Processor] = {int(code): p for code, p in (processors or {}).items()}
        self._rejects: dict[int, RejectRequest] = {}
        self._eager_codes: set[int] = {code for code, p in self._processors.items() if is_eager(p)}
        self._default_processor = default_processor
        self._default_reject: RejectRequest | None = None
        self.max_frame_length = max_frame_length
        self.max_concurrent_requests = max_concurrent_requests
        self._on_connection_closed = on_connection_closed
        self._server: asyncio.Server | None = None
        self._connections: set[RemotingConnection] = set()
        self._stopping = False
        self._pipeline: RequestPipeline | None = None
        self._observer: RequestObserver | None = None

    def set_request_observer(self, observer: RequestObserver | None) -> None:
        """Tell ``observer`` of every request answered on connections accepted from now on (None: nobody)."""
        self._observer = observer

    def set_request_pipeline(self, pipeline: RequestPipeline | None) -> None:
        """Check every request before its processor (None: no check). Requests the server cannot route are answered
        REQUEST_CODE_NOT_SUPPORTED or SYSTEM_BUSY first, as Java's ``processRequestCommand`` orders it."""
        self._pipeline = pipeline

    def register_processor(self, code: int, processor: Processor, reject_request: RejectRequest | None = None) -> None:
        """Route requests with ``code`` to ``processor``, replacing any earlier one (Java's registerProcessor).
        While ``reject_request()`` is true they are answered SYSTEM_BUSY instead, unseen by the processor."""
        self._processors[int(code)] = processor
        if is_eager(processor):
            self._eager_codes.add(int(code))
        else:
            self._eager_codes.discard(int(code))
        if reject_request is None:
            self._rejects.pop(int(code), None)
        else:
            self._rejects[int(code)] = reject_request

    def register_default_processor(self, processor: Processor | None,
                                   reject_request: RejectRequest | None = None) -> None:
        """Answer every code without its own processor; None restores REQUEST_CODE_NOT_SUPPORTED."""
        self._default_processor = processor
        self._default_reject = reject_request

    def set_connection_closed_listener(self, listener: Callable[[RemotingConnection], None] | None) -> None:
        """Set (or, with None, clear) ``on_connection_closed`` after construction: the broker's client processor
        wires it at registration, when the server already exists."""
        self._on_connection_closed = listener

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("RemotingServer.port is known only after start()")
        return self._server.sockets[0].getsockname()[1]

    @property
    def address(self) -> str:
        """``host:port`` as clients dial it."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def connections(self) -> frozenset[RemotingConnection]:
        """Open connections and closed ones whose last handlers are still running."""
        return frozenset(self._connections)

    async def start(self) -> RemotingServer:
        if self._server is not None:
            raise RuntimeError("RemotingServer already started")
        self._stopping = False
        self._server = await start_server(self._accept, self.host, self._requested_port, limit=READ_CHUNK)
        try:
            for port in self._also_on:
                self._extra_servers.append(await start_server(self._accept, self.host, port, limit=READ_CHUNK))
        except OSError:
            await self.stop()
            raise
        log.info("remoting server listening on %s%s", self.address,
                 "".join(f" and port {p}" for p in self._also_on))
        return self

    async def stop(self) -> None:
        """Stop listening, then close every connection (their pending calls fail with CloseReason.SHUTDOWN)."""
        if self._server is None:
            return
        self._stopping = True
        servers = (self._server, *self._extra_servers)
        for server in servers:
            server.close()
        connections = list(self._connections)
        await asyncio.gather(*(conn.close(CloseReason.SHUTDOWN) for conn in connections))
        await asyncio.gather(*(conn.wait_closed() for conn in connections))
        # Since Python 3.12.1 wait_closed() also waits for every accepted connection to end: close them first.
        for server in servers:
            await server.wait_closed()
        self._extra_servers = []
        self._server = None
        log.info("remoting server on %s:%s stopped", self.host, self._requested_port)

    async def __aenter__(self) -> RemotingServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = RemotingConnection(
            reader,
            writer,
            self._dispatch if self._observer is None else self._dispatch_observed,
            max_frame_length=self.max_frame_length,
            max_concurrent_requests=self.max_concurrent_requests,
            on_close=self._connection_closed,
            eager_codes=self._eager_codes,
        )
        if self._stopping:
            await conn.close(CloseReason.SHUTDOWN)
            return
        self._connections.add(conn)
        log.debug("accepted %s", conn.remote_address)
        try:
            conn.start()
            await conn.wait_closed()
        finally:
            self._connections.discard(conn)

    def _connection_closed(self, conn: RemotingConnection) -> None:
        if self._on_connection_closed is None:
            return
        try:
            self._on_connection_closed(conn)
        except Exception:  # a listener's bug must not stop the connection from closing
            log.exception("on_connection_closed failed for %s", conn.remote_address)

    async def _dispatch_observed(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        """``_dispatch``, timed: the observer hears of every answer (a held pull's comes later, from its processor)."""
        started = time.monotonic_ns()
        response = await self._dispatch(conn, request)
        if response is not None and self._observer is not None:
            self._observer(request, response, started)
        return response

    async def _dispatch(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand | None:
        """NettyRemotingAbstract.processRequestCommand: not supported, rejected, or the processor's answer."""
        processor = self._processors.get(request.code)
        reject = self._rejects.get(request.code)
        if processor is None:
            processor, reject = self._default_processor, self._default_reject
            if processor is None:
                log.warning("%s: request type %s not supported", conn.remote_address, request.code)
                return not_supported_response(request)
        if reject is not None and reject():
            return create_response(request, ResponseCode.SYSTEM_BUSY, REJECT_REQUEST_REMARK)
        if self._pipeline is not None:
            refused = self._pipeline(conn, request)
            if refused is not None:
                return refused
        return await processor(conn, request)
