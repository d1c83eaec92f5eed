"""When a session is rebuilt: after `every_frames` frames, after `every_s` seconds, or when RSS or
device memory grew by more than `max_growth_mb` since the last build (sampled every
`memory_check_s`). A failed rebuild is retried after `retry_s`.

One `RebuildPolicy` per session role (primary, CPU fallback) of a serving engine. It only
decides: `after_batch` (the worker thread) says what to start, `grown` (the builder thread)
whether a memory sample asks for a rebuild; the serving engine builds and swaps.
"""

from __future__ import annotations

from collections.abc import Callable

from daemon.config.engine import RebuildConfig
from daemon.core.clock import Clock
from daemon.core.memory import MemorySample

MEMORY_CHECK = "memory_check"
"""What `after_batch` returns when a memory sample is due (the builder thread then calls `grown`)."""


class RebuildPolicy:
    """Counters of one session role since its last build, and its memory baseline.

    Triggers are only checked after batches the role served: an idle role (the fallback while
    the primary serves) is rebuilt, if due, once it serves again.
    """

    def __init__(
        self,
        cfg: RebuildConfig,
        clock: Clock,
        memory_probe: Callable[[], MemorySample],
        *,
        memory_check_s: float = 5.0,
        retry_s: float = 30.0,
    ) -> None:
        self._cfg = cfg
        self._clock = clock
        self._probe = memory_probe
        self._memory_check_s = memory_check_s
        self.retry_s = retry_s
        now = clock.monotonic()
        self._built_at = now
        self._frames = 0
        self._retry_at = 0.0
        self._next_memory_check = now + memory_check_s
        self._baseline: MemorySample | None = None  # read and written in the builder thread only

    # -- worker thread ----------------------------------------------------------------------------
    def after_batch(self, frames: int, *, busy: bool) -> str | None:
        """Count a served batch; the build reason now due (`rebuild_frames`, `rebuild_interval`),
        `MEMORY_CHECK`, or None. `busy`: a build or check of this role is already in flight."""
        self._frames += frames
        now = self._clock.monotonic()
        if busy or now < self._retry_at:
            return None
        if self._cfg.every_frames and self._frames >= self._cfg.every_frames:
            return "rebuild_frames"
        if self._cfg.every_s and now - self._built_at >= self._cfg.every_s:
            return "rebuild_interval"
        if self._cfg.max_growth_mb > 0 and now >= self._next_memory_check:
            self._next_memory_check = now + self._memory_check_s
            return MEMORY_CHECK
        return None

    def swapped(self) -> tuple[int, float]:
        """A rebuilt session went into service: the frames and seconds the old one served."""
        now = self._clock.monotonic()
        served = (self._frames, now - self._built_at)
        self._frames, self._built_at = 0, now
        return served

    def failed(self) -> None:
        """A rebuild failed: the next try after `retry_s`."""
        self._retry_at = self._clock.monotonic() + self.retry_s

    # -- builder thread ---------------------------------------------------------------------------
    def resample(self) -> None:
        """A new baseline (after a build or a close: what the process holds now is the norm)."""
        if self._cfg.max_growth_mb > 0:
            self._baseline = self._probe()

    def grown(self) -> tuple[float, MemorySample] | None:
        """The growth in MiB since the baseline, and the sample, when it is over `max_growth_mb`."""
        sample = self._probe()
        if self._baseline is None:
            self._baseline = sample
            return None
        growth = sample.growth_mb(self._baseline)
        if growth is None or growth <= self._cfg.max_growth_mb:
            return None
        return growth, sample
