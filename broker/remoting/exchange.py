"""One connection's request/response exchange, sans-IO in h11's way: commands in, bytes out; bytes in, events out.

Rule 1: matching responses to requests by opaque happens here and nowhere else. The asyncio ``RemotingConnection``
(the broker's, the NameServer's and the client's), the ``BlockingRemotingClient`` and its ``Pipeline`` each keep a
``RemotingExchange`` per connection, write the bytes it encodes and feed it the bytes they read. It holds no socket,
no event loop and no clock: a call's timeout belongs to its caller, who ``abandon``s the call, so that its late
response is dropped here (Java's ``responseTable`` forgets a ResponseFuture the same way).

What the exchange does, in the order of a call:

* ``send_request`` encodes a request into its frame and remembers its opaque with a context of the caller's (a
  future, a marker), refusing an opaque already waiting. Opaques come from ``command.next_opaque`` when a request
  is created, a process-wide sequence as Java's ``requestId``, so a caller knows its call's opaque before sending.
  ``expect_response`` remembers a request framed elsewhere (``RequestTemplate``).
* ``receive_data`` cuts the bytes read into frames (``FrameDecoder``) and commands, and reports each as an event:
  ``ResponseReceived`` (the response with its request's context), ``RequestReceived`` (the peer asks us: a broker
  sends CHECK_TRANSACTION_STATE, NOTIFY_CONSUMER_IDS_CHANGED or GET_CONSUMER_RUNNING_INFO to its clients) or
  ``OnewayReceived`` (a command that wants no answer). A response that matches no waiting call is dropped.
* ``answer`` and ``send_response`` encode responses; ``send_oneway`` a oneway command.

Every frame sent is checked against ``max_frame_length`` (LocalProtocolError), the length the peer's decoder
accepts. Bytes that break the protocol raise RemoteProtocolError (MalformedFrame, MalformedCommand) from the
iteration of ``receive_data``, after the events of the commands that came before them.

Examples:
    >>> from broker.remoting.codes import RequestCode, ResponseCode
    >>> from broker.remoting.command import create_request, create_response, decode
    >>> client, server = RemotingExchange(peer="server"), RemotingExchange(peer="client")
    >>> request = create_request(RequestCode.HEART_BEAT)
    >>> data = b"".join(client.send_request(request, context="my call"))
    >>> [event] = server.receive_data(data)
    >>> type(event).__name__, event.request.opaque == request.opaque
    ('RequestReceived', True)
    >>> reply = b"".join(server.answer(event.request, create_response(event.request, ResponseCode.SUCCESS)))
    >>> [event] = client.receive_data(reply)
    >>> type(event).__name__, event.context, client.pending
    ('ResponseReceived', 'my call', 0)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from enum import IntEnum, auto
from typing import Any

from broker.common.errors import LocalProtocolError, MalformedFrame, RemotingConnectError, RequestTimeout
from broker.remoting import command
from broker.remoting.codes import ResponseCode
from broker.remoting.command import ONEWAY_FLAG, RESPONSE_FLAG, RemotingCommand, create_response
from broker.remoting.frame import DEFAULT_MAX_FRAME_LENGTH, Buffer, Frame, FrameDecoder

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_MS = 3000  # DefaultMQProducer.sendMsgTimeout and the namesrv calls' default
DEFAULT_CONNECT_TIMEOUT_MS = 3000  # NettyClientConfig.connectTimeoutMillis


def parse_address(address: str) -> tuple[str, int]:
    """``"host:port"`` or ``"[v6]:port"`` (split at the last colon, as RemotingHelper.string2SocketAddress)."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise RemotingConnectError(address, "not a host:port address")
    return host.removeprefix("[").removesuffix("]"), int(port)


class CloseReason(IntEnum):
    """Why a connection closed; ConnectionClosed carries it to every call still waiting."""

    LOCAL_CLOSE = auto()  # close() on this side
    PEER_CLOSED = auto()  # the peer closed its side (EOF)
    CONNECTION_BROKEN = auto()  # a socket error while reading or writing
    PROTOCOL_ERROR = auto()  # the peer sent bytes that are not remoting frames
    SHUTDOWN = auto()  # the server that owned the connection stopped
    INTERNAL_ERROR = auto()  # a bug on this side while reading; logged with its traceback


