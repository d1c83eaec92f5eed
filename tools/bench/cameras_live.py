"""Cameras added, changed and removed on the running daemon, measured: what the cameras nobody touched see.

    .venv/bin/python -m tools.bench.cameras_live [--cameras 4] [--fps 3] [--rounds 3] [--window-s 10]
                                                 [--cycles 20]

The daemon runs in this process (its own thread and loop, CPU inference, the committed demo models),
with `--cameras` cameras on a real RTSP server (synthetic belt clips, 320x240, `--fps`) and a real
redis-server. Keep the box under its capacity (the issue's measure runs at 80 %): on a saturated CPU
every added camera takes its share of inference from the others, which is not what this measures.
One run, in parts:

1. A fifth camera `extra` is added (`PUT /api/cameras/extra`) and runs in every window below, so
   both kinds of window carry the same cameras and differ by the change alone.
2. `--rounds` rounds of a quiet window and a churn window, `--window-s` each, in random order within
   a round (the host's drift falls on both kinds alike). A churn window starts with one change of
   `extra` through the API, in turn: a reader key changed (it is reopened alone), or removed
   (`DELETE`: drained, stopped) and added again. Printed for the untouched cameras, churn against
   quiet: frame rate (decoded, and published, per second), capture-to-sink p99 (each tracked
   result as the sink takes it), drops by reason; over the whole run their reconnects and `seq`
   restarts (both must be 0); and the time from each `PUT` that adds `extra` to its first result.
3. Leaks: `--cycles` add/remove cycles of one camera (each waits for its first result), then RSS,
   threads, open file descriptors and metric series against before the cycles.

After the daemon stopped: decoded = published + dropped for the untouched cameras. Numbers are
noisy on a shared machine (other processes take the same cores): read the ratios.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from daemon.app import Daemon
from daemon.core.seam import SYSTEM_CLOCK, FrameResult, time_ms
from tools.bench.lines_apply import delta, totals
from tools.kit.daemon_config import write_config
from tools.kit.redis_server import RedisServer, find_redis_server
from tools.kit.rtsp import RtspServer
from tools.kit.running import start_daemon, wait
from tools.kit.synth.video import render_video

WIDTH, HEIGHT = 320, 240  # the 416 model: the fastest lane on a CPU
CLIP_S = 7.3


class Probe:
    """Wraps the sink's `accept`: each result's capture-to-sink latency and arrival, per camera."""

    def __init__(self, daemon: Daemon) -> None:
        assert daemon.pipeline is not None
        sink = daemon.pipeline.sink
        accept = sink.accept
        self.latency_ms: dict[str, list[tuple[float, float]]] = {}
        self.first: dict[str, float] = {}
        self.seqs: dict[str, list[int]] = {}

        def probed(result: FrameResult) -> None:
            now = time.perf_counter()
            cid = result.camera_id
            self.latency_ms.setdefault(cid, []).append((now, time_ms(SYSTEM_CLOCK) - result.captured_ms))
            self.first.setdefault(cid, now)
            self.seqs.setdefault(cid, []).append(result.seq)
            accept(result)

        sink.accept = probed  # type: ignore[method-assign]

    def p99(self, cameras: list[str], spans: list[tuple[float, float]]) -> float:
        values = sorted(
            ms for cid in cameras for t, ms in self.latency_ms.get(cid, []) if any(a <= t < b for a, b in spans)
        )
        return values[int(0.99 * (len(values) - 1))] if values else float("nan")


def http(port: int, path: str, method: str = "GET", body: Any = None) -> int:
    data = None if body is None else json.dumps(body).encode()
    headers = {} if data is None else {"Content-Type": "application/json"}
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method, headers=headers)
    with urllib.request.urlopen(req, timeout=60) as r:
        r.read()
        return int(r.status)


def process_figures(daemon: Daemon) -> dict[str, float]:
    gc.collect()
    status = Path("/proc/self/status").read_text().splitlines()
    rss_kb = next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))
    series = sum(len(m.samples) for m in daemon.metrics.registry.collect())
    return {
        "rss_mb": rss_kb / 1024,
        "threads": threading.active_count(),
        "fds": len(os.listdir("/proc/self/fd")),
        "metric_samples": series,
    }


def quiet_and_churn(
    args: argparse.Namespace, daemon: Daemon, server: RtspServer, untouched: list[str], add_extra: Callable[[], None]
) -> tuple[dict[str, list[tuple[float, float]]], dict[str, dict[str, float]]]:
    """`--rounds` pairs of windows in random order, "quiet" (nothing changes) and "churn" (the extra camera
    changed, or removed and added again): each window's (start, end), and the untouched cameras' counters
    summed by kind of window."""
    assert daemon.health is not None
    port = daemon.health.port
    windows: dict[str, list[tuple[float, float]]] = {"quiet": [], "churn": []}
    sums: dict[str, dict[str, float]] = {"quiet": {}, "churn": {}}
    ops = itertools.cycle(("change", "remove+add"))
    order = random.Random(54)
    for i in range(args.rounds):
        kinds = ["quiet", "churn"] if order.random() < 0.5 else ["churn", "quiet"]
        for kind in kinds:
            before = totals(daemon.metrics, untouched)
            start = time.perf_counter()
            if kind == "churn":
                if next(ops) == "change":
                    body = {"url": server.url("extra"), "stall_s": 6 + i}
                    assert http(port, "/api/cameras/extra", "PUT", body) == 200
                else:
                    assert http(port, "/api/cameras/extra", "DELETE") == 200
                    add_extra()
            time.sleep(max(0.0, start + args.window_s - time.perf_counter()))
            windows[kind].append((start, time.perf_counter()))
            for k, v in delta(before, totals(daemon.metrics, untouched)).items():
                sums[kind][k] = sums[kind].get(k, 0.0) + v
    return windows, sums


def add_remove_cycles(
    daemon: Daemon, server: RtspServer, probe: Probe, cycles: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Add the extra camera (until its first result) and remove it `cycles` times: the process's figures
    before and after (what a leak would grow)."""
    assert daemon.health is not None
    port = daemon.health.port
    before_cycles = process_figures(daemon)
    for _ in range(cycles):
        probe.first.pop("extra", None)
        http(port, "/api/cameras/extra", "PUT", {"url": server.url("extra")})
        wait(lambda: "extra" in probe.first, 60, "the added camera's first result")
        http(port, "/api/cameras/extra", "DELETE")
    after_cycles = process_figures(daemon)
    return before_cycles, after_cycles


