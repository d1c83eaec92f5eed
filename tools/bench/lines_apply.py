"""Lines applied live, measured on the real daemon: how soon a `PUT /api/cameras/{id}/lines` reaches the
camera's frames, and what a reload (SIGHUP's path) costs the frames of 4 busy cameras.

    .venv/bin/python -m tools.bench.lines_apply [--cameras 4] [--puts 20] [--reloads 6] [--phase-s 12]

The daemon runs in this process (its own thread and loop, CPU inference, the committed demo models)
with `--cameras` replayed synthetic belt clips (320x240, 10 fps, real time) and a real redis-server.

1. Apply latency: `--puts` PUTs on camera 0, the line moved each time. Printed: from the moment the
   tracking stage took the new lines to the first frame of that camera tracked with them, against the
   camera's own frame interval (the baseline: a frame that waited for nothing comes within one
   interval); and the PUT's round trip (validation, drop-in fsync, apply) against a GET's.
2. Reload under load: `--reloads` rounds of a quiet window and a window that starts with a reload
   (each moves every camera's line in the config file), `--phase-s` in all for each kind, in random
   order within each round so the host's drift and the clips' restarts fall on both kinds alike. Per
   kind: frames decoded, published and dropped (by reason), and the drop rate of the reload windows
   against the quiet ones. After the daemon stopped: decoded = published + dropped (nothing disappeared).

Numbers are noisy on a shared machine (other processes take the same cores): read the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from daemon.app import Daemon
from daemon.core.seam import FrameResult, Metrics
from daemon.tracking.seam import TrackingStage
from tools.kit.daemon_config import write_config
from tools.kit.redis_server import RedisServer, find_redis_server
from tools.kit.running import start_daemon, wait
from tools.kit.synth.video import render_video

FPS = 10
WIDTH, HEIGHT = 320, 240  # the 416 model: the fastest lane on a CPU
CLIP_S = 7.3  # not a multiple of the windows


def line(x: float) -> dict[str, Any]:
    return {"id": "count", "start": [x, 0.0], "end": [x, 1.0], "direction": [1.0, 0.0]}


class Probe:
    """Wraps the tracking stage: when each camera's lines changed, and when each frame was tracked."""

    def __init__(self, stage: TrackingStage) -> None:
        self.applied: dict[str, float] = {}
        self.first_after: dict[str, float] = {}
        self.frames: dict[str, list[float]] = {}
        process, apply_lines = stage.process, stage.apply_lines

        def tracked(result: FrameResult) -> FrameResult:
            now = time.perf_counter()
            cid = result.camera_id
            self.frames.setdefault(cid, []).append(now)
            if cid in self.applied and cid not in self.first_after:
                self.first_after[cid] = now
            return process(result)

        def applied(camera_id: str, *args: Any, **kwargs: Any) -> None:
            apply_lines(camera_id, *args, **kwargs)
            self.applied[camera_id] = time.perf_counter()
            self.first_after.pop(camera_id, None)

        stage.process = tracked  # type: ignore[method-assign]
        stage.apply_lines = applied  # type: ignore[method-assign]


def http(port: int, path: str, body: Any = None) -> tuple[int, float]:
    data = None if body is None else json.dumps(body).encode()
    method, headers = ("GET", {}) if data is None else ("PUT", {"Content-Type": "application/json"})
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method, headers=headers)
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=30) as r:
        r.read()
        return r.status, (time.perf_counter() - t0) * 1000


def apply_latency(daemon: Daemon, probe: Probe, port: int, puts: int) -> dict[str, Any]:
    latencies, put_ms, get_ms = [], [], []
    for i in range(puts):
        get_ms.append(http(port, "/api/cameras/cam0/lines")[1])
        status, ms = http(port, "/api/cameras/cam0/lines", {"mm_per_px": None, "lines": [line(0.4 + 0.01 * (i % 10))]})
        assert status == 200
        put_ms.append(ms)
        wait(lambda: "cam0" in probe.first_after, 10, "a frame after the PUT")
        latencies.append((probe.first_after["cam0"] - probe.applied["cam0"]) * 1000)
    frames = probe.frames["cam0"]
    interval = statistics.median(b - a for a, b in itertools.pairwise(frames)) * 1000
    return {
        "apply_to_next_frame_ms": {"median": statistics.median(latencies), "max": max(latencies)},
        "frame_interval_ms": interval,
        "apply_over_interval": statistics.median(latencies) / interval,
        "put_round_trip_ms": statistics.median(put_ms),
        "get_round_trip_ms": statistics.median(get_ms),
        "put_over_get": statistics.median(put_ms) / statistics.median(get_ms),
    }


