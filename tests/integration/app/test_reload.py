"""`systemctl reload` (SIGHUP) on the real daemon (`python -m daemon run`, a child process) with a replayed
camera and a real Redis: a changed line, `conf_threshold` and log level apply live, what needs a restart is
named in one line and left as it runs, and an invalid file changes nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon_harness import REPO, write_config
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip
from tests.support.streams import stream
from tests.support.waits import wait_until
from tools.kit import leash

pytestmark = pytest.mark.slow

LINE = {"id": "count", "start": [0.5, 0.0], "end": [0.5, 1.0], "direction": [1.0, 0.0]}


class Child:
    """The daemon as `beltsight run` runs it; its JSON log lines collected as they come."""

    def __init__(self, config: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        cmd = [sys.executable, "-m", "daemon", "run", "-c", str(config)]
        self.proc = leash.spawn(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.logs: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.logs.append(json.loads(line))
            except ValueError:
                self.logs.append({"event": "(not json)", "text": line})

    def close(self) -> None:
        self._reader.join(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in list(self.logs) if e.get("event") == name]

    def wait_for(self, name: str, count: int = 1, timeout_s: float = 60) -> dict[str, Any]:
        def seen() -> bool:
            assert self.proc.poll() is None, f"the daemon exited: {self.logs[-20:]}"
            return len(self.events(name)) >= count

        wait_until(seen, timeout_s, f"{count} x {name}")
        return self.events(name)[count - 1]

    @property
    def port(self) -> int:
        url = self.wait_for("health_listening")["url"]
        return int(url.rsplit(":", 1)[1].split("/")[0])

    def lines(self, camera: str) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/cameras/{camera}/lines", timeout=10) as r:
            reply: dict[str, Any] = json.loads(r.read())
        return reply


@contextmanager
def child(config: Path) -> Iterator[Child]:
    c = Child(config)
    try:
        yield c
    finally:
        c.proc.send_signal(signal.SIGTERM)
        try:
            c.proc.wait(30)
        except subprocess.TimeoutExpired:
            c.proc.kill()
            c.proc.wait(10)
        c.close()


def scores_after(redis: RedisServer, camera: str, after_ms: int) -> list[float]:
    out = []
    for _id, fields in stream(redis, camera):
        if int(fields["captured_ms"]) > after_ms:
            out += [d["score"] for d in json.loads(fields["dets"])]
    return out


def test_sighup_applies_lines_threshold_and_log_level_names_the_rest_and_an_invalid_file_changes_nothing(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    redis = redis_server()
    clip = clip_factory(640, 480, fps=10, seconds=4.0, seed=21, synthetic=True)
    lines_dir = tmp_path / "lines"
    camera = {"id": "replay", "url": str(clip.path), "realtime": True, "loop": True, "lines": [LINE]}

    def config(level: str = "info", cameras: tuple[dict[str, Any], ...] = (camera,), **redis_keys: Any) -> Path:
        path = write_config(
            tmp_path / "beltsight.toml",
            redis_url=redis.url,
            cameras=list(cameras),
            tracking={"lines_dir": str(lines_dir)},
            redis=redis_keys,
        )
        path.write_text(path.read_text().replace('format = "json"', f'format = "json"\nlevel = "{level}"'))
        return path

    path = config()
    with child(path) as d:
        d.wait_for("daemon_ready", timeout_s=90)
        wait_until(lambda: any(s < 0.8 for s in scores_after(redis, "replay", 0)), 60, "a detection under 0.8")
        moved = {**LINE, "start": [0.4, 0.0], "end": [0.4, 1.0]}
        extra = {"id": "extra", "url": str(clip.path), "loop": True}
        changed_camera = {**camera, "lines": [moved], "conf_threshold": 0.8}
        config("warning", (changed_camera, extra), maxlen=5000)
        d.proc.send_signal(signal.SIGHUP)
        restart = d.wait_for("config_restart_needed")
        reloaded_at = int(time.time() * 1000)
        assert restart["changed"] == ["redis.maxlen"]  # the added camera runs at once (daemon.ops.cameras)
        assert d.wait_for("camera_added")["camera"] == "extra"
        wait_until(lambda: len(stream(redis, "extra")) >= 3, 60, "the camera added by the reload publishing")
        assert d.lines("replay")["lines"] == [{**moved, "gates": []}]
        # the threshold: every detection published from the next frames on scores at least 0.8
        wait_until(lambda: len(scores_after(redis, "replay", reloaded_at + 500)) >= 5, 60, "detections after")
        assert min(scores_after(redis, "replay", reloaded_at + 500)) >= 0.8
        # the lines were changed (and logged) before the level went to warning; this reload's own
        # `config_reloaded` (info) came after it, so it was not written
        (changed,) = d.events("lines_changed")
        assert changed["user"] == "reload" and changed["after"]["lines"] == [{**moved, "gates": []}]
        assert d.events("config_reloaded") == []

        # an invalid file changes nothing (the error is logged: error >= warning)
        bad = {**changed_camera, "lines": [{**moved, "start": [1.4, 0.0]}], "conf_threshold": 0.1}
        config("info", (bad,))
        d.proc.send_signal(signal.SIGHUP)
        failed = d.wait_for("config_reload_failed")
        assert any("lines.0.start" in p for p in failed["problems"]), failed
        assert d.lines("replay")["lines"] == [{**moved, "gates": []}]
        assert d.events("config_reloaded") == []  # the level is still warning
        assert not lines_dir.exists()  # a reload reads drop-ins; it never writes one
