"""`GET`/`PUT /api/cameras/{id}/lines` on the real daemon (in-process) with a real RTSP camera and Redis:
a line put on a running camera counts the parts crossing it in the objects stream, a kept line keeps its
count, every problem comes back by key path with nothing changed, what was applied is persisted as the
camera's drop-in and audited (`lines_changed` in `beltsight:events`); writes are refused (403) unless the
endpoint is authenticated (401 without credentials) or loopback-only."""

from __future__ import annotations

import asyncio
import base64
import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bcrypt
import pytest
from aiohttp.test_utils import make_mocked_request

from daemon.config.cameras import CameraConfig
from daemon.config.lines_dropin import CameraLines
from daemon.config.tracking import TrackingConfig
from daemon.core.metrics import Metrics
from daemon.ops.http import HealthServer
from daemon.ops.http.api_lines import LinesApi, loopback_only
from daemon.ops.lines import LinesControl
from daemon.ops.liveview import LiveView
from daemon.tracking.stage import TrackingStage
from tests.support.daemon_harness import InProcessDaemon, write_config
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip, RtspServer
from tests.support.http_api import LINE, crossings, events, request, running
from tests.support.waits import wait_until

pytestmark = pytest.mark.slow


def test_a_line_put_on_a_running_camera_counts_crossings_is_persisted_and_audited(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    rtsp_server: Callable[..., RtspServer],
    clip_factory: Callable[..., Clip],
) -> None:
    redis = redis_server()
    clip = clip_factory(640, 480, fps=10, seconds=4.0, seed=21, synthetic=True)
    server = rtsp_server({"belt": clip.path})
    lines_dir = tmp_path / "lines"
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[{"id": "belt", "url": server.url("belt")}],
        tracking={"lines_dir": str(lines_dir)},
    )
    text = config.read_text()
    with InProcessDaemon(config) as d:
        port = running(d)
        assert request(port, "/api/cameras/belt/lines") == (200, {"mm_per_px": None, "lines": []})
        assert request(port, "/api/cameras/nope/lines")[0] == 404
        assert request(port, "/api/cameras/nope/lines", "PUT", {"lines": []})[0] == 404
        wait_until(lambda: d.counter("beltsight_object_events_total", camera="belt", event="new") >= 2, 60, "tracks")

        body = {"mm_per_px": 0.75, "lines": [LINE]}
        status, applied = request(port, "/api/cameras/belt/lines", "PUT", body)
        assert status == 200 and applied == body
        assert request(port, "/api/cameras/belt/lines") == (200, body)
        wait_until(lambda: len(crossings(redis, "belt", "count")) >= 2, 90, "parts counted on the new line", d)
        first = crossings(redis, "belt", "count")
        assert [c.count for c in first if c.direction == "in"][:2] == [1, 2]

        # persisted: the drop-in holds what runs; the operator's file is untouched
        dropin = tomllib.loads((lines_dir / "belt.toml").read_text())
        assert CameraLines.model_validate(dropin).to_json() == body
        assert sorted(p.name for p in lines_dir.iterdir()) == ["belt.toml"]
        assert config.read_text() == text

        # "count" kept (its count continues), "second" new (from 1)
        second = {**LINE, "id": "second", "start": [0.75, 0.0], "end": [0.75, 1.0]}
        kept = {"mm_per_px": 0.75, "lines": [LINE, second]}
        assert request(port, "/api/cameras/belt/lines", "PUT", kept)[0] == 200
        n_before = len(crossings(redis, "belt", "count"))
        wait_until(lambda: len(crossings(redis, "belt", "second")) >= 1, 90, "a part counted on the second line", d)
        wait_until(lambda: len(crossings(redis, "belt", "count")) > n_before, 90, "another part on the kept line", d)
        after = crossings(redis, "belt", "count")
        counts_in = [c.count for c in after if c.direction == "in"]
        assert counts_in == list(range(1, len(counts_in) + 1))  # never restarted
        assert crossings(redis, "belt", "second")[0].count == 1

        audit = events(redis, "lines_changed")
        assert [e["camera"] for e in audit] == ["belt", "belt"]
        detail = json.loads(audit[1]["detail"])
        assert detail["before"] == body and detail["after"] == kept and detail["user"].startswith("local")


