"""The tracking stage: between post-processing and the sink, one `CameraTracker` per camera.

Policy: every `FrameResult` of a tracked camera goes through its camera's tracker in capture
order and comes out as a new `FrameResult` with each detection's confirmed track id and the
frame's object events (`new`, `crossed`, `end`), which the sink writes through the same buffer,
spool and explicit-ID path as the frame itself. The frame's weak detections (`FrameResult.weak`:
under the camera's `conf_threshold`) are fed to the tracker after the others, to extend tracks
only, and end here. No published detection is dropped here and nothing waits: the
stage runs on the event loop (a few tenths of a millisecond per frame, `tools/tracking/bench`).
A frame older than the camera's newest one (which the pipeline does not produce) is passed on
untracked rather than fed backwards in time. An untracked camera's results pass unchanged.

Track ids stay unique per camera across reconnects (one tracker per camera for the process's
life) and across restarts (`resume` with the state recovered from the objects stream), and
`count` continues the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import numpy as np

from daemon.config.cameras import CameraConfig
from daemon.config.tracking import LineConfig, TrackingConfig
from daemon.core.frames import Detection, FrameResult
from daemon.core.metrics import Metrics
from daemon.core.objects import ObjectEvent, ObjectsResume
from daemon.tracking.camera import CameraTracker
from daemon.tracking.specs import GateSpec, LineSpec, TrackerParams


def tracker_params(cfg: TrackingConfig) -> TrackerParams:
    return TrackerParams.from_config(cfg)


def line_specs(lines: Iterable[LineConfig]) -> tuple[LineSpec, ...]:
    return tuple(
        LineSpec(
            line.id,
            line.start,
            line.end,
            line.direction,
            tuple(GateSpec(g.id, g.distance_mm) for g in line.gates),
        )
        for line in lines
    )


def tracked_cameras(cameras: Sequence[CameraConfig], cfg: TrackingConfig) -> list[CameraConfig]:
    """The cameras whose parts are tracked: `[tracking] enabled` unless the camera says otherwise."""
    return [c for c in cameras if c.tracked(cfg)]


class TrackingStage:
    """Per-camera tracking of `FrameResult`s (event-loop only; see the module docstring)."""

    def __init__(self, cameras: Sequence[CameraConfig], cfg: TrackingConfig, metrics: Metrics) -> None:
        self._cfg = cfg
        self._params = tracker_params(cfg)
        self._cameras = {c.id: c for c in tracked_cameras(cameras, cfg)}
        self._retired: dict[str, ObjectsResume] = {}
        """Where a camera removed live left its ids and counts (it continues from there when it comes back)."""
        self._lines = {cid: (line_specs(c.lines), c.mm_per_px) for cid, c in self._cameras.items()}
        self._trackers: dict[str, CameraTracker] = {}
        self._last_ms: dict[str, int] = {}
        self._metrics = metrics

    @property
    def camera_ids(self) -> list[str]:
        return list(self._cameras)

    def lines_of(self, camera_id: str) -> tuple[LineSpec, ...]:
        """The lines `camera_id` counts on now (none for an untracked camera)."""
        return self._lines.get(camera_id, ((), None))[0]

    def apply_lines(self, camera_id: str, lines: Iterable[LineConfig], mm_per_px: float | None) -> None:
        """Count `camera_id` on `lines` from its next frame on (on the event loop, so between two of its
        frames): its tracks, ids and kept lines' counts stay (`CameraTracker.set_lines`). KeyError for
        a camera not tracked here."""
        if camera_id not in self._cameras:
            raise KeyError(camera_id)
        specs = line_specs(lines)
        self._lines[camera_id] = (specs, mm_per_px)
        tracker = self._trackers.get(camera_id)
        if tracker is not None:
            tracker.set_lines(specs, mm_per_px)

    def add_camera(self, camera: CameraConfig, resume: ObjectsResume | None = None) -> bool:
        """Track `camera` (added or changed live; on the loop) from its next frame on, when it is tracked
        (`[tracking] enabled` or its own `tracking`): a running tracker keeps its tracks, ids and counts
        and takes the camera's lines; a camera removed before continues its ids and counts from where it
        left them, else from `resume` (the objects stream's), else from 1. False when it is not tracked
        (a running tracker is then retired as by `remove_camera`)."""
        if not camera.tracked(self._cfg):
            self.remove_camera(camera.id)
            return False
        self._cameras[camera.id] = camera
        if camera.id in self._trackers:
            self.apply_lines(camera.id, camera.lines, camera.mm_per_px)
            return True
        self._lines[camera.id] = (line_specs(camera.lines), camera.mm_per_px)
        start = self._retired.pop(camera.id, None) or resume
        if start is not None:
            self.resume(camera.id, start)
        return True

    def remove_camera(self, camera_id: str) -> ObjectsResume | None:
        """Stop tracking `camera_id` (removed or disabled live, its frames drained; on the loop): its
        tracker ends, its ids and counts are kept for its return and returned; None when it had none."""
        self._cameras.pop(camera_id, None)
        self._lines.pop(camera_id, None)
        self._last_ms.pop(camera_id, None)
        tracker = self._trackers.pop(camera_id, None)
        if tracker is None:
            return self._retired.get(camera_id)
        kept = self._retired[camera_id] = ObjectsResume(tracker.next_track_id, tracker.counts)
        return kept

    def set_params(self, cfg: TrackingConfig) -> None:
        """Track every camera with `cfg`'s knobs from its next frame on (tracks, ids and counts stay)."""
        self._cfg = cfg
        self._params = tracker_params(cfg)
        for tracker in self._trackers.values():
            tracker.set_params(self._params)

    def resume(self, camera_id: str, state: ObjectsResume) -> None:
        """Start `camera_id`'s tracker where the objects stream left off (before its first frame)."""
        lines, mm_per_px = self._lines[camera_id]
        known = {(line.id, d) for line in lines for d in ("in", "out")}
        self._trackers[camera_id] = CameraTracker(
            camera_id,
            lines,
            self._params,
            mm_per_px=mm_per_px,
            first_track_id=max(1, state.next_track_id),
            counts={k: v for k, v in state.counts.items() if k in known},
        )

    def counts(self, camera_id: str) -> dict[tuple[str, str], int]:
        """`camera_id`'s running crossing totals per (line id, "in" | "out"), restored ones included;
        empty before its first frame."""
        tracker = self._trackers.get(camera_id)
        return tracker.counts if tracker is not None else {}

    def snapshot(self) -> dict[str, ObjectsResume]:
        """Where every started camera's ids and counts stand now (for `daemon.tracking.state`)."""
        return {cid: ObjectsResume(t.next_track_id, t.counts) for cid, t in self._trackers.items()}

    def process(self, result: FrameResult) -> FrameResult:
        """`result` with its detections' track ids and this frame's object events."""
        tracker = self._tracker(result.camera_id)
        if tracker is None or result.captured_ms < self._last_ms.get(result.camera_id, result.captured_ms):
            return dataclasses.replace(result, weak=()) if result.weak else result
        self._last_ms[result.camera_id] = result.captured_ms
        started = self._metrics.stage_cpu.tracking.start()
        dets = result.detections
        seen = dets + result.weak  # the weak ones only extend tracks: they start none, get no id, are not published
        boxes = np.array([d.box for d in seen], dtype=np.float64).reshape(-1, 4)
        scores = np.array([d.score for d in seen], dtype=np.float64)
        classes = np.array([d.cls for d in seen], dtype=np.int64)
        update = tracker.update(
            result.captured_ms,
            result.width,
            result.height,
            boxes,
            scores,
            classes,
            [d.label for d in seen],
            weak=len(result.weak),
        )
        tracked = tuple(
            d if track is None else Detection(d.cls, d.label, d.score, d.box, track)
            for d, track in zip(dets, update.track_ids[: len(dets)], strict=True)
        )
        self._count(result.camera_id, update.events, tracker.active_tracks)
        self._metrics.stage_cpu.tracking.stop(started)
        return dataclasses.replace(result, detections=tracked, weak=(), objects=update.events)

    def _tracker(self, camera_id: str) -> CameraTracker | None:
        tracker = self._trackers.get(camera_id)
        if tracker is None and camera_id in self._cameras:
            self.resume(camera_id, ObjectsResume())
            tracker = self._trackers[camera_id]
        return tracker

    def _count(self, camera_id: str, events: Sequence[ObjectEvent], active: int) -> None:
        m = self._metrics
        m.active_tracks.labels(camera=camera_id).set(active)
        for e in events:
            m.object_events.labels(camera=camera_id, event=e.event).inc()
            if e.event == "crossed":
                m.crossings.labels(camera=camera_id, line=e.line, direction=e.direction, label=e.label).inc()


__all__ = ["TrackingStage", "line_specs", "tracked_cameras", "tracker_params"]
