"""The per-stage CPU budget of a daemon phase, the instrumentation's own cost, and the scaling mode.

The daemon phase alternates segments with the stage counters on and off (`--stage-ab-seconds`);
the budget comes from the "on" segments: each stage's thread CPU (`beltsight_stage_cpu_seconds_total`)
per published frame and as a share of the machine (all cores), and per thread group what the
stages leave unexplained (the event loop's asyncio and redis-py plumbing, the readers' demux).
The "on"/"off" pairs give the instrumentation's cost as ratios in the same run.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from daemon.core.seam import STAGES

METRIC = "beltsight_stage_cpu_seconds_total"

LOOP, WORKERS, READERS = "event loop", "inference workers", "camera readers"
SNAPSHOTS, CAPTURE, CLIPS = "snapshot writer", "capture writer", "clip writer"
STAGE_THREADS = {
    "demux": READERS,
    "decode": READERS,
    "handoff": READERS,
    "batching": LOOP,
    "letterbox": WORKERS,
    "session_run": WORKERS,
    "postprocess": WORKERS,
    "tracking": LOOP,
    "encode": LOOP,
    "redis": LOOP,
    "snapshot": SNAPSHOTS,
    "capture": CAPTURE,
    "clip": CLIPS,
}
"""The thread group each stage runs on (snapshot and capture: their JPEG encoders' own threads; clip:
the clip writer's muxing thread)."""


def thread_role(group: str) -> str:
    """`tools.bench.procs.thread_times_s`' group name -> the role it plays in the daemon."""
    if group.startswith("beltsight-infer"):
        return WORKERS
    if group.startswith("source-"):
        return READERS
    if group in ("bench-daemon", "MainThread"):
        return LOOP
    return {"beltsight-snapshots": SNAPSHOTS, "beltsight-capture": CAPTURE, "beltsight-clips": CLIPS}.get(group, group)


def stage_seconds(snap: Mapping[tuple[str, tuple[tuple[str, str], ...]], float]) -> dict[str, float]:
    """Each stage's CPU seconds in a metrics snapshot (`tools.bench.phase.snapshot`)."""
    out = dict.fromkeys(STAGES, 0.0)
    for (name, labels), value in snap.items():
        if name == METRIC:
            out[dict(labels)["stage"]] += value
    return out


def role_seconds(threads: Mapping[str, tuple[float, float]]) -> dict[str, float]:
    """Thread groups' CPU seconds (`thread_times_s()`), summed by role."""
    out: dict[str, float] = {}
    for group, (cpu, _wait) in threads.items():
        role = thread_role(group)
        out[role] = out.get(role, 0.0) + cpu
    return out


def diff(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, float]:
    return {k: b.get(k, 0.0) - a.get(k, 0.0) for k in set(a) | set(b)}


def budget(segments: Sequence[Mapping[str, Any]], cores: int) -> dict[str, Any]:
    """The stage budget over the "on" segments: per stage CPU s, ms per published frame, % of the
    machine (`cores` x the segments' seconds) and % of session_run; per role the CPU the stages
    left unexplained."""
    on = [s for s in segments if s["on"]]
    seconds = sum(s["seconds"] for s in on)
    frames = sum(s["published"] for s in on)
    decoded = sum(s.get("decoded", 0) for s in on)
    stages = {k: sum(s["stage_cpu_s"].get(k, 0.0) for s in on) for k in STAGES}
    roles: dict[str, float] = {}
    for s in on:
        for role, cpu in s["role_cpu_s"].items():
            roles[role] = roles.get(role, 0.0) + cpu
    machine = seconds * cores
    run = stages["session_run"]
    rows = {
        k: {
            "thread": STAGE_THREADS[k],
            "cpu_s": round(v, 3),
            "ms_per_frame": round(1000 * v / frames, 3) if frames else None,
            "machine_pct": round(100 * v / machine, 2) if machine else None,
            "of_session_run_pct": round(100 * v / run, 2) if run else None,
        }
        for k, v in stages.items()
    }
    unexplained = {
        role: {
            "cpu_s": round(cpu - sum(v for k, v in stages.items() if STAGE_THREADS[k] == role), 3),
            "thread_cpu_s": round(cpu, 3),
            "machine_pct": round(
                100 * (cpu - sum(v for k, v in stages.items() if STAGE_THREADS[k] == role)) / machine, 2
            )
            if machine
            else None,
        }
        for role, cpu in sorted(roles.items())
    }
    return {
        "seconds": round(seconds, 2),
        "frames": frames,
        "decoded": decoded,
        "cores": cores,
        "stages": rows,
        "untimed_by_thread": unexplained,
        "stages_machine_pct": round(100 * sum(stages.values()) / machine, 2) if machine else None,
    }


def overhead(segments: Sequence[Mapping[str, Any]], key: str = "on") -> dict[str, Any]:
    """What alternated (`key`: "on", the counters; "ab", an experiment) costs or saves: each
    segment with it against the segment without it next to it (the later one, else the earlier),
    as ratios of published fps and of process CPU per published frame; medians over the pairs
    (the host's load changes between segments)."""
    fps_ratios: list[float] = []
    cpu_ratios: list[float] = []
    for i, seg in enumerate(segments):
        if not seg.get(key):
            continue
        near = [segments[j] for j in (i + 1, i - 1) if 0 <= j < len(segments) and segments[j].get(key) is False]
        if not near or not seg["published"] or not near[0]["published"]:
            continue
        off = near[0]
        fps_ratios.append((seg["published"] / seg["seconds"]) / (off["published"] / off["seconds"]))
        cpu_ratios.append((seg["cpu_s"] / seg["published"]) / (off["cpu_s"] / off["published"]))
    return {
        "pairs": len(fps_ratios),
        "fps_on_over_off": round(statistics.median(fps_ratios), 3) if fps_ratios else None,
        "cpu_per_frame_on_over_off": round(statistics.median(cpu_ratios), 3) if cpu_ratios else None,
        "fps_ratios": [round(r, 3) for r in fps_ratios],
        "cpu_per_frame_ratios": [round(r, 3) for r in cpu_ratios],
    }


def budget_lines(b: Mapping[str, Any], bare_cpu_ms: float | None, over: Mapping[str, Any]) -> list[str]:
    """The budget as a table, the bare model's session.run CPU per image beside it."""
    lines = [
        f"stage CPU budget ({b['seconds']} s with the counters on, {b['frames']} frames published, "
        f"{b['cores']} cores = the machine):",
        f"{'stage':<13}{'thread':<19}{'ms/frame':>10}{'% machine':>11}{'% of run':>10}",
    ]
    for name, row in b["stages"].items():
        if not row["cpu_s"] and name in ("snapshot", "capture"):
            continue  # hooks with nothing recorded (off in this run)
        lines.append(
            f"{name:<13}{row['thread']:<19}{_num(row['ms_per_frame']):>10}{_num(row['machine_pct']):>11}"
            f"{_num(row['of_session_run_pct']):>10}"
        )
    if bare_cpu_ms is not None:
        lines.append(f"{'bare run':<13}{'(same layout)':<19}{bare_cpu_ms:>10}")
    decoded = b.get("decoded")
    if decoded:
        per = 1000 * b["stages"]["decode"]["cpu_s"] / decoded
        lines.append(f"decode per decoded frame: {per:.2f} ms ({decoded} decoded; the readers decode every frame)")
    for role, row in b["untimed_by_thread"].items():
        if not row["thread_cpu_s"]:
            continue
        lines.append(
            f"untimed on {role}: {row['machine_pct']}% of the machine ({row['cpu_s']} of {row['thread_cpu_s']} CPU s)"
        )
    lines.append(f"timed stages in all: {b['stages_machine_pct']}% of the machine")
    lines.append(
        f"counters' cost, on / off in alternating segments ({over['pairs']} pairs, medians): "
        f"fps {over['fps_on_over_off']}, process CPU per frame {over['cpu_per_frame_on_over_off']}"
    )
    return lines


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


# -- scaling --------------------------------------------------------------------------------------
def scaling_points(phases: Mapping[int, Mapping[str, Any]], bare_main: Mapping[int, float]) -> list[dict[str, Any]]:
    """Per camera count: fps, offered, served share, ratio to the bare model at its batch sizes, RSS."""
    out = []
    for k in sorted(phases):
        ph = phases[k]
        bare = bare_main[k]
        out.append(
            {
                "cameras": k,
                "fps_total": ph["fps_total"],
                "fps_offered": ph["fps_offered"],
                "served": round(ph["fps_total"] / ph["fps_offered"], 3) if ph["fps_offered"] else None,
                "ratio_to_bare": round(ph["fps_total"] / bare, 3) if bare else None,
                "rss_mb": ph["rss_mb_end"],
                "latency_p99_ms": ph["latency_ms"]["p99"],
            }
        )
    return out


def knee(points: Sequence[Mapping[str, Any]], served_floor: float = 0.95) -> int | None:
    """The largest camera count up to which every count was served (published >= `served_floor`
    x offered): beyond it the daemon drops frames and throughput stops growing with cameras.
    None when even the first count was not served."""
    best = None
    for p in sorted(points, key=lambda p: p["cameras"]):
        if p["served"] is None or p["served"] < served_floor:
            break
        best = p["cameras"]
    return best


def plot_scaling(path: Path, points: Sequence[Mapping[str, Any]], title: str) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    ks = [p["cameras"] for p in points]
    fig, (top, mid, bottom) = plt.subplots(3, 1, figsize=(9, 10), sharex=True)
    top.plot(ks, [p["fps_total"] for p in points], "o-", label="daemon published fps")
    top.plot(ks, [p["fps_offered"] for p in points], "^:", color="grey", label="offered fps")
    top.set(ylabel="frames/s", title=title)
    top.legend(fontsize=8)
    mid.plot(ks, [p["ratio_to_bare"] for p in points], "o-", label="daemon / bare model at its batch sizes")
    mid.plot(ks, [p["served"] for p in points], "s--", label="published / offered")
    k = knee(points)
    if k is not None:
        mid.axvline(k, color="red", lw=0.8, ls=":", label=f"knee: {k} cameras")
    mid.set(ylabel="ratio", ylim=(0, 1.1))
    mid.legend(fontsize=8)
    bottom.plot(ks, [p["rss_mb"] for p in points], "o-", color="C2")
    bottom.set(xlabel="cameras", ylabel="RSS (MB)", xscale="log", xticks=ks, xticklabels=[str(k) for k in ks])
    fig.tight_layout()
    fig.savefig(path, dpi=100)
