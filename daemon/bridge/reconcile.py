"""Live reconciliation of a camera line's count against the plant's counter (pure: no I/O, no clock).

One `Reconciler` per `[[bridge.reconcile]]` entry. It is fed the line's crossings (their capture
times, `add_crossing`) and the counter's readings (`add_reading`, raw register values with the time
the reply came), and judges windows (`evaluate`):

- **Windows end on readings.** The window ends at the latest reading `t_b` whose matching camera time
  `t_b - lag` is at least `settle_s` old (so the crossings before it have reached the bridge) and
  starts at the latest reading `t_a <= t_b - window_s`. The reference's increase is the counter's
  between `t_a` and `t_b`; the camera's is its crossings with capture times in `(t_a - lag, t_b - lag]`.
  Comparing at the instants the counter was read, not on a grid, leaves no sampling error: a part is
  on both sides of the window's edge or on neither, up to its travel-time jitter.
- **Disagreeing**: `|vision - reference| > max(tolerance, tolerance_share * reference)`. While in
  `count_mismatch`, a window agrees only within `clear_ratio` of that (hysteresis). A change of state
  needs windows on the new side for `mismatch_after_s` / `agree_after_s` without a break (minimum
  duration), so a single odd window never raises or clears the alarm.
- **The counter** (`CounterTracker`): a raw value below the previous one is a wrap when the distance
  through the top of the range (16, 32 or 64 bit) is a plausible count for the time since the last
  reading (`max_rate_per_s`), else a reset; a forward jump above that is a preset. Each is reported
  (`CounterNote`), never counted as parts, and a reset or preset restarts the windows at that reading.
- **An unreachable reference** (`reference_failed`) is `reference_down`, never a mismatch; the
  windows restart at the first reading after it. An alarm raised before stays raised until windows agree.
"""

from __future__ import annotations

import bisect
import statistics
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

from daemon.config.reconcile import ReconcileConfig

NoteKind = Literal["reference_wrapped", "reference_reset", "reference_jump"]
VerdictKind = Literal["count_mismatch", "count_agrees", "reference_down", "reference_up"]
State = Literal["unknown", "agrees", "count_mismatch", "reference_down"]
KEEP_EXTRA_MS = 60_000
SPEEDS_KEPT = 25


@dataclass(frozen=True, slots=True)
class CounterNote:
    """Something the counter did that is not parts: a wrap, a reset (to `raw`), a preset jump."""

    kind: NoteKind
    before: int
    raw: int
    at_ms: int


@dataclass(frozen=True, slots=True)
class Window:
    """One judged window: reference times `start_ms`..`end_ms`, the camera's counts lag_ms earlier."""

    start_ms: int
    end_ms: int
    lag_ms: int
    vision: int
    reference: int
    allowed: float
    disagrees: bool
    crossings: tuple[str, ...] = ()
    """The stream ids of the crossings counted (kept only for a disagreeing window: the evidence)."""

    @property
    def drift(self) -> int:
        """Camera minus reference, in parts."""
        return self.vision - self.reference


@dataclass(frozen=True, slots=True)
class Verdict:
    """A change of the line's state, for the events stream, the log and the servers."""

    kind: VerdictKind
    at_ms: int
    window: Window | None = None


@dataclass(slots=True)
class CounterTracker:
    """Turns raw counter readings into a running total that survives wraps, resets and presets."""

    bits: int
    max_rate_per_s: float
    raw: int | None = None
    total: int = 0
    at_ms: int = 0

    def update(self, raw: int, at_ms: int) -> CounterNote | None:
        """Take a reading; the note when it was not plain counting (the total then stays)."""
        top = 1 << self.bits
        if not 0 <= raw < top:
            raise ValueError(f"counter reading {raw} outside 0..{top - 1}")
        before, self.raw = self.raw, raw
        dt_s = max(0.0, (at_ms - self.at_ms) / 1000)
        self.at_ms = at_ms
        if before is None:
            return None
        plausible = self.max_rate_per_s * dt_s + 2
        if raw >= before:
            if raw - before > plausible:
                return CounterNote("reference_jump", before, raw, at_ms)
            self.total += raw - before
            return None
        through_top = raw + top - before
        if through_top <= plausible:
            self.total += through_top
            return CounterNote("reference_wrapped", before, raw, at_ms)
        return CounterNote("reference_reset", before, raw, at_ms)


@dataclass(slots=True)
class _Hold:
    since_ms: int | None = None

    def held(self, on: bool, at_ms: int, for_ms: int) -> bool:
        if not on:
            self.since_ms = None
            return False
        if self.since_ms is None:
            self.since_ms = at_ms
        return at_ms - self.since_ms >= for_ms


