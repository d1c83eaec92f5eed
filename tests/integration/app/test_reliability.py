"""The whole daemon (in-process) against real servers while they fail: camera kills, Redis
outages, a daemon restart in the middle of an outage, forced session rebuilds.

Assertions are on what reached Redis and on the daemon's counters: every frame the daemon ran
through a model is in its camera's stream exactly once, in order, and the other cameras keep
publishing while one misbehaves.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from daemon.config.settings import Settings
from daemon.core.metrics import Metrics
from daemon.inference.engine import EngineFactory
from daemon.inference.model_file import ModelInfo
from daemon.inference.protocols import HostArray, InferenceEngine
from daemon.inference.providers import Placement
from tests.support.clips import small_clip
from tests.support.daemon_harness import InProcessDaemon, write_config
from tests.support.faults import DelegatingEngine
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip, RtspServer
from tests.support.metrics import drops, inferred, total
from tests.support.streams import assert_exactly_once_in_order, stream
from tests.support.waits import wait_until


def test_killed_camera_comes_back_and_the_other_camera_never_pauses(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    rtsp_server: Callable[..., RtspServer],
    clip_factory: Callable[..., Clip],
) -> None:
    victim_srv = rtsp_server({"a": small_clip(clip_factory, seed=1).path})
    steady_srv = rtsp_server({"b": small_clip(clip_factory, seed=2).path})
    redis = redis_server()
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[
            {"id": "victim", "url": victim_srv.url("a"), "read_timeout_s": 2.0},
            {"id": "steady", "url": steady_srv.url("b"), "read_timeout_s": 2.0},
        ],
    )
    with InProcessDaemon(config) as d:
        wait_until(
            lambda: len(stream(redis, "victim")) >= 5 and len(stream(redis, "steady")) >= 5, 60, "both cameras", d
        )
        killed_ms = int(time.time() * 1000)
        victim_srv.kill()
        retried = total(d, "beltsight_camera_reconnects_total", camera="victim")

        def steady_since(ms: int) -> int:
            return sum(int(f["captured_ms"]) > ms for _id, f in stream(redis, "steady"))

        # the outage itself: as long as the victim is retried twice and the steady camera publishes
        # 20 frames meanwhile (progress, not a span of wall-clock time)
        wait_until(
            lambda: (
                total(d, "beltsight_camera_reconnects_total", camera="victim") >= retried + 2
                and steady_since(killed_ms) >= 20
            ),
            90,
            "the steady camera's frames while the victim is retried",
            d,
        )
        victim_srv.restart()
        restarted_ms = int(time.time() * 1000)
        wait_until(
            lambda: any(int(f["captured_ms"]) > restarted_ms for _id, f in stream(redis, "victim")),
            90,
            "the restarted camera to publish again",
            d,
        )
        wait_until(lambda: steady_since(restarted_ms) >= 10, 60, "the steady camera past the outage", d)
    # the steady camera published all through the other's outage: frames captured between the kill
    # and the restart (how long a pause may last and how soon the victim is back are
    # performance figures: `python -m tools.soak --faults camera_kill` reports them)
    steady = [int(f["captured_ms"]) for _id, f in stream(redis, "steady")]
    during = [ms for ms in steady if killed_ms < ms <= restarted_ms]
    assert len(during) >= 20, f"the steady camera published {len(during)} frames during the other's outage"


def test_redis_outage_of_10_s_loses_and_duplicates_nothing(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    clip = small_clip(clip_factory, seed=3)
    redis = redis_server(appendonly=True)
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[{"id": "file", "url": str(clip.path), "realtime": True, "loop": True}],
    )
    with InProcessDaemon(config) as d:
        wait_until(lambda: len(stream(redis, "file")) >= 5, 60, "entries before the outage", d)
        redis.kill()
        before = inferred(d, "file")
        # the outage itself: 100 frames inferred while Redis is down (10 s of the 10 fps clip at
        # full speed; longer on a loaded machine, never shorter in frames)
        wait_until(lambda: inferred(d, "file") >= before + 100, 120, "the daemon to process during the outage", d)
        redis.restart()
        done = inferred(d, "file") + 10
        wait_until(lambda: len(stream(redis, "file")) >= done, 120, "the backlog to reach Redis", d)
        d.stop()  # graceful: intake stops, the sink drains
        frames = inferred(d, "file")
        assert total(d, "beltsight_entries_published_total", camera="file") == frames
        assert drops(d, "file", "buffer_full", "shutdown", "engine_error") == 0
    assert_exactly_once_in_order(stream(redis, "file"), frames)


def test_daemon_restarted_during_a_redis_outage_keeps_everything_through_the_spool(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    clip = small_clip(clip_factory, seed=4)
    redis = redis_server(appendonly=True)
    spool = tmp_path / "spool"
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[{"id": "file", "url": str(clip.path), "realtime": True, "loop": True}],
        extra="",
    )
    text = config.read_text().replace("[redis]\n", f'[redis]\nspool_dir = "{spool}"\n', 1)
    config.write_text(text)

    with InProcessDaemon(config) as a:
        wait_until(lambda: len(stream(redis, "file")) >= 3, 60, "daemon A's first entries", a)
        redis.kill()
        start = inferred(a, "file")
        wait_until(lambda: inferred(a, "file") >= start + 20, 120, "daemon A to process during the outage", a)
        a.stop()  # SIGTERM path: what Redis did not take goes to the spool
        a_frames = inferred(a, "file")
        assert drops(a, "file", "buffer_full", "shutdown", "engine_error") == 0
    b_started_ms = int(time.time() * 1000)

    with InProcessDaemon(config) as b:
        wait_until(lambda: inferred(b, "file") >= 10, 60, "daemon B to process during the outage", b)
        redis.restart()
        wait_until(lambda: len(stream(redis, "file")) >= a_frames + inferred(b, "file"), 120, "A's and B's entries", b)
        b.stop()
        b_frames = inferred(b, "file")
        assert drops(b, "file", "buffer_full", "shutdown", "engine_error") == 0

    entries = stream(redis, "file")
    assert_exactly_once_in_order(entries, a_frames + b_frames)
    from_a = [int(f["captured_ms"]) < b_started_ms for _id, f in entries]
    assert from_a == [True] * a_frames + [False] * b_frames, "A's entries are not all there, before B's"


def replay_config(tmp_path: Path, redis_url: str, clip: Clip, rebuild_every_frames: int) -> Path:
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis_url,
        cameras=[{"id": "replay", "url": str(clip.path), "realtime": False}],
    )
    rebuild = f"\n[engine.rebuild]\nevery_frames = {rebuild_every_frames}\n\n[health]"
    config.write_text(config.read_text().replace("\n[health]", rebuild, 1))
    return config


def replay_finished(d: InProcessDaemon) -> bool:
    return bool(d.daemon.sources) and d.daemon.sources[0].finished


def rebuilds(d: InProcessDaemon) -> float:
    return total(d, "beltsight_session_builds_total", reason="rebuild_frames")


def test_forced_rebuilds_every_50_frames_publish_every_frame_once(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    """Rebuilds swap sessions under load without losing, repeating or reordering a frame."""
    clip = small_clip(clip_factory, seconds=12.0, seed=5)
    redis = redis_server()
    with InProcessDaemon(replay_config(tmp_path, redis.url, clip, 50)) as d:
        wait_until(lambda: replay_finished(d), 90, "the replay to reach its end", d)
        wait_until(lambda: len(stream(redis, "replay")) >= inferred(d, "replay"), 30, "the sink to drain", d)
        wait_until(lambda: rebuilds(d) >= 2, 30, "two rebuilds", d)
        d.stop()
        frames = inferred(d, "replay")
        assert drops(d, "replay", "stale", "engine_error", "buffer_full", "shutdown") == 0
        assert drops(d, "replay", "superseded") == 0
    entries = stream(redis, "replay")
    assert frames == clip.frames
    assert [int(f["seq"]) for _id, f in entries] == list(range(frames))
    assert_exactly_once_in_order(entries, frames)


def test_replay_publishes_its_final_frame_while_the_engine_is_busy(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    clip = small_clip(clip_factory, seconds=3.0, seed=6)
    redis = redis_server()
    with InProcessDaemon(replay_config(tmp_path, redis.url, clip, 10)) as d:
        wait_until(lambda: replay_finished(d), 60, "the replay to reach its end", d)
        wait_until(lambda: len(stream(redis, "replay")) >= inferred(d, "replay"), 30, "the sink to drain", d)
        d.stop()
        assert drops(d, "replay", "superseded") == 0
    assert [int(f["seq"]) for _id, f in stream(redis, "replay")] == list(range(clip.frames))


OVERTAKEN_BY = 3
"""Batches the fast worker runs while the slow worker's first batch is held."""


