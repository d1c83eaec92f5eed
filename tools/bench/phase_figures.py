"""What a daemon phase of `python -m tools.bench` measured: the metric snapshots read (`sample`,
`batch_counts`), each camera's entries read back from Redis (`camera_figures`) and the phase's
summary (`summarize_phase`: throughput, latency, inference, CPU and RSS over the window)."""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np
import redis

from daemon.publish.seam import decode_entry
from tools.bench.procs import split_window
from tools.kit.stats import percentile, percentiles
from tools.kit.streams import read_stream


def sample(snap: dict[Any, float], name: str, **labels: str) -> float:
    return sum(v for (n, lab), v in snap.items() if n == name and all(dict(lab).get(k) == x for k, x in labels.items()))


def batch_counts(s0: dict[Any, float], s1: dict[Any, float]) -> dict[int, int]:
    cum = {
        int(float(dict(lab)["le"])): v - s0.get((n, lab), 0.0)
        for (n, lab), v in s1.items()
        if n == "beltsight_batch_size_bucket" and dict(lab)["le"] != "+Inf"
    }
    sizes = sorted(cum)
    return {
        b: int(cum[b] - (cum[sizes[i - 1]] if i else 0))
        for i, b in enumerate(sizes)
        if cum[b] - (cum[sizes[i - 1]] if i else 0) > 0
    }


def summarize_phase(
    k: int,
    args: argparse.Namespace,
    client: redis.Redis,
    streams: dict[str, str],
    samples: list[dict[str, Any]],
    window: tuple[float, float],
    snaps: tuple[dict[Any, float], ...],
    engine: dict[str, Any],
) -> dict[str, Any]:
    """The phase's figures: `window` (t0, t1) the measured seconds, `snaps` the metrics at its start, its
    end and after the daemon stopped."""
    t0, t1 = window
    s0, s1, _s2 = snaps
    per_cam: dict[str, Any] = {}
    series: dict[str, Any] = {}
    all_t, all_lat, all_exp = [], [], []
    for cam, stream in streams.items():
        per_cam[cam], (t, lat, exp) = camera_figures(client, cam, stream, args.fps, window, snaps)
        all_t.append(t)
        all_lat.append(lat)
        all_exp.append(exp)
        series[cam] = {"t": (t - t0).round(3).tolist(), "latency_ms": lat.tolist()}
    t, lat, exp = np.concatenate(all_t), np.concatenate(all_lat), np.concatenate(all_exp)
    first, last = split_window(t, lat, t0, t1)
    n_inf, sum_inf, cpu_inf = inference_figures(s0, s1, str(args.model))
    images = sum(b * n for b, n in batch_counts(s0, s1).items())
    rss = [s["rss_mb"] for s in samples]
    rss_start = next((s["rss_mb"] for s in samples if s["t"] >= 10), rss[0] if rss else float("nan"))
    return {
        "cameras": k,
        "seconds": round(t1 - t0, 2),
        "engine": engine,
        "fps_total": round(len(t) / (t1 - t0), 2),
        "per_camera": per_cam,
        "latency_ms": {
            **percentiles(lat, (50, 95, 99), 1),
            "max": percentile(lat, 100, 1),
            **{f"first_{k}": v for k, v in percentiles(first, (50, 99), 1).items()},
            **{f"last_{k}": v for k, v in percentiles(last, (50, 99), 1).items()},
        },
        "latency_vs_expected_capture_ms": percentiles(exp, (50, 95, 99), 1),
        "batch_sizes": batch_counts(s0, s1),
        "inference_ms_mean": round(1000 * sum_inf / n_inf, 2) if n_inf else float("nan"),
        "session_run_busy_pct": round(100 * sum_inf / (t1 - t0), 1),
        "fps_offered": k * args.fps,
        "inference_cpu_s": round(cpu_inf, 3),
        "inference_cpu_ms_per_image": round(1000 * cpu_inf / images, 2) if images else float("nan"),
        "cpu_pct_mean": round(float(np.mean([s["cpu_pct"] for s in samples])), 1),
        "servers_cpu_pct_mean": round(float(np.mean([s["servers_cpu_pct"] for s in samples])), 1),
        "others_cpu_pct_mean": round(float(np.mean([s["others_cpu_pct"] for s in samples])), 1),
        "rss_mb_start": rss_start,
        "rss_mb_end": rss[-1] if rss else float("nan"),
        "samples": samples,
        "series": series,
    }


def startup_figures(client: redis.Redis, streams: dict[str, str], span: tuple[float, float]) -> dict[str, Any]:
    """Freshness over `span` (from the moment every camera had published to the window's start: the
    daemon's start-up, --settle seconds), reported apart from the window's steady state."""
    up, t0 = span
    lats = []
    for stream in streams.values():
        entries = [decode_entry(f) for _id, f in read_stream(client, stream)]
        rows = np.array([(e["published_ms"], e["captured_ms"]) for e in entries], dtype=np.float64).reshape(-1, 2)
        rows = rows[(rows[:, 0] >= up * 1000) & (rows[:, 0] < t0 * 1000)]
        lats.append(rows[:, 0] - rows[:, 1])
    lat = np.concatenate(lats) if lats else np.empty(0)
    return {
        "seconds": round(t0 - up, 2),
        "entries": len(lat),
        "latency_ms": {**percentiles(lat, (50, 99), 1), "max": percentile(lat, 100, 1)} if len(lat) else None,
    }


