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
- cameras are taken least-recently-served first (then oldest-waiting), so none starves and none is
  favoured when load exceeds capacity;
- a live frame older than `max_age_ms` when its batch starts is dropped and counted
  (`stale`), never inferred late.
At most `engine.workers` batches per model size are in flight (one per session): while they
run, newer frames replace older ones in the slots, so the next batch is always built from the
freshest frames. `InOrder` hands their results on in the order the batches were taken, so a
camera's detections reach Redis in frame order even when a later, smaller batch ends first.

Thermal throttling (`set_share`, from the governor in `daemon.thermal.governor`): below a share of 1 a
worker rests after each batch for `busy x (1 - share) / share` before it takes the next, so each
session runs at most `share` of the time (the GPU draws proportionally less power); the frames
that arrive meanwhile replace older ones in the slots, so the batch after the rest is built from
the freshest frames, oldest-waiting camera first as always. At share 0 (paused) every frame that
arrives is taken and dropped (`thermal`) instead of waiting; cameras stay connected. At share 1
nothing of this runs: the batcher behaves exactly as without a governor.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from dataclasses import dataclass
from typing import Generic, TypeVar

from daemon.batching.hub import FrameHub, Pending
from daemon.core.clock import SYSTEM_CLOCK, Clock
from daemon.core.frames import Frame
from daemon.core.metrics import Metrics


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
        *,
        clock: Clock = SYSTEM_CLOCK,
        metrics: Metrics | None = None,
    ) -> None:
        """`clock`: the hub's (deadlines compare its `waiting_since`); `metrics` counts the
        frames dropped while paused (reason `thermal`)."""
        self.size = size
        self._hub = hub
        self._policy = policy
        self._loop = loop
        self._clock = clock
        self._wakeup = asyncio.Event()
        self._stopping = False
        self._waiting = 0  # workers inside next_batch; changed on the loop only
        self._metrics = metrics
        self._share = 1.0
        self._share_changed = asyncio.Event()
        hub.subscribe(size, self.notify)

    @property
    def share(self) -> float:
        return self._share

    def set_share(self, share: float) -> None:
        """The admitted share of full speed (1.0 full, 0.0 paused); on the loop. Resting and
        waiting workers re-plan at once."""
        share = min(1.0, max(0.0, share))
        if share != self._share:
            self._share = share
            self._share_changed.set()
            self._wakeup.set()

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
        self._share_changed.set()

    async def next_batch(self, busy_s: float = 0.0) -> list[Frame]:
        """The next batch to run; empty only after `stop()`, when no frame is left. Several
        workers may wait here at once: each batch goes to one of them. Cancellation propagates.

        `busy_s`: how long the caller's previous batch kept it busy (it ended just now); below
        a share of 1 the caller first rests in proportion (see the module docstring)."""
        if busy_s > 0 and self._share < 1.0:
            await self._rest(busy_s)
        self._waiting += 1
        try:
            return await self._next_batch()
        finally:
            self._waiting -= 1

    async def _rest(self, busy_s: float) -> None:
        """Idle for `busy_s x (1 - share) / share` from now, re-planned when the share changes;
        not at all once paused (the drop loop takes over) or stopping."""
        started = self._clock.monotonic()
        while not self._stopping and 0.0 < self._share < 1.0:
            remaining = started + busy_s * (1.0 - self._share) / self._share - self._clock.monotonic()
            if remaining <= 0:
                return
            self._share_changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._share_changed.wait(), remaining)

    def _drop_while_paused(self) -> None:
        for frame in self._hub.take(self.size, 1 << 30, math.inf):
            if self._metrics is not None:
                self._metrics.dropped(frame.camera_id, "thermal")

    async def _next_batch(self) -> list[Frame]:
        while True:
            self._wakeup.clear()
            if self._share <= 0.0 and not self._stopping:
                self._drop_while_paused()
                await self._wakeup.wait()
                continue
            pending = self._hub.pending(self.size)
            if self._stopping and pending.count == 0:
                self._wakeup.set()  # wake the other waiting workers too
                return []
            decision = decide(pending, self._clock.monotonic(), self._policy)
            if decision.run or (self._stopping and pending.count):
                limit = self._policy.max_batch if self._stopping else self._policy.share(pending.cameras)
                frames = self._hub.take(self.size, limit, self._policy.max_age_s)
                if frames:
                    return frames
                continue
            timeout = None if decision.wake_at is None else max(0.0, decision.wake_at - self._clock.monotonic())
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
    def issued(self) -> int:
        """Tickets handed out so far."""
        return self._issued

    @property
    def published(self) -> int:
        """Tickets whose results were released (every ticket below this one)."""
        return self._next

    @property
    def held(self) -> int:
        """Batches finished but waiting for an earlier one."""
        return len(self._done)
