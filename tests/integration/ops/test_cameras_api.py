"""The cameras API's answers on the real daemon (in-process, a replayed camera, a real Redis): every
problem by key path with nothing changed (400), unknown cameras (404), a camera that cannot be reached
added and reported down, concurrent writers of one camera serialised (one wins, the other sees the
winner's state: 412), and writes refused without a password (401) or where writes are not allowed (403)."""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bcrypt
import pytest
import structlog
from aiohttp.test_utils import make_mocked_request

from daemon.batching.hub import FrameHub
from daemon.batching.router import ModelRouter
from daemon.config.cameras import CameraConfig
from daemon.config.engine import EngineConfig
from daemon.config.settings import Settings
from daemon.config.tracking import TrackingConfig
from daemon.core.metrics import Metrics
from daemon.inference.lanes import Lanes
from daemon.ingest.sources import CameraSource
from daemon.ops.cameras import CameraParts, CamerasControl
from daemon.ops.http import HealthServer
from daemon.ops.http.api_cameras import CamerasApi
from daemon.ops.lines import LinesControl
from daemon.ops.liveview import LiveView
from daemon.tracking.stage import TrackingStage
from tests.support.daemon_harness import MODELS, InProcessDaemon, write_config
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip
from tests.support.http_api import events, request, running
from tests.support.streams import entries
from tests.support.waits import wait_until

pytestmark = pytest.mark.slow


def listed(port: int) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in request(port, "/api/cameras")[1]["cameras"]}


