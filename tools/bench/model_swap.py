"""A model swapped under load, measured on the real daemon: the time from `POST /api/models/640` to the
first frame served by the new model, and the frames of 4 busy cameras counted through each swap.

    .venv/bin/python -m tools.bench.model_swap [--cameras 4] [--swaps 6] [--window-s 8] [--fps 5]

The daemon runs in this process (its own thread and loop, CPU inference) with `--cameras` replayed
synthetic belt clips (640x480, real time, so the 640 lane serves them) and a real redis-server. The
640 lane's model is swapped `--swaps` times, alternating the committed FP32 file and its FP16 file
(copies in a temporary folder). Each swap window (`--window-s`, starting with the POST) is paired with
a quiet window of the same length, in random order. Printed:

- `post_to_serving_ms`: from the POST to the first frame tracked with the new model's name (median,
  max), against the lane's frame interval per camera (the baseline: a frame that waited for nothing);
  `post_round_trip_ms`: the POST's reply (checks, sessions built, warm-up, canary, the swap);
- per kind of window: frames decoded, published, dropped (by reason), and the drop rate of the swap
  windows against the quiet ones;
- after the daemon stopped: decoded = published + dropped, no `engine_error`, no frame tracked twice,
  and per camera the model field never went back within a swap window.

Numbers are noisy on a shared machine (other processes take the same cores): read the ratios.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from functools import partial
from pathlib import Path
from typing import Any

from daemon.app import Daemon
from daemon.core.seam import FrameResult
from daemon.tracking.seam import TrackingStage
from tools.bench.lines_apply import delta, totals
from tools.kit.daemon_config import MODELS, write_config
from tools.kit.redis_server import RedisServer, find_redis_server
from tools.kit.running import start_daemon, wait
from tools.kit.synth.video import render_video

WIDTH, HEIGHT = 640, 480  # the router picks the 640 lane
CLIP_S = 7.3


class Probe:
    """Wraps the tracking stage: each frame's (time, camera, (seq, captured_ms), model) as it is tracked
    (a replayed clip's seq restarts with each loop: seq and capture time name a frame)."""

    def __init__(self, stage: TrackingStage) -> None:
        self.frames: list[tuple[float, str, tuple[int, int], str]] = []
        process = stage.process

        def tracked(result: FrameResult) -> FrameResult:
            key = (result.seq, result.captured_ms)
            self.frames.append((time.perf_counter(), result.camera_id, key, result.model_name))
            return process(result)

        stage.process = tracked  # type: ignore[method-assign]


def post(port: int, path: Path) -> tuple[int, dict[str, Any], float]:
    body = json.dumps({"path": str(path), "allow_new_classes": False}).encode()
    json_type = {"Content-Type": "application/json"}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/api/models/640", data=body, method="POST", headers=json_type)
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120) as r:
        return r.status, json.loads(r.read()), t0


def swaps_under_load(daemon: Daemon, probe: Probe, files: list[Path], args: argparse.Namespace) -> dict[str, Any]:
    assert daemon.health is not None
    cameras = [s.camera_id for s in daemon.sources]
    quiet: dict[str, float] = {}
    busy: dict[str, float] = {}
    to_serving, round_trip, flips = [], [], 0
    order = random.Random(7)
    for i in range(args.swaps):
        swap_first = order.random() < 0.5
        for swapping in (swap_first, not swap_first):
            a = totals(daemon.metrics, cameras)
            t0 = time.perf_counter()
            if swapping:
                status, reply, sent = post(daemon.health.port, files[(i + 1) % 2])
                assert status == 200, reply
                round_trip.append((time.perf_counter() - sent) * 1000)
                new = reply["new"]
                wait(partial(served, probe, new, sent), 60, "a frame on the new model")
                to_serving.append(((first_on(probe, new, sent) or sent) - sent) * 1000)
                time.sleep(max(0.0, args.window_s - (time.perf_counter() - t0)))
                flips += went_back(probe.frames, sent, new)
            else:
                time.sleep(args.window_s)
            into = busy if swapping else quiet
            for k, v in delta(a, totals(daemon.metrics, cameras)).items():
                into[k] = into.get(k, 0.0) + v

    def rate(d: dict[str, float]) -> float:
        return d["dropped"] / d["decoded"] if d["decoded"] else 0.0

    interval = 1000 / args.fps
    return {
        "post_to_serving_ms": {"median": statistics.median(to_serving), "max": max(to_serving)},
        "post_to_serving_over_frame_interval": statistics.median(to_serving) / interval,
        "post_round_trip_ms": {"median": statistics.median(round_trip), "max": max(round_trip)},
        "quiet": quiet,
        "swapping": busy,
        "drop_rate_quiet": rate(quiet),
        "drop_rate_swapping": rate(busy),
        "swapping_over_quiet": rate(busy) / rate(quiet) if rate(quiet) else None,
        "model_went_back": flips,
    }


