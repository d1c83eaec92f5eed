"""ByteTrack-style multi-object tracker (Zhang et al. 2022, "ByteTrack: Multi-Object Tracking by Associating
Every Detection Box"), written from the paper's algorithm, with a time-based track life.

Per update: predict every track to the frame's time (real dt in seconds, `daemon.tracking.kalman`), match
the frame's detections to the tracks (the four association stages, `daemon.tracking.matching`), correct the
matched tracks, count a miss on the others, then birth and confirm. Births (additions for conveyors): every
unmatched detection from ``low_score`` (among those the caller lets start one: the daemon's tracking stage
excludes a camera's weak detections, under its ``conf_threshold``) starts a tentative track unless it overlaps
a track or a better birth (a duplicate box of one part, such as the same box under a second class, would
otherwise become a second track and count the part twice); a track that never scored ``new_track_score``
needs ``low_confirm_s`` to be confirmed, and a tentative track lives on through a missed frame while it was
seen in more frames than it missed. All ages are measured on a monotonic clock in ms that the caller
advances by capture time.
"""

from __future__ import annotations

import numpy as np

from daemon.tracking import kalman, matching
from daemon.tracking.association import (
    FloatArray,
    IntArray,
    indices,
    iou_matrix,
    xywh_to_xyxy,
    xyxy_to_xywh,
)
from daemon.tracking.specs import CONFIRM_TOL_MS, TrackerParams
from daemon.tracking.track import Observation, Step, Track


