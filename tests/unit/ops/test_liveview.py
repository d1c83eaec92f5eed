"""LiveView without a daemon: which frame it keeps, when it encodes, where it draws.

Frames are real `Frame`s with planes made here; the JPEG is decoded with Pillow and its box
outlines looked for at the detections' positions scaled into the letterbox content."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from io import BytesIO

import numpy as np
import structlog
from PIL import Image

from daemon.config.tracking import GateConfig, LineConfig
from daemon.core.drawing import BOX_WIDTH, class_colour
from daemon.core.frames import Detection, Frame, FrameResult, Letterbox
from daemon.core.metrics import Metrics
from daemon.core.objects import ObjectEvent
from daemon.ops.http import HealthServer
from daemon.ops.liveview import SCRIPTS, LiveView
from daemon.ops.liveview_render import LINE_COLOUR, Snapshot
from tests.support.waits import async_wait_until


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now


def frame_and_result(
    seq: int, captured_mono: float, dets: tuple[Detection, ...] = (), src: tuple[int, int] = (640, 480), size: int = 640
) -> tuple[Frame, FrameResult]:
    lb = Letterbox.fit(src[0], src[1], size)
    grey = np.full((lb.new_h, lb.new_w), 60, np.uint8)
    frame = Frame("cam", seq, 1_700_000_000_000 + seq, captured_mono, lb, (grey, grey.copy(), grey.copy()))
    result = FrameResult("cam", seq, frame.captured_ms, captured_mono, src[0], src[1], size, "m@1", dets)
    return frame, result


def batch(seq: int, captured_mono: float) -> tuple[list[Frame], list[FrameResult]]:
    """One frame's (frames, results) as a lane worker hands them over."""
    frame, result = frame_and_result(seq, captured_mono)
    return [frame], [result]


def encodes(metrics: Metrics) -> float:
    return metrics.registry.get_sample_value("beltsight_snapshot_encodes_total", {"camera": "cam"}) or 0.0


def test_keeps_the_newest_frame_even_when_batches_finish_out_of_order() -> None:
    view = LiveView(Metrics(), 1.0, Clock())
    view.offer(*batch(5, 10.5))
    view.offer(*batch(4, 10.4))  # an older batch finishing late
    assert view.camera_info("cam")["seq"] == 5
    assert view.camera_info("other") == {
        "model": None,
        "latency_ms": None,
        "seq": None,
        "detections": None,
        "w": None,
        "h": None,
        "lines": [],
        "last_crossing": None,
    }


def test_encodes_only_when_asked_once_per_interval_and_once_for_concurrent_viewers() -> None:
    metrics, clock = Metrics(), Clock()
    view = LiveView(metrics, 1.0, clock)

    async def scenario() -> None:
        assert await view.snapshot("cam") is None  # nothing inferred yet
        for seq in range(50):
            view.offer(*batch(seq, 50.0 + seq))
        assert encodes(metrics) == 0  # frames kept, none drawn
        snaps = await asyncio.gather(*(view.snapshot("cam") for _ in range(10)))
        assert encodes(metrics) == 1 and {s.seq for s in snaps if s is not None} == {49}
        view.offer(*batch(50, 100.0))
        clock.now += 0.5
        cached = await view.snapshot("cam")
        assert cached is not None and cached.seq == 49 and encodes(metrics) == 1  # within the interval
        clock.now += 0.6
        fresh = await view.snapshot("cam")
        assert fresh is not None and fresh.seq == 50 and encodes(metrics) == 2
        clock.now += 5.0
        same = await view.snapshot("cam")
        assert same is fresh and encodes(metrics) == 2  # no newer frame: nothing to draw again
        await view.close()

    asyncio.run(scenario())


def test_boxes_are_drawn_where_the_detections_are_in_a_scaled_letterbox() -> None:
    dets = (
        Detection(0, "bolt", 0.91, (200.0, 100.0, 600.0, 500.0)),
        Detection(1, "nut", 0.55, (800.0, 300.0, 1200.0, 700.0)),
    )
    frame, result = frame_and_result(1, 1.0, dets, src=(1280, 720), size=800)  # content 800 x 450
    view = LiveView(Metrics(), 1.0, Clock())
    view.offer([frame], [result])
    snap = asyncio.run(view.snapshot("cam"))
    asyncio.run(view.close())
    assert snap is not None and (snap.image_w, snap.image_h) == (800, 450)
    assert snap.describe()["dets"] == [d.as_json() for d in dets]
    image = np.asarray(Image.open(BytesIO(snap.jpeg)).convert("RGB")).astype(np.int16)
    scale = 800 / 1280
    for det in dets:
        x1, y1, x2, y2 = (v * scale for v in det.box)
        colour = np.array(class_colour(det.cls), np.int16)
        mid_y = round((y1 + y2) / 2)
        inside = round(x1 + BOX_WIDTH / 2)
        assert np.abs(image[mid_y, inside] - colour).max() <= 40, (det, image[mid_y, inside])  # left edge
        assert np.abs(image[round(y2) - 2, round((x1 + x2) / 2)] - colour).max() <= 40  # bottom edge
        assert np.abs(image[mid_y, round((x1 + x2) / 2)] - 60).max() <= 12  # the box's inside is the frame


