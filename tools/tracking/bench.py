"""Tracker cost against inference: is tracking a rounding error next to the model?

    python -m tools.tracking.bench [--cameras 4] [--parts 50] [--frames 300] [--fps 30]
        [--model models/conveyor-640.onnx] [--runs 20]

1. Synthetic detections: per camera, ``--parts`` parts on 5 lanes riding a belt along +x (300 px/s, 1 px
   noise, wrapping at the right edge so tracks keep ending and starting), two counting lines per camera,
   one with two gates (calibrated, so every crossing gets ETAs). Times ``CameraTracker.update`` over
   ``--frames`` frames for each camera, in this process.
2. ONNX Runtime (CPU provider, default threads) on the model with a batch of ``--cameras`` images:
   warm-up, then the median of ``--runs`` runs.
3. Prints a table and the ratio tracker / inference per frame of all cameras (goal <= 2 %).
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

from daemon.tracking import CameraTracker, GateSpec, LineSpec

W, H = 1280, 720
LABELS = ("bolt", "hex_nut", "washer", "l_bracket")
GOAL = 0.02


def _frames(parts: int, frames: int, fps: float, seed: int) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
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
        out.append((1_700_000_000_000 + round(t * 1000), boxes, scores, cls))
    return out


def bench_tracker(cameras: int, parts: int, frames: int, fps: float) -> dict[str, float]:
    lines = [
        LineSpec("entry", (0.3, 0.0), (0.3, 1.0)),
        LineSpec("exit", (0.8, 0.0), (0.8, 1.0), gates=(GateSpec("flap-a", 400.0), GateSpec("flap-b", 900.0))),
    ]
    per_frame_ms: list[float] = []
    events = 0
    for cam in range(cameras):
        tracker = CameraTracker(f"cam{cam}", lines, mm_per_px=0.5)
        for ms, boxes, scores, cls in _frames(parts, frames, fps, seed=cam):
            labels = [LABELS[c] for c in cls]
            t0 = time.perf_counter()
            upd = tracker.update(ms, W, H, boxes, scores, cls, labels)
            per_frame_ms.append((time.perf_counter() - t0) * 1000.0)
            events += len(upd.events)
    warm = per_frame_ms[10:] if len(per_frame_ms) > 20 else per_frame_ms
    return {
        "update_mean_ms": statistics.fmean(warm),
        "update_p50_ms": statistics.median(warm),
        "update_p99_ms": float(np.percentile(warm, 99)),
        "events": float(events),
    }


def bench_inference(model: Path, batch: int, runs: int) -> dict[str, float]:
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    inp = session.get_inputs()[0]
    side = [d if isinstance(d, int) else batch for d in inp.shape]
    x = np.random.default_rng(0).random(side, dtype=np.float32)
    for _ in range(3):
        session.run(None, {inp.name: x})
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        session.run(None, {inp.name: x})
        times.append((time.perf_counter() - t0) * 1000.0)
    return {"batch_median_ms": statistics.median(times), "batch_min_ms": min(times), "input": float(side[-1])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cameras", type=int, default=4)
    ap.add_argument("--parts", type=int, default=50)
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--fps", type=float, default=30.0)
    ap.add_argument("--model", type=Path, default=Path("models/conveyor-640.onnx"))
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = ap.parse_args()
    trk = bench_tracker(args.cameras, args.parts, args.frames, args.fps)
    inf = bench_inference(args.model, args.cameras, args.runs)
    all_cams_ms = trk["update_mean_ms"] * args.cameras
    ratio = all_cams_ms / inf["batch_median_ms"]
    rows = [
        ("machine", f"{os.cpu_count()} CPUs, ORT {ort.__version__} CPUExecutionProvider"),
        ("tracker update, 1 camera", f"mean {trk['update_mean_ms']:.3f} ms  p50 {trk['update_p50_ms']:.3f}  "
                                     f"p99 {trk['update_p99_ms']:.3f}  ({args.parts} parts, {args.frames} frames)"),
        (f"tracker, {args.cameras} cameras / frame", f"{all_cams_ms:.3f} ms  ({int(trk['events'])} events)"),
        (f"inference, batch {args.cameras}", f"median {inf['batch_median_ms']:.1f} ms  min {inf['batch_min_ms']:.1f} "
                                             f"({args.model.name}, {int(inf['input'])} px, {args.runs} runs)"),
        ("tracker / inference", f"{ratio * 100:.2f} %  (goal <= {GOAL * 100:.0f} %: "
                                f"{'met' if ratio <= GOAL else 'NOT met'})"),
    ]
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"{k:<{width}}  {v}")
    if args.json:
        print(json.dumps({"tracker": trk, "inference": inf, "ratio": ratio}))


if __name__ == "__main__":
    main()
