"""The soak's plan and verdict on crafted inputs (`tools.soak.faults.schedule`, `tools.soak.verdict`):
faults one at a time and none in the quiet tail, the cameras taken in turn; RSS flat against RSS that
keeps growing after the baseline; fds that end above the baseline."""

from __future__ import annotations

import itertools

from tools.soak.faults import FAULT_DOWN_S, QUIET_TAIL_S, schedule
from tools.soak.stats import Sample
from tools.soak.verdict import checks, memory, summarize


def test_schedule_runs_one_fault_at_a_time_and_none_in_the_quiet_tail() -> None:
    kinds = ["camera_kill", "redis_kill", "http_flood"]
    plan = schedule(kinds, ["cam0", "cam1"], duration_s=600, first_fault_s=30, fault_every_s=15)
    assert [k for _, k, _ in plan[:4]] == ["camera_kill", "redis_kill", "http_flood", "camera_kill"]
    assert [t for t, k, _ in plan if k == "camera_kill"][:2] == [30, 30 + 15 + 15 + 25]  # every_s or down_s + 5
    assert [target for _, k, target in plan if k == "camera_kill"][:3] == ["cam0", "cam1", "cam0"]
    assert {target for _, k, target in plan if k != "camera_kill"} == {"redis", "health"}
    for (t, kind, _), (t_next, _, _) in itertools.pairwise(plan):
        assert t + FAULT_DOWN_S[kind] < t_next
    t, kind, _ = plan[-1]
    assert t + FAULT_DOWN_S[kind] < 600 - QUIET_TAIL_S
    assert schedule([], ["cam0"], duration_s=600, first_fault_s=30, fault_every_s=15) == []


def samples(rss: list[float], fds: list[int], every_s: float = 10) -> list[Sample]:
    return [
        Sample(every_s * (i + 1), r, f, 20, {}, {"cam0": 0.0}, {}, extra={"healthz_ms": 3.0})
        for i, (r, f) in enumerate(zip(rss, fds, strict=True))
    ]


def judge(run: list[Sample]) -> dict[str, object]:
    mem = memory(run, duration_s=600, baseline_s=300, sample_s=10)
    checked = checks(run, mem, daemon_rc=0, streams={}, objects={}, plc_result={})
    return summarize(run, mem, checked, daemon_rc=0, flood_counts=[])


def test_flat_rss_passes_and_growth_after_the_baseline_fails() -> None:
    flat = judge(samples([100.0] * 60, [40] * 60))
    assert flat["pass"] and flat["rss_growth_pct"] == 0 and flat["baseline_t_s"] == [300, 350]
    # growth in the warm-up only (before baseline_s) is the allocators' high-water mark, not a leak
    warm = judge(samples([50.0 + i for i in range(30)] + [100.0] * 30, [40] * 60))
    assert warm["pass"], warm["checks"]
    leak = judge(samples([100.0 + 0.5 * max(0, i - 29) for i in range(60)], [40] * 60))
    checked = leak["checks"]
    assert isinstance(checked, dict)
    assert not leak["pass"] and not checked["rss_growth_pct<=2"] and not checked["rss_trend_pct<=2"]


def test_fds_above_the_baseline_at_the_end_fail() -> None:
    run = judge(samples([100.0] * 60, [40] * 59 + [41]))
    checked = run["checks"]
    assert isinstance(checked, dict)
    assert not run["pass"] and not checked["fds_no_growth"] and checked["threads_no_growth"]
