"""rmq's transactional batches on the wire: the capability key, the END_TRANSACTION_BATCH body and its limit.

Rule 1: this layout is defined here once, with its encode and decode; the client writes it
(``broker.client.transaction``), the broker reads it (``broker.server.processors.end_transaction_batch``). A broker
says it serves transactional batches by ``rmqTransactionBatchEnable=true`` in its GET_BROKER_CONFIG answer
(Apache's broker has no such key). The prepared batch itself is a standard SEND_BATCH_MESSAGE body
(``broker.common.message_batch``) sent with the TRANSACTION_PREPARED sysFlag. All integers are big-endian::

    off  field                 size
    0    count                 4          handles that follow: 1 .. END_TRANSACTION_BATCH_MAX
    then per handle:
    0    commitLogOffset       8          the half message's commit log offset (its offsetMsgId's)
    8    tranStateTableOffset  8          its queue offset in RMQ_SYS_TRANS_HALF_TOPIC
    16   msgId                 short length + UTF-8   its UNIQ_KEY

Examples:
    >>> body = encode_end_batch_body([TransactionHandle(4096, 7, "7F0000011F9018B4AAC2000000000001")])
    >>> len(body), decode_end_batch_body(body)[0].queue_offset
    (54, 7)
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from broker.common.errors import LocalProtocolError, MalformedBody

TRANSACTION_BATCH_ENABLE_KEY = "rmqTransactionBatchEnable"  # BrokerConfig.rmq_transaction_batch_enable
END_TRANSACTION_BATCH_MAX = 1024  # handles per END_TRANSACTION_BATCH

COUNT = struct.Struct(">i")
HANDLE_HEAD = struct.Struct(
    ">"
    "q"  # commitLogOffset
    "q"  # tranStateTableOffset
    "h"  # msgId length
)
_QUEUE_OFFSET_AND_LENGTH = struct.Struct(">qh")  # HANDLE_HEAD after its commitLogOffset
MSG_ID_MAX_BYTES = 2**15 - 1  # what the signed short length can say


class TransactionHandle(NamedTuple):
    """What names one half message to END_TRANSACTION: where it is stored and its transaction id (UNIQ_KEY). A
    plain ``(commit_log_offset, queue_offset, msg_id)`` tuple is one too."""

    commit_log_offset: int
    queue_offset: int  # tranStateTableOffset: its offset in the half topic's queue 0
    msg_id: str


def encode_end_batch_body(handles: Iterable[TransactionHandle]) -> bytes:
    """The END_TRANSACTION_BATCH body; LocalProtocolError when there are none, too many, or one does not fit."""
    parts = []
    count = 0
    for handle in map(TransactionHandle._make, handles):
        msg_id = handle.msg_id.encode()
        if len(msg_id) > MSG_ID_MAX_BYTES:
            raise LocalProtocolError(f"handle {count}: msgId of {len(msg_id)} bytes does not fit a short length")
        try:
            parts += (HANDLE_HEAD.pack(handle.commit_log_offset, handle.queue_offset, len(msg_id)), msg_id)
        except struct.error as err:
            raise LocalProtocolError(f"handle {count}: {handle} does not fit 64-bit offsets") from err
        count += 1
    return join_end_batch_body(count, parts)


def join_end_batch_body(count: int, entries: Iterable[bytes]) -> bytes:
    """The body of ``count`` handles already in their per-handle layout (``entries``: runs of them, as
    ``encode_end_batch_entries`` makes); LocalProtocolError for a count out of range."""
    if not 0 < count <= END_TRANSACTION_BATCH_MAX:
        raise LocalProtocolError(f"an END_TRANSACTION_BATCH carries 1 to {END_TRANSACTION_BATCH_MAX} handles, "
                                 f"not {count}")
    return COUNT.pack(count) + b"".join(entries)


_OFFSET_ID_BYTES = (16, 28)  # an offsetMsgId's bytes: store host (IPv4 or IPv6 address, port), commit log offset


def encode_end_batch_entries(offset_msg_ids: Sequence[str], first_queue_offset: int, msg_ids: Sequence[str]) -> bytes:
    """The per-handle layout (no count) of the half messages one prepared send stored, straight from its answer:
    their offsetMsgIds (the commit log offset is an offsetMsgId's last 8 bytes, big-endian as here), half queue
    offsets consecutive from ``first_queue_offset``, and UNIQ_KEYs. A sender keeps these bytes per request, not an
    object per half; ValueError when an id is no offsetMsgId or the lists differ in length."""
    count = len(msg_ids)
    if len(offset_msg_ids) != count:
        raise ValueError(f"{len(offset_msg_ids)} offsetMsgIds for {count} msgIds")
    if not count:
        return b""
    lengths = set(map(len, offset_msg_ids))
    width = lengths.pop() // 2 if len(lengths) == 1 else 0
    if width not in _OFFSET_ID_BYTES:
        raise ValueError(f"not offset message ids of one store host: {', '.join(offset_msg_ids)[:200]!r}")
    raw = bytes.fromhex("".join(offset_msg_ids))  # ValueError naming the first character that is no hex digit
    parts: list[bytes] = []
    for index, msg_id in enumerate(msg_ids):
        encoded = msg_id.encode()
        end = (index + 1) * width
        parts += (raw[end - 8:end], _QUEUE_OFFSET_AND_LENGTH.pack(first_queue_offset + index, len(encoded)), encoded)
    return b"".join(parts)


def decode_end_batch_body(buf: bytes | memoryview) -> list[TransactionHandle]:
    """The handles of an END_TRANSACTION_BATCH body; MalformedBody naming the first thing wrong (a count out of
    range, a handle cut short or not UTF-8, bytes left over)."""
    if _decode_end_batch_handles_c is not None:
        handles = _decode_end_batch_handles_c(buf, END_TRANSACTION_BATCH_MAX)
        if handles is not None:
            return list(map(TransactionHandle._make, handles))
    return _decode_end_batch_body_py(buf)  # also what names a malformed body's fault


def decode_end_batch_columns(buf: bytes | memoryview) -> tuple[tuple[int, ...], tuple[int, ...], tuple[str, ...]]:
    """The handles' columns (commit log offsets, tranStateTableOffsets, msgIds), as the broker reads them: no
    TransactionHandle per handle; MalformedBody as ``decode_end_batch_body``."""
    handles = None if _decode_end_batch_handles_c is None else _decode_end_batch_handles_c(buf,
                                                                                           END_TRANSACTION_BATCH_MAX)
    offsets, queue_offsets, msg_ids = zip(*(_decode_end_batch_body_py(buf) if handles is None else handles),
                                          strict=True)
    return offsets, queue_offsets, msg_ids


def _decode_end_batch_body_py(buf: bytes | memoryview) -> list[TransactionHandle]:
    """The Python twin of ``_speedups.decode_end_batch_handles``."""
    try:
        (count,) = COUNT.unpack_from(buf, 0)
    except struct.error as err:
        raise MalformedBody(f"the body of {len(buf)} bytes has no handle count") from err
    if not 0 < count <= END_TRANSACTION_BATCH_MAX:
        raise MalformedBody(f"handle count {count} is out of range 1..{END_TRANSACTION_BATCH_MAX}")
    handles: list[TransactionHandle] = []
    pos = COUNT.size
    for index in range(count):
        try:
            commit_log_offset, queue_offset, length = HANDLE_HEAD.unpack_from(buf, pos)
        except struct.error as err:
            raise MalformedBody(f"handle {index} at byte {pos} is cut short") from err
        pos += HANDLE_HEAD.size
        if length < 0 or pos + length > len(buf):
            raise MalformedBody(f"handle {index}: msgId length {length} runs past the body's end")
        try:
            msg_id = bytes(buf[pos:pos + length]).decode()
        except UnicodeDecodeError as err:
            raise MalformedBody(f"handle {index}: msgId is not UTF-8") from err
        pos += length
        handles.append(TransactionHandle(commit_log_offset, queue_offset, msg_id))
    if pos != len(buf):
        raise MalformedBody(f"{len(buf) - pos} bytes follow the {count} handles the body counts")
    return handles


try:
    from broker._speedups import decode_end_batch_handles as _decode_end_batch_handles_c
except ImportError:  # built without a C compiler: the Python twin serves
    _decode_end_batch_handles_c = None
