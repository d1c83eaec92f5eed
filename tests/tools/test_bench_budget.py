"""tools/bench/budget.py: the stage budget, the counters' cost and the scaling knee, from given data."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.core.metrics import Metrics
from daemon.core.stagecpu import STAGES
from tools.bench.budget import (
    LOOP,
    READERS,
    STAGE_THREADS,
    WORKERS,
    budget,
    budget_lines,
    knee,
    overhead,
    plot_scaling,
    role_seconds,
    scaling_points,
    stage_seconds,
    thread_role,
)
from tools.bench.phase import snapshot


def _segment(on: bool, published: int, cpu_s: float, seconds: float = 10.0, **stages: float) -> dict[str, object]:
    return {
        "on": on,
        "seconds": seconds,
        "published": published,
        "cpu_s": cpu_s,
        "stage_cpu_s": stages,
        "role_cpu_s": {WORKERS: 12.0, LOOP: 1.0, READERS: 2.0},
    }


def test_stage_seconds_reads_the_daemons_counter() -> None:
    metrics = Metrics()
    metrics.stage_cpu_seconds.labels(stage="decode").inc(1.5)
    metrics.stage_cpu_seconds.labels(stage="redis").inc(0.25)
    got = stage_seconds(snapshot(metrics))
    assert got["decode"] == 1.5 and got["redis"] == 0.25 and got["session_run"] == 0.0


def test_every_stage_has_its_thread() -> None:
    assert set(STAGE_THREADS) == set(STAGES)


def test_thread_roles() -> None:
    assert thread_role("beltsight-infer-640-0*") == WORKERS
    assert thread_role("source-*") == READERS
    assert thread_role("bench-daemon") == LOOP
    # the JPEG encoders' stages are timed on their own threads, so their CPU is charged there
    assert thread_role("beltsight-snapshots") == STAGE_THREADS["snapshot"] != LOOP
    assert thread_role("beltsight-capture") == STAGE_THREADS["capture"] != LOOP
    assert thread_role("beltsight-clips") == STAGE_THREADS["clip"] != LOOP
    assert thread_role("native (ORT pool, FFmpeg)") == "native (ORT pool, FFmpeg)"
    assert role_seconds(
        {"source-*": (1.0, 0.0), "beltsight-infer-640-0*": (2.0, 0.1), "beltsight-infer-640-1*": (3.0, 0.1)}
    ) == {
        READERS: 1.0,
        WORKERS: 5.0,
    }


def test_budget_uses_only_the_on_segments() -> None:
    segments = [
        _segment(True, 100, 20.0, session_run=10.0, decode=1.0, tracking=0.2, redis=0.3),
        _segment(False, 110, 19.0),  # off: counters read nothing, and must not dilute the budget
        _segment(True, 100, 20.0, session_run=10.0, decode=1.0, tracking=0.2, redis=0.3),
    ]
    b = budget(segments, cores=2)
    assert b["seconds"] == 20.0 and b["frames"] == 200
    run = b["stages"]["session_run"]
    assert run["cpu_s"] == 20.0 and run["ms_per_frame"] == 100.0
    assert run["machine_pct"] == 50.0  # 20 CPU s of 2 cores x 20 s
    assert b["stages"]["tracking"]["of_session_run_pct"] == 2.0
    assert b["stages"]["decode"]["thread"] == READERS
    # what the stages leave unexplained per thread role: workers 24 CPU s, 20 of it timed
    assert b["untimed_by_thread"][WORKERS]["cpu_s"] == 4.0
    assert b["untimed_by_thread"][LOOP]["cpu_s"] == pytest.approx(2.0 - 0.4 - 0.6)
    assert b["stages_machine_pct"] == pytest.approx(100 * 23.0 / 40, abs=0.01)


def test_overhead_pairs_each_on_segment_with_its_neighbour() -> None:
    segments = [
        _segment(True, 100, 10.0),
        _segment(False, 100, 9.0),
        _segment(True, 90, 10.0),
        _segment(False, 100, 10.0),
        _segment(True, 100, 10.0),  # the last one pairs with the off segment before it
    ]
    got = overhead(segments)
    assert got["pairs"] == 3
    assert got["fps_ratios"] == [1.0, 0.9, 1.0]
    assert got["fps_on_over_off"] == 1.0
    assert got["cpu_per_frame_ratios"] == [round(10 / 9, 3), round((10 / 90) / (10 / 100), 3), 1.0]


def test_overhead_without_off_segments_has_no_ratio() -> None:
    got = overhead([_segment(True, 100, 10.0)])
    assert got["pairs"] == 0 and got["fps_on_over_off"] is None


def test_budget_lines_name_every_timed_stage() -> None:
    segments = [_segment(True, 100, 20.0, session_run=10.0, decode=1.0), _segment(False, 100, 20.0)]
    segments[0]["decoded"] = 400
    text = "\n".join(budget_lines(budget(segments, 2), 95.0, overhead(segments)))
    assert "session_run" in text and "decode" in text and "bare run" in text
    assert "decode per decoded frame: 2.50 ms" in text
    assert "snapshot" not in text  # a hook with nothing recorded


def _phase(fps: float, offered: float, rss: float) -> dict[str, object]:
    return {"fps_total": fps, "fps_offered": offered, "rss_mb_end": rss, "latency_ms": {"p99": 100.0}}


def test_knee_is_the_last_count_served_in_full() -> None:
    phases = {1: _phase(15, 15, 200), 2: _phase(29.5, 30, 210), 4: _phase(40, 60, 230), 8: _phase(41, 120, 260)}
    points = scaling_points(phases, {1: 50.0, 2: 50.0, 4: 50.0, 8: 50.0})
    assert [p["served"] for p in points] == [1.0, 0.983, 0.667, 0.342]
    assert points[2]["ratio_to_bare"] == 0.8
    assert knee(points) == 2
    assert knee(points[2:]) is None


def test_knee_stops_at_the_first_count_not_served() -> None:
    phases = {1: _phase(15, 15, 200), 2: _phase(20, 30, 210), 4: _phase(60, 60, 230)}
    assert knee(scaling_points(phases, dict.fromkeys(phases, 50.0))) == 1


def test_plot_scaling_writes_a_png(tmp_path: Path) -> None:
    phases = {1: _phase(15, 15, 200), 2: _phase(20, 30, 210)}
    path = tmp_path / "scaling.png"
    plot_scaling(path, scaling_points(phases, dict.fromkeys(phases, 25.0)), "test")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
