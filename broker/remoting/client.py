"""RemotingClient: remoting calls by address, over one reused connection per address.

The role of Java's ``NettyRemotingClient``: a connection per "host:port", created on first use, replaced once it
closes, and shared by every concurrent call (a second caller waits for the first caller's connect instead of
opening another). The timeout of a call covers the connect as well, as Java's ``invokeSync`` does. A handler
answers the requests the server sends us (CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED...).
"""

from __future__ import annotations

import asyncio
import logging
import time

from broker.common.errors import ConnectionClosed, RemotingConnectError, RequestTimeout
from broker.remoting.command import RemotingCommand
from broker.remoting.connection import Handler, RemotingConnection, open_connection
from broker.remoting.exchange import (
    DEFAULT_CONNECT_TIMEOUT_MS,
    DEFAULT_TIMEOUT_MS,
    CloseReason,
    parse_address,
    request_timeout,
)
from broker.remoting.frame import DEFAULT_MAX_FRAME_LENGTH
from broker.remoting.signing import SessionCredentials, sign_request

log = logging.getLogger(__name__)

def _retrieve(task: asyncio.Task[RemotingConnection]) -> None:
    if not task.cancelled():
        task.exception()


class RemotingClient:
    """Remoting calls to any number of servers.

    Examples:
        >>> async with RemotingClient() as client:  # doctest: +SKIP
        ...     request = create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
        ...     response = await client.invoke("127.0.0.1:9876", request)
    """

    def __init__(
        self,
        handler: Handler | None = None,
        *,
        default_timeout_ms: float = DEFAULT_TIMEOUT_MS,
        connect_timeout_ms: float = DEFAULT_CONNECT_TIMEOUT_MS,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        credentials: SessionCredentials | None = None,
    ) -> None:
        """``credentials``: every request is signed with them (Java's AclClientRPCHook on the client), as its last
        step before it is sent."""
        self._handler = handler
        self.credentials = credentials
        self.default_timeout_ms = default_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.max_frame_length = max_frame_length
        self._connections: dict[str, asyncio.Task[RemotingConnection]] = {}
        self._all: set[RemotingConnection] = set()  # open ones plus closed ones whose handlers still run
        self._closed = False

    async def invoke(self, address: str, request: RemotingCommand, timeout_ms: float | None = None) -> RemotingCommand:
        """Send ``request`` to ``address`` and return the response (any response code: those are values).

        Raises RequestTimeout, RemotingConnectError, ConnectionClosed or LocalProtocolError."""
        timeout_ms = self.default_timeout_ms if timeout_ms is None else timeout_ms
        request = self.signed(request)
        started = time.monotonic()
        conn = await self.get_connection(address, timeout_ms)
        remaining_ms = timeout_ms - (time.monotonic() - started) * 1000
        if remaining_ms <= 0:
            raise request_timeout(request, address, timeout_ms)
        try:
            return await conn.invoke(request, remaining_ms)
        except RequestTimeout:
            raise request_timeout(request, address, timeout_ms) from None  # the caller's timeout, connect included

    async def invoke_oneway(self, address: str, request: RemotingCommand, timeout_ms: float | None = None) -> None:
        """Send ``request`` with the oneway flag; ``timeout_ms`` bounds only the connect."""
        conn = await self.get_connection(address, self.default_timeout_ms if timeout_ms is None else timeout_ms)
        await conn.invoke_oneway(self.signed(request))

    def signed(self, request: RemotingCommand) -> RemotingCommand:
        """``request`` as it goes out: signed when there are credentials (a request answered on a connection the
        peer opened, a transaction check's END_TRANSACTION, goes through here too)."""
        return request if self.credentials is None else sign_request(request, self.credentials)

    async def get_connection(self, address: str, timeout_ms: float | None = None) -> RemotingConnection:
        """The open connection to ``address``, connecting (once, for all concurrent callers) if there is none."""
        if self._closed:
            raise ConnectionClosed(CloseReason.LOCAL_CLOSE, "RemotingClient is closed")
        connecting = self._connections.get(address)
        if connecting is not None and connecting.done() and not connecting.cancelled():
            if connecting.exception() is None and not connecting.result().closed:
                return connecting.result()
            connecting = None
        if connecting is None:
            host, port = parse_address(address)
            connecting = asyncio.get_running_loop().create_task(self._connect(address, host, port))
            connecting.add_done_callback(_retrieve)  # a connect nobody waits for any more must not log an error
            self._connections[address] = connecting
        timeout_ms = self.connect_timeout_ms if timeout_ms is None else min(timeout_ms, self.connect_timeout_ms)
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                return await asyncio.shield(connecting)
        except TimeoutError:
            raise RemotingConnectError(address, f"no connection within {timeout_ms:g} ms") from None
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if connecting.cancelled() and current is not None and not current.cancelling():
                # close() stopped the connect, not our caller: say so instead of leaking a CancelledError
                raise ConnectionClosed(CloseReason.LOCAL_CLOSE, "RemotingClient is closed") from None
            raise

    async def _connect(self, address: str, host: str, port: int) -> RemotingConnection:
        try:
            async with asyncio.timeout(self.connect_timeout_ms / 1000):
                conn = await open_connection(
                    host, port, self._handler, max_frame_length=self.max_frame_length, on_close=self._forget
                )
        except (OSError, TimeoutError) as err:
            if self._connections.get(address) is asyncio.current_task():
                del self._connections[address]  # the next call tries again
            raise RemotingConnectError(address, str(err) or type(err).__name__) from err
        self._all = {known for known in self._all if not known.finished}
        self._all.add(conn)
        return conn

    def _forget(self, conn: RemotingConnection) -> None:
        """A closed connection leaves the address table at once, so the next call reconnects."""
        for address, task in list(self._connections.items()):
            if task.done() and not task.cancelled() and task.exception() is None and task.result() is conn:
                del self._connections[address]

    async def close(self) -> None:
        """Close every connection; calls still waiting fail with ConnectionClosed(LOCAL_CLOSE)."""
        self._closed = True
        for task in self._connections.values():
            task.cancel()
        connections = list(self._all)
        self._connections.clear()
        await asyncio.gather(*(conn.close() for conn in connections))
        await asyncio.gather(*(conn.wait_closed() for conn in connections))

    async def __aenter__(self) -> RemotingClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
