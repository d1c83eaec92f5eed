"""Health for systemd and operators: sd_notify (READY/WATCHDOG/STATUS/STOPPING), the watchdog, the HTTP endpoint.

The endpoint (`/healthz`, `/metrics`, and the live view's routes, see `daemon.ops.liveview`) is
served by aiohttp's low-level server (it parses the requests; prometheus-client writes the
exposition). What a client can take from the daemon is bounded, so that no client can starve
cameras, Redis or inference of descriptors or loop time:

- at most `max_connections` connections at once. A connection beyond that evicts the oldest
  one that has not yet sent a whole request head (a slow or idle sender); when every open
  connection is busy with a request, the new one is answered `503` and closed at once. Either
  way the daemon's descriptors in use by the endpoint stay at `max_connections` plus the few
  being turned away (at most `ACCEPT_BURST` per loop turn), and nothing waits holding one: what
  the kernel queues before accept costs the daemon no descriptor.
- one deadline for the whole connection (`request_timeout_s` from accept to the end of the
  response), not per line; every response closes the connection.
- request line and header field at most `MAX_LINE_BYTES`, at most `MAX_HEADERS` headers:
  larger requests get `400` (aiohttp's parser) and are closed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import structlog
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from daemon.core.metrics import Metrics

log = structlog.get_logger("beltsight.health")

MAX_LINE_BYTES = 4096
"""Longest request line, and longest header field, the endpoint accepts."""
MAX_HEADERS = 32
ACCEPT_BURST = 16
"""Connections accepted per turn of the event loop (asyncio's `backlog`): the most descriptors
that connections being turned away hold at once."""
KERNEL_BACKLOG = 512
"""The listen queue in the kernel: what waits there holds none of the daemon's descriptors, and a
full queue would drop a normal client's SYN (a 1 s retransmit) while a flood churns."""
SHED_LOG_INTERVAL_S = 60.0
"""Connections turned away are logged as one summary per interval, not one line each."""


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


def _server_logger(metrics: Metrics | None) -> logging.Logger:
    logger = logging.getLogger("beltsight.http")
    for old in [f for f in logger.filters if isinstance(f, _NoBadRequestTracebacks)]:
        logger.removeFilter(old)
    logger.addFilter(_NoBadRequestTracebacks(metrics))
    logger.setLevel(logging.DEBUG)  # aiohttp logs some bad requests at debug: the filter counts them too
    return logger


class SystemdNotifier:
    """sd_notify(3) over $NOTIFY_SOCKET; a no-op when not run by systemd."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        environ = os.environ if env is None else env
        self._address = environ.get("NOTIFY_SOCKET") or None
        usec = environ.get("WATCHDOG_USEC", "")
        pid = environ.get("WATCHDOG_PID", "")
        mine = not pid or pid == str(os.getpid())
        self.watchdog_interval_s: float | None = int(usec) / 2e6 if usec.isdigit() and mine else None

    @property
    def enabled(self) -> bool:
        return self._address is not None

    def notify(self, state: str) -> None:
        if self._address is None:
            return
        address = self._address
        if address.startswith("@"):  # abstract namespace socket
            address = "\0" + address[1:]
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.connect(address)
                sock.sendall(state.encode())
        except OSError as exc:
            log.warning("sd_notify_failed", error=str(exc))

    def ready(self, status: str) -> None:
        self.notify(f"READY=1\nSTATUS={status}")

    def status(self, status: str) -> None:
        self.notify(f"STATUS={status}")

    def stopping(self) -> None:
        self.notify("STOPPING=1")

    def watchdog(self) -> None:
        self.notify("WATCHDOG=1")


async def watchdog(notifier: SystemdNotifier, busy_s: Callable[[], Mapping[int, float]], interval_s: float) -> None:
    """Ping systemd (WATCHDOG=1) every `interval_s` while the loop runs and no lane's engine has
    been stuck on one batch for long (`busy_s`: each lane's longest batch in progress); else log
    `engine_stuck` and let systemd's watchdog restart the daemon."""
    stuck_after_s = max(30.0, 4 * interval_s)
    while True:
        busy = dict(busy_s())
        if all(b < stuck_after_s for b in busy.values()):
            notifier.watchdog()
        else:
            log.error("engine_stuck", lanes=busy)
        await asyncio.sleep(interval_s)


HealthProvider = Callable[[], dict[str, Any]]
Handler = Callable[[web.BaseRequest, dict[str, str]], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, slots=True)
class HttpLimits:
    max_connections: int = 64
    request_timeout_s: float = 5.0


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
        **kwargs: Any,
    ) -> None:
        super().__init__(handler, **kwargs)
        self.limits = limits
        self._metrics = metrics
        self._unmade: dict[RequestHandler, float] = {}
        self._open: dict[RequestHandler, _Conn] = {}  # insertion order: oldest first
        self._shed = {"evicted": 0, "refused": 0, "deadline": 0}
        self._shed_logged_mono = 0.0

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
        self._unmade.pop(handler, None)
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
        now = time.monotonic()
        if now - self._shed_logged_mono >= SHED_LOG_INTERVAL_S:
            self._shed_logged_mono = now
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


def _listening_socket(host: str, port: int) -> socket.socket:
    name = host.strip("[]") or None  # "[::1]" -> "::1"; "" -> every address
    family, kind, proto, _name, address = socket.getaddrinfo(
        name, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class HealthServer:
    """GET /healthz (JSON, 200 when ok, 503 when not) and GET /metrics (Prometheus text), plus the
    routes added with `route()` (the live view's); 404 for any other path, 405 for another method."""

    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        health: HealthProvider,
        *,
        limits: HttpLimits | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._host = host
        self._port = port
        self._registry = registry
        self._health = health
        self._limits = limits or HttpLimits()
        self._metrics = metrics
        self._runner: web.ServerRunner | None = None
        self._server: BoundedServer | None = None
        self._listener: asyncio.Server | None = None
        self._routes: list[tuple[re.Pattern[str], Handler]] = []
        self.route(r"/healthz|/health", self._healthz)
        self.route(r"/metrics", self._prometheus)

    def route(self, pattern: str, handler: Handler) -> None:
        """GET `pattern` (a regex matched against the whole path; named groups are passed on)."""
        self._routes.append((re.compile(pattern), handler))

    @property
    def port(self) -> int:
        if self._listener is None or not self._listener.sockets:
            return self._port
        return int(self._listener.sockets[0].getsockname()[1])

    @property
    def open_connections(self) -> int:
        return 0 if self._server is None else self._server.open_connections

    async def start(self) -> None:
        self._server = BoundedServer(
            self._dispatch,
            self._limits,
            self._metrics,
            max_line_size=MAX_LINE_BYTES,
            max_field_size=MAX_LINE_BYTES,
            max_headers=MAX_HEADERS,
            keepalive_timeout=0,
            lingering_time=0,
            access_log=None,
            logger=_server_logger(self._metrics),
        )
        self._runner = web.ServerRunner(self._server, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        loop = asyncio.get_running_loop()
        sock = _listening_socket(self._host, self._port)
        self._listener = await loop.create_server(self._server, sock=sock, backlog=ACCEPT_BURST)
        sock.listen(KERNEL_BACKLOG)  # after asyncio's listen(ACCEPT_BURST): a longer kernel queue, same burst
        log.info("health_listening", url=f"http://{self._host}:{self.port}/healthz")

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _dispatch(self, request: web.BaseRequest) -> web.StreamResponse:
        if self._server is not None:
            self._server.mark_busy(request.protocol)
        response = await self._respond(request)
        response.force_close()
        return response

    async def _respond(self, request: web.BaseRequest) -> web.StreamResponse:
        for pattern, handler in self._routes:
            match = pattern.fullmatch(request.path)
            if match is None:
                continue
            if request.method not in ("GET", "HEAD"):
                return web.Response(status=405, text="GET only\n", headers={"Allow": "GET, HEAD"})
            return await handler(request, match.groupdict())
        return web.Response(status=404, text="not found: try /, /healthz or /metrics\n")

    async def _healthz(self, _request: web.BaseRequest, _params: dict[str, str]) -> web.StreamResponse:
        report = self._health()
        body = json.dumps(report, sort_keys=True) + "\n"
        return web.Response(status=200 if report.get("ok") else 503, text=body, content_type="application/json")

    async def _prometheus(self, _request: web.BaseRequest, _params: dict[str, str]) -> web.StreamResponse:
        response = web.Response(status=200, body=generate_latest(self._registry))
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response