@dataclass(slots=True)
class Reconciler:
    """The reconciliation of one `[[bridge.reconcile]]` entry (see the module's docstring)."""

    cfg: ReconcileConfig
    counter: CounterTracker = field(init=False)
    alarm: bool = False
    down: bool = False
    last: Window | None = None
    _times: list[int] = field(default_factory=list)
    _totals: list[int] = field(default_factory=list)
    _segment_ms: int = 0
    _crossing_ms: list[int] = field(default_factory=list)
    _crossing_ids: list[str] = field(default_factory=list)
    _speeds: deque[float] = field(default_factory=lambda: deque(maxlen=SPEEDS_KEPT))
    _bad: _Hold = field(default_factory=_Hold)
    _good: _Hold = field(default_factory=_Hold)
    _judged_ms: int = -1

    def __post_init__(self) -> None:
        self.counter = CounterTracker(self.cfg.bits, self.cfg.max_rate_per_s)

    @property
    def state(self) -> State:
        if self.down:
            return "reference_down"
        if self.alarm:
            return "count_mismatch"
        return "agrees" if self.last is not None else "unknown"

    @property
    def lag_ms(self) -> int:
        """The travel time from the line to the counter: `lag_s`, or `distance_mm` over the median
        measured speed of the last crossings (`lag_s`, else 0, until one is measured)."""
        if self.cfg.distance_mm is not None and self._speeds:
            return round(self.cfg.distance_mm / statistics.median(self._speeds) * 1000)
        return round((self.cfg.lag_s or 0.0) * 1000)

    def add_crossing(self, at_ms: int, entry_id: str = "", speed_mm_s: float = 0.0) -> None:
        """One crossing of the line in the configured direction, at its capture time."""
        i = bisect.bisect_right(self._crossing_ms, at_ms)
        self._crossing_ms.insert(i, at_ms)
        self._crossing_ids.insert(i, entry_id)
        if speed_mm_s > 0:
            self._speeds.append(speed_mm_s)

    def add_reading(self, raw: int, at_ms: int) -> tuple[CounterNote | None, Verdict | None]:
        """One successful read of the counter; its note (wrap, reset, jump) and `reference_up` when
        it was down."""
        up = Verdict("reference_up", at_ms) if self.down else None
        note = self.counter.update(raw, at_ms)
        if up is not None or (note is not None and note.kind != "reference_wrapped"):
            self._restart(at_ms)
        self.down = False
        self._times.append(at_ms)
        self._totals.append(self.counter.total)
        return note, up

    def reference_failed(self, at_ms: int) -> Verdict | None:
        """A read failed (timeout, refused, exception reply): `reference_down` the first time."""
        if self.down:
            return None
        self.down = True
        self._bad.since_ms = self._good.since_ms = None
        return Verdict("reference_down", at_ms)

    def _restart(self, at_ms: int) -> None:
        self._segment_ms = at_ms
        self._bad.since_ms = self._good.since_ms = None

    def evaluate(self, now_ms: int) -> tuple[Window | None, Verdict | None]:
        """Judge the newest complete window not judged yet (None when there is none) and the state
        change it makes, if any."""
        if self.down:
            return None, None
        lag = self.lag_ms
        window = self._window(now_ms, lag)
        self._prune(now_ms, lag)
        if window is None:
            return None, None
        self.last = window
        if not self.alarm:
            self._good.since_ms = None
            if self._bad.held(window.disagrees, window.end_ms, round(self.cfg.mismatch_after_s * 1000)):
                self.alarm = True
                self._bad.since_ms = None
                return window, Verdict("count_mismatch", now_ms, window)
        elif self._good.held(not window.disagrees, window.end_ms, round(self.cfg.agree_after_s * 1000)):
            self.alarm = False
            self._good.since_ms = None
            return window, Verdict("count_agrees", now_ms, window)
        return window, None

    def _window(self, now_ms: int, lag: int) -> Window | None:
        newest = now_ms - round(self.cfg.settle_s * 1000) + lag
        b = bisect.bisect_right(self._times, newest) - 1
        if b < 0 or self._times[b] <= self._judged_ms:
            return None
        t_b = self._times[b]
        a = bisect.bisect_right(self._times, t_b - round(self.cfg.window_s * 1000)) - 1
        if a < 0 or self._times[a] < self._segment_ms:
            return None
        self._judged_ms = t_b
        t_a = self._times[a]
        reference = self._totals[b] - self._totals[a]
        lo = bisect.bisect_right(self._crossing_ms, t_a - lag)
        hi = bisect.bisect_right(self._crossing_ms, t_b - lag)
        vision = hi - lo
        allowed = max(float(self.cfg.tolerance), self.cfg.tolerance_share * reference)
        limit = allowed * self.cfg.clear_ratio if self.alarm else allowed
        disagrees = abs(vision - reference) > limit
        ids = tuple(self._crossing_ids[lo:hi]) if disagrees else ()
        return Window(t_a, t_b, lag, vision, reference, allowed, disagrees, ids)

    def _prune(self, now_ms: int, lag: int) -> None:
        keep = now_ms - round((self.cfg.window_s + self.cfg.settle_s) * 1000) - lag - KEEP_EXTRA_MS
        n = bisect.bisect_left(self._times, keep)
        if n > 0:
            del self._times[:n], self._totals[:n]
        m = bisect.bisect_left(self._crossing_ms, keep - lag)
        if m > 0:
            del self._crossing_ms[:m], self._crossing_ids[:m]


__all__ = ["CounterNote", "CounterTracker", "Reconciler", "State", "Verdict", "Window"]
