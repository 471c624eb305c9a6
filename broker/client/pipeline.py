"""Many requests in flight on one blocking connection: ``RequestTemplate`` writes frames of requests alike fast, and
``Pipeline`` keeps up to a window of them in flight. The Spark sink (``connector/sink.py``) sends its half messages
and END_TRANSACTIONs this way: RocketMQ refuses transactional batches, so this is how a sink keeps a broker busy
without a thread per request.

Examples:
    >>> template = RequestTemplate(RequestCode.END_TRANSACTION, {"producerGroup": "g", "msgId": None})
    >>> pipe = Pipeline(BlockingRemotingClient("127.0.0.1:10911"), window=64)  # doctest: +SKIP
    >>> done = pipe.submit_frames([(*template.frame(("0A0B",)), "row 1")])  # doctest: +SKIP
    >>> done += pipe.drain()  # [(context, response), ...]  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

import orjson

from broker.client.blocking_remoting import BlockingRemotingClient
from broker.common.errors import ConnectionClosed
from broker.remoting import command
from broker.remoting.codes import SerializeType
from broker.remoting.command import RemotingCommand
from broker.remoting.exchange import DEFAULT_TIMEOUT_MS, CloseReason
from broker.remoting.frame import PREFIX_SIZE, encode_frame
from broker.remoting.signing import (
    SIGNATURE,
    SessionCredentials,
    calculate_signature,
    credential_fields,
    signed_keys,
)

log = logging.getLogger(__name__)


class RequestTemplate:
    """A request whose frame is written once, with some extFields left open: for callers that send many requests
    alike (the sink's half messages and END_TRANSACTIONs). ``command.encode`` writes the JSON header of a sample
    with a mark in each open field; each request then splices its opaque and its open values (JSON strings) in with
    one ``%`` format, about 3 us instead of the 30 us of building, checking and encoding a RemotingCommand.

    With ``credentials`` every frame is signed (AclClientRPCHook): ``AccessKey`` (and ``SecurityToken``) are fixed
    fields of the template, ``Signature`` one more open field, last, computed by ``frame`` from the values it splices
    and the body, so what is signed is what is sent.

    Examples:
        >>> template = RequestTemplate(RequestCode.END_TRANSACTION, {"producerGroup": "g", "msgId": None})
        >>> opaque, frame = template.frame(("0A0B",))  # doctest: +SKIP
    """

    def __init__(self, code: int, ext_fields: dict[str, str | None],
                 credentials: SessionCredentials | None = None) -> None:
        self.code = int(code)
        self._secret: str | None = None
        if credentials is not None:
            ext_fields = {k: v for k, v in ext_fields.items() if k != SIGNATURE}
            ext_fields.update(credential_fields(credentials))
            ext_fields[SIGNATURE] = None
            self._secret = credentials.secret_key
        self.open_fields = [name for name, value in ext_fields.items() if value is None]
        # the signed content's parts in signing order: a fixed value, or the index of an open one
        opened = {name: i for i, name in enumerate(self.open_fields)}
        self._content: list[str | int] = [opened.get(k, ext_fields[k]) for k in signed_keys(ext_fields)]
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
        """A fresh opaque and the whole frame with ``values`` (the open fields, in order, ``Signature`` not among
        them) and ``body``."""
        opaque = command.next_opaque()
        if self._secret is not None:
            values = (*values, self._signature(values, body))
        header = self._format % (*map(_dumps_str, values), opaque)
        return opaque, encode_frame(SerializeType.JSON, header, body)


    def _signature(self, values: Sequence[str], body: bytes) -> str:
        content = "".join([part if type(part) is str else values[part] for part in self._content])
        return calculate_signature(content.encode("utf-8", "surrogatepass") + body, self._secret or "")


_OPAQUE_MARK = -2147480647  # an opaque no sample ever gets: what RequestTemplate cuts the header at


def _dumps_str(value: str) -> bytes:
    """A JSON string as the header encoder writes it (orjson: raw UTF-8, control characters escaped)."""
    return orjson.dumps(value)


class Pipeline:
    """Up to ``window`` requests in flight on one connection: ``submit`` sends at once and returns the calls that
    completed meanwhile; ``drain`` waits for the rest. Requests that must not overtake each other (END_TRANSACTION
    of one queue, which the broker may run on several threads) share an ``order_key``: one of them is in flight at
    a time. ``submit_frames`` writes many framed requests (RequestTemplate) with one ``sendall`` once the window has
    room for all of them, so the broker reads them in one chunk too. RocketMQ's broker refuses transactional
    batches, so this is how a sink keeps such a broker busy with half messages without a thread per request.
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
        return self.submit_frame(request.opaque, command.encode(self.client.signed(request)), context, order_key)

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

    def wait_for(self, order_key: object) -> list[tuple[object, RemotingCommand]]:
        """Read answers until no request of ``order_key`` is in flight: for a caller that must act on that answer
        (send the request again, say) before the next request of the key goes out."""
        done: list[tuple[object, RemotingCommand]] = []
        while order_key in self._busy_keys:
            done += self._read_some()
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
