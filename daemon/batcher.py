"""Frames from many cameras into one batch per model size: full batch or deadline.

Policy, in the spirit of Triton's dynamic batcher and DeepStream's nvstreammux:
- a batch starts when the engine is free AND either it is full or the oldest waiting
  frame has waited `max_wait_ms`;
- "full" is `max_batch`, or this worker's share has a frame waiting: with latest-frame-wins
  slots no further frame can join, so waiting longer only adds latency. The share is
  `engine.worker_batch`: on the CPU 1, so each free session (`engine.workers`) takes the
  freshest waiting frame (a batch of 4 takes 4 times as long as a batch of 1 there: the same
  throughput, a fraction of the latency); on a GPU ceil(cameras / workers), every camera with
  one worker, as one batch costs little more than one frame;
- cameras are taken oldest-waiting first, so none starves when load exceeds capacity;
- a live frame older than `max_age_ms` when its batch starts is dropped and counted
  (`stale`), never inferred late.
At most `engine.workers` batches per model size are in flight (one per session): while they
run, newer frames replace older ones in the slots, so the next batch is always built from the
freshest frames. `InOrder` hands their results on in the order the batches were taken, so a
camera's detections reach Redis in frame order even when a later, smaller batch ends first.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from daemon.frames import Frame
from daemon.hub import FrameHub, Pending


@dataclass(frozen=True, slots=True)
class BatchPolicy:
    max_batch: int
    max_wait_s: float
    max_age_s: float
    workers: int = 1
    per_worker: int | None = None  # frames per batch; None: this worker's share of the cameras

    def share(self, cameras: int) -> int:
        """Frames one batch takes: `per_worker`, or this worker's share of the cameras; at most
        `max_batch`."""
        share = self.per_worker or max(-(-cameras // self.workers), 1)
        return min(self.max_batch, share)


@dataclass(frozen=True, slots=True)
class Decision:
    """`run` now, or wait until `wake_at` (monotonic seconds; None: until a frame arrives)."""

    run: bool
    wake_at: float | None = None


def decide(pending: Pending, now: float, policy: BatchPolicy) -> Decision:
    """The batching rule as a pure function of what waits and the time (tested with a fake clock)."""
    if pending.count == 0 or pending.oldest_since is None:
        return Decision(run=False)
    full_at = policy.share(pending.cameras)
    if pending.count >= full_at:
        return Decision(run=True)
    deadline = pending.oldest_since + policy.max_wait_s
    if now >= deadline:
        return Decision(run=True)
    return Decision(run=False, wake_at=deadline)


class Batcher:
    """Waits (on the event loop) until `decide` says run, then takes the batch from the hub.

    `notify()` is safe to call from any thread (the hub calls it when a frame arrives). It wakes
    the loop only while a worker waits in `next_batch`: under overload every worker is busy and
    the cameras' 60 or more frames a second would each wake the loop (and preempt a worker) for
    nothing. A worker that comes back looks at the hub before it waits, so no frame is missed.
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
        self._stopping = False
        self._waiting = 0  # workers inside next_batch; changed on the loop only
        hub.subscribe(size, self.notify)

    def notify(self) -> None:
        # Race-free without a lock: a worker counts itself in before it reads the hub, and the
        # hub stores a frame before it calls this; so either this sees the worker or the
        # worker's read sees the frame.
        if self._waiting:
            self._loop.call_soon_threadsafe(self._wakeup.set)

    def stop(self) -> None:
        """Shutdown (on the loop, after intake stopped): what waits now runs at once, without
        waiting for a deadline, and `next_batch` returns [] once nothing is left."""
        self._stopping = True
        self._wakeup.set()

    async def next_batch(self) -> list[Frame]:
        """The next batch to run; empty only after `stop()`, when no frame is left. Several
        workers may wait here at once: each batch goes to one of them. Cancellation propagates."""
        self._waiting += 1
        try:
            return await self._next_batch()
        finally:
            self._waiting -= 1

    async def _next_batch(self) -> list[Frame]:
        while True:
            self._wakeup.clear()
            pending = self._hub.pending(self.size)
            if self._stopping and pending.count == 0:
                self._wakeup.set()  # wake the other waiting workers too
                return []
            decision = decide(pending, self._clock(), self._policy)
            if decision.run or (self._stopping and pending.count):
                limit = self._policy.max_batch if self._stopping else self._policy.share(pending.cameras)
                frames = self._hub.take(self.size, limit, self._policy.max_age_s)
                if frames:
                    return frames
                continue
            timeout = None if decision.wake_at is None else max(0.0, decision.wake_at - self._clock())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), timeout)


T = TypeVar("T")


class InOrder(Generic[T]):
    """Releases the results of concurrently running batches in the order the batches were taken.

    `ticket()` when a batch is taken; `complete(ticket, results)` when it ended (with [] when it
    failed or was cancelled, so later batches are not held back); returns every result that is
    now next in line, in ticket order. Event-loop only (not thread-safe).
    """

    def __init__(self) -> None:
        self._issued = 0
        self._next = 0
        self._done: dict[int, list[T]] = {}

    def ticket(self) -> int:
        self._issued += 1
        return self._issued - 1

    def complete(self, ticket: int, results: list[T]) -> list[T]:
        if not self._next <= ticket < self._issued or ticket in self._done:
            raise ValueError(f"ticket {ticket} is not outstanding")
        self._done[ticket] = results
        ready: list[T] = []
        while self._next in self._done:
            ready.extend(self._done.pop(self._next))
            self._next += 1
        return ready

    @property
    def held(self) -> int:
        """Batches finished but waiting for an earlier one."""
        return len(self._done)
