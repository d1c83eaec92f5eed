"""The `[tracking]` section (tracker defaults for every camera) and a camera's counting lines.

Lines are in normalised coordinates (fractions of the frame's width and height), so a camera
whose resolution changes keeps them. Gates sit downstream of a line at `distance_mm` along the
belt; they need the camera's `mm_per_px` calibration (checked where the camera is validated).
`LineConfig` and `GateConfig` are the one rule for a line and a gate: the config file, a lines drop-in,
`PUT /api/cameras/{id}/lines` and the tracker's `LineSpec` / `GateSpec` (`daemon.tracking.specs`, through
`refusal`) all check with them, so a body the API accepts is one the tracker accepts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from daemon.config.base import Section, problem_text

_ID_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]{0,47}$"


class TrackingConfig(Section):
    """Tracker defaults (ByteTrack-style, time-based: every limit is in seconds of capture time,
    so dropped frames cost accuracy, never correctness).

    The one source of these knobs' defaults and checks: the tracker's `TrackerParams`
    (`daemon.tracking.specs`) takes its defaults from here and validates its values with this
    model; every field but `enabled` is a field of `TrackerParams` of the same name."""

    enabled: bool = True
    """Track every camera (a camera's own `tracking = false` turns it off for that camera)."""
    high_score: float = Field(0.5, gt=0, le=1)
    """Detections at or above this score are matched first (ByteTrack's first stage)."""
    low_score: float = Field(0.1, ge=0, le=1)
    """Detections between this and `high_score` keep existing tracks alive (second stage), also those
    under the camera's `conf_threshold`, which reach the tracker only and are never published; an
    unmatched published detection that overlaps no track starts a tentative one."""
    new_track_score: float = Field(0.6, gt=0, le=1)
    """A track confirmed within `confirm_s` needs a detection from this score; one that never reached it
    is confirmed only after it was matched to first-stage (`high_score`) detections for 0.3 s."""
    match_iou: float = Field(0.2, gt=0, lt=1)
    """Least IoU between a track's predicted box and a detection for them to be matched."""
    confirm_s: float = Field(0.1, ge=0, le=10)
    """A tentative track is confirmed (gets its ID, `new`) after this long and `min_hits` observations
    by published detections (weak sightings keep it alive but do not count)."""
    min_hits: int = Field(3, ge=1, le=100)
    lost_s: float = Field(1.0, gt=0, le=600)
    """A track not observed for this long ends (`end`); a part standing on a stopped belt is
    still observed, so it keeps its track however long the belt stands."""
    anchor: Literal["center", "bottom_center"] = "center"
    """The point of a box that crosses lines: its centre, or the middle of its bottom edge."""
    lines_dir: Path = Path("/var/lib/beltsight/lines")
    """Where lines applied live (`PUT /api/cameras/{id}/lines`) are kept: one `<camera>.toml` per camera
    with its `mm_per_px` and `[[lines]]`; such a file overrides that camera's `mm_per_px` and lines in
    this config at start and on reload (`daemon.config.lines_dropin`), so this file is never rewritten."""

    @model_validator(mode="after")
    def _check_scores(self) -> TrackingConfig:
        if self.low_score > self.high_score:
            raise ValueError(f"low_score ({self.low_score}) must not exceed high_score ({self.high_score})")
        if self.new_track_score < self.high_score:
            raise ValueError(
                f"new_track_score ({self.new_track_score}) must not be under high_score ({self.high_score})"
            )
        return self


class GateConfig(Section):
    """An actuator downstream of a line (a reject gate, a diverter)."""

    id: str = Field(pattern=_ID_PATTERN)
    distance_mm: float = Field(gt=0, le=1_000_000)
    """Belt distance from the line to the gate, in the direction of travel."""


Point = tuple[float, float]


class LineConfig(Section):
    """A counting line from `start` to `end`, normalised (0..1 of width and height)."""

    id: str = Field(pattern=_ID_PATTERN)
    start: Point
    end: Point
    direction: Point = (1.0, 0.0)
    """A crossing whose motion has a positive component along this vector is `in`, else `out`."""
    gates: list[GateConfig] = Field(default_factory=list)

    @field_validator("start", "end")
    @classmethod
    def _inside_frame(cls, v: Point) -> Point:
        if not all(math.isfinite(c) and 0.0 <= c <= 1.0 for c in v):
            raise ValueError(f"{list(v)} is outside the frame: coordinates are fractions 0..1 of width and height")
        return v

    @field_validator("direction")
    @classmethod
    def _nonzero(cls, v: Point) -> Point:
        if not all(math.isfinite(c) for c in v) or math.hypot(*v) < 1e-9:
            raise ValueError(f"{list(v)} has no direction: give a non-zero vector, e.g. [1.0, 0.0]")
        return v

    @model_validator(mode="after")
    def _has_length(self) -> LineConfig:
        if math.dist(self.start, self.end) < 1e-6:
            raise ValueError(f"start and end are the same point {list(self.start)}: a line needs a length")
        lx, ly = self.end[0] - self.start[0], self.end[1] - self.start[1]
        dx, dy = self.direction
        if abs(lx * dy - ly * dx) < 1e-6 * math.hypot(lx, ly) * math.hypot(dx, dy):
            raise ValueError(f"direction {list(self.direction)} runs along the line: nothing can cross it that way")
        ids = [g.id for g in self.gates]
        duplicate = next((g for i, g in enumerate(ids) if g in ids[:i]), None)
        if duplicate is not None:
            raise ValueError(f"gate id {duplicate!r} is used twice on line {self.id!r}")
        return self


def refusal(model: type[LineConfig | GateConfig], data: Mapping[str, object]) -> str | None:
    """What `model` finds wrong with `data`, in the config's words (`key: message`, a whole-line problem
    without a key; `; ` between two), or None when it is valid: the tracker's check of a `LineSpec` or `GateSpec`."""
    try:
        model.model_validate(data)
    except ValidationError as exc:
        return "; ".join(problem_text(e).removeprefix("(top level): ") for e in exc.errors())
    return None


def duplicate_line(lines: list[LineConfig]) -> str | None:
    """The first line id used twice, if any."""
    seen: set[str] = set()
    for line in lines:
        if line.id in seen:
            return line.id
        seen.add(line.id)
    return None


def lines_problem(lines: list[LineConfig], mm_per_px: float | None) -> str | None:
    """What is wrong with a camera's lines as a whole (ids used twice, gates without calibration), if anything:
    the one rule for a `[[cameras]]` entry and a lines drop-in."""
    duplicate = duplicate_line(lines)
    if duplicate is not None:
        return f"lines: line id {duplicate!r} is used twice"
    gated = [line.id for line in lines if line.gates]
    if gated and mm_per_px is None:
        return f"lines: line {gated[0]!r} has gates, which need the camera's mm_per_px calibration"
    return None


def describe_lines(
    camera_id: str, tracked: bool, mm_per_px: float | None, lines: list[LineConfig], source: str = ""
) -> list[str]:
    """`check-config`'s summary of a camera's tracking: its lines and their gates (and where they come from)."""
    if not tracked:
        return [f"camera {camera_id}: not tracked"]
    calibration = f", {mm_per_px} mm/px" if mm_per_px is not None else ", uncalibrated (speeds in px/s)"
    origin = f" (from {source})" if source else ""
    out = [f"camera {camera_id}: tracked{calibration}, {len(lines)} line(s){origin}"]
    for line in lines:
        gates = ", ".join(f"{g.id} at {g.distance_mm:g} mm" for g in line.gates) or "no gates"
        out.append(
            f"  line {line.id}: ({line.start[0]:g}, {line.start[1]:g}) -> ({line.end[0]:g}, {line.end[1]:g}),"
            f" in = along ({line.direction[0]:g}, {line.direction[1]:g}); {gates}"
        )
    return out