def per_camera(sums: dict[str, dict[str, float]], seconds: float, cameras: int) -> dict[str, dict[str, float]]:
    """The counters by kind of window, with the published and decoded fps per camera over `seconds`."""
    per = {kind: {**d, "published_fps_per_camera": d["published"] / seconds / cameras} for kind, d in sums.items()}
    for d in per.values():
        d["fps_per_camera"] = d["decoded"] / seconds / cameras
    return per


def _run(args: argparse.Namespace, out: Path, server: RtspServer, redis_url: str) -> dict[str, Any]:
    untouched = [f"cam{i}" for i in range(args.cameras)]
    path = write_config(
        out / "beltsight.toml",
        redis_url=redis_url,
        cameras=[{"id": cid, "url": server.url(cid)} for cid in untouched],
        tracking={"lines_dir": str(out / "lines")},
        cameras_dir=out / "cameras",
    )
    running = start_daemon(path)
    daemon = running.daemon
    assert daemon.health is not None
    port = daemon.health.port
    probe = Probe(daemon)
    wait(lambda: all(c in probe.first for c in untouched), 60, "every camera publishing")
    time.sleep(3.0)

    def reconnects_of(camera: str) -> float:
        return daemon.metrics.registry.get_sample_value("beltsight_camera_reconnects_total", {"camera": camera}) or 0.0

    reconnects = {c: reconnects_of(c) for c in untouched}

    to_first: list[float] = []

    def add_extra() -> None:
        probe.first.pop("extra", None)
        put_at = time.perf_counter()
        assert http(port, "/api/cameras/extra", "PUT", {"url": server.url("extra")}) in (200, 201)
        wait(lambda: "extra" in probe.first, 60, "the added camera's first result")
        to_first.append((probe.first["extra"] - put_at) * 1000)

    add_extra()  # present in both kinds of window: what differs is the change alone
    windows, sums = quiet_and_churn(args, daemon, server, untouched, add_extra)
    per = per_camera(sums, args.rounds * args.window_s, len(untouched))
    http(port, "/api/cameras/extra", "DELETE")

    before_cycles, after_cycles = add_remove_cycles(daemon, server, probe, args.cycles)

    running.stop()
    final = totals(daemon.metrics, untouched)
    restarts = {c: sum(1 for a, b in itertools.pairwise(probe.seqs.get(c, [])) if b <= a) for c in untouched}
    reconnected = {c: reconnects_of(c) - reconnects[c] for c in untouched}
    return {
        "cameras_untouched": args.cameras,
        "quiet": per["quiet"],
        "churn": per["churn"],
        "fps_ratio": per["churn"]["fps_per_camera"] / per["quiet"]["fps_per_camera"],
        "published_fps_ratio": per["churn"]["published_fps_per_camera"] / per["quiet"]["published_fps_per_camera"],
        "p99_capture_to_sink_ms": {kind: probe.p99(untouched, spans) for kind, spans in windows.items()},
        "p99_ratio": probe.p99(untouched, windows["churn"]) / probe.p99(untouched, windows["quiet"]),
        "untouched_reconnects": reconnected,
        "untouched_seq_restarts": restarts,
        "put_to_first_result_ms": {"median": statistics.median(to_first), "max": max(to_first)} if to_first else None,
        "cycles": args.cycles,
        "before_cycles": before_cycles,
        "after_cycles": after_cycles,
        "after_stop": {**final, "balanced": final["decoded"] == final["published"] + final["dropped"]},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cameras", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3, help="rounds of one quiet and one churn window")
    ap.add_argument("--window-s", type=float, default=10.0)
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--fps", type=int, default=3, help="the clips' frame rate (keep the box under its capacity)")
    args = ap.parse_args(argv)
    binary = find_redis_server()
    if binary is None:
        raise SystemExit("redis-server not found")
    with tempfile.TemporaryDirectory(prefix="bench-cameras-") as tmp:
        out = Path(tmp)
        clip = out / "belt.mp4"
        render_video(clip, out / "belt.json", WIDTH, HEIGHT, args.fps, CLIP_S, seed=21)
        (out / "redis").mkdir()
        redis = RedisServer(binary, out / "redis").start()
        mounts = {f"cam{i}": clip for i in range(args.cameras)} | {"extra": clip}
        server = RtspServer(mounts).start()
        try:
            results = _run(args, out, server, redis.url)
        finally:
            server.close()
            redis.close()
    print(json.dumps(results, indent=2, sort_keys=True))
    ok = results["after_stop"]["balanced"] and not any(results["untouched_reconnects"].values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
