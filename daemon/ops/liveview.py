"""The live view: each camera's latest inferred frame with its detections drawn, on request.

A side tap after inference, not a stage: the lane workers hand each batch's (frame, result)
pairs to `LiveView.offer`, which keeps a reference to the newest pair per camera and nothing
else (no copy, no conversion, no encoding per frame). Only a request for
`/cameras/<id>/snapshot.jpg` draws and encodes (`liveview_render`), in the live view's own thread, and the JPEG is
cached per camera for `snapshot_min_interval_s`: any number of viewers cost at most one encode
per camera per interval, and nobody looking costs nothing. Each counting line is drawn with its
running counts beside it (`<line> in <N> out <M>`, read from the tracking stage through
`count_from` when the snapshot is asked for: the totals the objects stream's `count` carries).
Routes (GET):

- `/`                              the page: every camera, its snapshot refreshing, state, fps, latency, model,
                                   each counting line's counts and the last crossing, and the line editor
                                   (`liveview_editor.js`; it reads and writes `/api/cameras/<id>/lines`)
- `/static/<name>.js`              the page's scripts (`liveview_page.js`, `liveview_editor.js`)
- `/api/cameras`                   what the page polls (JSON; `lines`: each line's `in` and `out` counts and
                                   its `start`, `end`, `direction`; `w`, `h`: the source frame's size;
                                   `last_crossing`: label, line, direction, the first gate and its ETA)
- `/cameras/<id>/snapshot.jpg`     the JPEG; headers `X-Beltsight-Camera`, `-Seq`, `-Captured-Ms`, `-Model`
                                   name the frame, so it can be matched with its Redis entry; `?lines=0`
                                   leaves the lines out (the page draws them itself, over the image)
- `/cameras/<id>/snapshot.json`    the same snapshot's frame and detections, as in its Redis entry
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import Any

import structlog
from aiohttp import web

from daemon.config.tracking import LineConfig
from daemon.core.clock import SYSTEM_CLOCK, Clock
from daemon.core.frames import Frame, FrameResult
from daemon.core.metrics import Metrics
from daemon.core.objects import ObjectEvent
from daemon.core.redaction import SECRETS
from daemon.core.tasks import Tracked
from daemon.ops.http.server import HealthProvider, HealthServer
from daemon.ops.liveview_render import Counts, Latest, Snapshot, count_text, render
from daemon.publish.schema import model_tag

log = structlog.get_logger("beltsight.liveview")

LATENCY_SMOOTHING = 0.1


SCRIPTS = ("liveview_page.js", "liveview_editor.js")
"""The page's scripts, beside it in the package, served under `/static/`."""


