"""ServingEngine's breaker and rebuild policies with fake engines, a fake clock and a fake memory probe.

Every engine a test sees is a `FakeEngine` whose output is filled with its own id, so an output
says which session served the batch. Builds happen in the engine's real builder thread;
`wait_builds()` makes the tests deterministic.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from daemon.config.engine import BreakerConfig, EngineConfig, RebuildConfig
from daemon.core.frames import StatusEvent
from daemon.core.memory import MemorySample, read_rss_mb
from daemon.core.metrics import Metrics
from daemon.inference.engine import InferenceError
from daemon.inference.layouts.yolov8 import yolov8_layout
from daemon.inference.model_file import ModelInfo
from daemon.inference.providers import EngineError, Placement
from daemon.inference.serving import ServingEngine
from tests.support.waits import wait_until

HostArray = npt.NDArray[np.float32]

INFO = ModelInfo(
    path=Path("fake.onnx"),
    name="fake@1",
    size=416,
    names=("bolt",),
    strides=(8, 16, 32),
    layout="yolov8",
    input_name="images",
    output_name="output0",
    num_classes=1,
    anchors=3549,
    batch=None,
    model_layout=yolov8_layout(416, 1),
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return 1.7e9 + self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeEngine:
    def __init__(self, ident: int, *, failing: bool = False, providers: tuple[str, ...] = ("CUDAExecutionProvider",)):
        self.ident = ident
        self.failing = failing
        self.runs = 0
        self.closed = False
        self._providers = providers

    @property
    def max_batch(self) -> int:
        return 4

    @property
    def providers(self) -> tuple[str, ...]:
        return self._providers

    def run(self, batch: HostArray) -> HostArray:
        assert not self.closed, f"engine {self.ident} used after close"
        self.runs += 1
        if self.failing:
            raise InferenceError(f"engine {self.ident}: CUDA failure")
        return np.full((batch.shape[0], 1, 1), float(self.ident), dtype=np.float32)

    def close(self) -> None:
        self.closed = True


def is_closed(engine: FakeEngine) -> bool:
    return engine.closed  # a call, so mypy does not carry an earlier narrowing of `closed` over


@dataclass
class FakeFactory:
    next_id: int = 100
    primaries_fail: bool = False
    fail_builds: bool = False
    gate: threading.Event = field(default_factory=threading.Event)
    entered: threading.Event = field(default_factory=threading.Event)
    built: list[tuple[Placement, str, FakeEngine]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.gate.set()

    def build(self, info: ModelInfo, placement: Placement = "configured", reason: str = "startup") -> FakeEngine:
        self.entered.set()
        assert self.gate.wait(60)
        if self.fail_builds:
            raise EngineError("injected build failure")
        cpu = placement == "cpu"
        engine = FakeEngine(
            self.next_id,
            failing=self.primaries_fail and not cpu,
            providers=("CPUExecutionProvider",) if cpu else ("CUDAExecutionProvider", "CPUExecutionProvider"),
        )
        self.next_id += 1
        self.built.append((placement, reason, engine))
        return engine

    def last(self, reason: str) -> FakeEngine:
        return [e for _, r, e in self.built if r == reason][-1]


@dataclass
class Rig:
    engine: ServingEngine
    primary: FakeEngine
    factory: FakeFactory
    clock: FakeClock
    metrics: Metrics
    events: list[StatusEvent]
    memory: list[MemorySample]

    def run(self, n: int = 2) -> float:
        """Run one batch; return the id of the engine that served it."""
        out = self.engine.run(np.zeros((n, 3, 4, 4), dtype=np.float32))
        assert out.shape == (n, 1, 1) and np.all(out == out.flat[0])
        return float(out.flat[0])

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]

    def gauge(self) -> float | None:
        return self.metrics.registry.get_sample_value("beltsight_breaker_open", {"model": "416"})


def make_rig(
    providers: list[str] | None = None,
    breaker: BreakerConfig | None = None,
    rebuild: RebuildConfig | None = None,
    *,
    retry_s: float = 30.0,
    primary: FakeEngine | None = None,
    factory: FakeFactory | None = None,
) -> Rig:
    cfg = EngineConfig.model_validate(
        {
            "providers": providers or ["cuda", "cpu"],
            "breaker": breaker or BreakerConfig(fail_max=3, reset_timeout_s=30),
            "rebuild": rebuild or RebuildConfig(),
        }
    )
    primary = primary or FakeEngine(1)
    factory, clock, metrics = factory or FakeFactory(), FakeClock(), Metrics()
    events: list[StatusEvent] = []
    memory = [MemorySample(500.0, 1000.0)]
    engine = ServingEngine(
        factory,
        INFO,
        cfg,
        primary,
        metrics=metrics,
        on_status=events.append,
        clock=clock,
        memory_probe=lambda: memory[-1],
        memory_check_s=5.0,
        rebuild_retry_s=retry_s,
    )
    engine.wait_builds(60)
    return Rig(engine, primary, factory, clock, metrics, events, memory)


@pytest.fixture
def rig() -> Iterator[Rig]:
    r = make_rig()
    yield r
    r.engine.close()


# -- breaker ------------------------------------------------------------------------------------


def test_fallback_is_built_in_the_background_at_startup(rig: Rig) -> None:
    assert [(p, r) for p, r, _ in rig.factory.built] == [("cpu", "breaker_fallback")]
    assert rig.engine.breaker_state == "closed"
    assert rig.gauge() == 0
    assert rig.run() == 1


def test_opens_after_fail_max_and_every_failed_batch_is_served_by_the_fallback(rig: Rig) -> None:
    fallback = rig.factory.last("breaker_fallback").ident
    rig.primary.failing = True
    assert [rig.run() for _ in range(2)] == [fallback, fallback]
    assert rig.engine.breaker_state == "closed"
    assert rig.kinds() == []
    assert rig.run() == fallback  # the batch that trips the breaker
    assert rig.engine.breaker_state == "open"
    assert rig.kinds() == ["breaker_open"]
    assert "3 consecutive batches failed" in rig.events[0].detail
    assert rig.gauge() == 1
    assert rig.run() == fallback
    assert rig.primary.runs == 3  # the open breaker no longer calls the failed primary
    rig.engine.wait_builds(60)
    assert rig.primary.closed  # a failed GPU session is not reused
    assert rig.engine.providers == ("CPUExecutionProvider",)


def trip(rig: Rig) -> None:
    rig.primary.failing = True
    for _ in range(3):
        rig.run()
    assert rig.engine.breaker_state == "open"


def test_probe_after_reset_timeout_uses_a_freshly_built_primary(rig: Rig) -> None:
    trip(rig)
    fallback = rig.factory.last("breaker_fallback").ident
    rig.clock.advance(29.9)
    rig.run()
    rig.engine.wait_builds(60)
    assert "breaker_probe" not in [r for _, r, _ in rig.factory.built]
    rig.clock.advance(0.1)
    assert rig.run() == fallback  # starts the probe build; this batch is still on the CPU
    rig.engine.wait_builds(60)
    placement, reason, fresh = rig.factory.built[-1]
    assert (placement, reason) == ("configured", "breaker_probe")
    assert rig.run() == fresh.ident  # the probe batch
    assert rig.engine.breaker_state == "closed"
    assert rig.kinds() == ["breaker_open", "breaker_closed"]
    assert rig.gauge() == 0
    assert rig.run() == fresh.ident
    assert rig.primary.runs == 3


def test_a_failed_probe_reopens_for_another_reset_timeout(rig: Rig) -> None:
    trip(rig)
    rig.factory.primaries_fail = True  # the GPU is still broken
    rig.clock.advance(30)
    rig.run()
    rig.engine.wait_builds(60)
    fallback = rig.factory.last("breaker_fallback").ident
    assert rig.run() == fallback  # the probe fails; its batch is retried on the fallback
    assert rig.engine.breaker_state == "open"
    assert rig.kinds() == ["breaker_open", "breaker_open"]
    assert "probe batch failed" in rig.events[1].detail
    rig.engine.wait_builds(60)
    assert rig.factory.last("breaker_probe").closed
    rig.clock.advance(29)
    rig.run()
    rig.engine.wait_builds(60)
    assert [r for _, r, _ in rig.factory.built].count("breaker_probe") == 1
    rig.factory.primaries_fail = False
    rig.clock.advance(1)
    rig.run()
    rig.engine.wait_builds(60)
    assert rig.run() == rig.factory.last("breaker_probe").ident
    assert rig.kinds() == ["breaker_open", "breaker_open", "breaker_closed"]


def test_a_failed_probe_build_rearms_the_timer(rig: Rig) -> None:
    trip(rig)
    rig.factory.fail_builds = True
    rig.clock.advance(30)
    rig.run()
    rig.engine.wait_builds(60)
    fallback = rig.factory.last("breaker_fallback").ident
    assert rig.run() == fallback  # picks up the failed build, re-arms the timer
    assert rig.engine.breaker_state == "open"
    assert rig.kinds() == ["breaker_open"]
    rig.factory.fail_builds = False
    rig.clock.advance(20)
    rig.run()
    rig.engine.wait_builds(60)
    assert "breaker_probe" not in [r for _, r, _ in rig.factory.built]
    rig.clock.advance(10)
    rig.run()
    rig.engine.wait_builds(60)
    assert rig.run() == rig.factory.last("breaker_probe").ident
    assert rig.engine.breaker_state == "closed"


@pytest.mark.parametrize(
    ("providers", "breaker", "session_providers"),
    [
        (["cpu"], BreakerConfig(), ("CPUExecutionProvider",)),
        (["cuda", "cpu"], BreakerConfig(enabled=False), ("CUDAExecutionProvider",)),
        (["cuda", "cpu"], BreakerConfig(), ("CPUExecutionProvider",)),  # allow_fallback gave it the CPU
    ],
)
def test_no_breaker_on_a_cpu_primary_or_when_disabled(
    providers: list[str], breaker: BreakerConfig, session_providers: tuple[str, ...]
) -> None:
    rig = make_rig(providers, breaker, primary=FakeEngine(1, providers=session_providers))
    try:
        assert rig.engine.breaker_state is None
        assert rig.factory.built == []  # no fallback session
        rig.primary.failing = True
        for _ in range(5):
            with pytest.raises(InferenceError):
                rig.run()
        assert rig.kinds() == []
        assert rig.gauge() is None
    finally:
        rig.engine.close()


# -- rebuilds -----------------------------------------------------------------------------------


def test_rebuild_every_n_frames_swaps_between_batches_and_closes_the_old_session() -> None:
    rig = make_rig(["cpu"], rebuild=RebuildConfig(every_frames=4))
    try:
        assert rig.run(2) == 1
        assert rig.run(2) == 1  # 4 frames: a rebuild starts after this batch
        rig.engine.wait_builds(60)
        placement, reason, fresh = rig.factory.built[-1]
        assert (placement, reason) == ("configured", "rebuild_frames")
        assert not rig.primary.closed
        assert rig.run(1) == fresh.ident  # swapped in before this batch
        rig.engine.wait_builds(60)
        assert is_closed(rig.primary)  # after the swap, in the builder thread
        assert rig.kinds() == ["session_rebuilt"]
        assert "rebuild_frames" in rig.events[0].detail
        rig.run(3)  # 4 frames on the new session
        rig.engine.wait_builds(60)
        assert rig.run(1) == rig.factory.built[-1][2].ident != fresh.ident
    finally:
        rig.engine.close()


def test_rebuild_every_n_seconds() -> None:
    rig = make_rig(["cpu"], rebuild=RebuildConfig(every_s=60))
    try:
        rig.clock.advance(59)
        rig.run()
        rig.engine.wait_builds(60)
        assert rig.factory.built == []
        rig.clock.advance(1)
        rig.run()
        rig.engine.wait_builds(60)
        assert rig.run() == rig.factory.last("rebuild_interval").ident
    finally:
        rig.engine.close()


@pytest.mark.parametrize("grown", [MemorySample(651.0, 1000.0), MemorySample(500.0, 1151.0)])
def test_rebuild_when_rss_or_device_memory_grows(grown: MemorySample) -> None:
    rig = make_rig(["cpu"], rebuild=RebuildConfig(max_growth_mb=150))
    try:
        rig.memory.append(MemorySample(640.0, 1140.0))  # below the limit
        rig.clock.advance(5)
        rig.run()
        rig.engine.wait_builds(60)
        assert rig.factory.built == []
        rig.memory.append(grown)
        rig.run()  # checked at most every 5 s
        rig.engine.wait_builds(60)
        assert rig.factory.built == []
        rig.clock.advance(5)
        rig.run()
        rig.engine.wait_builds(60)
        assert rig.run() == rig.factory.last("rebuild_memory").ident
        assert rig.kinds() == ["session_rebuilt"]
    finally:
        rig.engine.close()


def test_batches_keep_running_on_the_old_session_while_a_rebuild_is_in_flight() -> None:
    rig = make_rig(["cpu"], rebuild=RebuildConfig(every_frames=2))
    try:
        rig.factory.gate.clear()  # builds block until the gate opens
        assert rig.run(2) == 1  # starts the rebuild
        for _ in range(20):
            assert rig.run(2) == 1  # none of these waits for the build
        rig.factory.gate.set()
        rig.engine.wait_builds(60)
        assert rig.run(2) == rig.factory.last("rebuild_frames").ident
    finally:
        rig.factory.gate.set()
        rig.engine.close()


def test_a_failed_rebuild_keeps_serving_and_is_retried_later() -> None:
    rig = make_rig(["cpu"], rebuild=RebuildConfig(every_frames=2), retry_s=30)
    try:
        rig.factory.fail_builds = True
        rig.run(2)
        rig.engine.wait_builds(60)
        assert rig.run(2) == 1  # picks up the failure, keeps the serving session
        rig.factory.fail_builds = False
        rig.clock.advance(29)
        rig.run(2)
        rig.engine.wait_builds(60)
        assert rig.factory.built == []
        rig.clock.advance(1)
        rig.run(2)
        rig.engine.wait_builds(60)
        assert rig.run(2) == rig.factory.last("rebuild_frames").ident
        rig.engine.wait_builds(60)
        assert rig.primary.closed
        assert rig.kinds() == ["session_rebuilt"]
    finally:
        rig.engine.close()


def test_close_closes_every_session_and_a_build_still_in_flight() -> None:
    rig = make_rig(rebuild=RebuildConfig(every_frames=2))
    rig.factory.gate.clear()
    rig.factory.entered.clear()
    rig.run(2)
    assert rig.factory.entered.wait(60)  # a rebuild is now blocked in the builder thread
    rig.engine.close()
    assert rig.primary.closed and rig.factory.last("breaker_fallback").closed
    rig.factory.gate.set()

    def late() -> list[FakeEngine]:
        return [e for _, r, e in rig.factory.built if r == "rebuild_frames"]

    wait_until(lambda: bool(late()) and late()[0].closed, 60, "the late build closed")
    assert late() and late()[0].closed  # finished after close(), closed by the done-callback
    with pytest.raises(InferenceError):
        rig.run()


def test_a_failing_status_listener_does_not_stop_the_lane(rig: Rig) -> None:
    def broken(event: StatusEvent) -> None:
        raise RuntimeError("redis gone")

    rig.engine._on_status = broken
    trip(rig)
    assert rig.run() == rig.factory.last("breaker_fallback").ident


def test_memory_samples_read_rss_and_compare_what_both_have(tmp_path: Path) -> None:
    rss = read_rss_mb()
    assert rss is not None and rss > 10  # this process, from /proc/self/status
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmRSS:\t  204800 kB\n", encoding="ascii")
    assert read_rss_mb(str(status)) == 200.0
    assert read_rss_mb(str(tmp_path / "missing")) is None
    assert MemorySample(300.0, None).growth_mb(MemorySample(200.0, 50.0)) == 100.0
    assert MemorySample(210.0, 400.0).growth_mb(MemorySample(200.0, 100.0)) == 300.0
    assert MemorySample(None).growth_mb(MemorySample(200.0)) is None


def test_while_the_breaker_is_open_the_fallback_is_the_session_that_gets_rebuilt() -> None:
    rig = make_rig(rebuild=RebuildConfig(every_frames=4))
    try:
        trip(rig)  # 3 failed batches of 2 frames, each served by the fallback
        rig.engine.wait_builds(60)
        assert ("cpu", "rebuild_frames") in [(p, r) for p, r, _ in rig.factory.built]
        old_fallback = rig.factory.last("breaker_fallback")
        assert rig.run() == rig.factory.last("rebuild_frames").ident
        rig.engine.wait_builds(60)
        assert old_fallback.closed
        assert rig.kinds() == ["breaker_open", "session_rebuilt"]
    finally:
        rig.engine.close()


# -- the device path: run_device, on_cuda, cuda_stream ---------------------------------------------


class DeviceFakeEngine(FakeEngine):
    """A FakeEngine behind the DeviceEngine interface too: `run_device` answers with minus its id
    (so an output says whether the device path served it), on a stream object of its own."""

    def __init__(
        self, ident: int, *, failing: bool = False, providers: tuple[str, ...] = ("CUDAExecutionProvider",)
    ) -> None:
        super().__init__(ident, failing=failing, providers=providers)
        self.stream = object()
        self.device_runs = 0
        self.synchronized: list[bool] = []

    @property
    def on_cuda(self) -> bool:
        return True

    @property
    def cuda_stream(self) -> object:
        return self.stream

    def run_device(self, batch: HostArray, *, synchronize: bool = True) -> HostArray:
        assert not self.closed, f"engine {self.ident} used after close"
        self.device_runs += 1
        self.synchronized.append(synchronize)
        if self.failing:
            raise InferenceError(f"engine {self.ident}: CUDA failure on the device")
        return np.full((batch.shape[0], 1, 1), -float(self.ident), dtype=np.float32)


@dataclass
class DeviceFakeFactory(FakeFactory):
    def build(self, info: ModelInfo, placement: Placement = "configured", reason: str = "startup") -> FakeEngine:
        engine = super().build(info, placement, reason)
        if placement == "cpu":
            return engine
        device = DeviceFakeEngine(engine.ident, failing=engine.failing, providers=engine.providers)
        self.built[-1] = (placement, reason, device)
        return device


def device_rig(breaker: BreakerConfig | None = None) -> tuple[Rig, DeviceFakeEngine]:
    primary = DeviceFakeEngine(1, providers=("CUDAExecutionProvider", "CPUExecutionProvider"))
    return make_rig(breaker=breaker, primary=primary, factory=DeviceFakeFactory()), primary


def on_cuda(rig: Rig) -> bool:
    return rig.engine.on_cuda  # a call, so mypy does not carry an earlier narrowing over


def run_device(rig: Rig, n: int = 2) -> float:
    out = rig.engine.run_device(np.zeros((n, 3, 4, 4), dtype=np.float32), synchronize=False)
    assert out.shape == (n, 1, 1) and np.all(out == out.flat[0])
    return float(out.flat[0])


def test_run_device_goes_to_the_primarys_run_device_while_the_breaker_is_closed() -> None:
    rig, primary = device_rig()
    try:
        assert rig.engine.on_cuda and rig.engine.cuda_stream is primary.stream
        assert run_device(rig) == -1  # the device path of the primary
        assert primary.device_runs == 1 and primary.runs == 0
        assert primary.synchronized == [False]  # passed on: no host sync
        assert rig.engine.providers == ("CUDAExecutionProvider", "CPUExecutionProvider")
    finally:
        rig.engine.close()


def test_run_device_failures_open_the_breaker_and_then_the_engine_is_not_on_cuda() -> None:
    rig, primary = device_rig()
    try:
        fallback = rig.factory.last("breaker_fallback")
        primary.failing = True
        served = [run_device(rig) for _ in range(3)]  # each failed batch retried on the CPU fallback
        assert served == [fallback.ident] * 3  # the fallback's host `run`, not a device output
        assert fallback.runs == 3 and primary.device_runs == 3
        assert rig.engine.breaker_state == "open" and rig.kinds() == ["breaker_open"]
        assert not rig.engine.on_cuda and rig.engine.cuda_stream is None  # the stage takes its host path
        assert rig.run() == fallback.ident  # ... which the fallback serves
        assert primary.device_runs == 3  # the open breaker no longer calls the failed primary
    finally:
        rig.engine.close()


def test_after_the_probe_closes_the_breaker_the_device_path_is_back() -> None:
    rig, primary = device_rig()
    try:
        primary.failing = True
        for _ in range(3):
            run_device(rig)
        assert not rig.engine.on_cuda
        rig.clock.advance(30)
        rig.run()  # starts the probe build (host path: the breaker is open)
        rig.engine.wait_builds(60)
        probe = rig.factory.last("breaker_probe")
        assert isinstance(probe, DeviceFakeEngine)
        assert not rig.engine.on_cuda  # built, not yet proven: the probe batch comes by the host path
        assert rig.run() == probe.ident and rig.engine.breaker_state == "closed"
        assert on_cuda(rig) and rig.engine.cuda_stream is probe.stream
        assert run_device(rig) == -probe.ident
    finally:
        rig.engine.close()


def test_without_a_breaker_a_failed_device_batch_is_an_inference_error() -> None:
    rig, primary = device_rig(BreakerConfig(enabled=False))
    try:
        assert run_device(rig) == -1
        primary.failing = True
        with pytest.raises(InferenceError):
            run_device(rig)
    finally:
        rig.engine.close()
