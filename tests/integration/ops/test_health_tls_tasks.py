"""The health endpoint's TLS handshakes (`daemon.ops.http.tls`) are tasks of the server's
`Tracked` set: closing the server ends a handshake still under way (no task left pending), and a
handshake's unexpected failure closes its connection and is logged (`http_tls_setup_failed`), not
lost."""

from __future__ import annotations

import asyncio

import pytest
import structlog
from prometheus_client import CollectorRegistry

from daemon.config.health import HealthConfig
from daemon.core.metrics import Metrics
from daemon.ops.http import HealthServer, HttpLimits
from daemon.ops.http.tls import TlsAccept
from tests.support.fixtures_redis_tls import TlsMaterial
from tests.support.waits import async_wait_until


def tls_server(tls_material: TlsMaterial) -> HealthServer:
    tls = HealthConfig(tls_cert_file=tls_material.server_cert, tls_key_file=tls_material.server_key).tls_context()
    metrics = Metrics()
    registry: CollectorRegistry = metrics.registry
    limits = HttpLimits(8, 60.0)  # no deadline closes the connection while the test looks
    return HealthServer("127.0.0.1", 0, registry, lambda: {"ok": True}, metrics=metrics, tls=tls, limits=limits)


def handshakes() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "health-tls" and not t.done()]


def test_closing_the_server_ends_a_handshake_still_under_way(tls_material: TlsMaterial) -> None:
    """A client that connects and never sends its hello: the handshake waits; the server's close
    cancels it and returns once it ended."""
    server = tls_server(tls_material)

    async def scenario() -> tuple[int, int]:
        await server.start()
        _reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            await async_wait_until(lambda: len(handshakes()) == 1)
            waiting = len(handshakes())
            await asyncio.wait_for(server.close(), 10)
            return waiting, len(handshakes())
        finally:
            writer.close()

    assert asyncio.run(scenario()) == (1, 0)


def test_a_handshake_that_fails_unexpectedly_closes_its_connection_and_is_logged(
    tls_material: TlsMaterial, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = tls_server(tls_material)

    async def broken(self: TlsAccept, raw: asyncio.Transport) -> None:
        raise KeyError("injected")

    monkeypatch.setattr(TlsAccept, "_start_tls", broken)

    async def scenario() -> tuple[bytes, int]:
        await server.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            closed = await asyncio.wait_for(reader.read(), 10)  # closed by the server: EOF, nothing sent
            writer.close()
            await async_wait_until(lambda: server.open_connections == 0)
            return closed, server.open_connections
        finally:
            await server.close()

    with structlog.testing.capture_logs() as logs:
        assert asyncio.run(scenario()) == (b"", 0)
    failed = [(e["task"], e["error"]) for e in logs if e["event"] == "http_tls_setup_failed"]
    assert failed == [("health-tls", "KeyError: 'injected'")]