class _HeldEngine(DelegatingEngine):
    """A real engine whose first batch waits until the other worker has run `OVERTAKEN_BY` batches."""

    def __init__(self, inner: InferenceEngine, overtaken: threading.Event) -> None:
        super().__init__(inner)
        self.overtaken = overtaken
        self.held: bool | None = None  # whether the first batch was overtaken (None: none ran yet)

    def run(self, batch: HostArray) -> HostArray:
        if self.held is None:
            self.held = self.overtaken.wait(120)  # a generous deadline; the test fails when it passed
        return self.inner.run(batch)


class _CountingEngine(DelegatingEngine):
    """A real engine that sets `overtaken` once it has run `OVERTAKEN_BY` batches."""

    def __init__(self, inner: InferenceEngine, overtaken: threading.Event) -> None:
        super().__init__(inner)
        self.overtaken = overtaken
        self.batches = 0

    def run(self, batch: HostArray) -> HostArray:
        out = self.inner.run(batch)
        self.batches += 1
        if self.batches >= OVERTAKEN_BY:
            self.overtaken.set()
        return out


@dataclass
class _FirstHeldFactory:
    inner: EngineFactory
    built: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    overtaken: threading.Event = field(default_factory=threading.Event)
    held: list[_HeldEngine] = field(default_factory=list)

    def build(self, info: ModelInfo, placement: Placement = "configured", reason: str = "startup") -> InferenceEngine:
        engine: InferenceEngine = self.inner.build(info, placement, reason)
        with self.lock:  # the workers' sessions are built side by side
            self.built += reason == "first_use"
            first = reason == "first_use" and self.built == 1
            second = reason == "first_use" and self.built == 2
        if first:
            self.held.append(_HeldEngine(engine, self.overtaken))
            return self.held[-1]
        return _CountingEngine(engine, self.overtaken) if second else engine


