"""The SEND_BATCH_MESSAGE body: the messages a producer sends in one request (MessageDecoder.encodeMessages).

Rule 1: this layout is defined here once, with its encode and decode; the client writes it, the broker reads it. It
is not stored as is: the broker turns each message into a CommitLog record of its own (``broker.common.record``),
keeping the PROPERTIES bytes the producer wrote. All integers are big-endian.

One block per message::

    off  field        size
    0    TOTALSIZE    4          this block, this field included
    4    MAGICCODE    4          0: unused
    8    BODYCRC      4          0: unused (the broker computes the record's)
    12   FLAG         4
    16   BODY         int length + bytes
    ..   PROPERTIES   short length + UTF-8 "k\\x01v\\x02..." (the message's own: UNIQ_KEY, KEYS, TAGS...)
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from broker.common.errors import CorruptRecord
from broker.common.message import decode_properties, encode_properties
from broker.common.record import MAX_PROPERTIES_LENGTH, PROPERTIES_LENGTH

BATCH_ITEM_HEAD = struct.Struct(
    ">"
    "i"  # TOTALSIZE
    "i"  # MAGICCODE
    "i"  # BODYCRC
    "i"  # FLAG
    "i"  # BODY length
)


@dataclass(frozen=True, slots=True)
class BatchMessage:
    """One message of a batch body: what it keeps of its own (the rest comes from the request header).

    ``encoded_properties`` is the PROPERTIES field as the producer wrote it (set by ``decode_batch_body``): Java's
    broker stores a batch item's properties bytes unchanged (MessageExtEncoder.encode(MessageExtBatch)), and they
    need not be what ``encode_properties`` makes of the dict (a 4.x client drops the last separator). It is not
    part of equality: the same message either way."""

    body: bytes
    properties: dict[str, str]
    flag: int = 0
    encoded_properties: bytes | None = field(default=None, compare=False, repr=False)


def encode_batch_body(messages: Iterable[BatchMessage]) -> bytes:
    """The SEND_BATCH_MESSAGE body for ``messages`` (MessageDecoder.encodeMessages)."""
    return b"".join([encode_batch_item(msg.body, encode_properties(msg.properties).encode(), msg.flag)
                     for msg in messages])


def encode_batch_item(body: bytes, properties: bytes, flag: int = 0) -> bytes:
    """One message's block of a batch body, its PROPERTIES field encoded already (a caller that builds each
    message's properties string from parts, as the Spark sink does, skips the dict)."""
    if len(properties) > MAX_PROPERTIES_LENGTH:
        raise ValueError(f"properties are {len(properties)} bytes, more than {MAX_PROPERTIES_LENGTH}")
    size = BATCH_ITEM_HEAD.size + len(body) + PROPERTIES_LENGTH.size + len(properties)
    return b"".join((BATCH_ITEM_HEAD.pack(size, 0, 0, flag, len(body)), body, PROPERTIES_LENGTH.pack(len(properties)),
                     properties))


def decode_batch_body(buf) -> list[BatchMessage]:
    """The messages of a SEND_BATCH_MESSAGE body; CorruptRecord (at the block's position) when a block is not whole
    or its TOTALSIZE disagrees with its fields."""
    return [BatchMessage(body, props, flag, encoded) for body, props, flag, encoded in decode_batch_items(buf)]


BatchItem = tuple[bytes, dict[str, str], int, bytes]
"""One message of a batch body as ``decode_batch_items`` gives it: body, properties, FLAG, PROPERTIES bytes."""


def decode_batch_items(buf) -> list[BatchItem]:
    """``decode_batch_body`` without a BatchMessage per message, for the broker's plain batched send, which turns
    each into its StoreMessage at once (in C from ``broker/_speedups_batch.c``, in Python where it is not built).
    Same errors as ``decode_batch_body``: a malformed body is walked again here to name what is wrong."""
    if _decode_batch_items_c is not None:
        items = _decode_batch_items_c(buf)
        if items is not None:
            return items
    return _decode_batch_items_py(buf)


def _decode_batch_items_py(buf) -> list[BatchItem]:
    """The Python twin of ``_speedups.decode_batch_items``, and what names a malformed body's fault."""
    items: list[BatchItem] = []
    pos, end = 0, len(buf)
    while pos < end:
        try:
            size, _, _, flag, body_len = BATCH_ITEM_HEAD.unpack_from(buf, pos)
            cur = pos + BATCH_ITEM_HEAD.size
            if body_len < 0 or cur + body_len > end:
                raise ValueError(f"body length {body_len} runs past the end")
            body = bytes(buf[cur:cur + body_len])
            cur += body_len
            (props_len,) = PROPERTIES_LENGTH.unpack_from(buf, cur)
            cur += PROPERTIES_LENGTH.size
            if props_len < 0 or cur + props_len > end:
                raise ValueError(f"properties length {props_len} runs past the end")
            encoded = bytes(buf[cur:cur + props_len])
            props = decode_properties(encoded.decode())
            cur += props_len
        except (struct.error, ValueError) as err:
            raise CorruptRecord(pos, f"batch message: {err}") from err
        if cur - pos != size:
            raise CorruptRecord(pos, f"batch message fields add up to {cur - pos}, TOTALSIZE says {size}")
        items.append((body, props, flag, encoded))
        pos = cur
    return items


try:
    from broker._speedups import decode_batch_items as _decode_batch_items_c
except ImportError:  # built without a C compiler: the Python twin serves
    _decode_batch_items_c = None
