"""Cameras added, changed and removed on the running daemon (in-process) through `PUT`/`DELETE
/api/cameras/{id}`, with real RTSP servers (password-protected) and a real Redis: an untouched camera
never reconnects (its `seq` keeps counting), the added camera publishes, the changed one is reopened
alone, the removed one stops and its metric series go; every change is persisted as a drop-in and
audited in `beltsight:events`; no answer, event or log line carries the password."""

from __future__ import annotations

import itertools
import json
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from daemon.config.settings import load_settings
from tests.support.daemon_harness import InProcessDaemon, write_config
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip, RtspServer
from tests.support.http_api import events, request, running
from tests.support.streams import entries
from tests.support.waits import wait_until

pytestmark = pytest.mark.slow

PASSWORD = "s3cret-Pw"


def seqs(redis: RedisServer, camera: str) -> list[int]:
    return [int(e["seq"]) for e in entries(redis, camera)]


def restarts(values: list[int]) -> int:
    """How many times a camera's `seq` went back (a new connection starts again at 0)."""
    return sum(1 for a, b in itertools.pairwise(values) if b <= a)


def test_a_camera_added_changed_and_removed_live_leaves_the_untouched_one_counting(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    rtsp_server: Callable[..., RtspServer],
    clip_factory: Callable[..., Clip],
) -> None:
    redis = redis_server()
    clip = clip_factory(320, 240, fps=10, seconds=4.0, seed=5, synthetic=False)
    server = rtsp_server({"a": clip.path, "b": clip.path, "c": clip.path}, user="op", password=PASSWORD)
    cameras_dir = tmp_path / "cameras"
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[{"id": "a", "url": server.url("a")}, {"id": "b", "url": server.url("b")}],
        tracking={"lines_dir": str(tmp_path / "lines")},
        cameras_dir=cameras_dir,
    )
    text = config.read_text()
    with InProcessDaemon(config) as d:
        port = running(d)
        wait_until(lambda: len(seqs(redis, "a")) >= 10 and len(seqs(redis, "b")) >= 5, 60, "a and b publishing", d)

        # added: 201, publishing, listed, its password nowhere
        status, added = request(port, "/api/cameras/c", "PUT", {"url": server.url("c"), "read_timeout_s": 3})
        assert status == 201, added
        assert added["id"] == "c" and added["source"] == f"drop-in {cameras_dir / 'c.toml'}"
        wait_until(lambda: len(seqs(redis, "c")) >= 5, 60, "the added camera publishing", d)
        status, listing = request(port, "/api/cameras")
        assert status == 200 and sorted(c["id"] for c in listing["cameras"]) == ["a", "b", "c"]
        assert all(c["enabled"] is True for c in listing["cameras"])

        # changed: a reader key reopens b alone (its seq starts again), a is untouched
        b_before = len(seqs(redis, "b"))
        status, changed = request(port, "/api/cameras/b", "PUT", {"url": server.url("b"), "stall_s": 6})
        assert status == 200 and changed["stall_s"] == 6
        wait_until(lambda: restarts(seqs(redis, "b")) >= 1, 60, "b reopened", d)
        wait_until(lambda: len(seqs(redis, "b")) > b_before + 5, 60, "b publishing again", d)

        # removed: 200, no longer listed nor served, its series retired, a removal mark kept
        assert request(port, "/api/cameras/c", "DELETE") == (200, {"removed": "c"})
        assert request(port, "/api/cameras/c", "DELETE")[0] == 404
        assert request(port, "/api/cameras/c")[0] == 404
        assert sorted(c["id"] for c in request(port, "/api/cameras")[1]["cameras"]) == ["a", "b"]
        assert d.metrics.registry.get_sample_value("beltsight_frames_decoded_total", {"camera": "c"}) is None
        c_count = len(seqs(redis, "c"))
        a_count = len(seqs(redis, "a"))
        wait_until(lambda: len(seqs(redis, "a")) > a_count + 10, 60, "a still publishing", d)
        assert len(seqs(redis, "c")) == c_count  # nothing after its removal was confirmed
        assert len(set(seqs(redis, "c"))) == c_count  # its frames, drained, each published once

        # the untouched camera: one connection all along (seq never went back, no reconnect)
        assert restarts(seqs(redis, "a")) == 0
        assert d.counter("beltsight_camera_reconnects_total", camera="a") == 0
        assert [e["camera"] for e in events(redis, "camera_up")].count("a") == 1

        audit = {kind: events(redis, kind) for kind in ("camera_added", "camera_changed", "camera_removed")}
        assert [e["camera"] for e in audit["camera_added"]] == ["c"]
        assert [e["camera"] for e in audit["camera_removed"]] == ["c"]
        (change,) = audit["camera_changed"]
        assert change["camera"] == "b" and json.loads(change["detail"])["changed"] == ["stall_s"]
        assert json.loads(audit["camera_added"][0]["detail"])["user"].startswith("local")

        everything: list[Any] = [listing, added, changed, audit, request(port, "/api/cameras/b")[1]]
        assert PASSWORD not in json.dumps(everything)

    # persisted without touching the operator's file: b's drop-in (owner-only), c's removal
    assert config.read_text() == text
    assert sorted(p.name for p in cameras_dir.iterdir()) == ["b.toml", "c.removed"]
    assert stat.S_IMODE((cameras_dir / "b.toml").stat().st_mode) == 0o600
    reloaded = load_settings(config)
    assert [c.id for c in reloaded.cameras] == ["a", "b"]
    assert reloaded.cameras[1].stall_s == 6
    assert reloaded.camera_sources == {"a": "the config file", "b": f"drop-in {cameras_dir / 'b.toml'}"}


