"""The health endpoint locked for exposure (`[health] tls_cert_file`/`tls_key_file`,
`basic_auth_users`, `healthz_open`), against the real daemon (in-process) with a file camera and
Redis, and against `HealthServer` alone: HTTPS works and plain HTTP is not answered; `401` with
the challenge without or with wrong credentials, `200` with the right ones, `/healthz` open when
configured and closed when not; refusals counted; a flood of connections that never finish a TLS
handshake stays inside `max_connections` and is closed by the deadline while a normal client is
served; and the live view renders over HTTPS in headless Chromium (DevTools protocol: the `Authorization`
header on every request; credentials in the URL break the page's relative `fetch()`)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import http.client
import json
import re
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from io import BytesIO
from pathlib import Path

import bcrypt
import numpy as np
import pytest
from PIL import Image
from prometheus_client import CollectorRegistry

from daemon.config.health import HealthConfig
from daemon.core.metrics import Metrics
from daemon.ops.http import HealthServer, HttpLimits
from daemon.ops.http.auth import REALM
from tests.support.chromium import CHROMIUM, Chromium
from tests.support.daemon_harness import InProcessDaemon, write_config
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_redis_tls import TlsMaterial
from tests.support.fixtures_rtsp import Clip
from tests.support.waits import wait_until

pytestmark = pytest.mark.slow
USER, PASSWORD = "operator", "s3cret-pass"
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
MAX_CONNECTIONS = 8


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def https_get(
    port: int, path: str, ca: Path, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    context = ssl.create_default_context(cafile=str(ca))
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


def plain_http_refused(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/healthz")
        conn.getresponse()
    except (http.client.RemoteDisconnected, ConnectionError):
        return True
    finally:
        conn.close()
    return False


def sample(exposition: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in exposition.splitlines():
        if line.startswith(f"{name}{{{want}}} ") or (not labels and line.startswith(f"{name} ")):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@contextlib.contextmanager
def locked_daemon(
    tmp_path: Path, redis: RedisServer, clip_factory: Callable[..., Clip], tls: TlsMaterial
) -> Iterator[tuple[InProcessDaemon, int]]:
    clip = clip_factory(640, 480, fps=10, seconds=4.0, seed=33, synthetic=True)
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[{"id": "replay", "url": str(clip.path), "realtime": True, "loop": True}],
        health={
            "snapshot_min_interval_s": 0.5,
            "max_connections": MAX_CONNECTIONS,
            "request_timeout_s": 2.0,
            "tls_cert_file": str(tls.server_cert),
            "tls_key_file": str(tls.server_key),
            "basic_auth_users": {USER: HASH},
        },
        tracking={"lines_dir": str(tmp_path / "lines")},
    )
    with InProcessDaemon(config) as d:
        wait_until(lambda: d.daemon.health is not None and d.daemon.state == "running", 60, "the daemon ready", d)
        assert d.daemon.health is not None
        yield d, d.daemon.health.port


def test_https_and_basic_auth_on_the_daemon(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    clip_factory: Callable[..., Clip],
    tls_material: TlsMaterial,
) -> None:
    ca, auth = tls_material.ca, basic(USER, PASSWORD)
    with locked_daemon(tmp_path, redis_server(), clip_factory, tls_material) as (d, port):
        status, _h, body = https_get(port, "/healthz", ca)  # healthz_open (default): no credentials needed
        assert status in (200, 503) and b'"status"' in body
        for headers in ({}, basic(USER, "wrong"), basic("nobody", PASSWORD), {"Authorization": "Basic !!"}):
            status, got, _b = https_get(port, "/metrics", ca, headers)
            assert status == 401 and got["WWW-Authenticate"].startswith(f'Basic realm="{REALM}"'), (headers, got)
            assert https_get(port, "/api/cameras", ca, headers)[0] == 401
        assert https_get(port, "/nope", ca)[0] == 401  # paths are not revealed without credentials
        status, _h, body = https_get(port, "/metrics", ca, auth)
        assert status == 200
        exposition = body.decode()
        assert sample(exposition, "beltsight_http_auth_failures_total", reason="missing") >= 3
        assert sample(exposition, "beltsight_http_auth_failures_total", reason="bad_credentials") == 4
        assert https_get(port, "/api/cameras", ca, auth)[0] == 200
        assert https_get(port, "/nope", ca, auth)[0] == 404
        assert plain_http_refused(port)
        assert d.counter("beltsight_http_auth_failures_total", reason="bad_credentials") == 4


def test_unfinished_tls_handshakes_stay_inside_the_bound(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    clip_factory: Callable[..., Clip],
    tls_material: TlsMaterial,
) -> None:
    ca, auth = tls_material.ca, basic(USER, PASSWORD)
    with locked_daemon(tmp_path, redis_server(), clip_factory, tls_material) as (d, port):
        assert d.daemon.health is not None
        health = d.daemon.health
        flood: list[socket.socket] = []
        try:
            for i in range(4 * MAX_CONNECTIONS):  # silent, or half a ClientHello, never finishing
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                if i % 2:
                    sock.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
                flood.append(sock)
                assert health.open_connections <= MAX_CONNECTIONS
            served: list[int] = []

            def normal_client() -> bool:
                with contextlib.suppress(OSError):
                    served.append(https_get(port, "/metrics", ca, auth)[0])
                return served[-1:] == [200]

            wait_until(normal_client, 30, "a normal HTTPS client served during the flood", d)
            assert health.open_connections <= MAX_CONNECTIONS

            def all_closed_by_the_daemon() -> bool:
                for sock in flood:
                    sock.settimeout(0.01)
                    with contextlib.suppress(TimeoutError, BlockingIOError):
                        try:
                            if sock.recv(4096) == b"":
                                continue
                        except ConnectionError:
                            continue
                    return False
                return True

            wait_until(all_closed_by_the_daemon, 30, "every unfinished handshake closed (evicted or deadline)", d)
            wait_until(lambda: health.open_connections == 0, 30, "no connection left open", d)
            reasons = ("evicted", "refused", "deadline")
            closed = {r: d.counter("beltsight_http_connections_closed_total", reason=r) for r in reasons}
            assert sum(closed.values()) >= 4 * MAX_CONNECTIONS, closed  # every one closed by the daemon
            assert closed["deadline"] >= 1, closed  # the last ones, by request_timeout_s
            assert https_get(port, "/metrics", ca, auth)[0] == 200
        finally:
            for sock in flood:
                sock.close()


def test_healthz_closed_and_tls_alone_on_the_server(tls_material: TlsMaterial) -> None:
    """`healthz_open = false`: /healthz needs credentials too; TLS without users: open, HTTPS only."""
    tls = HealthConfig(tls_cert_file=tls_material.server_cert, tls_key_file=tls_material.server_key).tls_context()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="health-under-test")
    thread.start()

    def serve(**kwargs: object) -> HealthServer:
        metrics = Metrics()
        registry: CollectorRegistry = metrics.registry
        server = HealthServer("127.0.0.1", 0, registry, lambda: {"ok": True}, metrics=metrics, tls=tls, **kwargs)  # type: ignore[arg-type]
        asyncio.run_coroutine_threadsafe(server.start(), loop).result(30)
        return server

    try:
        closed = serve(users={USER: HASH}, healthz_open=False, limits=HttpLimits(8, 5.0))
        ca = tls_material.ca
        assert https_get(closed.port, "/healthz", ca)[0] == 401
        assert https_get(closed.port, "/health", ca, basic(USER, "nope"))[0] == 401
        assert https_get(closed.port, "/healthz", ca, basic(USER, PASSWORD))[0] == 200
        assert https_get(closed.port, "/healthz", ca, basic(USER, PASSWORD))[0] == 200  # (cached)
        tls_only = serve()
        assert https_get(tls_only.port, "/metrics", ca)[0] == 200
        assert plain_http_refused(tls_only.port)
        for server in (closed, tls_only):
            asyncio.run_coroutine_threadsafe(server.close(), loop).result(30)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
@pytest.mark.parametrize("credentials", ["header", "url"])
def test_the_live_view_renders_over_https_with_credentials_in_headless_chromium(
    credentials: str,
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    clip_factory: Callable[..., Clip],
    tls_material: TlsMaterial,
) -> None:
    ca, auth = tls_material.ca, basic(USER, PASSWORD)
    with locked_daemon(tmp_path, redis_server(), clip_factory, tls_material) as (d, port):
        wait_until(
            lambda: https_get(port, "/cameras/replay/snapshot.jpg", ca, auth)[0] == 200, 180, "a first snapshot", d
        )
        browser = Chromium(tmp_path)
        try:
            if credentials == "header":
                browser.open(f"https://127.0.0.1:{port}/", auth)
            else:  # as an operator types it: the page's own fetch() calls must not carry the URL's credentials
                browser.open(f"https://{USER}:{PASSWORD}@127.0.0.1:{port}/")
            loaded = "document.querySelectorAll('section.camera[data-loaded=\"1\"]').length"
            wait_until(lambda: browser.evaluate(loaded) == 1, 180, "the page to show the camera's snapshot", d)
            dom = str(browser.evaluate("document.documentElement.outerHTML"))
            shot = browser.screenshot()
        finally:
            browser.close()
    cards = re.findall(r'<section class="camera" data-camera="([^"]+)"[^>]*>', dom)
    assert cards == ["replay"], dom[-3000:]
    assert 'data-state="up"' in dom and "blob:" in dom  # /api/cameras and the JPEG fetched, authenticated
    pixels = np.asarray(Image.open(BytesIO(shot)).convert("RGB"))
    assert pixels.size and pixels.std() > 5  # a page drawn, not a blank or error screen


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_line_editor_applies_a_line_over_https_with_basic_auth_in_headless_chromium(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    clip_factory: Callable[..., Clip],
    tls_material: TlsMaterial,
) -> None:
    """From a box on the plant network: the page opened over HTTPS with credentials typed into the URL,
    a line placed with two clicks and applied; the PUT carries the credentials and the daemon runs it."""
    ca, auth = tls_material.ca, basic(USER, PASSWORD)
    card, image = 'section[data-camera="replay"]', 'section[data-camera="replay"] svg.overlay'
    with locked_daemon(tmp_path, redis_server(), clip_factory, tls_material) as (_d, port):
        browser = Chromium(tmp_path)
        try:
            browser.open(f"https://{USER}:{PASSWORD}@127.0.0.1:{port}/")
            browser.wait_for(f"!!document.querySelector('{card}[data-loaded=\"1\"]')", 180, "the camera's snapshot")
            browser.click(*browser.at(card + " button.edit-lines", 0.5, 0.5))
            browser.wait_for(f"document.querySelector('{card}').dataset.editor === 'clean'", 30, "the running lines")
            browser.click(*browser.at(card + " button[data-tool=line]", 0.5, 0.5))
            browser.click(*browser.at(image, 0.5, 0.05))
            browser.click(*browser.at(image, 0.5, 0.95))
            browser.click(*browser.at(card + " button[data-act=apply]", 0.5, 0.5))
            browser.wait_for(f"document.querySelector('{card}').dataset.editor === 'applied'", 30, "Apply over HTTPS")
        finally:
            browser.close()
        status, _headers, body = https_get(port, "/api/cameras/replay/lines", ca, auth)
    assert status == 200, body
    assert [line["id"] for line in json.loads(body)["lines"]] == ["line1"]
    assert (tmp_path / "lines" / "replay.toml").is_file()
