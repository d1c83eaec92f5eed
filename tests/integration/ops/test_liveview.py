"""The live view against the real daemon (in-process) with a real RTSP camera, a file replay and
Redis: snapshots cost nothing until asked for, their boxes are the detections published to Redis
for that very frame, and the page works in headless Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from io import BytesIO
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from daemon.core.drawing import BOX_WIDTH, class_colour
from tests.support.daemon_harness import InProcessDaemon, http_get, write_config
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip, RtspServer
from tests.support.streams import stream
from tests.support.waits import wait_until

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or "/usr/bin/chromium"
"""Headless Chromium: on PATH under Debian's or Ubuntu's name, else Debian's path."""
pytestmark = pytest.mark.slow


def encodes(d: InProcessDaemon, camera: str) -> float:
    return d.counter("beltsight_snapshot_encodes_total", camera=camera)


def start(
    tmp_path: Path,
    redis: RedisServer,
    rtsp: Callable[..., RtspServer],
    clip_factory: Callable[..., Clip],
    interval_s: float,
) -> InProcessDaemon:
    clip = clip_factory(640, 480, fps=10, seconds=4.0, seed=21, synthetic=True)
    server = rtsp({"belt": clip.path})
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[
            {"id": "belt", "url": server.url("belt")},
            {"id": "replay", "url": str(clip.path), "realtime": True, "loop": True},
        ],
        health={"snapshot_min_interval_s": interval_s},
    )
    return InProcessDaemon(config)


def port_of(d: InProcessDaemon) -> int:
    wait_until(lambda: d.daemon.health is not None and d.daemon.state == "running", 60, "the daemon to be ready", d)
    assert d.daemon.health is not None
    return d.daemon.health.port


def entry_for(redis: RedisServer, camera: str, seq: int, captured_ms: int) -> dict[str, str] | None:
    for _id, fields in stream(redis, camera):
        if fields["seq"] == str(seq) and fields["captured_ms"] == str(captured_ms):
            return fields
    return None


def snapshot_with_detections(d: InProcessDaemon, camera: str) -> tuple[dict[str, str], bytes, dict[str, Any]]:
    """A JPEG snapshot with detections and its sidecar, the two of the same frame: a new snapshot
    may be cached between the two requests (its interval ended), then both are asked again."""
    found: list[tuple[dict[str, str], bytes, dict[str, Any]]] = []

    def probe() -> bool:
        reply = http_get(port_of(d), f"/cameras/{camera}/snapshot.jpg")
        if reply.status != 200:
            return False
        sidecar = http_get(port_of(d), f"/cameras/{camera}/snapshot.json").json()
        same = (str(sidecar["seq"]), str(sidecar["captured_ms"])) == (
            reply.headers["X-Beltsight-Seq"],
            reply.headers["X-Beltsight-Captured-Ms"],
        )
        if same and sidecar["dets"]:
            found.append((reply.headers, reply.body, sidecar))
            return True
        return False

    wait_until(probe, 60, f"a snapshot of {camera} with detections", d)
    return found[0]


def _outline(det: dict[str, Any], sx: float, sy: float) -> tuple[float, float, float, float]:
    return det["box"][0] * sx, det["box"][1] * sy, det["box"][2] * sx - 1, det["box"][3] * sy - 1


def _on_outline(x: float, y: float, box: tuple[float, float, float, float]) -> bool:
    """Whether pixel (x, y) may lie on the BOX_WIDTH outline of `box` (a pixel of slack)."""
    x1, y1, x2, y2 = box
    near = BOX_WIDTH + 1
    inside = x1 - 1 <= x <= x2 + 1 and y1 - 1 <= y <= y2 + 1
    return inside and min(x - x1, x2 - x, y - y1, y2 - y) <= near


