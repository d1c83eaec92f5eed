"""The one place for the tracker's rules: a camera's counting lines and gates, the tracker's parameters, and the
constants and noise levels its algorithms use.

Lines and gates are checked by the config's models (`LineConfig`, `GateConfig` in `daemon.config.tracking`), the
same rule and message as the config file, a lines drop-in and `PUT /api/cameras/{id}/lines`: whatever the API
accepts the tracker accepts. The `[tracking]` knobs' defaults and checks are `TrackingConfig`'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from daemon.config.tracking import GateConfig, LineConfig, TrackingConfig, refusal

Anchor = Literal["center", "bottom_center"]
CONFIG_KEYS = tuple(name for name in TrackingConfig.model_fields if name not in ("enabled", "lines_dir"))
"""The knobs the `[tracking]` section exposes: their defaults and checks are the config model's."""
_CONFIG = TrackingConfig()

SHIFT_TOL = 0.25
"""Box diagonals a track's detection may lie off the common belt shift, along and across the belt
(`daemon.tracking.belt_shift`)."""
MIN_DIAG_PX = 1.0
"""Pixels: the least box diagonal that distances are measured in (the third stage's jump and the belt
shift), so a degenerate box does not divide by zero."""
MIN_HYSTERESIS_PX = 2.0
"""Pixels: the least distance past a line the anchor must clear for a crossing to register, whatever
`line_hysteresis` gives for a thin box."""
MIN_SIZE_PX = 1.0
"""Pixels: the least box width and height the Kalman filter scales its noise by (a degenerate box)."""
INIT_POS_STD_MEAS = 2.0
"""A new track's position and size uncertainty, in multiples of `KalmanNoise.meas_std` (one detection)."""
INIT_SIZE_VEL_FRAC = 0.1
"""A new track's size-velocity uncertainty, as a fraction of `KalmanNoise.init_vel_std` (sizes change slowly)."""
CONFIRM_TOL_MS = 1e-6
"""Milliseconds of rounding forgiven when a track's age is compared with `confirm_s`."""


@dataclass(frozen=True, slots=True)
class KalmanNoise:
    """Noise levels of the tracker's Kalman filter (`daemon.tracking.kalman`), each relative to the box's own
    width (x terms) or height (y terms).

    meas_std: detector jitter, box sizes. accel_std: random acceleration of the centre, box sizes per s^2.
    size_accel_std: the same for w and h. init_vel_std: prior uncertainty of a new track's velocity,
    box sizes per s.
    """

    meas_std: float = 0.05
    accel_std: float = 2.0
    size_accel_std: float = 0.5
    init_vel_std: float = 10.0


def _check(subject: str, model: type[LineConfig | GateConfig], data: Mapping[str, object]) -> None:
    """Validate ``data`` with the config's ``model``; ValueError worded as the config's problems."""
    problem = refusal(model, data)
    if problem is not None:
        raise ValueError(f"{subject}: {problem}")


@dataclass(frozen=True, slots=True)
class GateSpec:
    """A downstream station (sorter flap, PLC gate) ``distance_mm`` along the belt after its line
    (checked by `GateConfig`)."""

    id: str
    distance_mm: float

    def __post_init__(self) -> None:
        _check(f"gate {self.id!r}", GateConfig, {"id": self.id, "distance_mm": self.distance_mm})


@dataclass(frozen=True, slots=True)
class LineSpec:
    """A counting line in normalised frame coordinates (fractions of width and height, 0..1), checked by
    `LineConfig` (bounds, length, direction, gate ids).

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
        gates = [{"id": g.id, "distance_mm": g.distance_mm} for g in self.gates]
        line = {"id": self.id, "start": self.start, "end": self.end, "direction": self.direction, "gates": gates}
        _check(f"line {self.id!r}", LineConfig, line)


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