def test_a_reload_applies_cameras_added_removed_and_changed_in_the_file_and_refuses_a_bad_set(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    rtsp_server: Callable[..., RtspServer],
    clip_factory: Callable[..., Clip],
) -> None:
    redis = redis_server()
    clip = clip_factory(320, 240, fps=10, seconds=4.0, seed=5, synthetic=False)
    server = rtsp_server({"a": clip.path, "b": clip.path, "c": clip.path})
    a, b, c = ({"id": m, "url": server.url(m)} for m in ("a", "b", "c"))

    def config(*cameras: dict[str, Any]) -> Path:
        return write_config(
            tmp_path / "beltsight.toml",
            redis_url=redis.url,
            cameras=list(cameras),
            tracking={"lines_dir": str(tmp_path / "lines")},
        )

    path = config(a, b)
    with InProcessDaemon(path) as d:
        running(d)
        wait_until(lambda: len(seqs(redis, "a")) >= 10 and len(seqs(redis, "b")) >= 5, 60, "a and b publishing", d)
        config(a, {**b, "stall_s": 6}, c)
        d.reload()
        wait_until(lambda: len(seqs(redis, "c")) >= 5, 60, "c, added to the file, publishing", d)
        wait_until(lambda: restarts(seqs(redis, "b")) >= 1, 60, "b, changed in the file, reopened", d)

        path.write_text(path.read_text() + '\n[[cameras]]\nid = "a"\nurl = "rtsp://127.0.0.1:1/dup"\n')
        d.reload()  # a duplicate id: config_reload_failed, nothing changed
        config(a, {**b, "stall_s": 6, "enabled": False})
        d.reload()  # c removed, b disabled (kept, idle)
        wait_until(lambda: len(events(redis, "camera_removed")) >= 1, 60, "c removed", d)
        wait_until(lambda: d.daemon.pipeline is not None and len(d.daemon.sources) == 1, 60, "b idle", d)
        a_count = len(seqs(redis, "a"))
        wait_until(lambda: len(seqs(redis, "a")) > a_count + 10, 60, "a still publishing", d)
        assert restarts(seqs(redis, "a")) == 0
        assert d.counter("beltsight_camera_reconnects_total", camera="a") == 0
        assert [e["camera"] for e in events(redis, "camera_added")] == ["c"]
        assert [e["camera"] for e in events(redis, "camera_removed")] == ["c"]
        changed = [(e["camera"], json.loads(e["detail"])) for e in events(redis, "camera_changed")]
        assert changed == [
            ("b", {"user": "reload", "changed": ["stall_s"]}),
            ("b", {"user": "reload", "changed": ["enabled"]}),
        ]
        listing = {cam["id"]: cam for cam in request(running(d), "/api/cameras")[1]["cameras"]}
        assert listing["b"]["enabled"] is False and listing["b"]["state"] == "idle" and "c" not in listing


def test_a_reload_adds_a_model_size_and_a_camera_that_asks_for_it(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    redis = redis_server()
    clip = clip_factory(320, 240, fps=10, seconds=2.0, seed=3, synthetic=False)
    replay = {"id": "replay", "url": str(clip.path), "loop": True}

    def config(*cameras: dict[str, Any], without: str = "") -> Path:
        path = write_config(
            tmp_path / "beltsight.toml",
            redis_url=redis.url,
            cameras=list(cameras),
            tracking={"lines_dir": str(tmp_path / "lines")},
        )
        path.write_text(
            "\n".join(line for line in path.read_text().splitlines() if not line.startswith(without or "\0"))
        )
        return path

    path = config(replay, without="800 = ")
    with InProcessDaemon(path) as d:
        port = running(d)
        assert request(port, "/api/cameras/big", "PUT", {"url": str(clip.path), "model": 800})[0] == 400
        wait_until(lambda: len(seqs(redis, "replay")) >= 3, 60, "replay publishing", d)
        config(replay, {"id": "big", "url": str(clip.path), "loop": True, "model": 800})
        d.reload()
        wait_until(lambda: len(entries(redis, "big")) >= 3, 90, "the camera on the added size publishing", d)
        assert {e["model"].split(":")[0] for e in entries(redis, "big")} == {"800"} and 800 in d.daemon.lanes
        assert [m["size"] for m in request(port, "/api/models")[1]["models"]] == [416, 640, 800]
