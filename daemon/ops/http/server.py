"""The HTTP endpoint for operators: `/healthz`, `/metrics`, and the live view's routes (see `daemon.ops.liveview`).

It is served by aiohttp's low-level server (it parses the requests; prometheus-client writes the
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

With `[health] tls_cert_file` it serves HTTPS only (`daemon.ops.http.tls`: the handshake inside the
bound and the deadline); with `basic_auth_users` every request but (optionally) `/healthz` needs a
user's password (`daemon.ops.http.auth`). After that check, a request a browser's page could forge
(another site's `Origin`, a rebound `Host`, a write that is not JSON) is refused
(`daemon.ops.http.browser`).
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from daemon.core.metrics import Metrics
from daemon.ops.http.auth import BasicAuth
from daemon.ops.http.bound import ACCEPT_BURST, BoundedServer, HttpLimits, server_logger
from daemon.ops.http.browser import BrowserGuard, BrowserPolicy, loopback_only

log = structlog.get_logger("beltsight.health")

MAX_LINE_BYTES = 4096
"""Longest request line, and longest header field, the endpoint accepts."""
MAX_HEADERS = 32
KERNEL_BACKLOG = 512
"""The listen queue in the kernel: what waits there holds none of the daemon's descriptors, and a
full queue would drop a normal client's SYN (a 1 s retransmit) while a flood churns."""


HealthProvider = Callable[[], dict[str, Any]]
Handler = Callable[[web.BaseRequest, dict[str, str]], Awaitable[web.StreamResponse]]


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
        tls: ssl.SSLContext | None = None,
        users: Mapping[str, str] | None = None,
        healthz_open: bool = True,
        allowed_hosts: Sequence[str] = (),
        allowed_origins: Sequence[str] = (),
    ) -> None:
        self._host = host
        self._port = port
        self._registry = registry
        self._health = health
        self._limits = limits or HttpLimits()
        self._metrics = metrics
        self._tls = tls
        self._auth = BasicAuth(users, metrics) if users else None
        self._open_paths = {"/healthz", "/health"} if healthz_open else set()
        self._browser = BrowserGuard(self._policy(allowed_hosts, allowed_origins), metrics)
        self._runner: web.ServerRunner | None = None
        self._server: BoundedServer | None = None
        self._listener: asyncio.Server | None = None
        self._routes: list[tuple[re.Pattern[str], Handler, tuple[str, ...]]] = []
        self.route(r"/healthz|/health", self._healthz)
        self.route(r"/metrics", self._prometheus)

    def route(self, pattern: str, handler: Handler, methods: tuple[str, ...] = ("GET", "HEAD")) -> None:
        """`methods` on `pattern` (a regex matched against the whole path; named groups are passed on)."""
        self._routes.append((re.compile(pattern), handler, methods))

    @property
    def authenticated(self) -> bool:
        """Whether every request (but an open /healthz) needs a user's password."""
        return self._auth is not None

    @property
    def host(self) -> str:
        return self._host

    def set_users(self, users: Mapping[str, str]) -> None:
        """Check requests against `users` from now on (a reload); none: no authentication."""
        if self._auth is not None:
            self._auth.close()
        self._auth = BasicAuth(users, self._metrics) if users else None

    def _policy(self, hosts: Sequence[str], origins: Sequence[str]) -> BrowserPolicy:
        return BrowserPolicy.of(
            loopback=loopback_only(self._host), tls=self._tls is not None, hosts=hosts, origins=origins
        )

    @property
    def browser_policy(self) -> BrowserPolicy:
        """The `Host` and `Origin` rules in force."""
        return self._browser.policy

    def set_browser_policy(self, allowed_hosts: Sequence[str], allowed_origins: Sequence[str]) -> None:
        """Check `Host` and `Origin` against these lists from now on (a reload)."""
        self._browser.policy = self._policy(allowed_hosts, allowed_origins)

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
            self._tls,
            max_line_size=MAX_LINE_BYTES,
            max_field_size=MAX_LINE_BYTES,
            max_headers=MAX_HEADERS,
            keepalive_timeout=0,
            lingering_time=0,
            access_log=None,
            logger=server_logger(self._metrics),
        )
        self._runner = web.ServerRunner(self._server, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        loop = asyncio.get_running_loop()
        sock = _listening_socket(self._host, self._port)
        self._listener = await loop.create_server(self._server, sock=sock, backlog=ACCEPT_BURST)
        sock.listen(KERNEL_BACKLOG)  # after asyncio's listen(ACCEPT_BURST): a longer kernel queue, same burst
        scheme = "http" if self._tls is None else "https"
        log.info("health_listening", url=f"{scheme}://{self._host}:{self.port}/healthz")

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
        if self._server is not None:
            await self._server.close_handshakes()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._auth is not None:
            self._auth.close()

    async def _dispatch(self, request: web.BaseRequest) -> web.StreamResponse:
        if self._server is not None:
            self._server.mark_busy(request.protocol)
        response = await self._respond(request)
        response.force_close()
        return response

    async def _respond(self, request: web.BaseRequest) -> web.StreamResponse:
        if self._auth is not None and request.path not in self._open_paths:
            refusal = await self._auth.refusal(request)
            if refusal is not None:
                return refusal
        if (refusal := self._browser.host_refusal(request)) is not None:
            return refusal
        for pattern, handler, methods in self._routes:
            match = pattern.fullmatch(request.path)
            if match is None:
                continue
            if request.method not in methods:
                allow = ", ".join(methods)
                return web.Response(status=405, text=f"{allow} only\n", headers={"Allow": allow})
            if (refusal := self._browser.write_refusal(request)) is not None:
                return refusal
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
