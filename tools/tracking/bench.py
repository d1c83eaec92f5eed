"""Tracker cost against inference: is tracking a rounding error next to the model?

    python -m tools.tracking.bench [--cameras 4] [--parts 50] [--weak 0.1] [--frames 300] [--fps 30]
        [--model models/conveyor-640.onnx] [--runs 20]

1. Synthetic detections: per camera, ``--parts`` parts on 5 lanes riding a belt along +x (300 px/s, 1 px
   noise, wrapping at the right edge so tracks keep ending and starting), plus ``--weak`` x parts weak
   detections a frame (scores 0.1-0.25, under the camera's threshold: what the daemon hands the tracker's
   second stage; the demo detector gives about 0.06 per published box on the eval clips), half of them a
   second box on a part, half clutter anywhere; two counting lines per camera,
   one with two gates (calibrated, so every crossing gets ETAs). Times ``CameraTracker.update`` over
   ``--frames`` frames for each camera, in this process (the first 3 inference runs are a warm-up).
2. ONNX Runtime (CPU provider, default threads, idle threads not spinning) on the model with a batch of
   ``--cameras`` images, interleaved with the tracker in ``--runs`` rounds (a shared machine's load then
   hits both alike).
3. Prints a table and the ratio tracker / inference per frame of all cameras (goal <= 2 %): the median
   of the rounds' ratios, and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

from daemon.tracking.seam import CameraTracker, GateSpec, LineSpec
from tools.kit.stats import percentile

W, H = 1280, 720
LABELS = ("bolt", "hex_nut", "washer", "l_bracket")
GOAL = 0.02


Feed = list[tuple[int, np.ndarray, np.ndarray, np.ndarray, int]]


def _frames(parts: int, frames: int, fps: float, seed: int, weak_frac: float = 0.0) -> Feed:
    """Per frame: capture ms, boxes, scores, classes (the published ones, then the weak ones) and how many are weak."""
    rng = np.random.default_rng(seed)
    lanes = 5
    per_lane = -(-parts // lanes)
    spacing = W / per_lane
    x0 = np.array([k * spacing + 13.0 * j for j in range(lanes) for k in range(per_lane)])[:parts]
    y = np.array([100.0 + 120.0 * j for j in range(lanes) for _ in range(per_lane)])[:parts]
    cls = rng.integers(0, len(LABELS), parts)
    out = []
    for k in range(frames):
        t = k / fps
        cx = (x0 + 300.0 * t) % W
        boxes = np.stack([cx - 25, y - 20, cx + 25, y + 20], axis=1) + rng.normal(0, 1.0, (parts, 4))
        scores = rng.uniform(0.3, 0.95, parts)
        n_weak = int(rng.poisson(weak_frac * parts)) if weak_frac > 0 else 0
        on_part = rng.integers(0, parts, n_weak // 2)
        n_clutter = n_weak - on_part.size
        corner = np.column_stack([rng.uniform(0, W - 50, n_clutter), rng.uniform(0, H - 40, n_clutter)])
        size = np.array([50.0, 40.0])
        weak_boxes = np.concatenate(
            [boxes[on_part] + rng.normal(0, 4.0, (on_part.size, 4)), np.column_stack([corner, corner + size])]
        )
        out.append(
            (
                1_700_000_000_000 + round(t * 1000),
                np.concatenate([boxes, weak_boxes]),
                np.concatenate([scores, rng.uniform(0.1, 0.25, n_weak)]),
                np.concatenate([cls, rng.integers(0, len(LABELS), n_weak)]),
                n_weak,
            )
        )
    return out


def _trackers(cameras: int) -> list[CameraTracker]:
    lines = [
        LineSpec("entry", (0.3, 0.0), (0.3, 1.0)),
        LineSpec("exit", (0.8, 0.0), (0.8, 1.0), gates=(GateSpec("flap-a", 400.0), GateSpec("flap-b", 900.0))),
    ]
    return [CameraTracker(f"cam{cam}", lines, mm_per_px=0.5) for cam in range(cameras)]


def _session(model: Path, batch: int) -> tuple[ort.InferenceSession, dict[str, np.ndarray]]:
    options = ort.SessionOptions()
    # ORT's idle intra-op threads spin after each run and would take the cores from the tracker timed next
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    inp = session.get_inputs()[0]
    shape = [d if isinstance(d, int) else batch for d in inp.shape]
    return session, {inp.name: np.random.default_rng(0).random(shape, dtype=np.float32)}


def run(
    cameras: int, parts: int, frames: int, fps: float, model: Path, runs: int, weak: float = 0.0
) -> dict[str, float]:
    """Interleaved rounds (one inference batch, then frames/runs frames of every camera's tracker), so both
    see the same load on a shared machine; the ratio is the median of the rounds' ratios."""
    feeds = [_frames(parts, frames, fps, seed=cam, weak_frac=weak) for cam in range(cameras)]
    trackers = _trackers(cameras)
    session, feed = _session(model, cameras)
    for _ in range(3):
        session.run(None, feed)
    update_ms: list[float] = []
    infer_ms: list[float] = []
    ratios: list[float] = []
    events = 0
    per_round = max(1, frames // runs)
    for start in range(0, frames, per_round):
        t0 = time.perf_counter()
        session.run(None, feed)
        infer_ms.append((time.perf_counter() - t0) * 1000.0)
        round_ms = 0.0
        chunk = range(start, min(frames, start + per_round))
        for k in chunk:
            for tracker, frames_of in zip(trackers, feeds, strict=True):
                ms, boxes, scores, cls, n_weak = frames_of[k]
                labels = [LABELS[c] for c in cls]
                t1 = time.perf_counter()
                upd = tracker.update(ms, W, H, boxes, scores, cls, labels, weak=n_weak)
                dt_ms = (time.perf_counter() - t1) * 1000.0
                events += len(upd.events)
                update_ms.append(dt_ms)
                round_ms += dt_ms
        ratios.append(round_ms / len(chunk) / infer_ms[-1])
    return {
        "update_mean_ms": statistics.fmean(update_ms),
        "update_p50_ms": statistics.median(update_ms),
        "update_p99_ms": percentile(update_ms, 99),
        "events": float(events),
        "infer_median_ms": statistics.median(infer_ms),
        "infer_min_ms": min(infer_ms),
        "rounds": float(len(ratios)),
        "ratio": statistics.median(ratios),
        "ratio_of_medians": statistics.median(update_ms) * cameras / statistics.median(infer_ms),
        "input": float(feed[next(iter(feed))].shape[-1]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cameras", type=int, default=4)
    ap.add_argument("--parts", type=int, default=50)
    ap.add_argument("--weak", type=float, default=0.1, help="weak detections a frame per part (0: none)")
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--fps", type=float, default=30.0)
    ap.add_argument("--model", type=Path, default=Path("models/conveyor-640.onnx"))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = ap.parse_args()
    r = run(args.cameras, args.parts, args.frames, args.fps, args.model, args.runs, args.weak)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    rows = [
        ("machine", f"{os.cpu_count()} CPUs (load {load:.1f}), ORT {ort.__version__} CPUExecutionProvider"),
        (
            "tracker update, 1 camera",
            f"mean {r['update_mean_ms']:.3f} ms  p50 {r['update_p50_ms']:.3f}  "
            f"p99 {r['update_p99_ms']:.3f}  ({args.parts} parts + {args.weak:g} weak each, "
            f"{args.frames} frames)",
        ),
        (
            f"tracker, {args.cameras} cameras / frame",
            f"mean {r['update_mean_ms'] * args.cameras:.3f} ms  ({int(r['events'])} events)",
        ),
        (
            f"inference, batch {args.cameras}",
            f"median {r['infer_median_ms']:.1f} ms  min {r['infer_min_ms']:.1f}  "
            f"({args.model.name}, {int(r['input'])} px, {int(r['rounds'])} runs)",
        ),
        (
            "tracker / inference",
            f"{r['ratio'] * 100:.2f} % (median of interleaved rounds; medians: "
            f"{r['ratio_of_medians'] * 100:.2f} %)  goal <= {GOAL * 100:.0f} %: "
            f"{'met' if r['ratio'] <= GOAL else 'NOT met'}",
        ),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    if args.json:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
