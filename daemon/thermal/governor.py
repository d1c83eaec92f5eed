"""The thermal governor: sensor readings in, the admitted share of full speed out.

Policy (feedback, not a switch), in the spirit of the kernel's `power_allocator` and Android's
thermal headroom forecast:
- the controlled quantity is the hottest relevant sensor's excess over its limit (`limit_c`, or
  the hardware's slowdown threshold less `margin_c`), forecast `forecast_s` ahead with a
  least-squares slope over the last `trend_window_s` (over its last half when a fast change
  shows there clearly), so the governor acts before the limit;
- an incremental PI on that forecast: the share moves by `proportional_gain` x the change of the
  error plus an integral step, `cut_gain` while over the limit (faster the further over: a fast
  plant's overshoot is cut at once) and the slower `raise_gain` while under it (as if at most
  5 C under: a bounded climb back), and within `deadband_c` of it a small integral that aims a
  quarter degree over the limit, so whole-degree readings dither around the right mean instead of
  stopping half a degree short (a single sensor step moves the forecast by at most half a step);
  the share is clamped to [`min_share`, 1], which is its anti-windup;
- gain scheduling on what the plant shows: a share that keeps reversing by more than 0.15 (a
  fast plant behind a long sensor lag) halves the gains, down to a quarter, regained when quiet;
- once the whole trend window has stayed `reset_below_c` under the limit for 2.5 windows and the
  temperature no longer falls, it goes straight back to full speed (the cause of the cut is gone);
- a hardware slowdown reported by the sensor counts as over the limit whatever the temperature;
- at `critical_c` inference pauses (share 0) for at least `min_pause_s` and until every sensor
  is back at `resume_c` (or has settled idle half the pause margin under the limit: a device that
  idles above `resume_c` but can run at `min_share`); a pause within 8 pauses' time (each at least
  as long as the last actually lasted) of the last resume lasts twice as long as
  the one before (up to 16 x `min_pause_s`) and waits for 5 C more cooling (up to 15 C), so paused
  and running never alternate quickly: a device that cannot hold even `min_share` stays paused
  until its surroundings cool.
`update` reads no clock and does no I/O: time is the caller's `now_s`, so a simulated plant
can drive it (tests/unit/thermal/test_thermal_governor.py, tools/thermal/sim.py).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from daemon.config.thermal import ThermalConfig
from daemon.thermal.types import Reading

__all__ = ["Limits", "ThermalGovernor", "Throttle"]

LEVELS = ("normal", "regulating", "paused")
_STEP_C = 1.0  # the resolution sensors report (NVML: whole degrees)
_CUT_BOOST_FROM_C = 1.5  # further over (forecast) than the deadband and this, each C more cuts faster
_P_CEILING_C = 5.0  # forecast excess beyond which the P term adds nothing (the cut term acts)
_RAISE_CLAMP_C = 5.0  # the integral raises the share as if at most this far under the limit
_SETTLED_C_PER_S = 0.1  # falling slower than this: cooling has settled
_RESET_AFTER_WINDOWS = 2.5  # trend windows the temperature must stay far below before a reset
_MAX_RESUME_DROP_C = 15.0  # the most the resume temperature is lowered after early resumes
_AIM_OVER_C = 0.25  # aim this far over the limit: whole-degree readings then dither at limit + 0.5
_FINE_GAIN = 0.5  # the integral within the deadband, relative to raise_gain
_SWING = 0.15  # a reversal of the share after a move larger than this counts as a swing
_SWING_WINDOW_S = 240.0  # four swings within this: halve the gains
_REGAIN_S = 1800.0  # quiet, the gains come back to 1 over this long
_NORMAL_AFTER_S = 10.0  # at full speed this long before "regulating" becomes "normal" again


@dataclass(frozen=True, slots=True)
class Throttle:
    """The governor's decision: `share` of full speed (0.0 paused, 1.0 full), its level and why.
    `sensor` and `celsius` name the hottest relevant sensor (relative to its limit)."""

    share: float
    level: str
    reason: str
    sensor: str = ""
    celsius: float | None = None


FULL = Throttle(1.0, "normal", "no reading yet")


@dataclass(frozen=True, slots=True)
class Limits:
    """What one sensor is held to: regulate at `limit_c`, pause at `critical_c`, resume at `resume_c`."""

    limit_c: float
    critical_c: float
    resume_c: float


def limits_for(config: ThermalConfig, slowdown_c: float | None) -> Limits:
    """A sensor's limits from the config, and from the slowdown threshold its hardware reports."""
    if config.limit_c is not None:
        limit = config.limit_c
    elif slowdown_c is not None:
        limit = slowdown_c - config.margin_c
    else:
        limit = config.fallback_limit_c
    if config.critical_c is not None:
        critical = config.critical_c
    else:
        critical = limit + 5.0
        if slowdown_c is not None:
            critical = max(limit + 1.0, min(critical, slowdown_c - 1.0))
    resume = config.resume_c if config.resume_c is not None else min(limit, critical) - 5.0
    return Limits(limit, critical, resume)


