"""The asyncio streams of remoting sockets: ``start_server`` and ``open_stream``, asyncio's own two with one change,
the protocol (``FrameProtocol``).

Why: through a plain ``StreamReaderProtocol`` every read went into a StreamReader's buffer (a copy), woke the
connection's reader task (a turn of the event loop) and was copied out again by ``read``. A sync send from the Java
client is one read, so each request paid that hop and two copies of its frame before its handler even started. A
``FrameProtocol`` hands the bytes of each read to the connection's callback in the event loop's own ``data_received``
call. The StreamReader stays for what it does well: its end (EOF, or the error the connection was lost with) still
wakes the reader task, which then closes the connection as before; the StreamWriter's ``drain`` and
``wait_closed`` are unchanged (they live in the protocol's base class).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from typing import Any

ClientConnected = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None] | None]


class FrameProtocol(asyncio.StreamReaderProtocol):
    """A StreamReaderProtocol whose bytes go to the callback ``attach`` sets, never into the StreamReader; the bytes
    that arrive before it (a peer may write as soon as it connects) are kept and handed to ``attach``'s caller."""

    def __init__(self, reader: asyncio.StreamReader, client_connected: ClientConnected | None = None) -> None:
        super().__init__(reader, client_connected)
        self._sink: Callable[[bytes], None] | None = None
        self._early: list[bytes] = []

    def attach(self, sink: Callable[[bytes], None]) -> list[bytes]:
        """From now on each read goes to ``sink``; returns what was read before, for the caller to take first (in
        the same synchronous step, so that nothing can come between)."""
        self._sink = sink
        early, self._early = self._early, []
        return early

    def data_received(self, data: bytes) -> None:
        if self._sink is not None:
            self._sink(data)
        else:
            self._early.append(data)


async def start_server(client_connected: ClientConnected, host: str | None, port: int, *,
                       limit: int) -> asyncio.Server:
    """``asyncio.start_server`` with FrameProtocol."""
    loop = asyncio.get_running_loop()

    def factory() -> FrameProtocol:
        return FrameProtocol(asyncio.StreamReader(limit=limit), client_connected)

    return await loop.create_server(factory, host, port)


async def open_stream(host: str | None = None, port: int | None = None, *, limit: int,
                      sock: socket.socket | None = None, **kwds: Any) -> tuple[asyncio.StreamReader,
                                                                               asyncio.StreamWriter]:
    """``asyncio.open_connection`` with FrameProtocol: to ``host:port``, or over a connected ``sock``."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    protocol = FrameProtocol(reader)
    transport, _ = await loop.create_connection(lambda: protocol, host, port, sock=sock, **kwds)
    return reader, asyncio.StreamWriter(transport, protocol, reader, loop)
