"""`/healthz` and the endpoint's HTTP contract against the real daemon (in-process) with a real
RTSP camera and Redis: 200 with `ok`, `degraded` while Redis or a camera is down, 503 while the
daemon is not running (stopping), 404 for unknown paths, 405 for other methods, the Prometheus
exposition, and the bounds a client cannot get past (connections, deadline, request size)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from daemon.config.settings import Settings
from daemon.core.metrics import Metrics
from daemon.inference.engine import EngineFactory
from daemon.ops.http.server import MAX_LINE_BYTES
from tests.support.clips import small_clip
from tests.support.daemon_child import HangingFactory
from tests.support.daemon_harness import InProcessDaemon, http_get, write_config
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip, RtspServer
from tests.support.streams import stream
from tests.support.waits import wait_until

pytestmark = pytest.mark.slow


def port_of(d: InProcessDaemon) -> int:
    wait_until(lambda: d.daemon.health is not None and d.daemon.state == "running", 60, "the daemon to be ready", d)
    assert d.daemon.health is not None
    return d.daemon.health.port


def healthz(d: InProcessDaemon) -> tuple[int, dict[str, Any]]:
    reply = http_get(port_of(d), "/healthz", timeout_s=2)
    return reply.status, reply.json()


def status_is(d: InProcessDaemon, code: int, status: str) -> Callable[[], bool]:
    return lambda: healthz(d)[0] == code and healthz(d)[1]["status"] == status


def raw_request(port: int, data: bytes, timeout_s: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_healthz_reports_ok_degraded_and_its_http_contract(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    rtsp_server: Callable[..., RtspServer],
    clip_factory: Callable[..., Clip],
) -> None:
    camera = rtsp_server({"belt": small_clip(clip_factory, seed=61).path})
    redis = redis_server()
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[{"id": "belt", "url": camera.url("belt"), "read_timeout_s": 1.0, "stall_s": 2.0}],
    )
    with InProcessDaemon(config) as d:
        port = port_of(d)
        wait_until(status_is(d, 200, "ok"), 60, "status ok", d)
        _code, report = healthz(d)
        assert report["ok"] is True and report["redis"] == {"connected": True, "buffered": report["redis"]["buffered"]}
        assert report["cameras"]["belt"]["state"] == "up"
        assert http_get(port, "/health").status == 200

        redis.kill()
        wait_until(status_is(d, 200, "degraded"), 30, "degraded while Redis is down", d)
        assert healthz(d)[1]["redis"]["connected"] is False
        redis.restart()
        wait_until(status_is(d, 200, "ok"), 30, "ok again with Redis back", d)

        camera.kill()
        wait_until(status_is(d, 200, "degraded"), 30, "degraded while the camera is down", d)
        assert healthz(d)[1]["cameras"]["belt"]["state"] != "up"
        camera.restart()
        wait_until(status_is(d, 200, "ok"), 30, "ok again with the camera back", d)

        assert http_get(port, "/nope").status == 404
        assert http_get(port, "/healthz/extra").status == 404
        for method in ("POST", "PUT", "DELETE"):
            reply = http_get(port, "/healthz", method=method)
            assert reply.status == 405 and "GET" in reply.headers["Allow"]
        assert http_get(port, "/metrics", method="POST").status == 405
        assert http_get(port, "/healthz", method="HEAD").status == 200
        metrics = http_get(port, "/metrics")
        assert metrics.status == 200 and metrics.headers["Content-Type"].startswith("text/plain")
        assert "beltsight_frames_inferred_total{" in metrics.body.decode()
        assert raw_request(port, b"GET /" + b"a" * (2 * MAX_LINE_BYTES) + b" HTTP/1.1\r\nHost: x\r\n\r\n").startswith(
            b"HTTP/1.0 400"
        )
        big_header = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * (2 * MAX_LINE_BYTES) + b"\r\n\r\n"
        assert raw_request(port, big_header).split(b"\r\n")[0].endswith(b"400 Bad Request")
        assert b" 400 " in raw_request(port, bytes(range(256)) * 4).split(b"\r\n")[0]


def test_healthz_is_503_while_the_daemon_stops(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    redis = redis_server()
    clip = small_clip(clip_factory, seed=62)
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[{"id": "replay", "url": str(clip.path), "realtime": True, "loop": True}],
    )
    hang = tmp_path / "hang"

    def factory(settings: Settings, metrics: Metrics) -> HangingFactory:
        return HangingFactory(EngineFactory(settings.engine, metrics), hang)

    with InProcessDaemon(config, engine_factory=factory) as d:
        port = port_of(d)
        wait_until(lambda: len(stream(redis, "replay")) >= 3, 60, "entries", d)
        hang.touch()  # a batch hangs: the shutdown waits for it for the grace period
        wait_until(lambda: any(la.busy_s() > 0.2 for la in d.daemon.lanes.values()), 30, "a hung batch", d)
        stopper = threading.Thread(target=d.stop)
        stopper.start()
        wait_until(lambda: d.daemon.state == "stopping", 60, "the shutdown to begin", d)
        reply = http_get(port, "/healthz")
        hang.unlink()
        stopper.join(60)
    assert reply.status == 503
    assert reply.json()["ok"] is False and reply.json()["status"] == "stopping"


def test_connections_beyond_the_bound_are_closed_at_once_and_each_has_one_deadline(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    redis = redis_server()
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[{"id": "replay", "url": str(small_clip(clip_factory, seed=63).path), "loop": True}],
        health={"max_connections": 8, "request_timeout_s": 2.0},
    )
    with InProcessDaemon(config) as d:
        port = port_of(d)
        assert d.daemon.health is not None
        held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(8)]
        wait_until(lambda: d.daemon.health is not None and d.daemon.health.open_connections == 8, 30, "8 open", d)
        # 8 more connections: each evicts the oldest idle one, so no more than 8 are ever open
        extra = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(8)]
        evicting = "beltsight_http_connections_closed_total"
        wait_until(lambda: d.counter(evicting, reason="evicted") >= 8, 30, "8 evictions", d)
        assert d.daemon.health.open_connections <= 8
        closed = 0
        for sock in held:
            sock.settimeout(10.0)
            try:
                closed += sock.recv(1) == b""
            except ConnectionResetError:
                closed += 1
            except TimeoutError:
                pass
        assert closed == 8, f"only {closed} of the oldest idle connections were closed"
        # a normal request is still served while idle connections hold every slot
        assert http_get(port, "/healthz").status == 200
        # a slow sender (a header line every 0.3 s) never ends its request: its one deadline ends it
        # (a deadline per line would never end it: the loop gives up after 60 s)
        slow = socket.create_connection(("127.0.0.1", port), timeout=0.3)
        slow.sendall(b"GET /healthz HTTP/1.1\r\n")
        started, ended = time.monotonic(), None
        while ended is None and time.monotonic() - started < 60:
            try:
                slow.sendall(b"X-A: b\r\n")
                if slow.recv(1) == b"":
                    ended = time.monotonic() - started
            except TimeoutError:
                continue
            except (ConnectionResetError, BrokenPipeError):
                ended = time.monotonic() - started
        assert ended is not None, "a slow sender's request never ended"  # one deadline, not one per line
        for sock in [*held, *extra, slow]:
            sock.close()
        evicted = d.counter("beltsight_http_connections_closed_total", reason="evicted")
        expired = d.counter("beltsight_http_connections_closed_total", reason="deadline")
    assert evicted >= 8 and expired >= 1