def relevant(config: ThermalConfig, sensor: str) -> bool:
    if any(fnmatchcase(sensor, pattern) for pattern in config.ignore):
        return False
    return not config.include or any(fnmatchcase(sensor, pattern) for pattern in config.include)


def lsq_slope(samples: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope (per second) of (t, value) samples; 0 with fewer than three."""
    n = len(samples)
    if n < 3:
        return 0.0
    mean_t = sum(t for t, _ in samples) / n
    mean_v = sum(v for _, v in samples) / n
    var = sum((t - mean_t) ** 2 for t, _ in samples)
    if var <= 0:
        return 0.0
    return sum((t - mean_t) * (v - mean_v) for t, v in samples) / var


@dataclass(frozen=True, slots=True)
class _Hottest:
    sensor: str
    celsius: float
    excess_c: float  # over its limit (negative: headroom)
    limits: Limits
    critical: bool  # this or another sensor at its critical temperature
    cooled: bool  # every sensor at or under its resume temperature, none in hardware slowdown
    hw_slowdown: bool


class ThermalGovernor:
    """Turns readings into a `Throttle`; see the module docstring for the policy."""

    def __init__(self, config: ThermalConfig) -> None:
        self.config = config
        self._share = 1.0
        self._level = "normal"
        self._history: deque[tuple[float, float]] = deque()
        self._last_t: float | None = None
        self._last_error: float | None = None
        self._full_since: float | None = None
        self._far_since: float | None = None  # since when the whole trend window is far below the limit
        self._paused_at: float | None = None
        self._pause_s = config.min_pause_s
        self._gain = 1.0  # the controller's gains scaled down while the share keeps swinging
        self._swings: deque[float] = deque()  # when the share reversed after a big move
        self._direction = 0
        self._turned_at = 1.0  # the share at its last reversal
        self._paused_for = 0.0  # how long the last pause lasted (its cooling shows the time constant)
        self._resumed_at: float | None = None
        self._resume_drop_c = 0.0  # the resume temperature lowered after resumes that came too early
        self.throttle = FULL

    def limits(self, reading: Reading) -> Limits:
        return limits_for(self.config, reading.slowdown_c)

    def update(self, now_s: float, readings: Sequence[Reading]) -> Throttle:
        hottest = self._hottest(readings)
        if hottest is None:
            self.throttle = self._decide(self._share, self._level, "no sensor reading", None)
            return self.throttle
        dt = 0.0 if self._last_t is None else max(0.0, now_s - self._last_t)
        self._last_t = now_s
        self._history.append((now_s, hottest.excess_c))
        while self._history and self._history[0][0] < now_s - self.config.trend_window_s:
            self._history.popleft()
        if self._level == "paused":
            self.throttle = self._while_paused(now_s, hottest)
        elif hottest.critical:
            self.throttle = self._pause(now_s, hottest)
        else:
            self.throttle = self._regulate(now_s, dt, hottest)
        return self.throttle

    # -- pieces of update ------------------------------------------------------------------
    def _hottest(self, readings: Sequence[Reading]) -> _Hottest | None:
        best: _Hottest | None = None
        critical, cooled, any_hw = False, True, False
        for r in readings:
            if not r.online or not relevant(self.config, r.sensor):
                continue
            lim = self.limits(r)
            critical = critical or r.celsius >= lim.critical_c
            cooled = cooled and r.celsius <= lim.resume_c - self._resume_drop_c and not r.hw_slowdown
            any_hw = any_hw or r.hw_slowdown
            excess = r.celsius - lim.limit_c
            if r.hw_slowdown:  # the hardware says too hot, whatever the temperature says
                excess = max(excess, self.config.deadband_c + 3.0)
            if best is None or excess > best.excess_c:
                best = _Hottest(r.sensor, r.celsius, excess, lim, False, False, r.hw_slowdown)
        if best is None:
            return None
        return _Hottest(best.sensor, best.celsius, best.excess_c, best.limits, critical, cooled, any_hw)

    def _forecast(self) -> tuple[float, float, float]:
        """(smoothed excess now, forecast excess, slope) from the least-squares line over the window."""
        samples = list(self._history)
        now, current = samples[-1]
        distinct = {v for _, v in samples}
        # one sensor step (back and forth) in the window: the slope of a single step says little,
        # so it moves the forecast by at most half a step (a slow plant's trend still shows)
        one_step = len(distinct) <= 2 and max(distinct) - min(distinct) <= _STEP_C
        slope = lsq_slope(samples)
        recent = [(t, v) for t, v in samples if t >= now - self.config.trend_window_s / 2]
        values = [v for _, v in recent]
        if len(recent) >= 3 and max(values) - min(values) >= 2 * _STEP_C:
            # a fast change shows clearly in the last half window: follow it without the full lag
            fast = lsq_slope(recent)
            slope = fast if fast * slope > 0 and abs(fast) > abs(slope) else slope
        if len(samples) >= 3:
            mean_t = sum(t for t, _ in samples) / len(samples)
            mean_v = sum(v for _, v in samples) / len(samples)
            fitted = mean_v + slope * (now - mean_t)
            # the fit smooths the 1 C steps, but a jump (a new hottest sensor) is taken at once
            current = fitted if abs(fitted - current) < 1.0 else current
        ahead = slope * self.config.forecast_s
        if one_step:
            ahead = max(-_STEP_C / 2, min(_STEP_C / 2, ahead))
        return current, current + ahead, slope

    def _regulate(self, now_s: float, dt: float, hot: _Hottest) -> Throttle:
        cfg = self.config
        _current, forecast, slope = self._forecast()
        error = forecast - _AIM_OVER_C
        share = self._share
        if all(v < -cfg.reset_below_c for _, v in self._history) and forecast < -cfg.reset_below_c:
            self._far_since = now_s if self._far_since is None else self._far_since
        else:
            self._far_since = None
        # far below for a while and no longer cooling: the cause of the cut is gone. A cut of our
        # own shows as a fall, and the climb back from it as a short stay far below: jumping to
        # full speed from there would only cut again.
        far_below = (
            self._far_since is not None
            and now_s - self._far_since >= _RESET_AFTER_WINDOWS * cfg.trend_window_s
            and slope > -_SETTLED_C_PER_S
        )
        if far_below and not hot.hw_slowdown:
            share = 1.0
        else:
            if self._last_error is not None:
                # the P term acts near and above the limit only: far below it, a rising forecast
                # is no reason to give up throughput
                floor, ceiling = -2.0 * cfg.deadband_c - 1.0, _P_CEILING_C
                # and both ways bounded: a forecast spike (a step entering the trend window) cut the
                # share to its floor, where the clamp swallowed the cut; without the ceiling its fall
                # back (the step leaving the window) gave the whole spike back as a jump to full speed
                share -= cfg.proportional_gain * (
                    min(max(error, floor), ceiling) - min(max(self._last_error, floor), ceiling)
                )
            if error > cfg.deadband_c:  # the further over, the faster: a fast plant's overshoot is cut at once
                over = error - cfg.deadband_c
                share -= cfg.cut_gain * over * (1.0 + max(0.0, over - _CUT_BOOST_FROM_C)) * dt
            elif error < -cfg.deadband_c:  # at most 5 C worth: a slow, steady climb back
                share += cfg.raise_gain * min(-error - cfg.deadband_c, _RAISE_CLAMP_C) * dt
            else:  # a small integral near the limit: whole-degree readings dither around the right mean
                share -= cfg.raise_gain * _FINE_GAIN * error * dt
            share = self._share + self._gain * (share - self._share)
        self._last_error = error
        share = min(1.0, max(cfg.min_share, share))
        self._watch_swings(now_s, dt, share)
        self._share = share
        if self._share < 1.0:
            self._full_since = None
            level = "regulating"
        else:
            self._full_since = now_s if self._full_since is None else self._full_since
            level = "normal" if self._level == "normal" or now_s - self._full_since >= _NORMAL_AFTER_S else self._level
        why = f"{hot.sensor} {hot.celsius:.1f} C, forecast {forecast + hot.limits.limit_c:.1f} C"
        why += f", limit {hot.limits.limit_c:.1f} C" + (", hardware slowdown" if hot.hw_slowdown else "")
        return self._decide(self._share, level, why, hot)

    def _pause(self, now_s: float, hot: _Hottest) -> Throttle:
        soon_after_resume = self._resumed_at is not None and now_s - self._resumed_at < self._soon_s()
        longest = 16 * self.config.min_pause_s
        self._pause_s = min(longest, 2 * self._pause_s) if soon_after_resume else self.config.min_pause_s
        # the last resume was too early (even the minimum share overheated): wait for more cooling
        # too, so a device that idles warm stays paused until its surroundings cool
        self._resume_drop_c = min(_MAX_RESUME_DROP_C, self._resume_drop_c + 5.0) if soon_after_resume else 0.0
        self._paused_at = now_s
        self._last_error = None
        why = f"{hot.sensor} {hot.celsius:.1f} C: critical (pause at {hot.limits.critical_c:.1f} C)"
        return self._decide(0.0, "paused", why, hot)

    def _while_paused(self, now_s: float, hot: _Hottest) -> Throttle:
        assert self._paused_at is not None
        if now_s - self._paused_at >= self._pause_s and (hot.cooled or self._idles_settled(hot)):
            self._resumed_at = now_s
            self._paused_for = now_s - self._paused_at
            self._share = self.config.min_share
            resume = hot.limits.resume_c - self._resume_drop_c
            how = f"cooled to {resume:.1f} C" if hot.cooled else "settled idle well under the limit"
            why = f"{hot.sensor} {hot.celsius:.1f} C: {how}, resuming"
            return self._decide(self._share, "regulating", why, hot)
        why = f"{hot.sensor} {hot.celsius:.1f} C: paused until {hot.limits.resume_c - self._resume_drop_c:.1f} C"
        return self._decide(0.0, "paused", why, hot)

    def _watch_swings(self, now_s: float, dt: float, share: float) -> None:
        """Gain scheduling on what the plant shows: a share that keeps reversing by more than
        `_SWING` (a fast plant behind a long sensor lag, where the default gains overreach) halves
        the controller's gains, down to a quarter; quiet, they come back over `_REGAIN_S`."""
        step = share - self._share
        if abs(step) > 1e-6:
            direction = 1 if step > 0 else -1
            if direction != self._direction:
                if abs(self._share - self._turned_at) > _SWING:
                    self._swings.append(now_s)
                self._direction, self._turned_at = direction, self._share
        while self._swings and self._swings[0] < now_s - _SWING_WINDOW_S:
            self._swings.popleft()
        if len(self._swings) >= 4:
            self._gain = max(0.25, self._gain / 2)
            self._swings.clear()
        elif not self._swings:
            self._gain = min(1.0, self._gain + dt / _REGAIN_S)

    def _soon_s(self) -> float:
        """How long after a resume counts as soon: it scales with the plant, as the last pause
        lasted as long as the device took to cool."""
        return 8 * max(self._pause_s, self._paused_for)

    def _idles_settled(self, hot: _Hottest) -> bool:
        """Paused, the device has stopped cooling half its pause margin under the limit (more after
        an early resume): it idles warmer than `resume_c`, and waiting for that would keep it
        paused for as long as its surroundings stay warm although it could run."""
        samples = self._history
        margin = (hot.limits.critical_c - hot.limits.limit_c) / 2 + self._resume_drop_c
        window_seen = samples[-1][0] - samples[0][0] >= 0.75 * self.config.trend_window_s
        flat = abs(lsq_slope(samples)) < _SETTLED_C_PER_S / 4
        return not hot.hw_slowdown and hot.excess_c <= -margin and window_seen and flat

    def _decide(self, share: float, level: str, reason: str, hot: _Hottest | None) -> Throttle:
        self._level = level
        if level == "paused":
            share = 0.0
        return Throttle(
            round(share, 4), level, reason, hot.sensor if hot else "", round(hot.celsius, 1) if hot else None
        )
