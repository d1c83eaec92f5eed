"""``CameraTracker``: one camera's tracks, line crossings, belt speed and gate ETAs, fed frame by frame."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from daemon.core.objects import ObjectEvent
from daemon.tracking.association import indices
from daemon.tracking.bytetrack import ByteTracker
from daemon.tracking.lines import Direction, LineGeometry, LineState, anchor_points
from daemon.tracking.specs import LineSpec, TrackerParams
from daemon.tracking.speed import BeltSpeed, eta_speed_px_s, gate_etas, speed_along
from daemon.tracking.track import Observation, Track

_RANK = {"new": 0, "crossed": 1, "end": 2}
DEFAULT_PARAMS = TrackerParams()


@dataclass(frozen=True, slots=True)
class TrackUpdate:
    """Per input detection its confirmed track id (None: tentative or untracked); the events, in time order."""

    track_ids: tuple[int | None, ...]
    events: tuple[ObjectEvent, ...]


@dataclass(frozen=True, slots=True)
class _Crossing:
    track: Track
    line: int
    direction: Direction
    at_ms: int


class CameraTracker:
    """Tracks one camera's parts on capture time (Unix ms); see ``TrackerParams`` for the track policy.

    Events: ``new`` at confirmation (at_ms = first seen), ``crossed`` when a confirmed track's anchor has
    crossed a line (at_ms = the interpolated crossing; crossings made while the track was tentative are
    emitted at confirmation), ``end`` when a confirmed track was unseen for ``lost_s`` or at ``finish``
    (at_ms = last seen). Capture times that go backwards or repeat advance the internal clock by 0 (no
    prediction step, no ageing). A frame size change rescales the tracks and the (normalised) lines.
    """

    def __init__(
        self,
        camera_id: str,
        lines: Sequence[LineSpec],
        params: TrackerParams = DEFAULT_PARAMS,
        *,
        mm_per_px: float | None = None,
        first_track_id: int = 1,
        counts: Mapping[tuple[str, str], int] | None = None,
    ) -> None:
        self.camera_id = camera_id
        self.params = params
        self.lines = tuple(lines)
        ids = [ln.id for ln in self.lines]
        if len(set(ids)) != len(ids):
            raise ValueError(f"lines: duplicate line ids {ids}")
        if mm_per_px is not None and not (math.isfinite(mm_per_px) and mm_per_px > 0.0):
            raise ValueError(f"mm_per_px: must be > 0, got {mm_per_px}")
        self.mm_per_px = mm_per_px
        self._tracker = ByteTracker(self.params, first_track_id)
        self._counts = {(ln.id, d): 0 for ln in self.lines for d in ("in", "out")}
        for key, value in (counts or {}).items():
            if key not in self._counts:
                raise ValueError(f"counts: unknown (line, direction) {key!r}")
            self._counts[key] = int(value)
        self._belt = BeltSpeed(self.params.belt_tau_s)
        self._states: dict[int, list[LineState]] = {}  # per track uid, one per line
        self._pending: dict[int, list[_Crossing]] = {}
        self._size: tuple[int, int] | None = None
        self._geoms: tuple[LineGeometry, ...] = ()
        self._mono_ms = 0
        self._last_captured: int | None = None

    @property
    def next_track_id(self) -> int:
        """The id the next confirmed track will get (persist it to keep ids unique across restarts)."""
        return self._tracker.next_track_id

    @property
    def counts(self) -> dict[tuple[str, str], int]:
        """Running crossing totals per (line id, "in" | "out")."""
        return dict(self._counts)

    @property
    def belt_speed_px_s(self) -> float | None:
        return self._belt.value_px_s

    @property
    def active_tracks(self) -> int:
        """Confirmed tracks alive now (tracked or lost)."""
        return sum(1 for t in self._tracker.tracks if t.track_id is not None)

    def update(  # noqa: PLR0917 - the frame's fields in the documented order
        self,
        captured_ms: int,
        width: int,
        height: int,
        boxes: np.ndarray,
        scores: np.ndarray,
        classes: np.ndarray,
        labels: Sequence[str],
        *,
        weak: int = 0,
    ) -> TrackUpdate:
        """One frame's detections: boxes (N, 4) x1,y1,x2,y2 camera px, scores (N,), classes (N,), labels.
        The last ``weak`` of them are under the camera's ``conf_threshold`` (never published): they extend
        tracks through both stages but never start or confirm one, so a confirmed track has ``min_hits``
        published sightings, the first at its birth."""
        b, s, c = _validated(boxes, scores, classes, labels)
        captured_ms = int(captured_ms)
        self._set_size(width, height)
        if self._last_captured is not None:
            self._mono_ms += max(0, captured_ms - self._last_captured)
        self._last_captured = captured_ms
        moving = self.params.moving_frac_s * max(width, height)
        step = self._tracker.update(
            captured_ms=captured_ms,
            mono_ms=self._mono_ms,
            boxes=b,
            scores=s,
            classes=c,
            labels=list(labels),
            moving_px_s=moving,
            births=len(s) - weak,
        )
        for t in step.dropped:
            self._forget(t)
        crossings = self._cross(step.observations, b)
        events = [self._new(t) for t in step.confirmed]
        for t in step.confirmed:
            crossings += self._pending.pop(t.uid, [])
        events += self._emit_crossings(crossings, moving)
        events += [self._end(t) for t in step.ended]
        for t in step.ended:
            self._forget(t)
        self._belt.update(
            self._mono_ms,
            [math.hypot(o.track.vx, o.track.vy) for o in step.observations if o.track.track_id is not None],
            moving,
        )
        events.sort(key=lambda e: (e.at_ms, _RANK[e.event]))
        ids = tuple(t.track_id if t is not None else None for t in step.det_tracks)
        return TrackUpdate(ids, tuple(events))

    def set_lines(self, lines: Sequence[LineSpec], mm_per_px: float | None) -> None:
        """Count on `lines` from the next frame on (call between two frames); tracks and ids stay.

        A line kept by id keeps its running counts, a new one counts from 0, a removed one's counts
        go. Where a kept line is unchanged, each track's progress across it (sides, a pending cut, the
        directions already counted) stays; a new or moved line starts every track afresh on the side
        where it stands, so a part standing on a line moved under it is not counted: a crossing needs
        the part's motion across the line. Crossings pending on tentative tracks follow their line."""
        lines = tuple(lines)
        ids = [ln.id for ln in lines]
        if len(set(ids)) != len(ids):
            raise ValueError(f"lines: duplicate line ids {ids}")
        if mm_per_px is not None and not (math.isfinite(mm_per_px) and mm_per_px > 0.0):
            raise ValueError(f"mm_per_px: must be > 0, got {mm_per_px}")
        old = {ln.id: i for i, ln in enumerate(self.lines)}
        kept = [old[ln.id] if ln.id in old and self.lines[old[ln.id]] == ln else None for ln in lines]
        moved = {old[ln.id]: i for i, ln in enumerate(lines) if ln.id in old}
        self._pending = {
            uid: [_Crossing(x.track, moved[x.line], x.direction, x.at_ms) for x in xs if x.line in moved]
            for uid, xs in self._pending.items()
        }
        self._counts = {(ln.id, d): self._counts.get((ln.id, d), 0) for ln in lines for d in ("in", "out")}
        self.lines, self.mm_per_px = lines, mm_per_px
        if self._size is not None:
            self._geoms = tuple(LineGeometry.of(ln, *self._size) for ln in self.lines)
        states: dict[int, list[LineState]] = {}
        for t in self._tracker.tracks:  # every live track, also those never observed against a line yet
            was, fresh = self._states.get(t.uid), self._fresh_states(t.box)
            states[t.uid] = [fresh[i] if k is None or was is None else was[k] for i, k in enumerate(kept)]
        self._states = states

    def _fresh_states(self, box: tuple[float, float, float, float]) -> list[LineState]:
        """A track's states against lines just placed: established on the side its box stands on, or,
        where it stands on the line (inside the hysteresis band), with both directions already counted."""
        if not self._geoms:
            return [LineState() for _ in self.lines]
        b = np.array([box], dtype=np.float64)
        p = anchor_points(b, self.params.anchor)
        out = []
        for geom in self._geoms:
            d = float(geom.signed_distances(p)[0])
            if abs(d) < float(geom.hysteresis_px(b, self.params.line_hysteresis)[0]):
                out.append(LineState(counted={"in", "out"}))
            else:
                out.append(LineState(side=1 if d > 0.0 else -1))
        return out

    def set_params(self, params: TrackerParams) -> None:
        """Track with `params` from the next frame on (tracks, ids and counts stay)."""
        self.params = self._tracker.params = params
        self._belt.tau_s = params.belt_tau_s

    def finish(self, at_ms: int) -> tuple[ObjectEvent, ...]:
        """End every live confirmed track (daemon shutdown). Each ``end`` keeps its last-seen time as
        ``at_ms``, capped at ``at_ms``; tentative tracks vanish silently. The tracker is empty afterwards."""
        events = [self._end(t, at_ms) for t in self._tracker.finish() if t.track_id is not None]
        self._states.clear()
        self._pending.clear()
        events.sort(key=lambda e: (e.at_ms, _RANK[e.event]))
        return tuple(events)

    def _set_size(self, width: int, height: int) -> None:
        if width <= 0 or height <= 0:
            raise ValueError(f"frame size: must be positive, got {width}x{height}")
        if self._size == (width, height):
            return
        if self._size is not None:
            self._tracker.rescale(width / self._size[0], height / self._size[1])
        self._size = (width, height)
        self._geoms = tuple(LineGeometry.of(ln, width, height) for ln in self.lines)

    def _cross(self, observations: tuple[Observation, ...], boxes: np.ndarray) -> list[_Crossing]:
        """Feed every observation to every line; crossings of confirmed tracks (tentative ones wait)."""
        if not observations or not self._geoms:
            return []
        cur = boxes[[o.det for o in observations]]  # each observed track's box is its detection's
        prev = np.array([o.prev_box or o.track.box for o in observations])
        has_prev = np.array([o.prev_box is not None for o in observations])
        p1, p0 = anchor_points(cur, self.params.anchor), anchor_points(prev, self.params.anchor)
        n_lines = len(self._geoms)
        states = [self._states.get(o.track.uid) or self._new_states(o.track.uid, n_lines) for o in observations]
        out = []
        for i, geom in enumerate(self._geoms):
            d1 = geom.signed_distances(p1)
            cut = has_prev & ((geom.signed_distances(p0) > 0.0) != (d1 > 0.0))
            hyst = geom.hysteresis_px(cur, self.params.line_hysteresis)
            clear = np.abs(d1) >= hyst
            # a state changes only on a cut, or once clear of the band on another side than it knows (2: a cut
            # is pending); everything else skips the per-track Python work
            known = np.array([st[i].side if st[i].cut_ms is None else 2 for st in states], dtype=np.int64)
            for k in indices(cut | (clear & (known != np.where(d1 > 0.0, 1, -1)))).tolist():
                o = observations[k]
                t = o.track
                q0 = (float(p0[k, 0]), float(p0[k, 1])) if o.prev_box is not None else None
                q1 = (float(p1[k, 0]), float(p1[k, 1]))
                hit = states[k][i].observe(geom, q0, q1, t0_ms=o.prev_ms, t1_ms=t.last_ms, hysteresis_px=float(hyst[k]))
                if hit is None:
                    continue
                crossing = _Crossing(t, i, hit[0], max(hit[1], t.first_ms))  # a clock that went back: not before new
                if t.track_id is None:
                    self._pending.setdefault(t.uid, []).append(crossing)
                else:
                    out.append(crossing)
        return out

    def _new_states(self, uid: int, n_lines: int) -> list[LineState]:
        states = [LineState() for _ in range(n_lines)]
        self._states[uid] = states
        return states

    def _emit_crossings(self, crossings: list[_Crossing], moving_px_s: float) -> list[ObjectEvent]:
        out = []
        for x in sorted(crossings, key=lambda x: (x.at_ms, x.track.uid, x.line)):
            spec, geom, t = self.lines[x.line], self._geoms[x.line], x.track
            key = (spec.id, x.direction)
            self._counts[key] += 1
            along = speed_along(t.vx, t.vy, geom.unit_dir)
            eta = None
            if spec.gates and self.mm_per_px is not None and x.direction == "in":
                reliable = t.hits >= self.params.min_hits
                use = eta_speed_px_s(along, reliable, self._belt.value_px_s, moving_px_s)
                eta = gate_etas(x.at_ms, spec.gates, use, self.mm_per_px) if use is not None else None
            out.append(
                ObjectEvent(
                    self.camera_id,
                    _id(t),
                    t.label,
                    t.cls,
                    round(t.best_score, 4),
                    "crossed",
                    x.at_ms,
                    line=spec.id,
                    direction=x.direction,
                    count=self._counts[key],
                    speed_px_s=round(along, 1),
                    speed_mm_s=round(along * self.mm_per_px, 1) if self.mm_per_px is not None else None,
                    eta=eta,
                )
            )
        return out

    def _new(self, t: Track) -> ObjectEvent:
        return ObjectEvent(self.camera_id, _id(t), t.label, t.cls, round(t.best_score, 4), "new", t.first_ms)

    def _end(self, t: Track, at_most_ms: int | None = None) -> ObjectEvent:
        last = t.last_ms if at_most_ms is None else min(t.last_ms, at_most_ms)
        first = min(t.first_ms, last)
        return ObjectEvent(
            self.camera_id,
            _id(t),
            t.label,
            t.cls,
            round(t.best_score, 4),
            "end",
            last,
            first_ms=first,
            last_ms=last,
            frames=t.hits,
        )

    def _forget(self, t: Track) -> None:
        self._pending.pop(t.uid, None)
        self._states.pop(t.uid, None)


def _id(t: Track) -> int:
    if t.track_id is None:
        raise AssertionError("event for a tentative track")
    return t.track_id


def _validated(
    boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray, labels: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    b = np.asarray(boxes, dtype=np.float64).reshape(-1, 4) if np.size(boxes) == 0 else np.asarray(boxes, np.float64)
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    c = np.asarray(classes).reshape(-1).astype(np.intp)
    n = b.shape[0]
    if b.ndim != 2 or b.shape[1] != 4:
        raise ValueError(f"boxes: need shape (N, 4), got {b.shape}")
    if s.shape[0] != n or c.shape[0] != n or len(labels) != n:
        raise ValueError(f"scores, classes, labels: need {n} each, got {s.shape[0]}, {c.shape[0]}, {len(labels)}")
    if not (np.isfinite(b).all() and np.isfinite(s).all()):
        raise ValueError("boxes, scores: must be finite")
    if n and int(c.min()) < 0:
        raise ValueError("classes: must be >= 0")
    return b, s, c
