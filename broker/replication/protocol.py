"""The HA wire protocol (RocketMQ's DefaultHAService, the same in 4.x and 5.x): plain TCP to the master's
haListenPort, not remoting.

    slave -> master   [8] the slave's CommitLog max offset       on connect, after each append, every heartbeat
    master -> slave   [8] offset [4] size, then size bytes       raw CommitLog bytes from offset; size 0: heartbeat

All integers are big-endian. A frame's bytes lie in one CommitLog file and may end mid-record. The decoders here
are sans-IO: the threads in ``ha_connection`` and ``ha_client`` own the sockets.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from broker.common.errors import HAProtocolError

REPORT = struct.Struct(">q")  # slave -> master: DefaultHAClient.REPORT_HEADER_SIZE
TRANSFER_HEADER = struct.Struct(">qi")  # master -> slave: DefaultHAConnection.TRANSFER_HEADER_SIZE
SLAVE_READ_BUFFER_SIZE = 4 * 1024 * 1024  # DefaultHAClient.READ_MAX_BUFFER_SIZE
MASTER_READ_BUFFER_SIZE = 1024 * 1024  # ReadSocketService.READ_MAX_BUFFER_SIZE


def heartbeat(offset: int) -> bytes:
    """A master's frame without data: the connection is alive, and the slave should be at ``offset``."""
    return TRANSFER_HEADER.pack(offset, 0)


class ReportDecoder:
    """The master's side: whole 8-byte reports out of a byte stream; only the newest one matters (Java reads the
    last complete unit of what arrived)."""

    def __init__(self) -> None:
        self._pending = b""

    def received(self, data: bytes) -> int | None:
        """The newest offset completed by ``data``, or None when it completes none."""
        data = self._pending + data
        whole = len(data) - len(data) % REPORT.size
        self._pending = data[whole:]
        return REPORT.unpack_from(data, whole - REPORT.size)[0] if whole else None


class TransferDecoder:
    """The slave's side: frames out of one receive buffer, read in place (a frame's body is a view of it).

    ``receive_into`` is the free part of the buffer for ``socket.recv_into``; ``received(n)`` records what arrived;
    ``frames`` yields (offset, body) for each whole frame, after which the caller must be done with the bodies
    before the next ``receive_into`` (the buffer is compacted then)."""

    def __init__(self, size: int = SLAVE_READ_BUFFER_SIZE) -> None:
        self._buffer = bytearray(size)
        self._view = memoryview(self._buffer)
        self._start = 0  # the first byte not yet decoded
        self._end = 0  # the end of what was received

    def receive_into(self) -> memoryview:
        if self._start:
            left = self._end - self._start
            self._buffer[:left] = self._buffer[self._start:self._end]
            self._start, self._end = 0, left
        return self._view[self._end:]

    def received(self, count: int) -> None:
        self._end += count

    def frames(self) -> Iterator[tuple[int, memoryview]]:
        header = TRANSFER_HEADER.size
        limit = len(self._buffer) - header
        while self._end - self._start >= header:
            offset, size = TRANSFER_HEADER.unpack_from(self._buffer, self._start)
            if offset < 0 or not 0 <= size <= limit:
                raise HAProtocolError(f"bad HA frame header: offset {offset}, size {size}")
            body_at = self._start + header
            if self._end - body_at < size:
                return
            self._start = body_at + size
            yield offset, self._view[body_at:body_at + size]
