"""ServingEngine with the committed 416 detector and real ONNX Runtime CPU sessions, alone and
inside the whole daemon.

The "GPU" primary is a real CPU engine behind `tests.support.faults.FaultyEngine` (a GPU fault cannot
happen on this machine); every output is compared with a separate, directly built session. In
the daemon's test the clip plays in real time, so the breaker's reset timeout passes with frames
still arriving however fast the machine runs them: the test waits until the breaker closes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from daemon.config.engine import BreakerConfig, EngineConfig, RebuildConfig
from daemon.config.settings import Settings
from daemon.core.frames import StatusEvent
from daemon.core.metrics import Metrics
from daemon.inference.engine import Engine, EngineFactory
from daemon.inference.model_file import ModelInfo, load_model_info
from daemon.inference.serving import ServingEngine
from tests.support.clips import small_clip
from tests.support.daemon_harness import InProcessDaemon, write_config
from tests.support.faults import FaultyEngine, FaultyFactory
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip
from tests.support.metrics import drops, inferred, total
from tests.support.streams import assert_exactly_once_in_order, stream
from tests.support.waits import wait_until

MODEL = Path(__file__).resolve().parents[3] / "models" / "conveyor-416.onnx"
SIZE = 416
CPU = EngineConfig(providers=["cpu"], max_batch=2, worker_batch=2, intra_op_threads=1)

pytestmark = pytest.mark.skipif(not MODEL.exists(), reason="models/conveyor-416.onnx is missing")


class ManualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return 1.7e9 + self.now


@pytest.fixture(scope="module")
def info() -> ModelInfo:
    return load_model_info(MODEL, SIZE)


@pytest.fixture(scope="module")
def reference(info: ModelInfo) -> Iterator[Engine]:
    engine = Engine.create(info, CPU, placement="cpu")
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def batches() -> list[npt.NDArray[np.float32]]:
    rng = np.random.default_rng(7)
    return [rng.random((2, 3, SIZE, SIZE), dtype=np.float32) for _ in range(4)]


def builds(metrics: Metrics, reason: str) -> float:
    value = metrics.registry.get_sample_value("beltsight_session_builds_total", {"model": "416", "reason": reason})
    return value or 0.0


def test_injected_faults_open_the_breaker_and_every_batch_is_still_correct(
    info: ModelInfo, reference: Engine, batches: list[npt.NDArray[np.float32]]
) -> None:
    metrics, clock, events = Metrics(), ManualClock(), list[StatusEvent]()
    factory = FaultyFactory(EngineFactory(CPU, metrics))
    primary = factory.build(info, "configured", "startup")
    cfg = EngineConfig(providers=["cuda", "cpu"], max_batch=2, breaker=BreakerConfig(fail_max=2, reset_timeout_s=10))
    engine = ServingEngine(factory, info, cfg, primary, metrics=metrics, on_status=events.append, clock=clock)
    expected = [reference.run(b) for b in batches]
    try:
        engine.wait_builds(60)
        np.testing.assert_array_equal(engine.run(batches[0]), expected[0])
        factory.switch.on()  # the "GPU" fails from now on
        for i in (1, 2, 3):
            np.testing.assert_array_equal(engine.run(batches[i]), expected[i])
        assert engine.breaker_state == "open"
        assert engine.providers == ("CPUExecutionProvider",)
        assert isinstance(primary, FaultyEngine) and primary.failures == 2
        assert [e.kind for e in events] == ["breaker_open"]
        assert metrics.registry.get_sample_value("beltsight_breaker_open", {"model": "416"}) == 1

        clock.now += 10
        np.testing.assert_array_equal(engine.run(batches[0]), expected[0])  # starts the probe build
        engine.wait_builds(60)
        factory.switch.off()  # the GPU is back
        np.testing.assert_array_equal(engine.run(batches[1]), expected[1])  # the probe batch
        assert engine.breaker_state == "closed"
        assert [e.kind for e in events] == ["breaker_open", "breaker_closed"]
        assert metrics.registry.get_sample_value("beltsight_breaker_open", {"model": "416"}) == 0
        assert primary.closed  # the failed session was closed, the probe used a fresh one
        probe = factory.builds[-1]
        assert (probe.placement, probe.reason) == ("configured", "breaker_probe")
        assert isinstance(probe.engine, FaultyEngine) and probe.engine.runs == 1
        assert builds(metrics, "breaker_fallback") == 1 and builds(metrics, "breaker_probe") == 1
    finally:
        engine.close()


@pytest.mark.slow
def test_rebuilds_under_continuous_load_change_no_output_and_block_no_batch(
    info: ModelInfo, reference: Engine, batches: list[npt.NDArray[np.float32]]
) -> None:
    metrics, events = Metrics(), list[StatusEvent]()
    runs = [0]  # batches the lane's worker has run
    blocked: list[str] = []  # rebuilds during which the worker ran nothing

    def hold_the_build(reason: str) -> None:
        """Keep each rebuild in progress until the worker ran 5 batches meanwhile: a run() that
        waited for a build would never let it finish (the wait gives up and records it). How long
        batches take beside a build is measured by `python -m tools.bench.rebuild_stall`."""
        if reason == "startup":
            return
        started = runs[0]
        try:
            wait_until(lambda: runs[0] >= started + 5 or stop.is_set(), 60, "batches run during a rebuild")
        except AssertionError:
            blocked.append(reason)

    factory = FaultyFactory(EngineFactory(CPU, metrics), during_build=hold_the_build)
    primary = factory.build(info, "configured", "startup")
    cfg = CPU.model_copy(update={"rebuild": RebuildConfig(every_frames=8)})
    engine = ServingEngine(factory, info, cfg, primary, metrics=metrics, on_status=events.append)
    expected = [reference.run(b) for b in batches]
    mismatches: list[int] = []
    stop = threading.Event()

    errors: list[Exception] = []

    def worker() -> None:
        i = 0
        while not stop.is_set():
            try:
                out = engine.run(batches[i % len(batches)])
            except Exception as exc:  # reported by the test, not lost in the thread
                errors.append(exc)
                return
            if not np.array_equal(out, expected[i % len(batches)]):
                mismatches.append(i)
            i += 1
            runs[0] = i

    thread = threading.Thread(target=worker, name="test-lane-worker")
    thread.start()
    try:
        wait_until(
            lambda: sum(e.kind == "session_rebuilt" for e in events) >= 3 or bool(errors or blocked), 180, "3 rebuilds"
        )
    finally:
        stop.set()
        thread.join(60)
    try:
        engine.wait_builds(60)
        rebuilt = sum(e.kind == "session_rebuilt" for e in events)
        assert errors == []
        assert blocked == [], "a rebuild in progress held up the lane's batches"
        assert rebuilt >= 3
        assert mismatches == []
        swapped_out = [primary] + [b.engine for b in factory.builds[1:rebuilt]]
        assert all(isinstance(e, FaultyEngine) and e.closed for e in swapped_out)
        assert builds(metrics, "rebuild_frames") >= rebuilt
    finally:
        engine.close()
    engine_threads = [t for t in threading.enumerate() if t.name.startswith(("beltsight-rebuild", "beltsight-breaker"))]
    for t in engine_threads:
        t.join(60)
    assert all(isinstance(b.engine, FaultyEngine) and b.engine.closed for b in factory.builds)


def test_in_the_daemon_a_failing_primary_opens_the_breaker_and_it_closes_again_with_no_frame_lost(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    """Batches go to the CPU fallback while the "GPU" fails, the breaker closes once it is back,
    and every frame inferred meanwhile is in Redis exactly once."""
    clip = small_clip(clip_factory, seconds=4.0, seed=8)
    redis = redis_server()
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[{"id": "replay", "url": str(clip.path), "realtime": True, "loop": True}],
        providers=["cuda", "cpu"],
        extra="[engine.breaker]\nfail_max = 2\nreset_timeout_s = 1.0\n",
    )
    factories: list[FaultyFactory] = []

    def make_factory(settings: Settings, metrics: Metrics) -> FaultyFactory:
        factories.append(FaultyFactory(EngineFactory(settings.engine, metrics)))
        factories[0].switch.on()  # the "GPU" fails from the first batch
        return factories[0]

    def breaker(d: InProcessDaemon) -> str | None:
        """The lane's worst worker's breaker state (each worker has its own breaker)."""
        state = d.daemon.health_report()["models"].get("416", {}).get("breaker")
        return str(state) if state is not None else None

    with InProcessDaemon(config, engine_factory=make_factory) as d:
        wait_until(lambda: total(d, "beltsight_breaker_open", model="416") == 1, 60, "the breaker to open", d)
        wait_until(lambda: len(stream(redis, "replay")) >= 10, 60, "frames served by the fallback", d)
        assert breaker(d) == "open"
        factories[0].switch.off()  # the device recovers; frames keep arriving at the clip's rate
        wait_until(lambda: breaker(d) == "closed", 60, "every worker's breaker to close", d)
        assert total(d, "beltsight_breaker_open", model="416") == 0
        closed_at = inferred(d, "replay")
        wait_until(lambda: inferred(d, "replay") >= closed_at + 10, 60, "frames on the primary again", d)
        d.stop()
        frames = inferred(d, "replay")
        assert total(d, "beltsight_entries_published_total", camera="replay") == frames
        assert drops(d, "replay", "engine_error", "buffer_full", "shutdown") == 0
    assert_exactly_once_in_order(stream(redis, "replay"), frames)
    probes = [b for b in factories[0].builds if b.reason == "breaker_probe"]
    assert probes and all(isinstance(p.engine, FaultyEngine) for p in probes)
    assert sum(p.engine.runs for p in probes if isinstance(p.engine, FaultyEngine)) >= 10  # the primary serves again
    client = redis.client()
    try:
        kinds = [fields["kind"] for _id, fields in client.xrange("beltsight:events")]
    finally:
        client.close()
    assert "breaker_open" in kinds and "breaker_closed" in kinds
    assert kinds.index("breaker_open") < len(kinds) - 1 - kinds[::-1].index("breaker_closed")