def box_pixels_match(
    image: np.ndarray, det: dict[str, Any], sx: float, sy: float, later: list[dict[str, Any]] | None = None
) -> float:
    """Share of sampled points on the box outline (drawn inside the box) that have its class colour;
    points where a box drawn after it (`later`) has its own outline are not its to show."""
    x1, y1, x2, y2 = _outline(det, sx, sy)
    over = [_outline(other, sx, sy) for other in later or []]
    inset = BOX_WIDTH / 2 - 0.5
    colour = np.array(class_colour(det["cls"]), dtype=np.int16)
    h, w = image.shape[:2]
    points = []
    for t in np.linspace(0.2, 0.8, 7):
        x, y = x1 + t * (x2 - x1), y1 + t * (y2 - y1)
        points += [(x, y2 - inset), (x1 + inset, y), (x2 - inset, y)]  # bottom, left, right edges
    points = [(x, y) for x, y in points if not any(_on_outline(x, y, box) for box in over)]
    if not points:
        return 1.0  # wholly under later boxes: nothing of it to see
    hits = 0
    for x, y in points:
        px = image[min(h - 1, max(0, round(y))), min(w - 1, max(0, round(x)))].astype(np.int16)
        hits += int(np.abs(px - colour).max() <= 60)
    return hits / len(points)


def test_snapshots_cost_nothing_unwatched_and_are_rate_limited(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    rtsp_server: Callable[..., RtspServer],
    clip_factory: Callable[..., Clip],
) -> None:
    redis = redis_server()
    with start(tmp_path, redis, rtsp_server, clip_factory, interval_s=30.0) as d:
        wait_until(lambda: len(stream(redis, "belt")) >= 20, 60, "20 entries of the RTSP camera", d)
        assert encodes(d, "belt") == 0 and encodes(d, "replay") == 0  # nobody looked: nothing encoded
        port = port_of(d)
        replies = [http_get(port, "/cameras/belt/snapshot.jpg") for _ in range(10)]
        assert all(r.status == 200 and r.headers["Content-Type"] == "image/jpeg" for r in replies)
        assert len({r.headers["X-Beltsight-Seq"] for r in replies}) == 1  # one cached JPEG for the interval
        assert encodes(d, "belt") == 1 and encodes(d, "replay") == 0
        image = Image.open(BytesIO(replies[0].body))
        assert image.format == "JPEG" and image.size == (640, 480)
        assert http_get(port, "/cameras/nope/snapshot.jpg").status == 404
        assert http_get(port, "/cameras/belt/snapshot.png").status == 404
        assert http_get(port, "/cameras/belt/snapshot.jpg", method="POST").status == 405


def test_snapshot_boxes_are_the_detections_published_for_that_frame(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    rtsp_server: Callable[..., RtspServer],
    clip_factory: Callable[..., Clip],
) -> None:
    redis = redis_server()
    with start(tmp_path, redis, rtsp_server, clip_factory, interval_s=5.0) as d:
        headers, jpeg, sidecar = snapshot_with_detections(d, "belt")
        seq, captured_ms = int(headers["X-Beltsight-Seq"]), int(headers["X-Beltsight-Captured-Ms"])
        wait_until(lambda: entry_for(redis, "belt", seq, captured_ms) is not None, 60, "the frame's entry", d)
        entry = entry_for(redis, "belt", seq, captured_ms)
    assert entry is not None
    assert (sidecar["seq"], sidecar["captured_ms"]) == (seq, captured_ms)
    assert headers["X-Beltsight-Model"] == entry["model"] == sidecar["model"]
    published = json.loads(entry["dets"])
    assert sidecar["dets"] == published and published
    image = np.asarray(Image.open(BytesIO(jpeg)).convert("RGB"))
    sx, sy = sidecar["image_w"] / int(entry["w"]), sidecar["image_h"] / int(entry["h"])
    for i, det in enumerate(published):  # drawn in this order: a later outline covers an earlier one
        assert box_pixels_match(image, det, sx, sy, published[i + 1 :]) >= 0.8, (det, published)


def chromium(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "chromium-profile"
    profile.mkdir(exist_ok=True)
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        "--window-size=1100,1400",
        "--virtual-time-budget=8000",
    ]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason=f"{CHROMIUM} is not installed (apt-get install chromium)")
