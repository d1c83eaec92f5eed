"""Fault injection around real engines, for tests and `python -m tools.soak`.

A GPU that fails mid-run cannot exist on a machine without one, so the "primary" in tests is
a real CPU `Engine` behind `FaultyEngine`, which raises `InferenceError` while its switch is
on. `FaultyFactory` is an `EngineBuilder` that builds real CPU engines for every placement,
wraps every non-CPU placement ("configured", "cuda": the primary) in a `FaultyEngine` sharing
one switch (a broken GPU breaks the freshly built probe too), can make builds fail or take
longer, and records what was built.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from daemon.inference.engine import EngineFactory, InferenceError
from daemon.inference.model_file import ModelInfo
from daemon.inference.protocols import InferenceEngine
from daemon.inference.providers import EngineError, Placement

HostArray = npt.NDArray[np.float32]


class FaultSwitch:
    """Shared on/off state of an injected fault (thread-safe)."""

    def __init__(self) -> None:
        self._on = threading.Event()

    def on(self) -> None:
        self._on.set()

    def off(self) -> None:
        self._on.clear()

    @property
    def is_on(self) -> bool:
        return self._on.is_set()


PRETEND_CUDA = ("CUDAExecutionProvider", "CPUExecutionProvider")


class DelegatingEngine:
    """A real engine behind the engine interface; subclasses change `run` (slower, hanging...)."""

    def __init__(self, inner: InferenceEngine) -> None:
        self.inner = inner

    @property
    def max_batch(self) -> int:
        return self.inner.max_batch

    @property
    def providers(self) -> tuple[str, ...]:
        return self.inner.providers

    def run(self, batch: HostArray) -> HostArray:
        return self.inner.run(batch)

    def close(self) -> None:
        self.inner.close()


class FaultyEngine:
    """An engine that raises InferenceError while `switch` is on, else delegates to `inner`.

    `providers` reports `pretend_providers` when given (a CPU engine standing in for a GPU one).
    """

    def __init__(
        self,
        inner: InferenceEngine,
        switch: FaultSwitch | None = None,
        *,
        name: str = "faulty",
        pretend_providers: tuple[str, ...] | None = None,
    ) -> None:
        self.inner = inner
        self.switch = switch or FaultSwitch()
        self.name = name
        self.pretend_providers = pretend_providers
        self.runs = 0
        self.failures = 0
        self.closed = False

    @property
    def max_batch(self) -> int:
        return self.inner.max_batch

    @property
    def providers(self) -> tuple[str, ...]:
        return self.pretend_providers or self.inner.providers

    def run(self, batch: HostArray) -> HostArray:
        self.runs += 1
        if self.switch.is_on:
            self.failures += 1
            raise InferenceError(f"{self.name}: injected fault (CUDA error: an illegal memory access)")
        return self.inner.run(batch)

    def close(self) -> None:
        self.closed = True
        self.inner.close()


@dataclass
class BuildRecord:
    placement: Placement
    reason: str
    engine: InferenceEngine
    build_s: float


@dataclass
class FaultyFactory:
    """Builds real engines with `inner` at placement "cpu"; primaries come wrapped in FaultyEngine
    that reports `primary_providers` (CUDA first by default, as a GPU primary would)."""

    inner: EngineFactory
    switch: FaultSwitch = field(default_factory=FaultSwitch)
    fail_builds: FaultSwitch = field(default_factory=FaultSwitch)
    during_build: Callable[[str], None] | None = None
    """Called in the builder's thread with the build's reason, before it returns (a build kept in
    progress until the test saw what it waits for)."""
    primary_providers: tuple[str, ...] | None = PRETEND_CUDA
    builds: list[BuildRecord] = field(default_factory=list)

    def build(self, info: ModelInfo, placement: Placement = "configured", reason: str = "startup") -> InferenceEngine:
        started = time.perf_counter()
        if self.fail_builds.is_on and placement != "cpu":
            raise EngineError(f"model {info.name}: injected build failure (no CUDA device)")
        engine: InferenceEngine = self.inner.build(info, "cpu", reason)
        if placement != "cpu":
            name = f"{reason}-{len(self.builds)}"
            engine = FaultyEngine(engine, self.switch, name=name, pretend_providers=self.primary_providers)
        if self.during_build is not None:
            self.during_build(reason)
        self.builds.append(BuildRecord(placement, reason, engine, time.perf_counter() - started))
        return engine

    def reasons(self) -> list[str]:
        return [b.reason for b in self.builds]