def test_every_problem_comes_back_by_key_path_and_nothing_changes(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    redis = redis_server()
    clip = clip_factory(320, 240, fps=10, seconds=2.0, seed=3, synthetic=True)
    lines_dir = tmp_path / "lines"
    camera = {"id": "replay", "url": str(clip.path), "loop": True, "lines": [LINE]}
    config = write_config(
        tmp_path / "beltsight.toml", redis_url=redis.url, cameras=[camera], tracking={"lines_dir": str(lines_dir)}
    )
    with InProcessDaemon(config) as d:
        port = running(d)
        before = request(port, "/api/cameras/replay/lines")
        bad = {
            "mm_per_px": 0,
            "lines": [{**LINE, "start": [1.2, 0.0]}, {**LINE, "id": "x", "direction": [0.0, 1.0]}],
        }
        status, reply = request(port, "/api/cameras/replay/lines", "PUT", bad)
        assert status == 400
        assert [p.split(":")[0] for p in reply["problems"]] == ["mm_per_px", "lines.0.start", "lines.1"]
        assert request(port, "/api/cameras/replay/lines", "PUT", "not an object")[0] == 400
        status, reply = request(
            port, "/api/cameras/replay/lines", "PUT", {"lines": [{**LINE, "gates": [{"id": "g", "distance_mm": 5}]}]}
        )
        assert status == 400 and reply["problems"] == [
            "(top level): lines: line 'count' has gates, which need the camera's mm_per_px calibration"
        ]
        assert request(port, "/api/cameras/replay/lines") == before
        assert not lines_dir.exists()
        assert events(redis, "lines_changed") == []


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def control(tmp_path: Path) -> LinesControl:
    cameras = [CameraConfig.model_validate({"id": "belt", "url": "rtsp://127.0.0.1:1/belt"})]
    metrics = Metrics()
    tracking = TrackingStage(cameras, TrackingConfig(), metrics)
    return LinesControl(cameras, tmp_path / "lines", tracking, LiveView(metrics, 0.5), on_event=lambda e: None)


def test_writes_need_authentication_or_a_loopback_only_endpoint(tmp_path: Path) -> None:
    assert loopback_only("127.0.0.1") and loopback_only("[::1]") and loopback_only("localhost")
    assert not loopback_only("") and not loopback_only("0.0.0.0") and not loopback_only("10.0.0.5")
    put = {"lines": [LINE]}

    async def scenario() -> None:
        # an endpoint on every address without users: reads yes, writes 403 (not started: no socket opened)
        open_server = HealthServer("0.0.0.0", 0, Metrics().registry, lambda: {"ok": True})
        api = LinesApi(open_server, control(tmp_path))
        reply = await api.handle(make_mocked_request("GET", "/api/cameras/belt/lines"), {"camera": "belt"})
        assert reply.status == 200
        reply = await api.handle(make_mocked_request("PUT", "/api/cameras/belt/lines"), {"camera": "belt"})
        assert reply.status == 403
        # a real authenticated endpoint on loopback: 401 without the password, 200 with it
        hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()
        locked = HealthServer("127.0.0.1", 0, Metrics().registry, lambda: {"ok": True}, users={"ann": hashed})
        LinesApi(locked, control(tmp_path)).register()
        await locked.start()
        try:
            loop = asyncio.get_running_loop()
            path = "/api/cameras/belt/lines"

            def call(*args: Any) -> tuple[int, Any]:
                return request(locked.port, *args)

            assert (await loop.run_in_executor(None, call, path, "PUT", put))[0] == 401
            assert (await loop.run_in_executor(None, call, path, "PUT", put, basic("ann", "no")))[0] == 401
            status, body = await loop.run_in_executor(None, call, path, "PUT", put, basic("ann", "pw"))
            assert status == 200 and body["lines"][0]["id"] == "count"
            assert (await loop.run_in_executor(None, call, path, "DELETE", None, basic("ann", "pw")))[0] == 405
        finally:
            await locked.close()

    asyncio.run(scenario())
    assert (tmp_path / "lines" / "belt.toml").is_file()