def first_on(probe: Probe, model: str, since: float) -> float | None:
    """When the first frame on `model` since `since` was tracked (None: none yet)."""
    return min((t for t, _c, _s, m in list(probe.frames) if m == model and t >= since), default=None)


def served(probe: Probe, model: str, since: float) -> bool:
    return first_on(probe, model, since) is not None


def went_back(frames: list[tuple[float, str, tuple[int, int], str]], since: float, new: str) -> int:
    """Frames of any camera on another model after that camera's first frame on `new` (since the POST)."""
    seen: set[str] = set()
    back = 0
    for t, camera, _key, model in list(frames):
        if t < since:
            continue
        if model == new:
            seen.add(camera)
        elif camera in seen:
            back += 1
    return back


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cameras", type=int, default=4)
    ap.add_argument("--swaps", type=int, default=6)
    ap.add_argument("--window-s", type=float, default=8.0)
    ap.add_argument("--fps", type=float, default=5.0)
    args = ap.parse_args(argv)
    binary = find_redis_server()
    if binary is None:
        raise SystemExit("redis-server not found")
    with tempfile.TemporaryDirectory(prefix="bench-swap-") as tmp:
        out = Path(tmp)
        clip = out / "belt.mp4"
        render_video(clip, out / "belt.json", WIDTH, HEIGHT, round(args.fps), CLIP_S, seed=21)
        files = [out / "conveyor-640.onnx", out / "conveyor-640-fp16.onnx"]
        for f in files:
            shutil.copyfile(MODELS[640].parent / f.name, f)
        (out / "redis").mkdir()
        redis = RedisServer(binary, out / "redis").start()
        try:
            results = _run(args, out, clip, redis.url)
        finally:
            redis.close()
    print(json.dumps(results, indent=2, sort_keys=True))
    return 0 if results["after_stop"]["balanced"] and not results["swaps"]["model_went_back"] else 1


def _run(args: argparse.Namespace, out: Path, clip: Path, redis_url: str) -> dict[str, Any]:
    cameras = [{"id": f"cam{i}", "url": str(clip), "realtime": True, "loop": True} for i in range(args.cameras)]
    path = write_config(out / "beltsight.toml", redis_url=redis_url, cameras=cameras)
    running = start_daemon(path)
    daemon = running.daemon
    assert daemon.pipeline is not None
    probe = Probe(daemon.pipeline.tracking)
    wait(lambda: len({c for _t, c, _s, _m in probe.frames}) == args.cameras, 60, "every camera's frames")
    files = [out / "conveyor-640.onnx", out / "conveyor-640-fp16.onnx"]
    results: dict[str, Any] = {"cameras": args.cameras, "fps": args.fps}
    results["swaps"] = swaps_under_load(daemon, probe, files, args)
    running.stop()
    final = totals(daemon.metrics, [f"cam{i}" for i in range(args.cameras)])
    keys = [(c, k) for _t, c, k, _m in probe.frames]
    results["after_stop"] = {
        **final,
        "balanced": final["decoded"] == final["published"] + final["dropped"],
        "engine_error": final.get("dropped.engine_error", 0.0),
        "tracked_twice": len(keys) - len(set(keys)),
    }
    return results


if __name__ == "__main__":
    sys.exit(main())
