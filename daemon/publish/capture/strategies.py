"""Which frames to capture: the strategies (one function each, in a registry), their chance and their
per-camera limits. Pure and cheap: it runs on the event loop for every published frame.

What a strategy sees (`Seen`): the frame's result before tracking (its published detections and, on a
tracked camera, its weak ones: from `[tracking] low_score` up to the camera's `conf_threshold`), the
result after tracking (track ids, `new`/`crossed`/`end` events), the camera's threshold, and the
confirmed tracks' boxes of the camera's previous frame.

- `close_to_threshold`: a detection scored within `epsilon` of the threshold, on either side (under
  it only where weak detections exist: tracked cameras).
- `weak_track`: what the tracker shows of a part the model was unsure of. A `crossed` event whose part
  was weak (its best score under `threshold + epsilon`), late (crossed before its track was confirmed:
  the `new` event comes with the crossing) or crossed on a weak detection (its track is not among the
  frame's published detections); or a weak detection over a confirmed track's box (IoU at least
  `WEAK_IOU` with one of this frame's or the previous frame's confirmed boxes): the part seen weakly
  after it was confirmed, or a second, weak box around it.
- `random`: every frame (`probability` is then the share captured).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from daemon.config.capture import CaptureStrategy, StrategyType
from daemon.core.clock import SYSTEM_CLOCK, Clock
from daemon.core.frames import FrameResult

Box = tuple[float, float, float, float]
WEAK_IOU = 0.3
MINUTE_S = 60.0
HOUR_S = 3600.0


@dataclass(frozen=True, slots=True)
class Seen:
    """One frame as the strategies see it (see the module docstring)."""

    before: FrameResult
    after: FrameResult
    threshold: float
    previous: tuple[Box, ...] = ()
    """The confirmed tracks' boxes in the camera's previous frame."""


def close_to_threshold(seen: Seen, epsilon: float) -> bool:
    t = seen.threshold
    return any(abs(d.score - t) <= epsilon for d in (*seen.before.detections, *seen.before.weak))


def weak_track(seen: Seen, epsilon: float) -> bool:
    after = seen.after
    published = {d.track for d in after.detections if d.track is not None}
    confirmed_now = {e.track for e in after.objects if e.event == "new"}
    for e in after.objects:
        if e.event == "crossed" and (
            e.score < seen.threshold + epsilon or e.track in confirmed_now or e.track not in published
        ):
            return True
    if not seen.before.weak:
        return False
    boxes = [d.box for d in after.detections if d.track is not None] + list(seen.previous)
    return any(iou(w.box, b) >= WEAK_IOU for w in seen.before.weak for b in boxes)


def random_frame(seen: Seen, epsilon: float) -> bool:
    return True


STRATEGIES: dict[StrategyType, Callable[[Seen, float], bool]] = {
    "close_to_threshold": close_to_threshold,
    "weak_track": weak_track,
    "random": random_frame,
}
"""Each strategy's test of a frame, by its `type` (adding one: a function and a line here)."""


def iou(a: Box, b: Box) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


class Limits:
    """One camera's and strategy's captures in the last hour (monotonic seconds), against its limits."""

    __slots__ = ("_times", "per_hour", "per_minute")

    def __init__(self, per_minute: int, per_hour: int) -> None:
        self.per_minute = per_minute
        self.per_hour = per_hour
        self._times: deque[float] = deque()

    def reached(self, now: float) -> str | None:
        """`per_minute` or `per_hour` when one more capture now would exceed it; None when it may."""
        times = self._times
        while times and now - times[0] >= HOUR_S:
            times.popleft()
        if len(times) >= self.per_hour:
            return "per_hour"
        in_minute = 0
        for t in reversed(times):
            if now - t >= MINUTE_S:
                break
            in_minute += 1
        return "per_minute" if in_minute >= self.per_minute else None

    def record(self, now: float) -> None:
        self._times.append(now)


@dataclass(frozen=True, slots=True)
class Pick:
    """The strategy that captures a frame: its place in `[[capture.strategies]]` and its settings."""

    index: int
    strategy: CaptureStrategy


@dataclass(frozen=True, slots=True)
class Refused:
    """A strategy picked and drew the frame but its limit was reached."""

    strategy: StrategyType
    limit: str


class Sampler:
    """Which strategy (if any) captures a frame: the first, in config order, that picks it, draws it
    (`probability`) and is within its camera's limits. `record` counts a capture against the limits
    (called once the capture is queued)."""

    def __init__(
        self,
        strategies: Sequence[CaptureStrategy],
        thresholds: Mapping[str, float],
        *,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
    ) -> None:
        self.strategies = tuple(strategies)
        self._thresholds = dict(thresholds)
        self._clock = clock
        self._rng = rng or random.Random()
        self._limits: dict[tuple[str, int], Limits] = {}
        self._confirmed: dict[str, tuple[Box, ...]] = {}

    def set_threshold(self, camera: str, threshold: float | None) -> None:
        """`camera`'s `conf_threshold` from its next frame on (a camera added or changed live; None: removed,
        its frames no longer captured and its limits and last boxes forgotten)."""
        if threshold is not None:
            self._thresholds[camera] = threshold
            return
        self._thresholds.pop(camera, None)
        self._confirmed.pop(camera, None)
        for key in [k for k in self._limits if k[0] == camera]:
            del self._limits[key]

    def choose(self, before: FrameResult, after: FrameResult) -> tuple[Pick | None, list[Refused]]:
        """The strategy that captures this frame (None: none), and the limits that refused it."""
        camera = after.camera_id
        previous = self._confirmed.get(camera, ())
        self._confirmed[camera] = tuple(d.box for d in after.detections if d.track is not None)
        threshold = self._thresholds.get(camera)
        if threshold is None:  # not one of this instance's cameras
            return None, []
        seen = Seen(before, after, threshold, previous)
        refused: list[Refused] = []
        now = self._clock.monotonic()
        for i, s in enumerate(self.strategies):
            if not STRATEGIES[s.type](seen, s.epsilon) or self._rng.random() >= s.probability:
                continue
            limit = self._limits_of(camera, i).reached(now)
            if limit is None:
                return Pick(i, s), refused
            refused.append(Refused(s.type, limit))
        return None, refused

    def record(self, camera: str, pick: Pick) -> None:
        self._limits_of(camera, pick.index).record(self._clock.monotonic())

    def _limits_of(self, camera: str, index: int) -> Limits:
        limits = self._limits.get((camera, index))
        if limits is None:
            s = self.strategies[index]
            limits = self._limits[(camera, index)] = Limits(s.per_minute, s.per_hour)
        return limits


__all__ = ["STRATEGIES", "WEAK_IOU", "Limits", "Pick", "Refused", "Sampler", "Seen", "iou"]
