"""A simulated thermal plant in discrete time, for the governor's tests and `tools/thermal/sim.py`.

First order: `C dT/dt = P(share) - k (T - T_ambient)`, written with the time constant
`tau = C / k` and temperature rises instead of powers: at steady state a device idling sits
`idle_rise_c` above ambient, one at full load `full_rise_c` above it, linear in between. Above
`slowdown_c` the "hardware" halves its clocks (throughput and dynamic power) until it has cooled
`slowdown_hyst_c` below, and reports it the way NVML's clock-event reasons do. The sensor reads
the temperature of `lag_s` ago, quantised to `quantum_c` (NVML reports whole degrees).

Nothing here reads a clock: `simulate` steps the plant and calls the policy at a fixed interval.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from daemon.thermal.seam import Reading, Throttle


@dataclass(frozen=True, slots=True)
class PlantParams:
    tau_s: float = 60.0
    idle_rise_c: float = 10.0
    full_rise_c: float = 50.0
    slowdown_c: float = 92.0
    """The hardware's own slowdown threshold (NVML SLOWDOWN / a zone's passive trip)."""
    slowdown_hyst_c: float = 3.0
    lag_s: float = 3.0
    quantum_c: float = 1.0
    sensor: str = "gpu0"
    reports_threshold: bool = True
    """The sensor reports `slowdown_c` (NVML, a zone's passive trip); False: it reports none."""

    def steady_c(self, ambient_c: float, share: float) -> float:
        """Temperature the plant settles at under `share` (no hardware slowdown)."""
        return ambient_c + self.idle_rise_c + (self.full_rise_c - self.idle_rise_c) * share

    def sustainable_share(self, ambient_c: float, limit_c: float) -> float:
        """The largest share the plant can hold at `limit_c` (clipped to 0..1)."""
        share = (limit_c - ambient_c - self.idle_rise_c) / (self.full_rise_c - self.idle_rise_c)
        return min(1.0, max(0.0, share))


Ambient = Callable[[float], float]
"""Ambient temperature (C) at simulated time t (s)."""


def steps(base_c: float, *changes: tuple[float, float]) -> Ambient:
    """An ambient profile: `base_c`, then each (time_s, celsius) from that time on."""
    ordered = sorted(changes)

    def ambient(t: float) -> float:
        value = base_c
        for at, celsius in ordered:
            if t >= at:
                value = celsius
        return value

    return ambient


@dataclass
class ThermalPlant:
    params: PlantParams
    ambient: Ambient
    temp_c: float = math.nan
    slowed: bool = False
    slowdown_s: float = 0.0
    """Simulated seconds spent in hardware slowdown."""
    t_s: float = 0.0
    _history: deque[tuple[float, float]] = field(default_factory=deque)

    def __post_init__(self) -> None:
        if math.isnan(self.temp_c):
            self.temp_c = self.params.steady_c(self.ambient(0.0), 0.0)
        self._history.append((self.t_s, self.temp_c))

    def step(self, share: float, dt_s: float) -> float:
        """Advance by `dt_s` at `share`; returns the throughput delivered (share, halved in slowdown)."""
        p = self.params
        if self.temp_c >= p.slowdown_c:
            self.slowed = True
        elif self.temp_c < p.slowdown_c - p.slowdown_hyst_c:
            self.slowed = False
        delivered = share * (0.5 if self.slowed else 1.0)
        target = p.steady_c(self.ambient(self.t_s), delivered)
        self.temp_c = target + (self.temp_c - target) * math.exp(-dt_s / p.tau_s)  # exact for constant input
        self.slowdown_s += dt_s if self.slowed else 0.0
        self.t_s += dt_s
        self._history.append((self.t_s, self.temp_c))
        while len(self._history) > 2 and self._history[1][0] <= self.t_s - p.lag_s:
            self._history.popleft()
        return delivered

    def reading(self) -> Reading:
        """What the sensor says now: the temperature of `lag_s` ago, quantised; the slowdown bit."""
        p = self.params
        lagged = self._history[0][1]
        for t, celsius in self._history:
            if t <= self.t_s - p.lag_s:
                lagged = celsius
        sensed = round(lagged / p.quantum_c) * p.quantum_c if p.quantum_c > 0 else lagged
        threshold = p.slowdown_c if p.reports_threshold else None
        return Reading(p.sensor, float(sensed), slowdown_c=threshold, hw_slowdown=self.slowed)


Policy = Callable[[float, Sequence[Reading]], Throttle]


@dataclass(frozen=True, slots=True)
class Trace:
    """One sample per policy interval."""

    t_s: list[float]
    temp_c: list[float]
    sensed_c: list[float]
    share: list[float]
    throughput: list[float]
    level: list[str]
    ambient_c: list[float]
    slowdown_s: float

    def window(self, start_s: float, end_s: float) -> range:
        return range(
            next((i for i, t in enumerate(self.t_s) if t >= start_s), len(self.t_s)),
            next((i for i, t in enumerate(self.t_s) if t >= end_s), len(self.t_s)),
        )

    def pauses(self) -> list[tuple[float, float]]:
        """(start, end) of every paused stretch; one still paused at the end ends at the last sample."""
        out: list[tuple[float, float]] = []
        start = None
        for t, level in zip(self.t_s, self.level, strict=True):
            if level == "paused" and start is None:
                start = t
            elif level != "paused" and start is not None:
                out.append((start, t))
                start = None
        if start is not None:
            out.append((start, self.t_s[-1]))
        return out


def simulate(
    policy: Policy,
    params: PlantParams,
    ambient: Ambient,
    duration_s: float,
    *,
    interval_s: float = 1.0,
    substeps: int = 10,
    start_c: float | None = None,
) -> Trace:
    """Run `policy` against the plant: every `interval_s` it reads the sensor and sets the share,
    which holds until the next call (the plant integrates in `substeps` steps in between)."""
    plant = ThermalPlant(params, ambient, temp_c=math.nan if start_c is None else start_c)
    out: dict[str, list[float]] = {k: [] for k in ("t", "temp", "sensed", "share", "thr", "amb")}
    levels: list[str] = []
    t = 0.0
    while t < duration_s:
        reading = plant.reading()
        throttle = policy(t, [reading])
        delivered = sum(plant.step(throttle.share, interval_s / substeps) for _ in range(substeps)) / substeps
        for key, value in (
            ("t", t),
            ("temp", plant.temp_c),
            ("sensed", reading.celsius),
            ("share", throttle.share),
            ("thr", delivered),
            ("amb", ambient(t)),
        ):
            out[key].append(value)
        levels.append(throttle.level)
        t = round(t + interval_s, 9)
    return Trace(out["t"], out["temp"], out["sensed"], out["share"], out["thr"], levels, out["amb"], plant.slowdown_s)


class SleepSwitch:
    """The seeds' policy, `if temp > 85: time.sleep(0.1)` in the inference loop, as a share: while
    the sensor reads above `threshold_c` each batch of `batch_s` is followed by a 0.1 s sleep."""

    def __init__(self, threshold_c: float, batch_s: float = 0.025) -> None:
        self.threshold_c = threshold_c
        self.batch_s = batch_s

    def __call__(self, now_s: float, readings: Sequence[Reading]) -> Throttle:
        hot = max(r.celsius for r in readings) > self.threshold_c
        share = self.batch_s / (self.batch_s + 0.1) if hot else 1.0
        return Throttle(share, "regulating" if hot else "normal", "sleep(0.1)" if hot else "")
