"""The caller's description of a camera's counting lines, gates and tracker parameters."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from daemon.config.tracking import TrackingConfig
from daemon.tracking.kalman import KalmanNoise

Anchor = Literal["center", "bottom_center"]
CONFIG_KEYS = tuple(name for name in TrackingConfig.model_fields if name not in ("enabled", "lines_dir"))
"""The knobs the `[tracking]` section exposes: their defaults and checks are the config model's."""
_CONFIG = TrackingConfig()


@dataclass(frozen=True, slots=True)
class GateSpec:
    """A downstream station (sorter flap, PLC gate) ``distance_mm`` along the belt after its line."""

    id: str
    distance_mm: float

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("gate id: empty")
        if not (math.isfinite(self.distance_mm) and self.distance_mm >= 0.0):
            raise ValueError(f"gate {self.id!r} distance_mm: must be finite and >= 0, got {self.distance_mm}")


@dataclass(frozen=True, slots=True)
class LineSpec:
    """A counting line in normalised frame coordinates (fractions of width and height, 0..1).

    ``direction`` (same coordinates; (1, 0) = towards the right edge) says which way is "in": crossing the line
    with motion that has a positive component along it is "in", the opposite is "out". It must not be parallel
    to the line. ``gates`` lie downstream of this line along ``direction``.
    """

    id: str
    start: tuple[float, float]
    end: tuple[float, float]
    direction: tuple[float, float] = (1.0, 0.0)
    gates: tuple[GateSpec, ...] = ()

    def __post_init__(self) -> None:
        if not self.id:
            raise ValueError("line id: empty")
        for name, pt in (("start", self.start), ("end", self.end)):
            if len(pt) != 2 or not all(math.isfinite(c) and -1e-9 <= c <= 1.0 + 1e-9 for c in pt):
                raise ValueError(f"line {self.id!r} {name}: must be two numbers in 0..1, got {pt}")
        lx, ly = self.end[0] - self.start[0], self.end[1] - self.start[1]
        if math.hypot(lx, ly) < 1e-9:
            raise ValueError(f"line {self.id!r}: start and end coincide")
        dx, dy = self.direction
        if not (math.isfinite(dx) and math.isfinite(dy)) or math.hypot(dx, dy) < 1e-9:
            raise ValueError(f"line {self.id!r} direction: must be a non-zero vector, got {self.direction}")
        # normal (-ly, lx) must not be perpendicular to the direction, i.e. the direction crosses the line
        if abs(-ly * dx + lx * dy) < 1e-6 * math.hypot(lx, ly) * math.hypot(dx, dy):
            raise ValueError(f"line {self.id!r} direction: parallel to the line, nothing can cross along it")
        ids = [g.id for g in self.gates]
        if len(set(ids)) != len(ids):
            raise ValueError(f"line {self.id!r} gates: duplicate gate ids {ids}")


@dataclass(frozen=True, slots=True)
class TrackerParams:
    """ByteTrack thresholds and the time-based track policy (units in the names; times are capture time).

    Scores: detections with ``score >= high_score`` take part in the first association;
    ``low_score <= score < high_score`` extend, in the second association, the tracks the first left: tracked,
    lost and tentative ones (ByteTrack offers them to tracked tracks only, so a part the detector scores under
    ``high_score`` all along, as it does a part cut by the frame's edge, never becomes a track there); below
    ``low_score`` they are ignored. Any unmatched detection from ``low_score`` that the caller lets start a
    track (``CameraTracker.update``'s ``weak`` ones may not) starts a tentative track,
    unless it overlaps a track or a better-scored birth by ``match_iou`` (a second box on one part). A track
    whose best score is under ``new_track_score`` is confirmed only after ``low_confirm_s``.
    Association: first stage pairs need IoU >= ``match_iou`` (cost 1 - IoU <= 1 - match_iou), the second
    IoU >= ``low_match_iou``. A tentative track seen once (velocity unknown) may also take the nearest
    unmatched high detection whose centre lies within ``jump_diag`` of its box diagonals (a fast part), and
    the tracks still unmatched may follow a common belt shift of at most ``jump_diag`` diagonals (a belt that
    stopped or started between two processed frames; see ``bytetrack``).
    Life: a track is confirmed (gets an id, emits ``new``) once ``confirm_s`` seconds have passed since it
    was first seen AND it has ``min_hits`` observations by detections that may start a track (weak ones, see
    ``CameraTracker.update``, do not count); a tentative track is dropped silently once it has
    missed as many frames as it was seen in (ByteTrack: at its first miss; here a part the detector misses
    every third frame still becomes a track). A confirmed track not observed for more than ``lost_s`` seconds
    ends (``end``); a track that keeps being detected, moving or standing still, never ends.
    Lines: a crossing registers once the anchor is ``line_hysteresis`` of the box's extent across the
    line (at least 2 px) past it. Speed: a track moves when faster than ``moving_frac_s`` of the frame's
    larger side per second; the belt speed is smoothed with time constant ``belt_tau_s`` seconds.
    """

    # the [tracking] section's knobs (CONFIG_KEYS): defaults and checks are `TrackingConfig`'s
    high_score: float = _CONFIG.high_score  # score, 0..1: first-stage detections (ByteTrack's track_thresh)
    low_score: float = _CONFIG.low_score  # score: below this a detection is ignored (ByteTrack's 0.1)
    new_track_score: float = _CONFIG.new_track_score  # score: an unmatched detection starts a track
    match_iou: float = _CONFIG.match_iou  # IoU, first stage (ByteTrack's match_thresh 0.8 on cost 1 - IoU)
    confirm_s: float = _CONFIG.confirm_s  # seconds from first sighting to confirmation (3 frames at 30 fps)
    min_hits: int = _CONFIG.min_hits  # observations (not weak ones) needed for confirmation, whatever the frame rate
    lost_s: float = _CONFIG.lost_s  # seconds of capture time unseen before a confirmed track ends
    anchor: Anchor = _CONFIG.anchor  # the box point that crosses lines
    # the tracker's own knobs (not configurable)
    low_match_iou: float = 0.5  # IoU, second stage: a low box must overlap well (ByteTrack's 0.5)
    jump_diag: float = 1.5  # box diagonals: third stage gate for a track seen once (a part moving > 1 box/frame)
    line_hysteresis: float = 0.25  # fraction of the box's extent across the line the anchor must clear
    moving_frac_s: float = 0.03  # fraction of the frame's larger side per second: slower counts as standing
    belt_tau_s: float = 0.5  # seconds: time constant of the belt speed's smoothing
    low_confirm_s: float = 0.3  # seconds before a track never scored new_track_score is confirmed
    noise: KalmanNoise = field(default_factory=KalmanNoise)  # the filter's noise levels, in box sizes

    def __post_init__(self) -> None:
        TrackingConfig.model_validate({name: getattr(self, name) for name in CONFIG_KEYS})  # raises ValueError
        if not 0.0 < self.low_match_iou <= 1.0:
            raise ValueError(f"low_match_iou: need 0 < iou <= 1, got {self.low_match_iou}")
        for name in ("low_confirm_s", "jump_diag", "line_hysteresis", "moving_frac_s", "belt_tau_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0.0):
                raise ValueError(f"{name}: must be finite and >= 0, got {value}")

    @classmethod
    def from_config(cls, cfg: TrackingConfig) -> TrackerParams:
        """The tracker's parameters for the `[tracking]` section (its knobs; the rest at their defaults)."""
        return cls(**{name: getattr(cfg, name) for name in CONFIG_KEYS})