def test_the_page_lists_every_camera_with_its_snapshot_in_headless_chromium(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    rtsp_server: Callable[..., RtspServer],
    clip_factory: Callable[..., Clip],
) -> None:
    redis = redis_server()
    with start(tmp_path, redis, rtsp_server, clip_factory, interval_s=0.5) as d:
        snapshot_with_detections(d, "belt")
        snapshot_with_detections(d, "replay")
        url = f"http://127.0.0.1:{port_of(d)}/"
        dom = chromium(["--dump-dom", url], tmp_path)
        shot = tmp_path / "liveview.png"
        chromium([f"--screenshot={shot}", url], tmp_path)
        models = {c["id"]: c["model"] for c in http_get(port_of(d), "/api/cameras").json()["cameras"]}
    assert dom.returncode == 0, dom.stderr[-2000:]
    cards = {
        m.group(1): m.group(0) for m in re.finditer(r'<section class="camera" data-camera="([^"]+)"[^>]*>', dom.stdout)
    }
    assert set(cards) == {"belt", "replay"}, dom.stdout[-3000:]
    for camera, tag in cards.items():
        assert 'data-state="up"' in tag and 'data-loaded="1"' in tag, tag
        assert re.search(r'data-snapshot-seq="\d+"', tag), tag
        assert models[camera] is not None and models[camera] in dom.stdout
    assert dom.stdout.count("blob:") >= 2  # both snapshots were fetched and shown
    assert shot.is_file()
    pixels = np.asarray(Image.open(shot).convert("RGB")).astype(np.int16)
    boxes = sum(
        int((np.abs(pixels - np.array(class_colour(cls), np.int16)).max(axis=2) <= 40).sum()) for cls in range(3)
    )
    assert boxes >= 200, f"only {boxes} box-coloured pixels in the screenshot"


def newest_counts(redis: RedisServer, camera: str) -> dict[str, int]:
    """Each direction's running `count` of the line "count", as the newest `crossed` entry has it."""
    client = redis.client()
    try:
        raw = client.xrange(f"beltsight:objects:{camera}")
    finally:
        client.close()
    counts = {"in": 0, "out": 0}
    for _id, fields in raw:
        f = {str(k): str(v) for k, v in fields.items()}
        if f["event"] == "crossed" and f["line"] == "count":
            counts[f["direction"]] = int(f["count"])
    return counts


@pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason=f"{CHROMIUM} is not installed (apt-get install chromium)")
def test_the_page_shows_each_lines_counts_as_the_objects_stream_has_them(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    clip_factory: Callable[..., Clip],
) -> None:
    """A replayed belt with a counting line: the page (headless Chromium) shows `count in <N> out <M>`
    under the camera's snapshot, N the running count the objects stream carries around that moment,
    and /api/cameras lists the same line with its last crossing and gate arrival."""
    redis = redis_server()
    clip = clip_factory(640, 480, fps=10, seconds=4.0, seed=21, synthetic=True)
    line = {
        "id": "count",
        "start": [0.5, 0.0],
        "end": [0.5, 1.0],
        "direction": [1.0, 0.0],
        "gates": [{"id": "reject1", "distance_mm": 400}],
    }
    camera = {"id": "replay", "url": str(clip.path), "realtime": True, "loop": True, "mm_per_px": 0.75, "lines": [line]}
    config = write_config(
        tmp_path / "beltsight.toml", redis_url=redis.url, cameras=[camera], health={"snapshot_min_interval_s": 0.5}
    )
    with InProcessDaemon(config) as d:
        wait_until(lambda: newest_counts(redis, "replay")["in"] >= 2, 120, "two parts counted in", d)
        before = newest_counts(redis, "replay")
        dom = chromium(["--dump-dom", f"http://127.0.0.1:{port_of(d)}/"], tmp_path)
        api = http_get(port_of(d), "/api/cameras").json()["cameras"][0]
        row = (
            r'<div class="line-count" data-line="count" data-in="(\d+)" data-out="(\d+)">count in (\d+) out (\d+)</div>'
        )
        shown = re.search(row, dom.stdout)
        assert shown is not None, dom.stdout[-3000:]
        n_in, n_out = int(shown.group(1)), int(shown.group(2))
        # what the daemon counted is in the stream at once or a moment later (the sink's buffer)
        wait_until(lambda: newest_counts(redis, "replay")["in"] >= n_in, 30, "the shown count in the stream", d)
        after = newest_counts(redis, "replay")
    assert (shown.group(3), shown.group(4)) == (shown.group(1), shown.group(2))
    assert before["in"] <= n_in <= after["in"] and before["out"] <= n_out <= after["out"]
    assert [(x["id"], x["text"]) for x in api["lines"]] == [
        ("count", f"count in {x['in']} out {x['out']}") for x in api["lines"]
    ]
    assert before["in"] <= api["lines"][0]["in"] <= after["in"]
    last = api["last_crossing"]
    assert last is not None and last["line"] == "count" and last["label"]
    if last["direction"] == "in":
        assert last["gate"] == "reject1" and last["eta_ms"] > last["at_ms"]
