"""Frames from many cameras into one batch per model size: full batch or deadline.

Policy, in the spirit of Triton's dynamic batcher and DeepStream's nvstreammux:
- a batch starts when the engine is free AND either it is full or the oldest waiting
  frame has waited `max_wait_ms`;
- "full" is `max_batch`, or every camera this model serves has a frame waiting: with
  latest-frame-wins slots no further frame can join, so waiting longer only adds latency;
- cameras are taken oldest-waiting first, so none starves when load exceeds capacity;
- a live frame older than `max_age_ms` when its batch starts is dropped and counted
  (`stale`), never inferred late.
Only one batch per model size is in flight: while it runs, newer frames replace older ones
in the slots, so the next batch is always built from the freshest frames.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from daemon.frames import Frame
from daemon.hub import FrameHub, Pending


@dataclass(frozen=True, slots=True)
class BatchPolicy:
    max_batch: int
    max_wait_s: float
    max_age_s: float


@dataclass(frozen=True, slots=True)
class Decision:
    """`run` now, or wait until `wake_at` (monotonic seconds; None: until a frame arrives)."""

    run: bool
    wake_at: float | None = None


def decide(pending: Pending, now: float, policy: BatchPolicy) -> Decision:
    """The batching rule as a pure function of what waits and the time (tested with a fake clock)."""
    if pending.count == 0 or pending.oldest_since is None:
        return Decision(run=False)
    full_at = min(policy.max_batch, max(pending.cameras, 1))
    if pending.count >= full_at:
        return Decision(run=True)
    deadline = pending.oldest_since + policy.max_wait_s
    if now >= deadline:
        return Decision(run=True)
    return Decision(run=False, wake_at=deadline)


class Batcher:
    """Waits (on the event loop) until `decide` says run, then takes the batch from the hub.

    `notify()` is safe to call from any thread (the hub calls it when a frame arrives).
    """

    def __init__(
        self,
        size: int,
        hub: FrameHub,
        policy: BatchPolicy,
        loop: asyncio.AbstractEventLoop,
        clock: Callable[[], float],
    ) -> None:
        self.size = size
        self._hub = hub
        self._policy = policy
        self._loop = loop
        self._clock = clock
        self._wakeup = asyncio.Event()
        hub.subscribe(size, self.notify)

    def notify(self) -> None:
        self._loop.call_soon_threadsafe(self._wakeup.set)

    async def next_batch(self) -> list[Frame]:
        """The next batch to run (never empty). Cancellation propagates."""
        while True:
            self._wakeup.clear()
            decision = decide(self._hub.pending(self.size), self._clock(), self._policy)
            if decision.run:
                frames = self._hub.take(self.size, self._policy.max_batch, self._policy.max_age_s)
                if frames:
                    return frames
                continue
            timeout = None if decision.wake_at is None else max(0.0, decision.wake_at - self._clock())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), timeout)
