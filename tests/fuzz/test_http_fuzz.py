"""The HTTP endpoint (daemon/ops/http/server.py, with Basic authentication on) under random raw
requests: random request lines, paths, headers, credentials and bodies over a real socket. Every
one gets a 4xx or the right answer (never a 5xx) or a closed connection, within the request
deadline (never a hung one), and the server still answers /healthz afterwards."""

from __future__ import annotations

import asyncio
import base64
import socket
import threading
import time
from collections.abc import Iterator

import bcrypt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemon.core.metrics import Metrics
from daemon.ops.http.bound import HttpLimits
from daemon.ops.http.server import HealthServer

USER, PASSWORD = "ops", "s3cret-pass"
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
REQUEST_TIMEOUT_S = 1.0
GOOD_AUTH = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="http-fuzz", daemon=True)
    thread.start()
    metrics = Metrics()
    server = HealthServer(
        "127.0.0.1",
        0,
        metrics.registry,
        lambda: {"ok": True},
        metrics=metrics,
        users={USER: HASH},
        limits=HttpLimits(16, REQUEST_TIMEOUT_S),
    )
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(30)
    try:
        yield server.port
    finally:
        asyncio.run_coroutine_threadsafe(server.close(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


def exchange(port: int, raw: bytes) -> bytes:
    """Send `raw` and read until the server closes (a hung connection fails here)."""
    deadline = time.monotonic() + REQUEST_TIMEOUT_S + 10
    with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT_S + 10) as sock:
        try:
            sock.sendall(raw)  # no half-close: an incomplete request must be ended by the server's deadline
        except OSError:
            return b""  # refused mid-send: closed, which is an answer
        reply = b""
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                return reply
            if not chunk:
                return reply
            reply += chunk
    raise AssertionError(f"the connection stayed open: {raw[:200]!r}")


def status_of(reply: bytes) -> int | None:
    if not reply:
        return None
    line = reply.split(b"\r\n", 1)[0].split()
    # aiohttp answers in the request's version (HTTP/2.0 included), so only the scheme is checked
    assert len(line) >= 2 and line[0].startswith(b"HTTP/"), f"not an HTTP reply: {reply[:200]!r}"
    return int(line[1])


token = st.text(st.characters(codec="ascii", exclude_characters="\r\n"), max_size=20)
methods = st.sampled_from(["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PRI", "get", ""]) | token
paths = st.sampled_from(["/healthz", "/health", "/metrics", "/", "//", "/%00", "/healthz?x=1", "*", "/a" * 300]) | token
header_names = st.sampled_from(["Authorization", "Content-Length", "Transfer-Encoding", "Host", "Connection"]) | token
auth_values = st.sampled_from([GOOD_AUTH, "Basic", "Basic ====", "Bearer x", "Basic " + "A" * 5000]) | st.binary(
    max_size=40
).map(lambda b: "Basic " + base64.b64encode(b).decode())
header_values = auth_values | st.sampled_from(["chunked", "-1", "99999999999", "0", "keep-alive", "x" * 9000]) | token


@st.composite
def requests(draw: st.DrawFn) -> tuple[bytes, str, str, bool]:
    method, path = draw(methods), draw(paths)
    version = draw(st.sampled_from(["HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/9", ""]))
    headers = draw(st.lists(st.tuples(header_names, header_values), max_size=6))
    body = draw(st.binary(max_size=64))
    lines = [f"{method} {path} {version}".encode(), b"Host: 127.0.0.1"]
    lines += [f"{name}: {value}".encode("ascii", "replace") for name, value in headers]
    raw = b"\r\n".join(lines) + b"\r\n\r\n" + body
    authorized = (("Authorization", GOOD_AUTH) in headers) and sum(
        n.lower() == "authorization" for n, _ in headers
    ) == 1
    clean = version == "HTTP/1.1" and not headers and not body
    return raw, method, path, clean or (authorized and len(headers) == 1 and not body and version == "HTTP/1.1")


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(requests())
def test_a_random_request_gets_a_4xx_or_the_right_answer(port: int, request: tuple[bytes, str, str, bool]) -> None:
    raw, method, path, well_formed = request
    status = status_of(exchange(port, raw))
    assert status is None or status < 500, f"{status} for {raw[:300]!r}"
    if well_formed and method in ("GET", "HEAD") and path in ("/healthz", "/health"):
        assert status == 200
    assert status_of(exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")) == 200


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_random_bytes_get_a_4xx_or_a_close(port: int, raw: bytes) -> None:
    status = status_of(exchange(port, raw))
    assert status is None or 400 <= status < 500, f"{status} for {raw[:300]!r}"
    assert status_of(exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")) == 200


def test_a_held_connection_that_sends_nothing_is_closed_and_the_server_still_answers(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT_S + 10) as held:
        metrics = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: " + GOOD_AUTH.encode() + b"\r\n\r\n"
        assert status_of(exchange(port, metrics)) == 200
        started = time.monotonic()
        status = status_of(held.recv(1024))  # the socket's timeout fails a connection left open
        assert status is None or 400 <= status < 500
        assert time.monotonic() - started < REQUEST_TIMEOUT_S + 10
