"""The health endpoint's connection bound: aiohttp's low-level server (`BoundedServer`) with at
most `max_connections` connections open and one deadline each (`HttpLimits`); see
`daemon.ops.http.server` for the contract. With TLS, each connection's handshake runs inside the bound
(`daemon.ops.http.tls`)."""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import structlog
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler

from daemon.core.metrics import Metrics
from daemon.core.ratelimit import RateLimited
from daemon.core.tasks import Tracked
from daemon.ops.http.tls import TlsAccept

log = structlog.get_logger("beltsight.health")

ACCEPT_BURST = 16
"""Connections accepted per turn of the event loop (asyncio's `backlog`): the most descriptors
that connections being turned away hold at once."""
SHED_LOG_INTERVAL_S = 60.0
"""Connections turned away are logged as one summary per interval, not one line each."""


@dataclass(frozen=True, slots=True)
class HttpLimits:
    """The endpoint's bounds: open connections at most, and how long one request may take."""

    max_connections: int = 64
    request_timeout_s: float = 5.0


class _NoBadRequestTracebacks(logging.Filter):
    """aiohttp logs every unparsable request (oversized, garbage) with a traceback; a client
    cannot be allowed to fill the journal: those are answered 400 and counted, not logged."""

    def __init__(self, metrics: Metrics | None) -> None:
        super().__init__()
        self._metrics = metrics

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            if self._metrics is not None:
                self._metrics.http_connections_closed.labels(reason="bad_request").inc()
            return False
        return record.levelno >= logging.getLogger().getEffectiveLevel()


def server_logger(metrics: Metrics | None) -> logging.Logger:
    logger = logging.getLogger("beltsight.http")
    for old in [f for f in logger.filters if isinstance(f, _NoBadRequestTracebacks)]:
        logger.removeFilter(old)
    logger.addFilter(_NoBadRequestTracebacks(metrics))
    logger.setLevel(logging.DEBUG)  # aiohttp logs some bad requests at debug: the filter counts them too
    return logger


_REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n"
    b"Retry-After: 1\r\nConnection: close\r\n\r\nbusy\n"
)


