"""What the live view's editor costs inference: frames inferred per second with the page open
(polling as it does while its editor is open) against closed, alternating in the same run.

    .venv/bin/python -m tools.bench.liveview_overlay [--cameras 2] [--rounds 4] [--phase-s 15]

A real daemon (`python -m daemon run`, CPU provider) replays a synthetic belt clip per camera as
fast as it decodes (not in real time: inference is the bottleneck, so any cost shows in its rate),
into a real redis-server. Each round has a "closed" phase (nobody looks) and an "open" phase in
which one viewer per camera does what an open editor does every `EDITING_POLL_MS` (1 s):
GET `/api/cameras` and GET `/cameras/<id>/snapshot.jpg?lines=0` (the SVG overlay is drawn by the
browser, on the viewer's machine, not by the daemon). The rate comes from
`beltsight_frames_inferred_total` read over `/metrics` at each phase's ends; the first seconds
are warm-up, not counted. Prints each phase and the ratio open / closed (median over rounds).
Numbers on a shared machine are noisy: read the spread between rounds before the ratio.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from tools.kit.daemon_config import write_config
from tools.kit.ports import free_port
from tools.kit.redis_server import RedisServer, find_redis_server
from tools.kit.running import spawn_daemon, stop_process
from tools.kit.synth.video import render_video

EDITING_POLL_MS = 1000
"""The page's poll while an editor is open (`EDITING_POLL_MS` in daemon/ops/liveview_page.js)."""
WARMUP_S = 20.0


def get(port: int, path: str) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
        return bytes(reply.read())


def inferred(port: int) -> float:
    text = get(port, "/metrics").decode()
    return sum(float(m.group(1)) for m in re.finditer(r"^beltsight_frames_inferred_total\{[^}]*\} (\S+)$", text, re.M))


def viewer(port: int, cameras: list[str], stop: threading.Event, requests: list[int]) -> None:
    """The open page: every poll, the camera list, then each camera's snapshot."""
    while not stop.is_set():
        started = time.monotonic()
        get(port, "/api/cameras")
        for camera in cameras:
            get(port, f"/cameras/{camera}/snapshot.jpg?lines=0")
        requests[0] += 1 + len(cameras)
        stop.wait(max(0.0, EDITING_POLL_MS / 1000 - (time.monotonic() - started)))


def phase(port: int, cameras: list[str], seconds: float, open_page: bool) -> tuple[float, int]:
    """(frames inferred per second, requests made) over `seconds`, with or without the page open."""
    stop, requests = threading.Event(), [0]
    thread = threading.Thread(target=viewer, args=(port, cameras, stop, requests), daemon=True)
    if open_page:
        thread.start()
    before, t0 = inferred(port), time.monotonic()
    time.sleep(seconds)
    after, t1 = inferred(port), time.monotonic()
    stop.set()
    if open_page:
        thread.join(15)
    return (after - before) / (t1 - t0), requests[0]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--cameras", type=int, default=2)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--phase-s", type=float, default=15.0)
    args = p.parse_args(argv)
    binary = find_redis_server()
    if binary is None:
        print("needs redis-server")
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-overlay-") as tmp_dir:
        tmp = Path(tmp_dir)
        clip = tmp / "belt.mp4"
        render_video(clip, tmp / "belt.json", 640, 480, 10, 10.0, seed=21)
        (tmp / "redis").mkdir()
        redis = RedisServer(binary, tmp / "redis").start()
        port = free_port()
        cameras = [f"belt{i}" for i in range(args.cameras)]
        line = {"id": "count", "start": [0.5, 0.05], "end": [0.5, 0.95], "direction": [1.0, 0.0]}
        config = write_config(
            tmp / "beltsight.toml",
            redis_url=redis.url,
            cameras=[{"id": c, "url": str(clip), "realtime": False, "loop": True, "lines": [line]} for c in cameras],
            health={"listen": f"127.0.0.1:{port}", "snapshot_min_interval_s": 0.5},
            tracking={"lines_dir": str(tmp / "lines")},
        )
        daemon = spawn_daemon(config, tmp / "daemon.log")
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    if inferred(port) > 0:
                        break
                except OSError:
                    pass
                time.sleep(0.5)
            time.sleep(WARMUP_S)
            rows = []
            for i in range(args.rounds):
                order = (False, True) if i % 2 == 0 else (True, False)  # alternate which goes first
                rates = {}
                for open_page in order:
                    rate, requests = phase(port, cameras, args.phase_s, open_page)
                    rates["open" if open_page else "closed"] = rate
                    print(
                        f"round {i} {'open  ' if open_page else 'closed'} {rate:7.2f} frames/s  ({requests} requests)"
                    )
                rows.append(rates["open"] / rates["closed"])
        finally:
            stop_process(daemon)
            redis.close()
    ratio = statistics.median(rows)
    print(json.dumps({"open_over_closed": round(ratio, 3), "per_round": [round(r, 3) for r in rows]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