class LiveView:
    """The newest inferred (frame, result) per camera, and snapshots of them made on request.

    `offer` is called on the event loop by the lane workers; everything else is the HTTP
    routes' side. Only one snapshot per camera is drawn at a time; concurrent requests share it."""

    def __init__(self, metrics: Metrics, min_interval_s: float, clock: Clock = SYSTEM_CLOCK) -> None:
        self._metrics = metrics
        self._min_interval_s = min_interval_s
        self._clock = clock
        self._latest: dict[str, Latest] = {}
        self._latency_s: dict[str, float] = {}
        self._lines: dict[str, tuple[LineConfig, ...]] = {}
        self._cache: dict[tuple[str, bool], Snapshot] = {}
        self._pending: dict[tuple[str, bool], asyncio.Task[Snapshot]] = {}  # shared by the viewers asking
        self._renders = Tracked(self._render_failed)  # every render still running (`close` ends them)
        self._executor: ThreadPoolExecutor | None = None
        self._failing: set[str] = set()
        self._counts: Callable[[str], Counts] = lambda _camera_id: {}
        self._configured: Callable[[], Mapping[str, Mapping[str, Any]]] = dict
        self._last_crossing: dict[str, ObjectEvent] = {}

    def count_from(self, counts: Callable[[str], Counts]) -> None:
        """Where a camera's running line counts are read (on the event loop): the tracking stage's."""
        self._counts = counts

    def set_lines(self, camera_id: str, lines: Sequence[LineConfig]) -> None:
        """The counting lines drawn on `camera_id`'s view."""
        self._lines[camera_id] = tuple(lines)

    def forget(self, camera_id: str) -> None:
        """A camera removed live: its frame, lines and figures go."""
        self._lines.pop(camera_id, None)
        self._latest.pop(camera_id, None)
        self._latency_s.pop(camera_id, None)
        self._last_crossing.pop(camera_id, None)
        for key in [k for k in self._cache if k[0] == camera_id]:
            del self._cache[key]
        self._failing.discard(camera_id)

    def configured_from(self, configured: Callable[[], Mapping[str, Mapping[str, Any]]]) -> None:
        """Where `/api/cameras` reads every configured camera's settings (enabled, model, redacted URL,
        source), merged into each camera's entry; a configured camera that does not run is listed too."""
        self._configured = configured

    def tracked(self, result: FrameResult) -> None:
        """The tracking stage's version of a result already offered (its boxes carry track ids);
        its last crossing is kept for the page."""
        for event in result.objects:
            if event.event == "crossed":
                self._last_crossing[result.camera_id] = event
        latest = self._latest.get(result.camera_id)
        if latest is not None and latest.result.captured_mono == result.captured_mono:
            self._latest[result.camera_id] = Latest(latest.frame, result)

    def offer(self, frames: Sequence[Frame], results: Sequence[FrameResult]) -> None:
        """Keep the newest pair per camera (workers may finish batches out of order)."""
        now = self._clock.monotonic()
        for frame, result in zip(frames, results, strict=True):
            previous = self._latest.get(result.camera_id)
            if previous is not None and previous.result.captured_mono > result.captured_mono:
                continue
            self._latest[result.camera_id] = Latest(frame, result)
            latency = now - result.captured_mono
            smoothed = self._latency_s.get(result.camera_id)
            self._latency_s[result.camera_id] = (
                latency if smoothed is None else smoothed + LATENCY_SMOOTHING * (latency - smoothed)
            )

    def camera_info(self, camera_id: str) -> dict[str, Any]:
        parts = self.parts_info(camera_id)
        latest = self._latest.get(camera_id)
        if latest is None:
            return {"model": None, "latency_ms": None, "seq": None, "detections": None, "w": None, "h": None, **parts}
        result = latest.result
        return {
            "w": result.width,
            "h": result.height,
            "model": model_tag(result.model_size, result.model_name),
            "latency_ms": round(self._latency_s.get(camera_id, 0.0) * 1000, 1),
            "seq": result.seq,
            "detections": len(result.detections),
            **parts,
        }

    def parts_info(self, camera_id: str) -> dict[str, Any]:
        """`lines` (id, in, out, text per counting line) and `last_crossing` (or None)."""
        counts = self._counts(camera_id)
        lines = [
            {
                "id": line.id,
                "in": counts.get((line.id, "in"), 0),
                "out": counts.get((line.id, "out"), 0),
                "text": count_text(line.id, counts),
                "start": list(line.start),
                "end": list(line.end),
                "direction": list(line.direction),
            }
            for line in self._lines.get(camera_id, ())
        ]
        last = self._last_crossing.get(camera_id)
        crossing = None
        if last is not None:
            gate, eta_ms = last.eta[0] if last.eta else (None, None)
            crossing = {
                "track": last.track,
                "label": last.label,
                "line": last.line,
                "direction": last.direction,
                "at_ms": last.at_ms,
                "speed_mm_s": last.speed_mm_s,
                "gate": gate,
                "eta_ms": eta_ms,
            }
        return {"lines": lines, "last_crossing": crossing}

    async def snapshot(self, camera_id: str, lines: bool = True) -> Snapshot | None:
        """The camera's snapshot: the cached one while it is younger than the interval (or shows
        the newest frame already), else a fresh one; None before the camera's first result.
        `lines=False`: without the counting lines (a snapshot of its own, cached alike)."""
        key = (camera_id, lines)
        cached = self._cache.get(key)
        latest = self._latest.get(camera_id)
        if cached is not None and (
            self._clock.monotonic() - cached.encoded_mono < self._min_interval_s
            or latest is None
            or (latest.result.seq, latest.result.captured_ms) == (cached.seq, cached.captured_ms)
        ):
            return cached
        if latest is None:
            return None
        task = self._pending.get(key)
        if task is None:
            counts = dict(self._counts(camera_id))  # read here, on the loop; drawn in the thread
            drawn = Latest(latest.frame, latest.result, self._lines.get(camera_id, ()) if lines else (), counts)
            task = self._renders.start(self._render(key, drawn), f"snapshot-{camera_id}")
            self._pending[key] = task
            task.add_done_callback(lambda _t: self._pending.pop(key, None))
        return await asyncio.shield(task)  # a viewer that goes away does not cancel the others' snapshot

    async def _render(self, key: tuple[str, bool], latest: Latest) -> Snapshot:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, "beltsight-liveview")
        loop = asyncio.get_running_loop()
        snapshot = await loop.run_in_executor(self._executor, render, latest, self._clock)
        self._cache[key] = snapshot
        self._metrics.snapshot_encodes.labels(camera=snapshot.camera_id).inc()
        return snapshot

    def _render_failed(self, name: str, exc: BaseException) -> None:
        """A render that raised: reported even when every viewer that asked for it went away."""
        self._report_failure(name.removeprefix("snapshot-"), exc)

    def _report_failure(self, camera_id: str, exc: BaseException) -> None:
        """Logged once per camera until a snapshot of it works again (viewers retry every 2 s)."""
        if camera_id not in self._failing:
            self._failing.add(camera_id)
            log.error("snapshot_failed", camera=camera_id, error=SECRETS.scrub(f"{type(exc).__name__}: {exc}"))

    async def close(self) -> None:
        """End the renders still running (waited for) and the live view's thread."""
        await self._renders.close()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    # -- HTTP ------------------------------------------------------------------------------
    def register(self, server: HealthServer, health: HealthProvider) -> None:
        """Add the live view's routes to the health endpoint."""
        package = resources.files("daemon.ops")
        page = package.joinpath("liveview_page.html").read_bytes()
        scripts = {name: package.joinpath(name).read_bytes() for name in SCRIPTS}

        def cameras() -> dict[str, Any]:
            return dict(health().get("cameras", {}))

        async def index(_request: web.BaseRequest, _params: dict[str, str]) -> web.StreamResponse:
            return web.Response(body=page, content_type="text/html", charset="utf-8")

        async def script(_request: web.BaseRequest, params: dict[str, str]) -> web.StreamResponse:
            body = scripts[params["name"]]
            return web.Response(body=body, content_type="text/javascript", charset="utf-8")

        async def api(_request: web.BaseRequest, _params: dict[str, str]) -> web.StreamResponse:
            running, configured = cameras(), self._configured()
            listing = [
                {"id": cid, **configured.get(cid, {}), **running.get(cid, {"state": "idle"}), **self.camera_info(cid)}
                for cid in sorted(running.keys() | configured.keys())
            ]
            return web.json_response({"cameras": listing}, dumps=lambda v: json.dumps(v, sort_keys=True))

        async def snapshot(request: web.BaseRequest, params: dict[str, str]) -> web.StreamResponse:
            camera_id = params["camera"]
            if camera_id not in cameras():
                return web.Response(status=404, text=f"no camera {camera_id!r}\n")
            try:
                snap = await self.snapshot(camera_id, lines=request.query.get("lines") != "0")
            except Exception as exc:  # a frame that cannot be drawn: this request fails, nothing else
                self._report_failure(camera_id, exc)
                return web.Response(status=500, text=f"snapshot failed: {type(exc).__name__}\n")
            self._failing.discard(camera_id)
            if snap is None:
                return web.Response(status=503, text="no inferred frame yet\n", headers={"Retry-After": "1"})
            if params["kind"] == "json":
                return web.json_response(snap.describe(), headers=snap.headers())
            return web.Response(body=snap.jpeg, content_type="image/jpeg", headers=snap.headers())

        server.route(r"/", index)
        server.route(r"/static/(?P<name>" + "|".join(n.replace(".", r"\.") for n in SCRIPTS) + ")", script)
        server.route(r"/api/cameras", api)
        server.route(r"/cameras/(?P<camera>[A-Za-z0-9][A-Za-z0-9_.-]{0,63})/snapshot\.(?P<kind>jpg|json)", snapshot)