_NONE = object()  # "no call waits under this opaque" (a context may be None)

# Events are plain slotted dataclasses, not frozen ones as in h11: one is built per command received, and a frozen
# dataclass costs three times as much to build (a microsecond).


@dataclass(slots=True)
class ResponseReceived:
    """The response to a request of ours, with the context its ``send_request`` (or ``expect_response``) was given."""

    response: RemotingCommand
    context: Any


@dataclass(slots=True)
class RequestReceived:
    """A request from the peer; answer it with ``answer`` (Java: a response is written unless it was oneway)."""

    request: RemotingCommand


@dataclass(slots=True)
class OnewayReceived:
    """A oneway request from the peer: handled, never answered."""

    request: RemotingCommand


Event = ResponseReceived | RequestReceived | OnewayReceived


def not_supported_response(request: RemotingCommand) -> RemotingCommand:
    """REQUEST_CODE_NOT_SUPPORTED with Java's exact remark (leading space included)."""
    remark = f" request type {request.code} not supported"
    return create_response(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark)


def request_timeout(request: RemotingCommand, address: str, timeout_ms: float) -> RequestTimeout:
    """The error of a call whose response did not come within ``timeout_ms``: it names the code, opaque and peer."""
    return RequestTimeout(
        f"no response to request code {request.code} opaque {request.opaque} from {address} within {timeout_ms:g} ms",
        opaque=request.opaque,
        code=request.code,
    )


def frame_size(parts: list[Buffer]) -> int:
    """The length of a frame given as buffers; most are two (the prefix with the header, then the body), and
    ``sum(map(len, parts))`` costs several times more on every command."""
    return len(parts[0]) + len(parts[1]) if len(parts) == 2 else sum(map(len, parts))


