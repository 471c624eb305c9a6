"""The console's server: the page's static files and the JSON API over HTTP (the standard library's
ThreadingHTTPServer), and one asyncio event loop in a thread of its own where the admin client, the API handlers
and the sampler run. An HTTP thread hands its API call to the loop and waits for the answer.

Every answer of the API is JSON: a value, or ``{"error": "...", "code": ...}`` with a 4xx or 5xx status (see
``broker.console.api.error_answer``); no input gets a stack trace page.

Examples:
    >>> with start_console("127.0.0.1:9876", port=0) as console:  # doctest: +SKIP
    ...     print(console.url)  # http://127.0.0.1:41234/
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from concurrent.futures import TimeoutError as FutureTimeout
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self
from urllib.parse import parse_qsl, unquote, urlsplit

from broker.console import cluster_api, group_api, message_api, topic_api
from broker.console.api import ApiError, ApiRequest, Console, Route, error_answer, find_route
from broker.console.sampler import DEFAULT_HISTORY_S, DEFAULT_INTERVAL_S, Sampler
from broker.remoting.signing import SessionCredentials
from broker.tools.admin import MQAdminExt

log = logging.getLogger(__name__)

STATIC_DIR = Path(__file__).resolve().parent / "static"
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
                 ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml", ".png": "image/png",
                 ".ico": "image/x-icon"}
ROUTES: tuple[Route, ...] = (*cluster_api.ROUTES, *topic_api.ROUTES, *group_api.ROUTES, *message_api.ROUTES)
CALL_TIMEOUT_S = 60.0  # an API call waits this long for the cluster; the admin's own timeouts are shorter
MAX_BODY = 1 << 20


def _static_files() -> dict[str, Path]:
    """URL path -> file, for every file under static/ (nothing else is served)."""
    return {"/" + p.relative_to(STATIC_DIR).as_posix(): p for p in STATIC_DIR.rglob("*") if p.is_file()}


class ConsoleServer:
    """The console on ``host:port`` (port 0: a free one, see ``url``) for the cluster of ``namesrv_addr``, its
    requests signed with ``credentials`` when given. ``start()`` binds and serves in background threads;
    ``close()`` stops them."""

    def __init__(self, namesrv_addr: str, *, host: str = "127.0.0.1", port: int = 8080,
                 credentials: SessionCredentials | None = None, sample_interval_s: float = DEFAULT_INTERVAL_S,
                 history_s: float = DEFAULT_HISTORY_S, timeout_ms: int = 5000) -> None:
        self.namesrv_addr = namesrv_addr
        self._bind = (host, port)
        self._credentials, self._timeout_ms = credentials, timeout_ms
        self._sampling = (sample_interval_s, history_s)
        Sampler.check(sample_interval_s, history_s)  # bad settings fail here, not on the loop
        self._loop: asyncio.AbstractEventLoop | None = None
        self._threads: list[threading.Thread] = []
        self._http: ThreadingHTTPServer | None = None
        self._sampler_task: asyncio.Task[None] | None = None
        self._closing = False
        self.console: Console | None = None
        self.static = _static_files()

    @property
    def url(self) -> str:
        assert self._http is not None, "not started"
        host, port = self._http.server_address[:2]
        return f"http://{host}:{port}/"

    def start(self) -> Self:
        http = ThreadingHTTPServer(self._bind, _handler_class(self))  # a port in use fails here, before any thread
        http.daemon_threads = True
        self._http = http
        self._loop = loop = asyncio.new_event_loop()
        loop_thread = threading.Thread(target=loop.run_forever, name="mqconsole-loop", daemon=True)
        loop_thread.start()
        self._threads.append(loop_thread)
        try:
            asyncio.run_coroutine_threadsafe(self._open(), loop).result(CALL_TIMEOUT_S)
        except BaseException:
            self.close()
            raise
        http_thread = threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.2}, name="mqconsole-http",
                                       daemon=True)
        http_thread.start()
        self._threads.append(http_thread)
        log.info("mqconsole on %s for the NameServer %s", self.url, self.namesrv_addr)
        return self

    async def _open(self) -> None:
        admin = MQAdminExt(self.namesrv_addr, timeout_ms=self._timeout_ms, credentials=self._credentials)
        sampler = Sampler(admin, *self._sampling)
        self.console = Console(admin, sampler)
        self._sampler_task = asyncio.get_running_loop().create_task(sampler.run())

    async def _shut(self) -> None:
        if self._sampler_task is not None:
            self._sampler_task.cancel()
            await asyncio.gather(self._sampler_task, return_exceptions=True)
        if self.console is not None:
            await self.console.admin.close()

    def close(self) -> None:
        self._closing = True  # a kept-alive connection's thread may still bring a call
        if self._http is not None:
            if any(t.name == "mqconsole-http" for t in self._threads):
                self._http.shutdown()  # waits for serve_forever, so only once it runs
            self._http.server_close()
        loop = self._loop
        if loop is not None and loop.is_running():
            asyncio.run_coroutine_threadsafe(self._shut(), loop).result(CALL_TIMEOUT_S)
            loop.call_soon_threadsafe(loop.stop)
        for thread in self._threads:
            thread.join(CALL_TIMEOUT_S)
        if loop is not None and not loop.is_closed():
            loop.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def call_api(self, method: str, path: str, query: str, body: bytes) -> tuple[int, Any]:
        """One API call from an HTTP thread: (status, JSON value)."""
        try:
            segments = [unquote(s) for s in path.strip("/").split("/")]
            handler, params = find_route(ROUTES, method, segments)
            request = ApiRequest(params, dict(parse_qsl(query)), _json_object(body))
            loop = self._loop
            if self._closing or loop is None or self.console is None:
                raise ApiError(503, "the console is stopping")
            coro = handler(self.console, request)
            try:
                future = asyncio.run_coroutine_threadsafe(coro, loop)
            except RuntimeError:  # the loop closed meanwhile
                coro.close()
                raise ApiError(503, "the console is stopping") from None
            try:
                return 200, future.result(CALL_TIMEOUT_S)
            except FutureTimeout:
                future.cancel()
                raise ApiError(504, f"the cluster did not answer within {CALL_TIMEOUT_S:.0f} s") from None
        except Exception as err:  # noqa: BLE001 - every failure becomes a JSON answer (error_answer logs faults)
            return error_answer(err)


def _json_object(body: bytes) -> dict[str, Any]:
    if not body.strip():
        return {}
    try:
        value = json.loads(body)
    except (UnicodeDecodeError, ValueError) as err:
        raise ApiError(400, f"the request body is not JSON: {err}") from None
    if not isinstance(value, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return value


def _handler_class(server: ConsoleServer) -> type[BaseHTTPRequestHandler]:
    class Handler(_Handler):
        console_server = server

    return Handler


class _Handler(BaseHTTPRequestHandler):
    """GET of a static file (``/`` is index.html), and any method under /api/."""

    console_server: ConsoleServer
    server_version = "mqconsole"
    protocol_version = "HTTP/1.1"
    default_request_version = "HTTP/1.0"  # a malformed request line still gets a status line and headers

    def do_GET(self) -> None:  # noqa: N802 - BaseHTTPRequestHandler's names
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def do_DELETE(self) -> None:  # noqa: N802
        self._dispatch("DELETE")

    def do_PUT(self) -> None:  # noqa: N802
        self._dispatch("PUT")

    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        try:
            body = self._read_body()
        except ApiError as err:
            self._send_json(err.status, {"error": err.message})
            return
        if url.path == "/api" or url.path.startswith("/api/"):
            status, value = self.console_server.call_api(method, url.path, url.query, body)
            self._send_json(status, value)
        elif method == "GET":
            self._send_static(url.path)
        else:
            self._send_json(405, {"error": f"{method} is only for /api/"})

    def _read_body(self) -> bytes:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise ApiError(400, "Content-Length is not a number") from None
        if length < 0 or length > MAX_BODY:
            raise ApiError(413, f"a request body is at most {MAX_BODY} bytes")
        return self.rfile.read(length) if length else b""

    def _send_static(self, path: str) -> None:
        file = self.console_server.static.get("/index.html" if path in ("", "/") else path)
        if file is None:
            self._send(404, b"not found\n", "text/plain; charset=utf-8")
            return
        self._send(200, file.read_bytes(), CONTENT_TYPES.get(file.suffix, "application/octet-stream"))

    def _send_json(self, status: int, value: Any) -> None:
        self._send(status, json.dumps(value, ensure_ascii=False).encode("utf-8"), "application/json; charset=utf-8")

    def _send(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The server's own errors (a malformed request line, an unsupported method) as JSON too."""
        self.close_connection = True
        self._send_json(code, {"error": message or HTTPStatus(code).phrase})

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        log.debug("%s %s", self.address_string(), format % args)


def start_console(namesrv_addr: str, *, host: str = "127.0.0.1", port: int = 8080,
                  credentials: SessionCredentials | None = None, sample_interval_s: float = DEFAULT_INTERVAL_S,
                  history_s: float = DEFAULT_HISTORY_S) -> ConsoleServer:
    """The console started in this process (threads); ``close()`` it, or use it as a context manager. ``port=0``
    takes a free port (``url`` says which)."""
    return ConsoleServer(namesrv_addr, host=host, port=port, credentials=credentials,
                         sample_interval_s=sample_interval_s, history_s=history_s).start()