class ByteTracker:
    """Tracks of one camera. Policy: see ``TrackerParams``; ids come from ``first_track_id`` upwards."""

    def __init__(self, params: TrackerParams, first_track_id: int = 1) -> None:
        self.params = params
        self.next_track_id = first_track_id
        self._tracks: list[Track] = []
        self._x = np.zeros((0, kalman.STATE))
        self._p = np.zeros((0, 3, kalman.MEAS))  # per-dimension covariance, see kalman
        self._mono_ms: int | None = None
        self._next_uid = 0
        self._belt_dir: tuple[float, float] | None = None  # unit vector: the moving tracks' median velocity, last known

    @property
    def tracks(self) -> tuple[Track, ...]:
        return tuple(self._tracks)

    def rescale(self, sx: float, sy: float) -> None:
        """Map every track into a frame scaled by (sx, sy)."""
        self._x, self._p = kalman.rescale(self._x, self._p, sx, sy)
        for t in self._tracks:
            x1, y1, x2, y2 = t.box
            t.box = (x1 * sx, y1 * sy, x2 * sx, y2 * sy)
            t.vx, t.vy = t.vx * sx, t.vy * sy
        if self._belt_dir is not None:
            ux, uy = self._belt_dir[0] * sx, self._belt_dir[1] * sy
            norm = float(np.hypot(ux, uy))
            self._belt_dir = (ux / norm, uy / norm)

    def prior_velocity(self, moving_px_s: float) -> tuple[float, float]:
        """Median velocity of the moving confirmed tracks (a new part most likely rides the belt); when it is
        moving, its direction is remembered as the belt's (kept while the belt stands)."""
        live = np.fromiter((t.track_id is not None and not t.lost for t in self._tracks), bool, len(self._tracks))
        if not live.any():
            return 0.0, 0.0
        v = self._x[live, 4:6]
        moving = np.hypot(v[:, 0], v[:, 1]) > moving_px_s
        if not moving.any():
            return 0.0, 0.0
        med = np.median(v[moving], axis=0)
        speed = float(np.hypot(med[0], med[1]))
        if speed > moving_px_s:
            self._belt_dir = (float(med[0]) / speed, float(med[1]) / speed)
        return float(med[0]), float(med[1])

    def expire(self, mono_ms: int) -> list[Track]:
        """Remove tracks unseen for more than lost_s; returns them all (confirmed and tentative)."""
        limit = self.params.lost_s * 1000.0
        keep = np.array([mono_ms - t.last_mono_ms <= limit for t in self._tracks], dtype=bool)
        gone = [t for t, k in zip(self._tracks, keep, strict=True) if not k]
        if gone:
            self._compact(keep)
        return gone

    def finish(self) -> list[Track]:
        """Remove every track (shutdown); returns them."""
        gone = list(self._tracks)
        self._compact(np.zeros(len(self._tracks), dtype=bool))
        return gone

    def update(
        self,
        *,
        captured_ms: int,
        mono_ms: int,
        boxes: FloatArray,
        scores: FloatArray,
        classes: IntArray,
        labels: list[str],
        moving_px_s: float,
        births: int | None = None,
    ) -> Step:
        """Associate one frame's detections (boxes x1,y1,x2,y2 px) taken at ``captured_ms``; only the first
        ``births`` of them (default: all) may start a track."""
        expired = self.expire(mono_ms)
        if self._mono_ms is not None and mono_ms > self._mono_ms and self._tracks:
            dt_s = (mono_ms - self._mono_ms) / 1000.0
            self._x, self._p = kalman.predict(self._x, self._p, dt_s, self.params.noise)
        self._mono_ms = mono_ms if self._mono_ms is None else max(self._mono_ms, mono_ms)
        matches = matching.associate(
            self._tracks,
            self._x[:, :4],
            boxes,
            scores,
            params=self.params,
            belt_dir=lambda: self._belt_direction(moving_px_s),
        )
        det_tracks: list[Track | None] = [None] * boxes.shape[0]
        observations = self._apply(
            matches,
            boxes=boxes,
            scores=scores,
            classes=classes,
            labels=labels,
            captured_ms=captured_ms,
            mono_ms=mono_ms,
            det_tracks=det_tracks,
            strong=boxes.shape[0] if births is None else births,
        )
        dropped = [t for t in expired if t.track_id is None] + self._miss({r for r, _ in matches})
        fresh = self._births(boxes, scores, [d for _, d in matches], births)
        if fresh:  # the belt's velocity after this frame's corrections
            prior = self.prior_velocity(moving_px_s)
            observations += self._spawn(
                fresh,
                boxes=boxes,
                scores=scores,
                classes=classes,
                labels=labels,
                captured_ms=captured_ms,
                mono_ms=mono_ms,
                prior=prior,
                det_tracks=det_tracks,
            )
        confirmed = self._confirm([o.track for o in observations])
        for t, (vx, vy) in zip(self._tracks, self._x[:, 4:6].tolist(), strict=True):
            t.vx, t.vy = vx, vy
        ended = tuple(t for t in expired if t.track_id is not None)
        return Step(tuple(det_tracks), tuple(observations), confirmed, ended, tuple(dropped))

    def _miss(self, matched_rows: set[int]) -> list[Track]:
        """Every track this frame did not match missed once: a tentative one seen in fewer frames than it
        missed is dropped (returned), any other is lost until it is seen again or expires."""
        keep = np.ones(len(self._tracks), dtype=bool)
        dropped: list[Track] = []
        for i, t in enumerate(self._tracks):
            if i in matched_rows:
                continue
            t.misses += 1
            if t.track_id is None and t.misses >= t.hits:
                keep[i] = False
                dropped.append(t)
            else:
                t.lost = True
        self._compact(keep)
        return dropped

    def _births(self, boxes: FloatArray, scores: FloatArray, matched: list[int], births: int | None) -> list[int]:
        """Unmatched detections from ``low_score`` (among the first ``births``) that start tentative tracks,
        best score first: none that overlaps a track (its box now: corrected or predicted) or a better birth by
        ``match_iou`` or more (a second box on the same part, e.g. the same box under another class)."""
        p = self.params
        free = scores >= p.low_score
        free[matched] = False
        if births is not None:
            free[max(births, 0) :] = False
        idx = indices(free)
        if not idx.size:
            return []
        idx = idx[np.argsort(-scores[idx], kind="stable")]
        cand = boxes[idx]
        if self._tracks:
            clear = iou_matrix(cand, xywh_to_xyxy(self._x[:, :4])).max(axis=1) < p.match_iou
            idx, cand = idx[clear], cand[clear]
        over = iou_matrix(cand, cand) >= p.match_iou
        keep: list[int] = []
        for k in range(idx.size):
            if not over[k, keep].any():
                keep.append(k)
        out: list[int] = idx[keep].tolist()
        return out

    def _belt_direction(self, moving_px_s: float) -> tuple[float, float] | None:
        """The belt's direction, refreshed first while it moves (association's stage 4 asks for it)."""
        self.prior_velocity(moving_px_s)
        return self._belt_dir

    def _apply(
        self,
        pairs: list[tuple[int, int]],
        *,
        boxes: FloatArray,
        scores: FloatArray,
        classes: IntArray,
        labels: list[str],
        captured_ms: int,
        mono_ms: int,
        det_tracks: list[Track | None],
        strong: int,
    ) -> list[Observation]:
        """Matched pairs update their tracks; detections before index ``strong`` also count towards confirmation."""
        if not pairs:
            return []
        rows = np.array([r for r, _ in pairs], dtype=np.intp)
        dets = np.array([d for _, d in pairs], dtype=np.intp)
        z = xyxy_to_xywh(boxes[dets])
        x, p = kalman.update(self._x[rows], self._p[rows], z, self.params.noise)
        self._x[rows], self._p[rows] = x, p
        out: list[Observation] = []
        tracks = self._tracks
        for r, d, (x1, y1, x2, y2), c, score in zip(
            rows.tolist(),
            dets.tolist(),
            boxes[dets].tolist(),
            classes[dets].tolist(),
            scores[dets].tolist(),
            strict=True,
        ):
            t = tracks[r]
            out.append(Observation(t, d, t.box, t.last_ms))
            t.box = (x1, y1, x2, y2)
            t.hits += 1
            t.strong_hits += int(d < strong)
            t.lost = False
            t.last_ms = captured_ms
            t.last_mono_ms = max(t.last_mono_ms, mono_ms)
            t.observe(c, labels[d], score)
            det_tracks[d] = t
        return out

    def _spawn(
        self,
        fresh: list[int],
        *,
        boxes: FloatArray,
        scores: FloatArray,
        classes: IntArray,
        labels: list[str],
        captured_ms: int,
        mono_ms: int,
        prior: tuple[float, float],
        det_tracks: list[Track | None],
    ) -> list[Observation]:
        if not fresh:
            return []
        idx = np.array(fresh, dtype=np.intp)
        x, p = kalman.initiate(xyxy_to_xywh(boxes[idx]), np.array(prior), self.params.noise)
        self._x = np.concatenate([self._x, x])
        self._p = np.concatenate([self._p, p])
        out: list[Observation] = []
        for d in fresh:
            b = boxes[d]
            t = Track(
                self._next_uid,
                captured_ms,
                mono_ms,
                captured_ms,
                mono_ms,
                (float(b[0]), float(b[1]), float(b[2]), float(b[3])),
            )
            self._next_uid += 1
            t.observe(int(classes[d]), labels[d], float(scores[d]))
            self._tracks.append(t)
            det_tracks[d] = t
            out.append(Observation(t, d, None, captured_ms))
        return out

    def _confirm(self, seen: list[Track]) -> tuple[Track, ...]:
        p = self.params
        out = []
        for t in seen:
            need_s = p.confirm_s if t.best_score >= p.new_track_score else max(p.confirm_s, p.low_confirm_s)
            old_enough = t.last_mono_ms - t.first_mono_ms >= need_s * 1000.0 - CONFIRM_TOL_MS
            if t.track_id is None and t.strong_hits >= p.min_hits and old_enough:
                t.track_id = self.next_track_id
                self.next_track_id += 1
                out.append(t)
        return tuple(out)

    def _compact(self, keep: np.ndarray) -> None:
        if keep.all():
            return
        self._tracks = [t for t, k in zip(self._tracks, keep, strict=True) if k]
        self._x = self._x[keep]
        self._p = self._p[keep]