def test_problems_unknown_cameras_an_unreachable_one_and_concurrent_writers(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    redis = redis_server()
    clip = clip_factory(320, 240, fps=10, seconds=2.0, seed=3, synthetic=False)
    cameras_dir = tmp_path / "cameras"
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[{"id": "replay", "url": str(clip.path), "loop": True}],
        tracking={"lines_dir": str(tmp_path / "lines")},
        cameras_dir=cameras_dir,
    )
    with InProcessDaemon(config) as d:
        port = running(d)
        before = listed(port)
        assert list(before) == ["replay"] and before["replay"]["source"] == "the config file"

        bad = {"url": "http://127.0.0.1/x", "colour": "red", "model": 123, "stall_s": -1}
        status, reply = request(port, "/api/cameras/new", "PUT", bad)
        assert status == 400
        assert sorted(p.split(":")[0] for p in reply["problems"]) == ["colour", "model", "stall_s", "url"]
        status, reply = request(port, "/api/cameras/new", "PUT", {"id": "other", "url": "rtsp://127.0.0.1:1/x"})
        assert status == 400 and reply["problems"][0].startswith("id: ")
        status, reply = request(port, "/api/cameras/new", "PUT", {"url": "rtsp://127.0.0.1:1/x", "classes": ["cat"]})
        assert status == 400 and [p.split(":")[0] for p in reply["problems"]] == ["classes"] * len(MODELS)
        assert request(port, "/api/cameras/new", "PUT", ["not", "an", "object"])[0] == 400
        assert listed(port).keys() == {"replay"} and not cameras_dir.exists()
        assert request(port, "/api/cameras/new")[0] == 404
        assert request(port, "/api/cameras/new", "DELETE")[0] == 404

        # a camera on a size no lane serves yet: its lane is built beside the running one; its lines API answers
        assert 800 not in d.daemon.lanes
        status, _ = request(port, "/api/cameras/big", "PUT", {"url": str(clip.path), "loop": True, "model": 800})
        assert status == 201
        wait_until(lambda: len(entries(redis, "big")) >= 3, 90, "the camera on the new lane publishing", d)
        assert {e["model"].split(":")[0] for e in entries(redis, "big")} == {"800"} and 800 in d.daemon.lanes
        assert request(port, "/api/cameras/big/lines") == (200, {"mm_per_px": None, "lines": []})
        assert request(port, "/api/cameras/big", "DELETE")[0] == 200
        assert request(port, "/api/cameras/big/lines")[0] == 404

        # a camera that cannot be reached: added (201) and reported down, as at start
        status, _ = request(port, "/api/cameras/dead", "PUT", {"url": "rtsp://127.0.0.1:9/dead", "open_timeout_s": 1})
        assert status == 201
        wait_until(lambda: any(e["camera"] == "dead" for e in events(redis, "camera_down")), 60, "dead reported", d)
        assert listed(port)["dead"]["state"] in ("down", "connecting")

        # two writers with the same tag: one wins, the other gets 412 and the winner's state
        reply_get = request(port, "/api/cameras/dead")
        assert reply_get[0] == 200
        tag = _etag(port, "/api/cameras/dead")
        results: dict[int, tuple[int, Any]] = {}

        def put(i: int) -> None:
            body = {"url": "rtsp://127.0.0.1:9/dead", "open_timeout_s": 1, "stall_s": 5 + i}
            results[i] = request(port, "/api/cameras/dead", "PUT", body, {"If-Match": tag})

        threads = [threading.Thread(target=put, args=(i,)) for i in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        statuses = sorted(status for status, _ in results.values())
        assert statuses == [200, 412], results
        winner = next(body for status, body in results.values() if status == 200)
        loser = next(body for status, body in results.values() if status == 412)
        assert loser == winner == request(port, "/api/cameras/dead")[1]
        assert request(port, "/api/cameras/dead", "DELETE", headers={"If-Match": tag})[0] == 412
        assert request(port, "/api/cameras/dead", "DELETE")[0] == 200
        assert listed(port).keys() == {"replay"}


def _etag(port: int, path: str) -> str:
    import urllib.request  # noqa: PLC0415 - the header, which `request` does not return

    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        return str(r.headers["ETag"])


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def bare_control(tmp_path: Path) -> CamerasControl:
    """A control over stages that are built but not started (the refusals never reach them)."""
    settings = Settings(models={640: MODELS[640]}, cameras_dir=tmp_path / "cameras")
    m = Metrics()
    tracking = TrackingStage([], TrackingConfig(), m)
    liveview = LiveView(m, 0.5)

    def never(*_args: Any) -> Any:
        raise AssertionError("not started")

    def make_source(camera: CameraConfig) -> CameraSource:
        raise AssertionError(camera.id)

    parts = CameraParts(
        sources=[],
        make_source=make_source,
        hub=FrameHub(m),
        router=ModelRouter([640], {}),
        tracking=tracking,
        lines=LinesControl([], tmp_path / "lines", tracking, liveview, on_event=lambda e: None),
        liveview=liveview,
        lanes=Lanes(EngineConfig(), m, build=never, batching=never, publish=never, observe=never),
        set_rules=lambda s: None,
        models={},
        metrics=m,
        on_event=lambda e: None,
    )
    return CamerasControl(settings, parts)


def test_writes_need_authentication_or_a_loopback_only_endpoint(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    async def refused() -> None:  # an endpoint on every address without users (not started: no socket)
        open_server = HealthServer("0.0.0.0", 0, Metrics().registry, lambda: {"ok": True})
        api = CamerasApi(open_server, bare_control(tmp_path))
        for method in ("PUT", "DELETE"):
            reply = await api.handle(make_mocked_request(method, "/api/cameras/x"), {"camera": "x"})
            assert reply.status == 403
        assert (await api.handle(make_mocked_request("GET", "/api/cameras/x"), {"camera": "x"})).status == 404

    asyncio.run(refused())
    assert not (tmp_path / "cameras").exists()

    redis = redis_server()
    clip = clip_factory(320, 240, fps=10, seconds=2.0, seed=3, synthetic=False)
    hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[{"id": "replay", "url": str(clip.path), "loop": True}],
        tracking={"lines_dir": str(tmp_path / "lines")},
        health={"basic_auth_users": {"ann": hashed}},
    )
    body = {"url": "rtsp://127.0.0.1:9/x", "enabled": False}
    with InProcessDaemon(config) as d:
        port = running(d)
        assert request(port, "/api/cameras/x", "PUT", body)[0] == 401
        assert request(port, "/api/cameras/x", "PUT", body, basic("ann", "no"))[0] == 401
        assert request(port, "/api/cameras/replay", "DELETE")[0] == 401
        status, view = request(port, "/api/cameras/x", "PUT", body, basic("ann", "pw"))
        assert status == 201 and view["enabled"] is False and view["runs"] is False
        listing = request(port, "/api/cameras", headers=basic("ann", "pw"))[1]["cameras"]
        assert {c["id"]: c["state"] for c in listing} == {"replay": listing[0]["state"], "x": "idle"}
        added = events(redis, "camera_added")
        assert [(e["camera"], e["detail"]) for e in added] == [("x", '{"user":"ann","changed":["enabled","id","url"]}')]


def test_a_change_s_apply_that_fails_is_logged_and_close_ends_one_still_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The apply of a write runs in a task of the control's own (the write returns after `API_WAIT_S`
    of it): an apply that raises is logged (`camera_change_failed`), not lost; the control's close
    (the daemon's shutdown) cancels one still running and returns once it ended: none left pending."""
    monkeypatch.setattr("daemon.ops.cameras.API_WAIT_S", 0.05)
    control = bare_control(tmp_path)
    cancelled: list[str] = []

    async def broken(_self: object, camera: CameraConfig) -> None:
        raise KeyError(f"injected: {camera.id}")

    async def slow(_self: object, camera: CameraConfig) -> None:
        try:
            await asyncio.sleep(60)  # a reader that takes its time to open
        except asyncio.CancelledError:
            cancelled.append(camera.id)
            raise

    def changes() -> list[str]:
        return [t.get_name() for t in asyncio.all_tasks() if t.get_name().startswith("camera-change-")]

    async def scenario() -> tuple[list[str], list[str]]:
        monkeypatch.setattr("daemon.ops.camera_runner.CameraRunner.start", broken)
        assert await control.put(CameraConfig(id="bad", url="rtsp://127.0.0.1:1/x"), "op")
        monkeypatch.setattr("daemon.ops.camera_runner.CameraRunner.start", slow)
        assert await control.put(CameraConfig(id="slow", url="rtsp://127.0.0.1:1/x"), "op")
        running = changes()
        await asyncio.wait_for(control.close(), 5)
        return running, changes()

    with structlog.testing.capture_logs() as logs:
        assert asyncio.run(scenario()) == (["camera-change-slow"], [])
    assert cancelled == ["slow"]
    failed = [(e["change"], e["error"]) for e in logs if e["event"] == "camera_change_failed"]
    assert failed == [("camera-change-bad", "KeyError: 'injected: bad'")]
