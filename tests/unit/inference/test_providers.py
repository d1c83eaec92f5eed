"""How many sessions per model size run side by side, and how many ORT threads each gets."""

from __future__ import annotations

import os

import pytest

from daemon.config.engine import EngineConfig
from daemon.inference import providers
from daemon.inference.providers import intra_op_threads, lane_workers, session_options, worker_batch


@pytest.mark.parametrize(
    ("cores", "cfg", "workers", "threads"),
    [
        (2, EngineConfig(providers=["cpu"]), 2, 1),  # CPU: one single-threaded session per core
        (16, EngineConfig(providers=["cpu"]), 4, 4),  # at most 4 auto workers, the cores shared out
        (1, EngineConfig(providers=["cpu"]), 1, 0),  # one worker keeps ORT's default
        (16, EngineConfig(providers=["cuda", "cpu"]), 1, 0),  # a GPU scales by batch, not by workers
        (2, EngineConfig(providers=["cpu"], workers=1), 1, 0),
        (8, EngineConfig(providers=["cpu"], workers=3), 3, 2),
        (8, EngineConfig(providers=["cpu"], workers=2, intra_op_threads=1), 2, 1),  # explicit wins
        (8, EngineConfig(providers=["cuda"], workers=2), 2, 4),  # their CPU fallbacks share the cores
    ],
)
def test_workers_and_threads(
    monkeypatch: pytest.MonkeyPatch, cores: int, cfg: EngineConfig, workers: int, threads: int
) -> None:
    monkeypatch.setattr(providers, "cpu_cores", lambda: cores)
    assert lane_workers(cfg) == workers
    assert intra_op_threads(cfg) == threads
    assert session_options(cfg).intra_op_num_threads == threads


@pytest.mark.parametrize(
    ("cfg", "expected"),
    [
        (EngineConfig(providers=["cpu"]), 1),  # CPU: each free session takes the freshest frame
        (EngineConfig(providers=["cuda", "cpu"]), None),  # GPU: the worker's share of the cameras
        (EngineConfig(providers=["cpu"], worker_batch=3), 3),  # explicit wins
        (EngineConfig(providers=["cuda"], worker_batch=2), 2),
    ],
)
def test_worker_batch(cfg: EngineConfig, expected: int | None) -> None:
    assert worker_batch(cfg) == expected


def test_cpu_cores_follows_the_affinity_mask() -> None:
    assert providers.cpu_cores() == len(os.sched_getaffinity(0)) >= 1


@pytest.mark.parametrize("shared", [True, False])
def test_sessions_share_one_cpu_arena_only_when_turned_on(shared: bool) -> None:
    assert EngineConfig(providers=["cpu"]).shared_cpu_arena is False  # per-session arenas by default
    opts = session_options(EngineConfig(providers=["cpu"], shared_cpu_arena=shared))
    keys = ("session.use_env_allocators", "session.use_device_allocator_for_initializers")
    if shared:  # weights stay out of the shared arena, which never shrinks
        assert [opts.get_session_config_entry(k) for k in keys] == ["1", "1"]
    else:
        for key in keys:
            with pytest.raises(RuntimeError, match="does not have configuration"):
                opts.get_session_config_entry(key)
