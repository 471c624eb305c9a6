"""Shared by the remoting tests: running coroutines without pytest-asyncio, connected pairs, hand-built frames."""

from __future__ import annotations

import asyncio
import functools
import socket
import struct
from typing import Any

from broker.remoting.connection import READ_CHUNK, Handler, RemotingConnection
from broker.remoting.stream import open_stream
from tests.helpers import run as run_bounded

TEST_TIMEOUT_S = 20.0


# tests.helpers.run with this package's ceiling: a hang fails the test instead of the whole run.
run = functools.partial(run_bounded, timeout=TEST_TIMEOUT_S)


async def connection_pair(
    handler_a: Handler | None = None, handler_b: Handler | None = None, **options: Any
) -> tuple[RemotingConnection, RemotingConnection]:
    """Two started connections talking to each other over a socketpair."""
    sock_a, sock_b = socket.socketpair()
    reader_a, writer_a = await open_stream(sock=sock_a, limit=READ_CHUNK)
    reader_b, writer_b = await open_stream(sock=sock_b, limit=READ_CHUNK)
    a = RemotingConnection(reader_a, writer_a, handler_a, **options).start()
    b = RemotingConnection(reader_b, writer_b, handler_b, **options).start()
    return a, b


async def raw_pair(handler: Handler | None = None, **options: Any) -> tuple[RemotingConnection, Any, Any]:
    """A started connection and the raw (reader, writer) of its peer, to send arbitrary bytes."""
    sock_a, sock_b = socket.socketpair()
    reader_a, writer_a = await open_stream(sock=sock_a, limit=READ_CHUNK)
    reader_b, writer_b = await asyncio.open_connection(sock=sock_b)
    return RemotingConnection(reader_a, writer_a, handler, **options).start(), reader_b, writer_b


def raw_frame(header: bytes, body: bytes = b"", serialize_type: int = 0) -> bytes:
    """A frame built by hand from the layout in anchors.md §5.1, independent of broker.remoting.frame."""
    return struct.pack(">ii", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


def rocketmq_header(
    code: int,
    language: int,
    version: int,
    opaque: int,
    flag: int,
    remark: bytes = b"",
    ext: list[tuple[bytes, bytes]] = (),  # type: ignore[assignment]
) -> bytes:
    """A ROCKETMQ binary header built by hand, field by field as RocketMQSerializable writes it."""
    entries = b"".join(struct.pack(">h", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in ext)
    return (
        struct.pack(">h", code)  # code
        + struct.pack(">b", language)  # language
        + struct.pack(">h", version)  # version
        + struct.pack(">i", opaque)  # opaque
        + struct.pack(">i", flag)  # flag
        + struct.pack(">i", len(remark))  # remark length
        + remark
        + struct.pack(">i", len(entries))  # extFields length
        + entries
    )


async def read_frames(reader: asyncio.StreamReader, count: int) -> list[bytes]:
    """``count`` whole frames (length field included) read off a raw stream."""
    frames = []
    for _ in range(count):
        prefix = await reader.readexactly(4)
        frames.append(prefix + await reader.readexactly(struct.unpack(">i", prefix)[0]))
    return frames