def totals(metrics: Metrics, cameras: list[str]) -> dict[str, float]:
    r = metrics.registry
    out = {"decoded": 0.0, "published": 0.0, "dropped": 0.0}
    for cid in cameras:
        out["decoded"] += r.get_sample_value("beltsight_frames_decoded_total", {"camera": cid}) or 0.0
        out["published"] += r.get_sample_value("beltsight_entries_published_total", {"camera": cid}) or 0.0
    for metric in r.collect():
        if metric.name == "beltsight_frames_dropped":
            for s in metric.samples:
                if s.name.endswith("_total"):
                    out["dropped"] += s.value
                    reason = f"dropped.{s.labels.get('reason', '?')}"
                    out[reason] = out.get(reason, 0.0) + s.value
    return out


def delta(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {k: b.get(k, 0.0) - a.get(k, 0.0) for k in b}


def reload_under_load(
    daemon: Daemon, loop: asyncio.AbstractEventLoop, config: Callable[[float], Path], phase_s: float, reloads: int
) -> dict[str, Any]:
    """`reloads` rounds, each a quiet window and a window that starts with a reload, the same length, in
    random order: the host's drift (other processes on the same cores) and anything periodic (the
    replayed clips restart every `CLIP_S`) fall on both kinds alike."""
    assert daemon.pipeline is not None
    cameras = [s.camera_id for s in daemon.sources]
    window_s = phase_s / reloads
    quiet: dict[str, float] = {}
    busy: dict[str, float] = {}
    reload_ms = []

    def add(into: dict[str, float], d: dict[str, float]) -> None:
        for k, v in d.items():
            into[k] = into.get(k, 0.0) + v

    order = random.Random(7)
    for i in range(reloads):
        reload_first = order.random() < 0.5  # random order: nothing periodic (a clip's loop) lines up with one kind
        for reloading in (reload_first, not reload_first):
            a = totals(daemon.metrics, cameras)
            t0 = time.perf_counter()
            if reloading:
                done = asyncio.run_coroutine_threadsafe(
                    daemon.pipeline.reloader.reload(config(0.3 + 0.05 * (i % 8))), loop
                )
                assert done.result(30)
                reload_ms.append((time.perf_counter() - t0) * 1000)
            time.sleep(max(0.0, window_s - (time.perf_counter() - t0)))
            add(busy if reloading else quiet, delta(a, totals(daemon.metrics, cameras)))

    def rate(d: dict[str, float]) -> float:
        return d["dropped"] / d["decoded"] if d["decoded"] else 0.0

    return {
        "quiet": quiet,
        "reloading": busy,
        "reload_ms": {"median": statistics.median(reload_ms), "max": max(reload_ms)},
        "drop_rate_quiet": rate(quiet),
        "drop_rate_reloading": rate(busy),
        "reloading_over_quiet": rate(busy) / rate(quiet) if rate(quiet) else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cameras", type=int, default=4)
    ap.add_argument("--puts", type=int, default=20)
    ap.add_argument("--reloads", type=int, default=15)
    ap.add_argument("--phase-s", type=float, default=30.0)
    args = ap.parse_args(argv)
    binary = find_redis_server()
    if binary is None:
        raise SystemExit("redis-server not found")
    with tempfile.TemporaryDirectory(prefix="bench-lines-") as tmp:
        out = Path(tmp)
        clip = out / "belt.mp4"
        render_video(clip, out / "belt.json", WIDTH, HEIGHT, FPS, CLIP_S, seed=21)
        (out / "redis").mkdir()
        redis = RedisServer(binary, out / "redis").start()
        try:
            results = _run(args, out, clip, redis.url)
        finally:
            redis.close()
    print(json.dumps(results, indent=2, sort_keys=True))
    return 0 if results["after_stop"]["balanced"] else 1


def _run(args: argparse.Namespace, out: Path, clip: Path, redis_url: str) -> dict[str, Any]:
    def config(x: float) -> Path:
        cameras = [
            {"id": f"cam{i}", "url": str(clip), "realtime": True, "loop": True, "lines": [line(x)]}
            for i in range(args.cameras)
        ]
        return write_config(
            out / "beltsight.toml", redis_url=redis_url, cameras=cameras, tracking={"lines_dir": str(out / "lines")}
        )

    path = config(0.5)
    running = start_daemon(path)
    daemon = running.daemon
    assert daemon.pipeline is not None and daemon.health is not None
    probe = Probe(daemon.pipeline.tracking)
    time.sleep(2.0)  # every camera streaming
    results: dict[str, Any] = {"cameras": args.cameras}
    results["apply"] = apply_latency(daemon, probe, daemon.health.port, args.puts)
    (out / "lines").joinpath("cam0.toml").unlink()  # the reloads below move every camera's line from the file
    results["reload"] = reload_under_load(daemon, running.loop, config, args.phase_s, args.reloads)
    running.stop()
    final = totals(daemon.metrics, [f"cam{i}" for i in range(args.cameras)])
    results["after_stop"] = {**final, "balanced": final["decoded"] == final["published"] + final["dropped"]}
    return results


if __name__ == "__main__":
    sys.exit(main())
