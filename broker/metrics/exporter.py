"""The Prometheus endpoint (``metricsPromExporterHost:metricsPromExporterPort``), served on the node's own event loop.

Apache's exporter answers a GET of any path with the metrics page; so does this one (HEAD gets the headers). It runs
on the broker's loop rather than in a thread (prometheus-client's server): the gauges read the broker's tables while
no request changes them, and a scrape every few seconds costs the loop a few milliseconds without a second thread
taking the GIL. Each answer closes its connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from broker.common.errors import ConfigError

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 10.0
MAX_REQUEST_HEAD = 16 * 1024
CONTENT_TYPE = b"text/plain; version=0.0.4; charset=utf-8"  # the text format generate_latest writes, as Apache's


class PrometheusEndpoint:
    """Serves ``render()``'s page on ``host:port`` (0 picks a free port: read ``port`` after ``start``)."""

    def __init__(self, host: str, port: int, render: Callable[[], bytes]) -> None:
        self.host = host
        self._requested_port = port
        self._render = render
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("PrometheusEndpoint.port is known only after start()")
        return self._server.sockets[0].getsockname()[1]

    async def start(self) -> None:
        """Listen; a port that cannot be bound is a ConfigError naming the keys."""
        try:
            self._server = await asyncio.start_server(self._serve, self.host, self._requested_port,
                                                      limit=MAX_REQUEST_HEAD)
        except OSError as err:
            raise ConfigError(f"metricsPromExporterPort {self._requested_port} on metricsPromExporterHost "
                              f"{self.host} cannot be bound: {err.strerror or err}") from err
        log.info("Prometheus metrics on http://%s:%s/metrics", self.host, self.port)

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(REQUEST_TIMEOUT_S):
                await self._server.wait_closed()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT_S):
                method = (await reader.readuntil(b"\r\n\r\n")).split(b" ", 1)[0]
                status, content_type, body = self._answer(method)
                writer.write(b"HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                             % (status, content_type, len(body)))
                if method != b"HEAD":
                    writer.write(body)
                await writer.drain()
        except (TimeoutError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as err:
            log.debug("metrics request from %s dropped: %r", writer.get_extra_info("peername"), err)
        finally:
            writer.close()

    def _answer(self, method: bytes) -> tuple[bytes, bytes, bytes]:
        """(status, content type, body) for a request with ``method``."""
        if method not in (b"GET", b"HEAD"):
            return b"405 Method Not Allowed", b"text/plain", b"only GET and HEAD\n"
        try:
            return b"200 OK", CONTENT_TYPE, self._render()
        except Exception as err:  # a gauge's bug: say so to the scraper, keep serving
            log.exception("rendering the metrics failed")
            return b"500 Internal Server Error", b"text/plain", f"rendering the metrics failed: {err!r}\n".encode()