class _Refused(asyncio.Protocol):
    """A connection beyond the bound with every slot busy: one short 503, then closed at once."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(_REFUSAL)  # fits any fresh socket's send buffer: close() frees the descriptor now
        transport.close()


class _Handler(RequestHandler):
    """aiohttp's connection handler, telling the server as soon as a whole request head has
    arrived (before aiohttp schedules the request's task), so a flood of new connections cannot
    evict a client that has already asked."""

    __slots__ = ("_bounded", "_last_bytes")

    def __init__(self, manager: BoundedServer, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._bounded = manager
        self._last_bytes = b""

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """aiohttp's answer to an unparsable request, without the request's own bytes: its parser
        quotes the offending line (`Content-Length: Bearer ...`), which may hold credentials."""
        if isinstance(exc, HttpProcessingError):
            message = f"{status} {HTTPStatus(status).phrase}: unparsable request ({type(exc).__name__})"
        return super().handle_error(request, status, exc, message)

    def data_received(self, data: bytes) -> None:
        seen = self._last_bytes + data
        if b"\r\n\r\n" in seen:
            self._bounded.mark_busy(self)
        self._last_bytes = seen[-3:]
        super().data_received(data)


@dataclass(slots=True)
class _Conn:
    transport: asyncio.Transport
    deadline: asyncio.TimerHandle
    busy: bool = False


class BoundedServer(web.Server):
    """aiohttp's low-level server with a bound on open connections and a deadline for each.

    `__call__` (the protocol factory the listening socket calls for each accepted connection)
    is where the bound is enforced, before aiohttp sees the connection."""

    def __init__(
        self,
        handler: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]],
        limits: HttpLimits,
        metrics: Metrics | None,
        tls: ssl.SSLContext | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(handler, **kwargs)
        self.limits = limits
        self._metrics = metrics
        self._tls = tls
        self._unmade: dict[RequestHandler, float] = {}
        self._open: dict[RequestHandler, _Conn] = {}  # insertion order: oldest first
        self._shed = {"evicted": 0, "refused": 0, "deadline": 0}
        self._shed_log = RateLimited(SHED_LOG_INTERVAL_S)
        self._handshakes = Tracked(_setup_failed)  # TLS: each connection's handshake (`close_handshakes`)

    async def close_handshakes(self) -> None:
        """End the TLS handshakes still running (the listener closed first: no new one starts)."""
        await self._handshakes.close()

    @property
    def open_connections(self) -> int:
        return len(self._open) + len(self._unmade)

    def __call__(self) -> RequestHandler:  # a _Refused (a plain protocol) for a connection turned away
        now = time.monotonic()
        for handler, made in list(self._unmade.items()):
            if now - made > 1.0:  # the transport never came up (accept failed half-way)
                del self._unmade[handler]
        if self.open_connections >= self.limits.max_connections and not self._evict_one():
            self._count("refused")
            return _Refused()  # type: ignore[return-value]
        handler = _Handler(self, loop=self._loop, **self._kwargs)
        self._unmade[handler] = now
        if self._tls is not None:
            tls = TlsAccept(self, handler, self._tls, self.limits.request_timeout_s, self._handshakes)
            return tls  # type: ignore[return-value]
        return handler

    def _evict_one(self) -> bool:
        idle = next((handler for handler, conn in self._open.items() if not conn.busy), None)
        if idle is None:
            return False
        self._close(idle, "evicted")
        return True

    def _close(self, handler: RequestHandler, reason: str) -> None:
        conn = self._open.pop(handler, None)
        if conn is not None:
            conn.deadline.cancel()  # (holding the handler for the deadline would keep it alive)
            self._count(reason)
            conn.transport.abort()  # the descriptor is closed on the loop's next turn
            self._gauge()

    def connection_made(self, handler: RequestHandler, transport: asyncio.Transport) -> None:
        super().connection_made(handler, transport)
        self.track(handler, transport)

    def track(self, handler: RequestHandler, transport: asyncio.Transport) -> None:
        """Count the connection from now, its deadline running (TLS: from accept, on the raw transport)."""
        self._unmade.pop(handler, None)
        if handler in self._open:
            return
        timer = asyncio.get_running_loop().call_later(self.limits.request_timeout_s, self._close, handler, "deadline")
        self._open[handler] = _Conn(transport, timer)
        self._gauge()

    def connection_lost(self, handler: RequestHandler, exc: BaseException | None = None) -> None:
        super().connection_lost(handler, exc)
        self._unmade.pop(handler, None)
        conn = self._open.pop(handler, None)
        if conn is not None:
            conn.deadline.cancel()
        self._gauge()

    def mark_busy(self, handler: RequestHandler) -> None:
        """A whole request head arrived on this connection: it is served, not evicted."""
        conn = self._open.get(handler)
        if conn is not None:
            conn.busy = True

    def _count(self, reason: str) -> None:
        self._shed[reason] += 1
        if self._metrics is not None:
            self._metrics.http_connections_closed.labels(reason=reason).inc()
        if self._shed_log.allow() is not None:  # the counts cover every connection shed since the last line
            shed = self._shed
            log.warning(
                "http_connections_shed",
                open=self.open_connections,
                max_connections=self.limits.max_connections,
                evicted=shed["evicted"],
                refused=shed["refused"],
                deadline=shed["deadline"],
            )
            self._shed = dict.fromkeys(self._shed, 0)

    def _gauge(self) -> None:
        if self._metrics is not None:
            self._metrics.http_connections_open.set(self.open_connections)


def _setup_failed(task: str, exc: BaseException) -> None:
    log.error("http_tls_setup_failed", task=task, error=f"{type(exc).__name__}: {exc}")


__all__ = ["ACCEPT_BURST", "BoundedServer", "server_logger"]
