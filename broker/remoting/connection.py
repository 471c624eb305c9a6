"""One remoting connection over asyncio streams (``stream.py``'s), used by both the server and the client.

The role of Java's ``NettyRemotingAbstract``: each read's bytes go, in the protocol's ``data_received``, to the
connection's sans-IO ``RemotingExchange`` (``exchange.py``: frames, commands, matching by opaque) and the connection
acts on its events; a reader task waits for the stream's end and closes the connection. A response completes the
future its request was sent with. A request (either side may send them: the broker sends CHECK_TRANSACTION_STATE to
producers) runs the handler in its own task, so a slow one (a long-polling pull) does not stall the connection, and
its response is written back unless the request was oneway. A handler exception becomes a
SYSTEM_ERROR response carrying its text, as in Java.

An eager request (its code in ``eager_codes``: the server's sends and pulls) runs in the read's own callback up to
its handler's first wait, and gets a task only if it waits: a send of the common shape or a pull that finds
messages is answered without one (a task, its turn of the loop and its done callback were a tenth of the loop
thread's time per sync send). Only handlers that need no current task before their first wait may be eager
(``asyncio.timeout`` and, from Python 3.12, ``wait_for`` need one).

Writes need no lock: each frame is appended whole, in a single synchronous call, to the frames of the current loop
iteration, which are written together at its end, or at the end of the read whose requests they answer (one
syscall for many pipelined responses; straight to the socket with the GIL released while the transport holds
nothing, else through ``StreamWriter.write``), so frames of concurrent calls never interleave; ``drain`` (which
accepts concurrent waiters since Python 3.10) applies the peer's back-pressure to each writer.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import traceback
import warnings
from collections.abc import Awaitable, Callable, Container, Coroutine, Generator
from typing import Any

from broker.common.errors import ConnectionClosed, LocalProtocolError, MalformedCommand, RemoteProtocolError
from broker.remoting.codes import ResponseCode
from broker.remoting.command import CommandFlag, RemotingCommand, create_response
from broker.remoting.exchange import (
    CloseReason,
    Event,
    RemotingExchange,
    ResponseReceived,
    frame_size,
    not_supported_response,
    request_timeout,
)
from broker.remoting.frame import DEFAULT_MAX_FRAME_LENGTH, Buffer
from broker.remoting.stream import FrameProtocol, open_stream

log = logging.getLogger(__name__)

Handler = Callable[["RemotingConnection", RemotingCommand], Awaitable[RemotingCommand | None]]
"""Answers a request from the peer; returning None writes nothing (the answer may come later, or never)."""

READ_CHUNK = 256 * 1024
CLOSE_FLUSH_TIMEOUT_S = 1.0  # how long close() lets buffered bytes (a last error response) reach the peer
DEFAULT_MAX_CONCURRENT_REQUESTS = 16384
FLUSH_AT = 64 * 1024  # frames of one loop iteration written at once, or as soon as they reach this many bytes
OVERLOAD_REMARK = "[OVERLOAD]system busy, start flow control for a while"  # NettyRemotingAbstract's text


def eager(handler: Handler) -> Handler:
    """Mark a handler to run in the read's own callback up to its first wait (``_serve_eagerly``): one that is
    usually answered at once (sends, pulls), and needs no current task before its first wait (no ``asyncio.timeout``,
    no ``wait_for`` from Python 3.12, no ``current_task``)."""
    handler.eager = True  # type: ignore[attr-defined]
    return handler


def is_eager(handler: Handler) -> bool:
    return getattr(handler, "eager", False) is True


def exception_simple_desc(err: BaseException) -> str:
    """``UtilAll.exceptionSimpleDesc``: the exception and where it was raised, e.g. ``ValueError: bad, f(x.py:3)``."""
    kind = type(err).__qualname__
    if type(err).__module__ not in ("builtins", "__main__"):
        kind = f"{type(err).__module__}.{kind}"
    text = f"{kind}: {err}" if str(err) else kind
    frames = traceback.extract_tb(err.__traceback__)
    if frames:
        last = frames[-1]
        text += f", {last.name}({last.filename.rsplit('/', 1)[-1]}:{last.lineno})"
    return text


class RemotingConnection:
    """A remoting connection over a (StreamReader, StreamWriter) pair; ``start()`` begins reading.

    Examples:
        >>> reader, writer = await open_stream("127.0.0.1", 9876, limit=READ_CHUNK)  # doctest: +SKIP
        >>> conn = RemotingConnection(reader, writer).start()  # doctest: +SKIP
        >>> response = await conn.invoke(create_request(RequestCode.GET_BROKER_CLUSTER_INFO), 3000)  # doctest: +SKIP
        >>> await conn.close()  # doctest: +SKIP
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        handler: Handler | None = None,
        *,
        max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
        max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_REQUESTS,
        on_close: Callable[[RemotingConnection], None] | None = None,
        eager_codes: Container[int] = frozenset(),
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._handler = handler
        self.max_frame_length = max_frame_length
        self.max_concurrent_requests = max_concurrent_requests
        self._on_close = on_close
        self._eager_codes = eager_codes
        self._receiving = False  # in _receive: its answers are written at its end, not at the loop iteration's
        self._request_tasks: set[asyncio.Task[None]] = set()
        self._read_task: asyncio.Task[None] | None = None
        self._closing: asyncio.Task[None] | None = None
        self._transport_closed = False
        self._read_error: Exception | None = None  # what stopped ``_receive``; the reader task closes with it
        self._out: list[Buffer] | None = None  # frames written in this loop iteration, not yet given to the writer
        self._out_size = 0
        sock = writer.get_extra_info("socket")
        # the socket's descriptor for _write_directly; -1 (write through the transport only) for a test's
        # transport without one, or a TLS one (none here), whose bytes are not the frames
        self._fd = sock.fileno() if sock is not None and writer.get_extra_info("sslcontext") is None else -1
        self._finished = asyncio.Event()
        self.close_reason: CloseReason | None = None
        peer = writer.get_extra_info("peername")
        self.remote_address = _format_address(peer) if peer else "unknown"
        # the context of each call waiting is the future its response completes
        self._exchange = RemotingExchange(max_frame_length, peer=self.remote_address)

    def start(self) -> RemotingConnection:
        if self._read_task is None and self.close_reason is None:
            self._read_task = asyncio.get_running_loop().create_task(
                self._read_loop(), name=f"remoting-read-{self.remote_address}"
            )
        return self

    @property
    def closed(self) -> bool:
        return self.close_reason is not None

    @property
    def finished(self) -> bool:
        """Closed, and the handlers of its last requests are done: nothing of it is left running."""
        return self._finished.is_set()

    @property
    def pending_requests(self) -> int:
        """Requests sent on this connection that still wait for their response."""
        return self._exchange.pending

    def __repr__(self) -> str:
        state = self.close_reason.name if self.close_reason else "open"
        return f"<RemotingConnection {self.remote_address} {state} pending={self._exchange.pending}>"

    # -- outgoing ---------------------------------------------------------------------------------------------

    async def invoke(self, request: RemotingCommand, timeout_ms: float) -> RemotingCommand:
        """Send ``request`` and wait for its response. Raises RequestTimeout (the request stays unanswered as far
        as we care: a late response is dropped), ConnectionClosed, or LocalProtocolError for an unsendable one."""
        future: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()
        parts = self._exchange.send_request(request, future)
        try:
            async with asyncio.timeout(timeout_ms / 1000):
                await self._write(parts)
                return await future
        except TimeoutError:
            raise request_timeout(request, self.remote_address, timeout_ms) from None
        finally:
            if not future.done() or future.cancelled():  # a response or the close took it off the exchange
                self._exchange.abandon(request.opaque)

    async def invoke_oneway(self, request: RemotingCommand) -> None:
        """Send ``request`` with the oneway flag set; nothing is answered and nothing is awaited but the write."""
        await self._write(self._exchange.send_oneway(request))

    async def send_response(self, response: RemotingCommand) -> None:
        """Write a response decided later than its handler returned (long polling answers this way)."""
        await self._write(self._exchange.send_response(response))

    def _check_open(self) -> None:
        if self.close_reason is not None:
            raise ConnectionClosed(self.close_reason, self.remote_address)

    async def _write(self, parts: list[Buffer]) -> None:
        """Write one frame (the exchange's buffers of it) with the others of this loop iteration."""
        size = frame_size(parts)
        self._check_open()
        if self._out is None:  # the first frame of this loop iteration: flush them all together, soon
            self._out, self._out_size = parts, size
            if not self._receiving:  # else _receive flushes them at its end
                asyncio.get_running_loop().call_soon(self._flush_out)
        else:
            self._out += parts
            self._out_size += size
        if self._out_size >= FLUSH_AT:  # now, so that drain() below sees them (a writer that never yields)
            self._flush_out()
        transport = self._writer.transport
        if not transport.get_write_buffer_size() and not transport.is_closing():
            return  # an empty buffer is below the low-water mark: not paused, nothing to wait for (a microsecond)
        try:
            await self._writer.drain()
        except OSError as err:  # ConnectionResetError from drain() once the transport is lost
            self._begin_close(CloseReason.CONNECTION_BROKEN, err)
            raise ConnectionClosed(CloseReason.CONNECTION_BROKEN, f"{self.remote_address}: {err}") from err

    def _flush_out(self) -> None:
        """Write the frames of one loop iteration at once: under pipelined requests the handlers answer many in
        one iteration, and a socket write per response was a sixth of the broker's time. Small frames are joined
        into one write; big buffers (pull responses) are written as they are, not copied again."""
        out, out_size, self._out, self._out_size = self._out, self._out_size, None, 0
        if not out or self._writer.transport.is_closing():
            return
        if len(out) == 1:
            out = [out[0]]
        elif out_size < FLUSH_AT or max(map(len, out)) < FLUSH_AT:
            out = [b"".join(out)]
        out = self._write_directly(out)
        if not out:
            return
        if len(out) == 1:
            self._writer.write(out[0])
            return
        self._writer.writelines(out)
        # asyncio's writelines (Python 3.12.0 to 3.12.8 and 3.13.0 to 3.13.1, CPython gh-127655) never pauses
        # the protocol, so drain() would not wait for a peer that stops reading; setting the same limits again
        # makes the transport check its buffer against them (any loop, any version: one comparison).
        low, high = self._writer.transport.get_write_buffer_limits()
        self._writer.transport.set_write_buffer_limits(high=high, low=low)

    def _write_directly(self, out: list[Buffer]) -> list[Buffer]:
        """Send what the socket takes at once with ``os.writev``, which releases the GIL for the system call (the
        event loop's transports hold it: on loopback that call also delivers the bytes to the peer and wakes it,
        up to a third of the broker's main thread under sync sends, while its other threads waited). Only when the
        transport holds nothing yet, so the bytes keep their order; what is left (the socket's buffer is full, or
        an error, which the transport then meets and reports itself) goes to the transport. Returns that rest."""
        transport = self._writer.transport
        if self._fd < 0 or transport.get_write_buffer_size():
            return out
        try:
            sent = os.writev(self._fd, out)
        except OSError:  # BlockingIOError (nothing taken), or the connection is broken: the transport will say
            return out
        for index, buf in enumerate(out):
            if sent < len(buf):
                return [memoryview(buf)[sent:], *out[index + 1:]]
            sent -= len(buf)
        return []

    # -- incoming ---------------------------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        """Take the peer's bytes until the stream ends, then close. The bytes come to ``_receive`` from the
        protocol's ``data_received`` (``stream.FrameProtocol``); this task waits for the StreamReader's end only."""
        reason, error = CloseReason.PEER_CLOSED, None
        try:
            protocol = self._writer.transport.get_protocol()
            if not isinstance(protocol, FrameProtocol):
                raise TypeError(f"a remoting connection reads through stream.FrameProtocol, not {protocol!r}")
            for data in protocol.attach(self._receive):
                self._take(data)
            while await self._reader.read(READ_CHUNK):  # b"" at its end; it never holds bytes, only EOF or an error
                pass
            if self._read_error is not None:
                raise self._read_error
        except RemoteProtocolError as err:
            reason, error = CloseReason.PROTOCOL_ERROR, err
            log.warning("closing %s: %s", self.remote_address, err.reason)
            await self._answer_malformed(err)
        except OSError as err:
            reason, error = CloseReason.CONNECTION_BROKEN, err
        except Exception as err:  # never leave a connection open with nobody reading it
            log.exception("reading from %s failed", self.remote_address)
            reason, error = CloseReason.INTERNAL_ERROR, err
        self._begin_close(reason, error)

    def _receive(self, data: bytes) -> None:
        """One read's bytes, in the protocol's ``data_received``: its requests start, its responses complete their
        calls. An error stops the reading: kept for the reader task, which the StreamReader's end wakes."""
        if self._read_error is not None:
            return
        self._receiving = True
        try:
            self._take(data)
        except Exception as err:
            self._read_error = err
            self._reader.feed_eof()
        finally:
            self._receiving = False
            if self._out:  # the answers of this read's eager requests, in one write
                self._flush_out()

    def _take(self, data: bytes) -> None:
        for event in self._exchange.receive_data(data):
            self._route(event)

    def _route(self, event: Event) -> None:
        if type(event) is ResponseReceived:
            future = event.context
            if future.done():  # cancelled: its caller is gone
                log.debug("response opaque %s from %s: its call is over", event.response.opaque, self)
            else:
                future.set_result(event.response)
            return
        cmd = event.request  # a request from the peer, oneway or not
        if len(self._request_tasks) >= self.max_concurrent_requests:
            self._spawn(self._reply(cmd, create_response(cmd, ResponseCode.SYSTEM_BUSY, OVERLOAD_REMARK)))
            return
        if cmd.code in self._eager_codes:
            self._serve_eagerly(cmd)
        else:
            self._spawn(self._serve(cmd))

    def _serve_eagerly(self, request: RemotingCommand) -> None:
        """``_serve`` run here up to its first wait; only then does the rest get a task."""
        serve = self._serve(request)
        try:
            waiting_on = serve.send(None)
        except StopIteration:
            return
        except Exception:  # what a task would have logged as never retrieved; the connection goes on
            log.exception("serving request code %s opaque %s from %s failed", request.code, request.opaque, self)
            return
        self._spawn(_resumed(serve, waiting_on))

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._request_tasks.add(task)
        task.add_done_callback(self._request_done)

    async def _serve(self, request: RemotingCommand) -> None:
        try:
            response = await self._handler(self, request) if self._handler else not_supported_response(request)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            log.exception("handler failed on request code %s opaque %s from %s", request.code, request.opaque, self)
            response = create_response(request, ResponseCode.SYSTEM_ERROR, exception_simple_desc(err))
        if response is not None:
            await self._reply(request, response)

    async def _reply(self, request: RemotingCommand, response: RemotingCommand) -> None:
        """Java's ``writeResponse``: nothing for a oneway request; otherwise stamp the opaque and response flag."""
        if request.is_oneway or self.close_reason is not None:
            return
        try:
            try:
                await self._write(self._exchange.answer(request, response))
            except LocalProtocolError as err:
                log.error("cannot send the response to code %s opaque %s: %s", request.code, request.opaque, err)
                remark = f"response not encodable: {err.reason}"
                await self._write(self._exchange.send_response(create_response(request, ResponseCode.SYSTEM_ERROR,
                                                                               remark)))
        except ConnectionClosed:
            log.debug("response to opaque %s dropped: %s closed", request.opaque, self)

    async def _answer_malformed(self, err: RemoteProtocolError) -> None:
        """A SYSTEM_ERROR naming what was wrong, before the connection closes: for the request's opaque when the
        header got that far, else opaque -1 (no Java request id until it wraps), so the peer's logs show why."""
        if isinstance(err, MalformedCommand) and err.is_response:
            return
        opaque = err.opaque if isinstance(err, MalformedCommand) and err.opaque is not None else -1
        response = RemotingCommand(
            code=int(ResponseCode.SYSTEM_ERROR), opaque=opaque, flag=int(CommandFlag.RESPONSE), remark=err.reason
        )
        try:
            async with asyncio.timeout(CLOSE_FLUSH_TIMEOUT_S):
                await self._write(self._exchange.send_response(response))
        except (TimeoutError, ConnectionClosed, LocalProtocolError):
            pass

    # -- closing ----------------------------------------------------------------------------------------------

    async def close(self, reason: CloseReason = CloseReason.LOCAL_CLOSE) -> None:
        """Close the connection: every pending call fails with ConnectionClosed(reason), and request handlers still
        running are cancelled (their answers could not be delivered). Idempotent."""
        self._begin_close(reason, None)
        current = asyncio.current_task()
        cancelled = [task for task in self._request_tasks if task is not current]
        for task in cancelled:
            task.cancel()
        assert self._closing is not None
        await asyncio.gather(asyncio.shield(self._closing), *cancelled, return_exceptions=True)

    async def wait_closed(self) -> None:
        """Wait until the connection is closed and the handlers of its last requests have finished."""
        await self._finished.wait()

    def _begin_close(self, reason: CloseReason, error: BaseException | None) -> None:
        """Mark closed, fail every waiting call and start closing the socket, all before anything can await.

        Handlers of requests already received keep running when the peer went away (Java's executors finish them
        too: a oneway message sent just before a disconnect is still stored); only close() cancels them."""
        if self.close_reason is not None:
            return
        self.close_reason = reason
        log.debug("closing %s: %s %s", self, reason.name, error or "")
        for future in self._exchange.abandon_all():
            if not future.done():
                failure = ConnectionClosed(reason, self.remote_address)
                failure.__cause__ = error
                future.set_exception(failure)
        if self._read_task is not None and self._read_task is not asyncio.current_task():
            self._read_task.cancel()
        self._closing = asyncio.get_running_loop().create_task(self._close_transport())
        if self._on_close is not None:
            self._on_close(self)

    async def _close_transport(self) -> None:
        if self._out:  # a last response written just before the close
            self._flush_out()
        self._writer.close()
        try:
            async with asyncio.timeout(CLOSE_FLUSH_TIMEOUT_S):
                await self._writer.wait_closed()
        except TimeoutError:
            self._writer.transport.abort()  # a peer that stopped reading must not keep us waiting
        except OSError:
            pass
        self._transport_closed = True
        self._check_finished()

    def _request_done(self, task: asyncio.Task[None]) -> None:
        self._request_tasks.discard(task)
        self._check_finished()

    def _check_finished(self) -> None:
        if self._transport_closed and not self._request_tasks:
            self._finished.set()

    async def __aenter__(self) -> RemotingConnection:
        return self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __del__(self, _warn: Callable[..., None] = warnings.warn) -> None:
        if self.close_reason is None and self._read_task is not None:
            _warn(f"unclosed {self!r}", ResourceWarning, stacklevel=1)