def test_a_frame_that_cannot_be_drawn_fails_its_request_with_500_and_one_log_line() -> None:
    def broken() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        raise RuntimeError("the decoder's frame is gone")

    frame, result = frame_and_result(1, 1.0)
    metrics = Metrics()
    view = LiveView(metrics, 0.0, Clock())
    view.offer([dataclasses.replace(frame, pixels=broken)], [result])
    server = HealthServer("127.0.0.1", 0, metrics.registry, lambda: {"ok": True, "cameras": {"cam": {"state": "up"}}})
    view.register(server, lambda: {"ok": True, "cameras": {"cam": {"state": "up", "fps": 1.0}}})

    async def scenario() -> list[int]:
        await server.start()
        try:
            statuses = []
            for _ in range(3):
                reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
                writer.write(b"GET /cameras/cam/snapshot.jpg HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                statuses.append(int((await reader.read()).split(b" ", 2)[1]))
                writer.close()
            return statuses
        finally:
            await server.close()
            await view.close()

    with structlog.testing.capture_logs() as logs:
        assert asyncio.run(scenario()) == [500, 500, 500]
    failures = [e for e in logs if e["event"] == "snapshot_failed"]
    assert len(failures) == 1 and failures[0]["camera"] == "cam" and "decoder's frame is gone" in failures[0]["error"]
    assert encodes(metrics) == 0


def crossed(count: int, direction: str = "in") -> ObjectEvent:
    eta = (("reject1", 1_700_000_002_800 + count),) if direction == "in" else None
    return ObjectEvent(
        "cam",
        10 + count,
        "washer",
        2,
        0.9,
        "crossed",
        1_700_000_000_000 + count,
        line="count",
        direction="in" if direction == "in" else "out",
        count=count,
        speed_px_s=200.0,
        speed_mm_s=150.0,
        eta=eta,
    )


def test_each_line_shows_the_tracking_stages_counts_beside_it_and_in_the_api() -> None:
    """The counts come from the tracking stage (restored totals included), drawn next to the line
    on the snapshot and listed per line with the last crossing for the page."""
    line = LineConfig(id="count", start=(0.5, 0.0), end=(0.5, 1.0), gates=[GateConfig(id="reject1", distance_mm=400)])
    counts = {("count", "in"): 12345, ("count", "out"): 678}
    view = LiveView(Metrics(), 0.0, Clock())
    view.set_lines("cam", [line])
    view.count_from(lambda camera: counts if camera == "cam" else {})
    assert view.parts_info("cam")["lines"] == [
        {
            "id": "count",
            "in": 12345,
            "out": 678,
            "text": "count in 12345 out 678",
            "start": [0.5, 0.0],
            "end": [0.5, 1.0],
            "direction": [1.0, 0.0],
        }
    ]
    assert view.parts_info("cam")["last_crossing"] is None
    frame, result = frame_and_result(1, 1.0)
    view.offer([frame], [result])
    view.tracked(dataclasses.replace(result, objects=(crossed(41), crossed(42), crossed(3, "out"))))
    last = view.camera_info("cam")["last_crossing"]
    assert (last["label"], last["direction"], last["gate"], last["eta_ms"]) == ("washer", "out", None, None)
    view.tracked(dataclasses.replace(result, objects=(crossed(42),)))
    last = view.camera_info("cam")["last_crossing"]
    assert (last["gate"], last["eta_ms"] - last["at_ms"]) == ("reject1", 2800)

    without = LiveView(Metrics(), 0.0, Clock())  # the same frame and line, no counts: another label
    without.set_lines("cam", [line])
    without.offer([frame], [result])
    snaps = [asyncio.run(v.snapshot("cam")) for v in (view, without)]
    asyncio.run(view.close())
    asyncio.run(without.close())
    images = [np.asarray(Image.open(BytesIO(s.jpeg)).convert("RGB")).astype(np.int16) for s in snaps if s]
    assert len(images) == 2
    yellow = [(np.abs(im - np.array(LINE_COLOUR, np.int16)).max(axis=2) <= 60) for im in images]
    right = slice(320 + BOX_WIDTH + 2, None)  # right of the line (x = 320): the arrow and the label
    extent = [int(np.flatnonzero(y[:, right].any(axis=0)).max()) for y in yellow]
    assert extent[0] >= extent[1] + 25  # "count in 12345 out 678" is 6 characters longer than "count in 0 out 0"
    label_rows = np.flatnonzero(yellow[0][:, right].any(axis=1))
    assert 236 <= label_rows.min() <= label_rows.max() <= 300  # the arrow at the middle (y = 240), the label under it


def test_a_snapshot_without_lines_leaves_them_to_the_page_and_is_cached_on_its_own() -> None:
    """`lines=False` (the page's `?lines=0`): the same frame and boxes, no line drawn; each kind
    is encoded once per interval however many ask for it."""
    line = LineConfig(id="count", start=(0.5, 0.0), end=(0.5, 1.0))
    metrics = Metrics()
    view = LiveView(metrics, 60.0, Clock())
    view.set_lines("cam", [line])
    view.offer(*batch(1, 1.0))

    async def both() -> list[Snapshot | None]:
        return list(await asyncio.gather(*(view.snapshot("cam", lines=kind) for kind in (True, False, True, False))))

    snaps = [s for s in asyncio.run(both()) if s is not None]
    asyncio.run(view.close())
    assert encodes(metrics) == 2 and len(snaps) == 4
    assert snaps[2] is snaps[0] and snaps[3] is snaps[1] and snaps[0] is not snaps[1]
    images = [np.asarray(Image.open(BytesIO(s.jpeg)).convert("RGB")).astype(np.int16) for s in snaps[:2]]
    yellow = [int((np.abs(im - np.array(LINE_COLOUR, np.int16)).max(axis=2) <= 60).sum()) for im in images]
    assert yellow[0] >= 480 and yellow[1] == 0
    assert view.camera_info("cam")["w"] == 640 and view.camera_info("cam")["h"] == 480


def test_the_page_loads_its_scripts_from_the_endpoint() -> None:
    """`/` names its scripts under `/static/`; the endpoint serves them (package data) as JavaScript,
    and the unlines snapshot the page asks for."""
    metrics = Metrics()
    view = LiveView(metrics, 0.0, Clock())
    view.set_lines("cam", [LineConfig(id="count", start=(0.5, 0.0), end=(0.5, 1.0))])
    view.offer(*batch(1, 1.0))
    server = HealthServer("127.0.0.1", 0, metrics.registry, lambda: {"ok": True})
    view.register(server, lambda: {"ok": True, "cameras": {"cam": {"state": "up", "fps": 1.0}}})

    async def get(path: str) -> tuple[int, dict[str, str], bytes]:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        head, _, body = (await reader.read()).partition(b"\r\n\r\n")
        writer.close()
        lines = head.decode().split("\r\n")
        headers = dict(h.lower().split(": ", 1) for h in lines[1:])
        return int(lines[0].split(" ")[1]), headers, body

    async def scenario() -> dict[str, tuple[int, dict[str, str], bytes]]:
        await server.start()
        try:
            paths = ["/", *(f"/static/{n}" for n in SCRIPTS), "/static/nope.js", "/cameras/cam/snapshot.jpg?lines=0"]
            return {path: await get(path) for path in paths}
        finally:
            await server.close()
            await view.close()

    replies = asyncio.run(scenario())
    page = replies["/"][2].decode()
    for name in SCRIPTS:
        status, headers, body = replies[f"/static/{name}"]
        assert f'<script src="/static/{name}"></script>' in page
        assert status == 200 and headers["content-type"].startswith("text/javascript")
        assert body.startswith(b"// ") and b'"use strict";' in body
    assert replies["/static/nope.js"][0] == 404
    status, headers, jpeg = replies["/cameras/cam/snapshot.jpg?lines=0"]
    assert status == 200 and headers["content-type"] == "image/jpeg"
    image = np.asarray(Image.open(BytesIO(jpeg)).convert("RGB")).astype(np.int16)
    assert int((np.abs(image - np.array(LINE_COLOUR, np.int16)).max(axis=2) <= 60).sum()) == 0


def test_a_render_its_viewer_left_is_still_reported_and_close_ends_one_under_way() -> None:
    """Each render is a task of the live view's own: one whose every viewer went away and that then
    fails is logged (`snapshot_failed`), not lost; `close` cancels a render still under way and
    returns once it ended (no `snapshot-` task left pending)."""
    drawing = threading.Event()
    release = threading.Event()

    def stuck() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        drawing.set()
        release.wait(10)
        raise RuntimeError("the decoder's frame is gone")

    frame, result = frame_and_result(1, 1.0)
    view = LiveView(Metrics(), 0.0, Clock())
    view.offer([dataclasses.replace(frame, pixels=stuck)], [result])

    def renders() -> list[asyncio.Task[object]]:
        return [t for t in asyncio.all_tasks() if t.get_name().startswith("snapshot-") and not t.done()]

    async def scenario() -> tuple[int, int]:
        viewer = asyncio.create_task(view.snapshot("cam"))
        await asyncio.get_running_loop().run_in_executor(None, drawing.wait, 10)
        viewer.cancel()  # the viewer went away; the render goes on for the others
        release.set()
        await async_wait_until(lambda: not renders())
        drawing.clear()
        release.clear()
        viewer = asyncio.create_task(view.snapshot("cam"))  # another render, still drawing at close
        await asyncio.get_running_loop().run_in_executor(None, drawing.wait, 10)
        under_way = len(renders())
        await asyncio.wait_for(view.close(), 5)
        left = len(renders())
        release.set()
        await asyncio.wait([viewer])
        return under_way, left

    with structlog.testing.capture_logs() as logs:
        assert asyncio.run(scenario()) == (1, 0)
    failed = [(e["camera"], e["error"]) for e in logs if e["event"] == "snapshot_failed"]
    assert failed == [("cam", "RuntimeError: the decoder's frame is gone")]
