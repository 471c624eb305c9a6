"""The remoting frame: how RemotingCommands are cut out of a TCP byte stream. Sans-IO, in the style of h11.

Rule 1: the frame layout is defined here once (``FRAME_PREFIX``), with its one encoder (``encode_frame``) and one
decoder (``FrameDecoder``). What is inside the header (JSON or ROCKETMQ) belongs to ``command.py``. The decoder's
loop over the frames of a read is ``_speedups.cut_frames`` in C where the extension is built (its twin
``_cut_frames_py``, tests/unit/test_speedups_frames.py), which repeats the layout's sizes and the checks' words.

Layout (``RemotingCommand.encode`` / ``NettyDecoder``), big-endian::

    off  field           size
    0    length          4            bytes after this field: 4 + header length + body length
    4    header marker   4            serialize type << 24 | header length (low 24 bits)
    8    header          header len   JSON or ROCKETMQ, see SerializeType
    ..   body            length - 4 - header length

Java's ``NettyDecoder`` is a ``LengthFieldBasedFrameDecoder(frameMaxLength, 0, 4, 0, 4)``: its maximum counts the
4-byte length field too, so ``max_frame_length`` here does the same (a frame of exactly 16 MiB with its length
field passes, one byte more does not).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from broker.common.errors import LocalProtocolError, MalformedFrame
from broker.remoting.codes import SerializeType

FRAME_PREFIX = struct.Struct(
    ">"
    "i"  # length: bytes after this field
    "i"  # header marker: serialize type << 24 | header length
)
LENGTH_FIELD = struct.Struct(">i")
LENGTH_FIELD_SIZE = LENGTH_FIELD.size  # 4
PREFIX_SIZE = FRAME_PREFIX.size  # 8
MARKER_SIZE = PREFIX_SIZE - LENGTH_FIELD_SIZE  # 4: the smallest legal length (an empty header, no body)
SERIALIZE_TYPE_SHIFT = 24
HEADER_LENGTH_MASK = (1 << SERIALIZE_TYPE_SHIFT) - 1  # 0xFFFFFF: the largest header
DEFAULT_MAX_FRAME_LENGTH = 16 * 1024 * 1024  # Java: -Dcom.rocketmq.remoting.frameMaxLength, default 16777216
_SERIALIZE_TYPES = {member.value: member for member in SerializeType}
Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class Frame:
    """One whole frame, split but not interpreted: ``command.decode`` turns it into a RemotingCommand."""

    serialize_type: SerializeType
    header: bytes
    body: bytes | memoryview  # a view only from ``feed_owned``


def header_marker(serialize_type: SerializeType, header_length: int) -> int:
    """``RemotingCommand.markProtocolType``; the top bit of a ROCKETMQ (1) marker stays clear, so it fits an int."""
    return (serialize_type << SERIALIZE_TYPE_SHIFT) | header_length


def encode_frame(serialize_type: SerializeType, header: bytes, body: bytes = b"") -> bytes:
    """A whole frame, length field included. Raises LocalProtocolError if the header exceeds 24 bits of length."""
    return b"".join(encode_frame_parts(serialize_type, header, (body,)))


def encode_frame_parts(serialize_type: SerializeType, header: bytes, body_parts: Sequence[Buffer]) -> list[Buffer]:
    """The frame as buffers to send back to back: the prefix with the header, then the body's parts as they are
    (a pull response's megabyte of records is not copied once more to be framed)."""
    if len(header) > HEADER_LENGTH_MASK:
        raise LocalProtocolError(f"header of {len(header)} bytes exceeds the 24-bit header length field")
    body_length = sum(map(len, body_parts))
    prefix = FRAME_PREFIX.pack(MARKER_SIZE + len(header) + body_length, header_marker(serialize_type, len(header)))
    return [prefix + header, *body_parts]


class FrameDecoder:
    """Bytes in, whole frames out; keeps the partial tail between calls.

    A malformed stream raises MalformedFrame as soon as the first 8 bytes of the bad frame reveal it (the peer
    may be a port scanner announcing a 2 GiB frame: we do not wait for it). The decoder then stays broken: every
    later ``feed`` raises the same error, because the stream has no frame boundary left to resynchronise on.

    Examples:
        >>> decoder = FrameDecoder()
        >>> data = encode_frame(SerializeType.JSON, b'{"code":0}', b"body")
        >>> decoder.feed(data[:5]), decoder.feed(data[5:])
        ([], [Frame(serialize_type=<SerializeType.JSON: 0>, header=b'{"code":0}', body=b'body')])
    """

    def __init__(self, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH) -> None:
        if not PREFIX_SIZE <= max_frame_length <= 2**31 - 1:
            raise ValueError(f"max_frame_length {max_frame_length} is not within [{PREFIX_SIZE}, 2**31 - 1]")
        self.max_frame_length = max_frame_length
        self._buffer = bytearray()
        self._error: MalformedFrame | None = None

    @property
    def buffered(self) -> int:
        """Bytes received that do not yet make a whole frame."""
        return len(self._buffer)

    def feed(self, data: Buffer) -> list[Frame]:
        """Add ``data`` and return every frame it completes, in order. Frames are cut out of ``data`` itself when
        nothing is buffered; only an incomplete tail is kept.

        Raises MalformedFrame (with the frames completed before the bad one in ``.frames``)."""
        return self._feed(data, bytes)

    def feed_owned(self, data: bytearray) -> list[Frame]:
        """``feed`` for a buffer handed over for good (nothing writes to it again: the blocking client's buffer of
        one big frame): the bodies of the frames cut out of it are views of it, not copies. A pull response's
        megabyte of records is then copied once out of the socket and once into the reader's columns, not three
        times."""
        return self._feed(data, memoryview)

    def _feed(self, data: Buffer, body_type: type[bytes] | type[memoryview]) -> list[Frame]:
        if self._error is not None:
            raise self._error
        if self._buffer:
            self._buffer += data
            source: Buffer = self._buffer
        else:
            source = data
        if body_type is bytes or source is not data:
            frames, pos, fault = cut_frames(source, self.max_frame_length)
        else:
            frames, pos, fault = _cut_frames_py(source, self.max_frame_length, body_type)
        if source is self._buffer:
            del self._buffer[:pos]  # O(1) for a bytearray's head
        elif pos < len(source):
            self._buffer += memoryview(source)[pos:]
        if fault is not None:
            self._error = MalformedFrame(fault)
            self._error.frames = frames
            raise self._error
        return frames

    def missing(self) -> int:
        """Bytes still to come before the frame begun in the buffer is whole; 0 when none is begun, or its length
        field is not all here or not a legal length (``feed`` says what is wrong with it)."""
        buffer = self._buffer
        if len(buffer) < LENGTH_FIELD_SIZE:
            return 0
        (length,) = LENGTH_FIELD.unpack_from(buffer, 0)
        if length < MARKER_SIZE or length + LENGTH_FIELD_SIZE > self.max_frame_length:
            return 0
        return max(0, LENGTH_FIELD_SIZE + length - len(buffer))

    def drain(self) -> bytearray:
        """Take the buffered bytes out (the caller completes the frame and feeds it back whole)."""
        data, self._buffer = self._buffer, bytearray()
        return data


def _cut_frames_py(buffer: Buffer, max_frame_length: int,
                   body_type: type[bytes] | type[memoryview] = bytes) -> tuple[list[Frame], int, str | None]:
    """The whole frames at the head of ``buffer``, where the rest begins, and MalformedFrame's text for the frame
    there when it is malformed (else None); ``_speedups.cut_frames`` in C, for bodies as bytes."""
    frames: list[Frame] = []
    pos = 0
    try:
        while True:
            frame_end = _next_frame_end(buffer, pos, max_frame_length)
            if frame_end < 0:
                return frames, pos, None
            frames.append(_cut(buffer, pos, frame_end, body_type))
            pos = frame_end
    except MalformedFrame as err:
        return frames, pos, err.reason


def _next_frame_end(buffer: Buffer, pos: int, max_frame_length: int) -> int:
    """Where the frame at ``pos`` ends, or -1 when it is not all here; validates as soon as bytes allow."""
    available = len(buffer) - pos
    if available < LENGTH_FIELD_SIZE:
        return -1
    (length,) = LENGTH_FIELD.unpack_from(buffer, pos)
    if length < MARKER_SIZE:
        raise MalformedFrame(f"frame length {length} is less than the {MARKER_SIZE}-byte header marker")
    if length + LENGTH_FIELD_SIZE > max_frame_length:
        raise MalformedFrame(
            f"frame of {length + LENGTH_FIELD_SIZE} bytes exceeds the maximum frame length {max_frame_length}"
        )
    if available < PREFIX_SIZE:
        return -1
    (length, marker) = FRAME_PREFIX.unpack_from(buffer, pos)
    header_length = marker & HEADER_LENGTH_MASK
    if header_length > length - MARKER_SIZE:
        raise MalformedFrame(f"header length {header_length} exceeds frame length {length} - {MARKER_SIZE}")
    type_code = (marker >> SERIALIZE_TYPE_SHIFT) & 0xFF
    if type_code not in _SERIALIZE_TYPES:
        raise MalformedFrame(f"unknown serialize type {type_code} in header marker {marker & 0xFFFFFFFF:#010x}")
    frame_end = pos + LENGTH_FIELD_SIZE + length
    return frame_end if frame_end <= len(buffer) else -1


def _cut(buffer: Buffer, pos: int, frame_end: int, body_type: type[bytes] | type[memoryview]) -> Frame:
    (_, marker) = FRAME_PREFIX.unpack_from(buffer, pos)
    header_start = pos + PREFIX_SIZE
    body_start = header_start + (marker & HEADER_LENGTH_MASK)
    serialize_type = _SERIALIZE_TYPES[(marker >> SERIALIZE_TYPE_SHIFT) & 0xFF]
    if body_type is memoryview:  # the caller's buffer, kept: the body is a view of it
        view = memoryview(buffer)
        return Frame(serialize_type, bytes(view[header_start:body_start]), view[body_start:frame_end])
    with memoryview(buffer) as view:  # one copy per field (slicing the bytearray itself would make two)
        return Frame(serialize_type, bytes(view[header_start:body_start]), bytes(view[body_start:frame_end]))


def _bind_speedups() -> Callable[[Buffer, int], tuple[list[Frame], int, str | None]]:
    """``_speedups.cut_frames``, told the classes it makes, or the twin."""
    try:
        from broker._speedups import bind_frame
        from broker._speedups import cut_frames as cut_frames_c
    except ImportError:  # built without a C compiler: the same frames, slower
        return _cut_frames_py
    bind_frame(Frame, tuple(sorted(SerializeType, key=int)))
    return cut_frames_c


cut_frames = _bind_speedups()