def test_two_workers_publish_in_frame_order_when_a_later_batch_ends_first(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    """One worker's first batch is held until the other has run three: batches end out of order,
    Redis gets frame order."""
    clip = small_clip(clip_factory, seconds=3.0, seed=11)
    redis = redis_server()
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[{"id": "replay", "url": str(clip.path), "realtime": False}],
        workers=2,
        max_batch=1,
    )
    factories: list[_FirstHeldFactory] = []

    def make_factory(settings: Settings, metrics: Metrics) -> _FirstHeldFactory:
        factories.append(_FirstHeldFactory(EngineFactory(settings.engine, metrics)))
        return factories[0]

    with InProcessDaemon(config, engine_factory=make_factory) as d:
        wait_until(lambda: len(stream(redis, "replay")) >= clip.frames, 90, "every frame in Redis", d)
        lane = d.daemon.lanes[416]
        per_worker = [w.batches for w in lane.workers]
        d.stop()
    assert len(per_worker) == 2 and min(per_worker) >= 1, per_worker  # both workers served batches
    held = factories[0].held
    assert len(held) == 1 and held[0].held is True  # the later batches ended first
    entries = stream(redis, "replay")
    assert_exactly_once_in_order(entries, clip.frames)
    assert [int(f["seq"]) for _id, f in entries] == list(range(clip.frames))
