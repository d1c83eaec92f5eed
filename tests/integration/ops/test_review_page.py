"""The review page used as a person would: headless Chromium on a real endpoint and a real Redis, real
clicks (DevTools `Input.dispatchMouseEvent`): filter to one line, open a crossing, its clip (a real
H.264 MP4 made with PyAV, served with ranges as the clips' route serves it) plays from a few seconds
before the crossing with the box and the line drawn over it; the crossing's link opens it again."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from importlib import resources
from io import BytesIO
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.support.chromium import CHROMIUM, Chromium
from tests.support.fixtures_redis import RedisServer, RedisServerFactory
from tests.support.review_harness import Belt, ReviewEndpoint, review_endpoint
from tests.support.waits import wait_until
from tools.kit.synth.video import h264_writer

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)"),
]

CLIP_OFFSET_MS = 5000
ROWS = "#crossings tr.crossing"


def make_clip(path: Path, seconds: int = 9, fps: int = 10) -> None:
    """A part moving left to right over a grey belt, 640x480 H.264 (yuv420p, a keyframe each second)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with h264_writer(path, 640, 480, fps) as write:
        for i in range(seconds * fps):
            frame = np.full((480, 640, 3), 90, np.uint8)
            x = 20 + i * 6
            frame[200:280, x : x + 80] = (200, 120, 40)
            write(frame)


def make_snapshot(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (640, 480), (90, 90, 90)).save(path, quality=80)


@pytest.fixture
def page(redis_server: RedisServerFactory, tmp_path: Path) -> Iterator[tuple[ReviewEndpoint, Belt, Chromium]]:
    server: RedisServer = redis_server()
    snapshots, clips = tmp_path / "snapshots", tmp_path / "clips"
    make_clip(clips / "cam1" / "reject-1.mp4")
    make_snapshot(snapshots / "cam1" / "s.jpg")
    belt = Belt(server.client())
    now = int(time.time() * 1000)
    for i in range(6):
        belt.crossing("cam1", now - 600_000 + i * 60_000, line="count", track=i + 1, snapshot="cam1/s.jpg")
        belt.crossing("cam2", now - 590_000 + i * 60_000, line="count", track=i + 1)
    belt.crossing("cam1", now - 300_000, line="reject", direction="out", track=3, snapshot="cam1/s.jpg")
    belt.crossing(
        "cam1",
        now - 120_000,
        line="reject",
        direction="out",
        label="nut",
        track=7,
        snapshot="cam1/s.jpg",
        clip="cam1/reject-1.mp4",
        clip_offset_ms=CLIP_OFFSET_MS,
        box=(300.0, 200.0, 380.0, 280.0),
    )
    browser = Chromium(tmp_path)
    with review_endpoint(
        server, tmp_path / "review.sqlite3", ["cam1", "cam2"], snapshots=snapshots, clips=clips
    ) as api:
        wait_until(lambda: api.recorder.recorded == 14, 60, "14 crossings recorded")
        try:
            yield api, belt, browser
        finally:
            browser.close()


def keep_screenshot(browser: Chromium, tmp_path: Path) -> None:
    """The page as PNG: always under tmp_path, and into the docs when asked (`BELTSIGHT_DOCS_IMG=docs/img`)."""
    png = browser.screenshot()
    assert png.startswith(b"\x89PNG")
    (tmp_path / "review.png").write_bytes(png)
    if docs := os.environ.get("BELTSIGHT_DOCS_IMG"):  # small for the repository: 900 px wide, 128 colours
        image = Image.open(BytesIO(png)).convert("RGB")
        image = image.resize((900, round(image.height * 900 / image.width)), Image.Resampling.LANCZOS)
        image.quantize(128).save(Path(docs) / "review.png", optimize=True)


def test_filter_to_a_line_open_a_crossing_and_its_clip_plays(
    page: tuple[ReviewEndpoint, Belt, Chromium], tmp_path: Path
) -> None:
    api, _belt, browser = page
    browser.open(f"http://127.0.0.1:{api.port}/review")
    browser.wait_for(f"document.querySelectorAll('{ROWS}').length === 14", what="every crossing listed")
    assert browser.evaluate("document.querySelectorAll('#crossings img.thumb').length") == 8
    assert browser.wait_for("document.querySelector('#crossings img.thumb').naturalWidth") == 640

    browser.click(*browser.at('#lines button[data-camera="cam1"][data-line="reject"]', 0.5, 0.5))
    browser.wait_for(
        f"(() => {{ const rows = [...document.querySelectorAll('{ROWS}')];"
        " return rows.length === 2 && rows.every((r) => r.dataset.line === 'reject'); })()",
        what="only the reject line's crossings",
    )
    assert "line=reject" in browser.evaluate("location.search")
    assert browser.evaluate("document.querySelectorAll('#chart rect.bar').length") > 0
    shown = browser.evaluate("[...document.querySelectorAll('#chart rect.bar')].reduce((s, r) => s + +r.dataset.n, 0)")
    assert shown == 2

    browser.click(*browser.at(f"{ROWS}:first-child td:nth-child(3)", 0.5, 0.5))  # the newest: the one with a clip
    video = "document.querySelector('#player video')"
    browser.wait_for(f"{video} && {video}.readyState >= 2", what="the clip to load")
    start = browser.wait_for(
        f"(() => {{ const v = {video}; return !v.paused && v.currentTime > 0 && v.currentTime; }})()",
        what="the clip to play",
    )
    assert CLIP_OFFSET_MS / 1000 - 3.5 <= start <= CLIP_OFFSET_MS / 1000, start  # from a few seconds before
    browser.wait_for(f"{video}.currentTime > {start} + 0.5", what="time to move")
    drawn = browser.evaluate(
        "(() => { const s = document.querySelector('#player svg'); const r = s.querySelector('rect.box');"
        " const l = s.querySelector('line.line');"
        " return [s.getAttribute('viewBox'), +r.getAttribute('x'), +r.getAttribute('width'),"
        " +l.getAttribute('x1')]; })()"
    )
    assert drawn == ["0 0 640 480", 300, 80, 0.2 * 640]
    keep_screenshot(browser, tmp_path)

    link = browser.evaluate(f"document.querySelector('{ROWS}:first-child a.share').href")
    opened = browser.evaluate("window.reviewOpen.id")
    browser.open(link)  # a colleague opens the link
    got = browser.wait_for("window.reviewOpen && JSON.stringify(window.reviewOpen)", what="the linked crossing open")
    assert json.loads(got)["id"] == opened
    assert json.loads(got)["clip"] == "cam1/reject-1.mp4"
    browser.wait_for(f"{video} && {video}.readyState >= 2", what="the linked clip to load")


def test_the_live_view_links_to_the_review_page() -> None:
    page = resources.files("daemon.ops").joinpath("liveview_page.html").read_text()
    assert '<a href="/review">Review</a>' in page