def _carry_on(coro: Coroutine[Any, Any, Any], waiting_on: Any) -> Generator[Any, Any, Any]:
    """The rest of a coroutine begun outside any task, ``waiting_on`` what its last step yielded: each step's wait
    goes to the task driving this generator, and the task's answer (a value, or the CancelledError of a cancel)
    back to the coroutine."""
    while True:
        try:
            sent = yield waiting_on
        except BaseException as err:  # thrown into the task (a cancel): the coroutine gets it as it would
            step = coro.throw
            value: Any = err
        else:
            step, value = coro.send, sent
        try:
            waiting_on = step(value)
        except StopIteration as stop:
            return stop.value


class _Rest:
    """Awaitable of ``_carry_on``: a task runs only coroutines, from Python 3.12 not bare generators."""

    __slots__ = ("coro", "waiting_on")

    def __init__(self, coro: Coroutine[Any, Any, Any], waiting_on: Any) -> None:
        self.coro, self.waiting_on = coro, waiting_on

    def __await__(self) -> Generator[Any, Any, Any]:
        return _carry_on(self.coro, self.waiting_on)


async def _resumed(coro: Coroutine[Any, Any, Any], waiting_on: Any) -> Any:
    """The rest of ``coro``, which waits on ``waiting_on``, as a coroutine a task can run."""
    return await _Rest(coro, waiting_on)


def _format_address(peer: tuple) -> str:
    host, port = peer[0], peer[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


async def open_connection(
    host: str,
    port: int,
    handler: Handler | None = None,
    *,
    max_frame_length: int = DEFAULT_MAX_FRAME_LENGTH,
    on_close: Callable[[RemotingConnection], None] | None = None,
) -> RemotingConnection:
    """Connect and start reading. OSError propagates; the client turns it into RemotingConnectError."""
    started = time.monotonic()
    reader, writer = await open_stream(host, port, limit=READ_CHUNK)
    conn = RemotingConnection(reader, writer, handler, max_frame_length=max_frame_length, on_close=on_close)
    log.debug("connected to %s in %.1f ms", conn.remote_address, (time.monotonic() - started) * 1000)
    return conn.start()
