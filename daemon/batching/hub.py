"""The hand-off between camera threads and the batchers: one slot per camera.

Policy (live cameras): latest frame wins. A camera has at most one frame waiting; a newer
frame replaces it and the replaced one is counted as dropped (`superseded`). Memory and
latency therefore stay bounded however slow inference is: there is no queue to grow.

Policy (replays, `put(wait=True)`): the source blocks until its previous frame was taken,
so every frame of a recording is processed, in order, and is never dropped as stale.

The slot remembers when its camera first had a frame waiting since the last take
(`waiting_since`, which batch deadlines use) and when a batch last took one (`last_taken`).
Fairness: the camera served longest ago goes first, then the one waiting longest. Oldest-waiting
alone was not fair under overload: cameras at a steady frame rate lock into phase with the
batches, and the camera whose frames land just after each take always looks oldest (by
simulation, one camera of four served half as often as another; `python -m tools.bench` saw
0.74 between its busiest and least served camera).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from daemon.core.clock import SYSTEM_CLOCK, Clock
from daemon.core.drop_reasons import DropReason
from daemon.core.frames import Frame
from daemon.core.metrics import Metrics

Notify = Callable[[], None]


@dataclass(slots=True)
class _Slot:
    frame: Frame | None = None
    waiting_since: float = 0.0
    replay: bool = False
    size: int | None = None
    """Model size of this camera's most recent frame (which batcher serves it now)."""
    last_taken: float = float("-inf")
    """When a batch last took this camera's frame (never: minus infinity)."""


@dataclass(frozen=True, slots=True)
class Pending:
    """What waits for one model size: how many cameras, since when, and how many could."""

    count: int
    oldest_since: float | None
    cameras: int


class FrameHub:
    """Latest-frame-wins slots for every camera; implements `daemon.core.frames.FrameConsumer`."""

    def __init__(self, metrics: Metrics, clock: Clock = SYSTEM_CLOCK) -> None:
        self._metrics = metrics
        self._clock = clock
        self._cond = threading.Condition()
        self._slots: dict[str, _Slot] = {}
        self._listeners: dict[int, Notify] = {}
        self._on_new_size: Callable[[int], None] | None = None

    def subscribe(self, size: int, notify: Notify) -> None:
        """`notify()` is called (from any thread) whenever a frame for `size` arrives."""
        with self._cond:
            self._listeners[size] = notify

    def on_new_size(self, callback: Callable[[int], None]) -> None:
        """`callback(size)` runs (from the source thread) the first time a size is asked for."""
        self._on_new_size = callback

    # -- producer side (camera threads) -------------------------------------------------
    def put(self, frame: Frame, *, wait: bool = False, stop: threading.Event | None = None) -> bool:
        size = frame.model_size
        started = self._metrics.stage_cpu.handoff.start()
        with self._cond:
            slot = self._slots.setdefault(frame.camera_id, _Slot())
            if wait:
                while slot.frame is not None:
                    if stop is not None and stop.is_set():
                        return False
                    self._cond.wait(timeout=0.1)
            elif slot.frame is not None:
                self._metrics.dropped(frame.camera_id, "superseded")
            if slot.frame is None:
                slot.waiting_since = self._clock.monotonic()
            slot.frame = frame
            slot.replay = wait
            new_size = size not in self._listeners
            slot.size = size
            notify = self._listeners.get(size)
        if new_size and self._on_new_size is not None:
            self._on_new_size(size)
        if notify is not None:
            notify()
        self._metrics.stage_cpu.handoff.stop(started)
        return True

    def discard(self, camera_id: str) -> None:
        """The camera's connection ended: it no longer counts toward a full batch.

        A frame it already handed over stays and is processed (or dropped as stale): it was
        accepted, and a replay's last frame must not be lost at end of file.
        """
        with self._cond:
            slot = self._slots.get(camera_id)
            if slot is not None:
                slot.size = None
            self._cond.notify_all()

    def holds(self, camera_id: str) -> bool:
        """Whether a frame of `camera_id` waits in its slot (a removed camera's drain waits for it to go)."""
        with self._cond:
            slot = self._slots.get(camera_id)
            return slot is not None and slot.frame is not None

    def forget(self, camera_id: str) -> bool:
        """Remove the camera's slot (a camera removed live, once its reader ended and its frame was
        taken); True when a frame was still waiting in it (the caller counts it as dropped)."""
        with self._cond:
            slot = self._slots.pop(camera_id, None)
            self._cond.notify_all()
        return slot is not None and slot.frame is not None

    # -- consumer side (one batcher per model size) ---------------------------------------
    def pending(self, size: int) -> Pending:
        with self._cond:
            count, oldest, cameras = 0, None, 0
            for slot in self._slots.values():
                cameras += slot.size == size
                if slot.frame is not None and slot.frame.model_size == size:
                    count += 1
                    if oldest is None or slot.waiting_since < oldest:
                        oldest = slot.waiting_since
            return Pending(count, oldest, cameras)

    def take(self, size: int, max_n: int, max_age_s: float) -> list[Frame]:
        """Pop up to `max_n` frames for `size`: the camera served longest ago first, then the one
        waiting longest (round robin under overload, no starvation).

        Live frames older than `max_age_s` are dropped (`stale`) instead of being returned.
        """
        started = self._metrics.stage_cpu.batching.start()
        now = self._clock.monotonic()
        taken: list[Frame] = []
        with self._cond:
            waiting = sorted(
                (s.last_taken, s.waiting_since, cam)
                for cam, s in self._slots.items()
                if s.frame is not None and s.frame.model_size == size
            )
            for _last, _since, cam in waiting:
                if len(taken) >= max_n:
                    break
                slot = self._slots[cam]
                frame = slot.frame
                assert frame is not None
                slot.frame = None
                slot.last_taken = now
                if not slot.replay and now - frame.captured_mono > max_age_s:
                    self._metrics.dropped(cam, "stale")
                    continue
                taken.append(frame)
            self._cond.notify_all()
        self._metrics.stage_cpu.batching.stop(started)
        return taken

    def drain(self) -> list[tuple[str, DropReason]]:
        """Empty every slot at shutdown; returns (camera, reason) for each frame left unprocessed."""
        with self._cond:
            left: list[tuple[str, DropReason]] = [
                (cam, "shutdown") for cam, s in self._slots.items() if s.frame is not None
            ]
            for slot in self._slots.values():
                slot.frame = None
            self._cond.notify_all()
        return left

    def cameras(self) -> dict[str, int | None]:
        """camera id -> model size currently serving it (None while disconnected)."""
        with self._cond:
            return {cam: s.size for cam, s in self._slots.items()}