class RemotingExchange:
    """The calls waiting on one connection, and the frame decoder of its incoming bytes.

    Arguments:
        max_frame_length: the longest frame sent or received, length field included (Java's frameMaxLength).
        peer: the peer's address, for log lines and error messages.
    """

    def __init__(self, max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH, *, peer: str = "unknown") -> None:
        self.max_frame_length = max_frame_length
        self.peer = peer
        self._decoder = FrameDecoder(max_frame_length)
        self._pending: dict[int, Any] = {}  # opaque -> the caller's context, for each request not yet answered

    @property
    def pending(self) -> int:
        """Requests sent that still wait for their response."""
        return len(self._pending)

    def is_pending(self, opaque: int) -> bool:
        return opaque in self._pending

    # -- outgoing ---------------------------------------------------------------------------------------------

    def send_request(self, request: RemotingCommand, context: Any = None) -> list[Buffer]:
        """The frame of ``request`` (buffers to write back to back); its response will come as a ResponseReceived
        carrying ``context``. LocalProtocolError for a response or oneway command, an opaque already waiting, or
        a frame that cannot be sent; the call is then not remembered."""
        if request.flag & (RESPONSE_FLAG | ONEWAY_FLAG):
            raise LocalProtocolError(
                f"send_request() sends requests; flag {request.flag:#x} marks a response or oneway"
            )
        if request.opaque in self._pending:
            raise LocalProtocolError(f"opaque {request.opaque} is already waiting for a response from {self.peer}")
        parts = self._encode(request)
        self._pending[request.opaque] = context
        return parts

    def expect_response(self, opaque: int, context: Any = None) -> None:
        """Remember a request the caller framed itself (``RequestTemplate``), as ``send_request`` would have."""
        if opaque in self._pending:
            raise LocalProtocolError(f"opaque {opaque} is already waiting for a response from {self.peer}")
        self._pending[opaque] = context

    def send_oneway(self, request: RemotingCommand) -> list[Buffer]:
        """The frame of ``request`` with the oneway flag set (the caller's command is left as it is)."""
        if request.flag & RESPONSE_FLAG:
            raise LocalProtocolError(f"send_oneway() sends requests; flag {request.flag:#x} marks a response")
        return self._encode(replace(request, flag=request.flag | ONEWAY_FLAG))

    def send_response(self, response: RemotingCommand) -> list[Buffer]:
        """The frame of a response made whole already (``create_response``)."""
        if not response.flag & RESPONSE_FLAG:
            raise LocalProtocolError(f"send_response() sends responses; flag {response.flag:#x} marks a request")
        return self._encode(response)

    def answer(self, request: RemotingCommand, response: RemotingCommand) -> list[Buffer]:
        """Java's ``writeResponse``: the frame of ``response`` stamped with ``request``'s opaque and the response
        flag (a handler may have built it from scratch). The caller writes nothing for a oneway request."""
        if response.opaque != request.opaque or not response.flag & RESPONSE_FLAG:
            response = replace(response, opaque=request.opaque, flag=response.flag | RESPONSE_FLAG)
        return self._encode(response)

    def _encode(self, cmd: RemotingCommand) -> list[Buffer]:
        parts = command.encode_parts(cmd)
        size = len(parts[0]) + len(parts[1]) if len(parts) == 2 else sum(map(len, parts))  # frame_size, inlined
        if size > self.max_frame_length:
            raise LocalProtocolError(
                f"frame of {size} bytes for code {cmd.code} exceeds the maximum frame length {self.max_frame_length}"
            )
        return parts

    def abandon(self, opaque: int) -> Any:
        """Stop waiting for the response to ``opaque`` (its call timed out or failed): a late one is dropped.
        Returns the call's context, or None when nothing waited."""
        return self._pending.pop(opaque, None)

    def abandon_all(self) -> list[Any]:
        """Stop waiting for every call (the connection is gone) and return their contexts, oldest first."""
        contexts = list(self._pending.values())
        self._pending.clear()
        return contexts

    # -- incoming ---------------------------------------------------------------------------------------------

    def receive_data(self, data: Buffer) -> Iterator[Event]:
        """The events of the commands ``data`` completes. The bytes are taken at once; each command is decoded and
        matched as the iteration reaches it, so iterate to the end. A response that matches no waiting call is
        dropped (its call timed out). Raises MalformedFrame or MalformedCommand after the events before it: the
        stream is lost and the connection must close."""
        return self._receive(self._decoder.feed, data)

    def receive_owned(self, data: bytearray) -> Iterator[Event]:
        """``receive_data`` for a buffer handed over for good (a blocking reader's buffer of one big frame, see
        ``drain``): the commands' bodies are views of it, not copies (``FrameDecoder.feed_owned``)."""
        return self._receive(self._decoder.feed_owned, data)

    def _receive(self, feed: Callable[[Any], list[Frame]], data: Buffer) -> Iterator[Event]:
        try:
            frames = feed(data)
        except MalformedFrame as err:
            return self._events(err.frames, err)
        return self._events(frames, None)

    def _events(self, frames: list[Frame], error: MalformedFrame | None) -> Iterator[Event]:
        pending = self._pending
        for frame in frames:
            cmd = command.decode(frame)  # looked up per call: tests patch it to simulate a bug
            flag = cmd.flag
            if flag & RESPONSE_FLAG:
                context = pending.pop(cmd.opaque, _NONE)
                if context is _NONE:
                    log.debug("response opaque %s code %s from %s matches no request", cmd.opaque, cmd.code,
                              self.peer)
                else:
                    yield ResponseReceived(cmd, context)
            elif flag & ONEWAY_FLAG:
                yield OnewayReceived(cmd)
            else:
                yield RequestReceived(cmd)
        if error is not None:
            raise error

    def missing(self) -> int:
        """Bytes still to come before the frame begun is whole (0 when none is begun): a blocking reader receives a
        big frame (a pull response) straight into one buffer of this size."""
        return self._decoder.missing()

    def drain(self) -> bytearray:
        """Take out the bytes of the frame begun; the reader completes it and gives it to ``receive_data``."""
        return self._decoder.drain()

    def restore(self, data: Buffer) -> None:
        """Give back bytes taken by ``drain`` and not completed (the read timed out): the next bytes continue them."""
        frames = self._decoder.feed(data)
        assert not frames, "restore() is for an incomplete frame"