def camera_figures(
    client: redis.Redis,
    cam: str,
    stream: str,
    fps: int,
    window: tuple[float, float],
    snaps: tuple[dict[Any, float], ...],
) -> tuple[dict[str, Any], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """One camera's figures over the window (fps, latency percentiles, drops; totals at the end), and its
    entries' publish times (s), latencies and latencies against the expected capture time (ms)."""
    t0, t1 = window
    s0, s1, s2 = snaps
    entries = [decode_entry(f) for _id, f in read_stream(client, stream)]  # also checks the schema
    rows = np.array([(e["published_ms"], e["captured_ms"], e["seq"]) for e in entries], dtype=np.float64)
    anchor = (rows[:, 1] - rows[:, 2] * 1000 / fps).min()  # stream start, as in the naive loop
    rows = rows[(rows[:, 0] >= t0 * 1000) & (rows[:, 0] <= t1 * 1000)]
    t, lat = rows[:, 0] / 1000, rows[:, 0] - rows[:, 1]
    exp = rows[:, 0] - (anchor + rows[:, 2] * 1000 / fps)
    # seq counts decoded frames: a reader that skipped (`behind`) is further along its stream than seq says
    skipped = sample(s1, "beltsight_frames_dropped_total", camera=cam, reason="behind")
    behind_end = float(rows[-1, 0] - (anchor + (rows[-1, 2] + skipped) * 1000 / fps)) if len(rows) else float("nan")
    figures = {
        "fps": round(len(rows) / (t1 - t0), 2),
        "entries": len(rows),
        "latency_ms": percentiles(lat, (50, 95, 99), 1),
        "behind_stream_at_end_ms": round(behind_end, 1),
        "dropped_window": {
            r: sample(s1, "beltsight_frames_dropped_total", camera=cam, reason=r)
            - sample(s0, "beltsight_frames_dropped_total", camera=cam, reason=r)
            for r in ("superseded", "stale", "no_model", "engine_error", "buffer_full")
        },
        "decoded_total": sample(s2, "beltsight_frames_decoded_total", camera=cam),
        "published_total": sample(s2, "beltsight_entries_published_total", camera=cam),
        "xlen_total": client.xlen(stream),
        "dropped_total": {
            dict(lab)["reason"]: v
            for (n, lab), v in s2.items()
            if n == "beltsight_frames_dropped_total" and dict(lab)["camera"] == cam
        },
    }
    return figures, (t, lat, exp)


def inference_figures(s0: dict[Any, float], s1: dict[Any, float], model: str) -> tuple[float, float, float]:
    """The model's session.run calls, their seconds and their CPU seconds between two snapshots."""
    n_inf = sample(s1, "beltsight_inference_seconds_count", model=model) - sample(
        s0, "beltsight_inference_seconds_count", model=model
    )
    sum_inf = sample(s1, "beltsight_inference_seconds_sum", model=model) - sample(
        s0, "beltsight_inference_seconds_sum", model=model
    )
    cpu_inf = sample(s1, "beltsight_inference_cpu_seconds_total", model=model) - sample(
        s0, "beltsight_inference_cpu_seconds_total", model=model
    )
    return n_inf, sum_inf, cpu_inf


def crossings(
    args: argparse.Namespace, s0: dict[Any, float], s1: dict[Any, float], seconds: float
) -> dict[str, Any] | None:
    """The crossings counted over the window (and the snapshots written, with --snapshots); None without --lines."""
    if not getattr(args, "lines", False):
        return None
    count = sample(s1, "beltsight_object_events_total", event="crossed") - sample(
        s0, "beltsight_object_events_total", event="crossed"
    )
    written = None
    if getattr(args, "snapshots", False):
        written = int(sample(s1, "beltsight_snapshots_written_total") - sample(s0, "beltsight_snapshots_written_total"))
    return {"count": int(count), "per_s": round(count / seconds, 2), "snapshots": written}


def thread_figures(
    threads0: dict[str, tuple[float, float]],
    threads1: dict[str, tuple[float, float]],
    seconds: float,
    inference_cpu_s: float,
) -> dict[str, Any]:
    """Per thread role, CPU and wait in % of the window (roles under 0.5 % left out); the inference workers'
    CPU, and session.run's share of it."""
    busy = {
        g: (cpu - threads0.get(g, (0.0, 0.0))[0], wait - threads0.get(g, (0.0, 0.0))[1])
        for g, (cpu, wait) in sorted(threads1.items())
    }
    busy = {g: v for g, v in busy.items() if v[0] > 0.005 * seconds}
    cpu_pct = {g: round(100 * cpu / seconds, 1) for g, (cpu, _) in busy.items()}
    wait_pct = {g: round(100 * wait / seconds, 1) for g, (_, wait) in busy.items() if not math.isnan(wait)}
    workers_cpu = sum(cpu for g, (cpu, _) in busy.items() if g.startswith("beltsight-infer"))
    share = inference_cpu_s / workers_cpu if workers_cpu else None
    return {
        "thread_cpu_pct": cpu_pct,
        "thread_wait_pct": wait_pct,
        "workers_cpu_pct": round(100 * workers_cpu / seconds, 1),
        "session_run_share_of_workers_cpu": None if share is None else round(share, 3),
    }
