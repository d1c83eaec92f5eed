"""Crossing snapshots through the whole daemon (in-process): a real RTSP camera, real Redis, the real
endpoint with basic authentication. A `crossed` entry names its snapshot; `GET /snapshots/<path>` returns
that JPEG at the camera's size, only with credentials, and nothing outside the directory; every frame is
still published exactly once."""

from __future__ import annotations

import base64
import http.client
from collections.abc import Callable
from io import BytesIO
from pathlib import Path

import bcrypt
import pytest
from PIL import Image

from tests.support.daemon_harness import InProcessDaemon, write_config
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip, RtspServer
from tests.support.metrics import inferred
from tests.support.objects import assert_objects_exactly_once, objects
from tests.support.streams import assert_exactly_once_in_order, stream
from tests.support.waits import wait_until

pytestmark = pytest.mark.slow
USER, PASSWORD = "quality", "why-rejected"
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
LINE = {"id": "mid", "start": [0.5, 0.0], "end": [0.5, 1.0]}


def get(port: int, path: str, *, auth: bool = True) -> tuple[int, str, bytes]:
    headers = {"Authorization": "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()} if auth else {}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read()
    finally:
        conn.close()


def test_a_crossing_names_its_snapshot_and_the_endpoint_serves_it_behind_auth(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    rtsp_server: Callable[..., RtspServer],
    clip_factory: Callable[..., Clip],
) -> None:
    clip = clip_factory(640, 480, fps=10, seconds=8.0, seed=5, synthetic=True)
    server = rtsp_server({"belt": clip.path})
    redis = redis_server()
    snaps = tmp_path / "snaps"
    (tmp_path / "secret.jpg").write_bytes(b"outside the snapshot directory")
    config = write_config(
        tmp_path / "b.toml",
        redis_url=redis.url,
        cameras=[{"id": "belt", "url": server.url("belt"), "lines": [LINE]}],
        health={"basic_auth_users": {USER: HASH}},
        extra=f'[snapshots]\nenabled = true\ndir = "{snaps}"\ncrop = false\ndraw_box = true\nquality = 80\n',
    )

    def named() -> list[str]:
        return [e.snapshot for _i, e in objects(redis, "belt") if e.event == "crossed" and e.snapshot]

    with InProcessDaemon(config) as d:
        wait_until(lambda: any((snaps / p).is_file() for p in named()), 120, "a crossing's snapshot on disk", d)
        assert d.daemon.health is not None
        port = d.daemon.health.port
        path = next(p for p in named() if (snaps / p).is_file())
        status, kind, body = get(port, f"/snapshots/{path}")
        assert (status, kind) == (200, "image/jpeg")
        with Image.open(BytesIO(body)) as image:
            image.load()
            assert (image.format, image.size) == ("JPEG", (640, 480))  # the whole camera frame
        assert get(port, f"/snapshots/{path}", auth=False)[0] == 401
        for escape in ("/snapshots/../secret.jpg", "/snapshots/%2e%2e/secret.jpg", f"/snapshots/{tmp_path}/secret.jpg"):
            assert get(port, escape)[0] == 404, escape
        d.stop()
        frames = inferred(d, "belt")
        written = d.counter("beltsight_snapshots_written_total", camera="belt")
    assert_exactly_once_in_order(stream(redis, "belt"), frames)  # snapshots took no frame
    events = objects(redis, "belt")
    assert_objects_exactly_once(events)
    crossed = [e for _i, e in events if e.event == "crossed"]
    assert all(e.snapshot is not None for e in crossed), "a crossing lost its snapshot with an idle queue"
    assert written == len(crossed) == len(list(snaps.rglob("*.jpg")))
