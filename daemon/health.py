"""Health for systemd and operators: sd_notify (READY/WATCHDOG/STATUS/STOPPING), /healthz, /metrics.

The HTTP endpoint is deliberately tiny (two GET routes on asyncio streams); the metrics
exposition itself is prometheus-client's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import Callable
from typing import Any

import structlog
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

log = structlog.get_logger("beltsight.health")


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


HealthProvider = Callable[[], dict[str, Any]]


class HealthServer:
    """GET /healthz (JSON, 200 when ok, 503 when not) and GET /metrics (Prometheus text)."""

    def __init__(self, host: str, port: int, registry: CollectorRegistry, health: HealthProvider) -> None:
        self._host = host
        self._port = port
        self._registry = registry
        self._health = health
        self._server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        if self._server is None or not self._server.sockets:
            return self._port
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self._host, self._port)
        log.info("health_listening", url=f"http://{self._host}:{self.port}/healthz")

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), 5.0)
            while (await asyncio.wait_for(reader.readline(), 5.0)).strip():
                pass  # headers are not needed
            parts = request.decode("latin-1").split()
            path = parts[1].split("?")[0] if len(parts) >= 2 else ""
            status, ctype, body = self._route(parts[0] if parts else "", path)
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                "Connection: close\r\n\r\n"
            )
            writer.write(head.encode() + body)
            await writer.drain()
        except (TimeoutError, ConnectionError, UnicodeDecodeError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    def _route(self, method: str, path: str) -> tuple[str, str, bytes]:
        if method != "GET":
            return "405 Method Not Allowed", "text/plain", b"GET only\n"
        if path == "/metrics":
            return "200 OK", CONTENT_TYPE_LATEST, generate_latest(self._registry)
        if path in ("/healthz", "/health", "/"):
            report = self._health()
            code = "200 OK" if report.get("ok") else "503 Service Unavailable"
            return code, "application/json", json.dumps(report, sort_keys=True).encode() + b"\n"
        return "404 Not Found", "text/plain", b"try /healthz or /metrics\n"
