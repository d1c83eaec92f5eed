"""Track speed along a line, the camera's belt speed, and gate arrival times.

Speeds come from the Kalman filter's centre velocity (px/s), which averages the detector's jitter over
several frames. The belt speed is the median speed of the moving confirmed tracks (stationary ones are
ignored so a jammed part does not pull it down; when every track stands still the belt has stopped and
the target is 0), smoothed exponentially with a time constant in seconds.

ETA policy: a part crossing "in" (moving downstream, towards the gates) reaches a gate ``distance_mm``
after the line at ``crossing_ms + distance_mm / speed_mm_s * 1000``. The speed is the track's own speed
along the line's direction when the track is reliable (at least ``min_hits`` observations and moving);
otherwise the belt speed, when the belt is moving. Without either, or for "out" crossings (moving away
from the gates), there is no ETA.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from daemon.tracking.specs import GateSpec


def speed_along(vx: float, vy: float, unit_dir: tuple[float, float]) -> float:
    """Signed speed (px/s) of velocity (vx, vy) along a unit direction."""
    return vx * unit_dir[0] + vy * unit_dir[1]


class BeltSpeed:
    """Smoothed median speed (px/s) of a camera's moving tracks; None until a confirmed track was seen."""

    def __init__(self, tau_s: float) -> None:
        self.tau_s = tau_s
        self.value_px_s: float | None = None
        self._mono_ms: int | None = None

    def update(self, mono_ms: int, speeds_px_s: Sequence[float], moving_px_s: float) -> float | None:
        """Feed the current speeds of the confirmed, observed tracks; returns the smoothed belt speed."""
        if not speeds_px_s:
            return self.value_px_s
        moving = [s for s in speeds_px_s if s > moving_px_s]
        target = statistics.median(moving) if moving else 0.0
        if self.value_px_s is None or self._mono_ms is None:
            self.value_px_s = target
        else:
            dt_s = max(0.0, (mono_ms - self._mono_ms) / 1000.0)
            alpha = 1.0 - math.exp(-dt_s / self.tau_s) if self.tau_s > 0.0 else 1.0
            self.value_px_s += alpha * (target - self.value_px_s)
        self._mono_ms = mono_ms
        return self.value_px_s


def eta_speed_px_s(
    track_speed_px_s: float, reliable: bool, belt_px_s: float | None, moving_px_s: float
) -> float | None:
    """The speed used for gate ETAs (see the module's policy), or None when no usable speed is known."""
    if reliable and track_speed_px_s > moving_px_s:
        return track_speed_px_s
    if belt_px_s is not None and belt_px_s > moving_px_s:
        return belt_px_s
    return None


def gate_etas(
    crossing_ms: int, gates: Sequence[GateSpec], speed_px_s: float, mm_per_px: float
) -> tuple[tuple[str, int], ...]:
    """(gate id, Unix ms of arrival) for each gate, at ``speed_px_s`` converted with ``mm_per_px``."""
    speed_mm_s = speed_px_s * mm_per_px
    return tuple((g.id, round(crossing_ms + g.distance_mm / speed_mm_s * 1000.0)) for g in gates)
