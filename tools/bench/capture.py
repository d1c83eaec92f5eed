"""Frame capture: its cost per frame as a ratio against inference, measured on real decoded frames.

    .venv/bin/python -m tools.bench.capture [--frames 20] [--rounds 3] [--fps 10]

It renders H.264 clips with the test kit (`tools.kit.synth`), decodes them with PyAV (yuv420p, as the
daemon's sources hand them over) and, in the same run, times the process's CPU for:
  - inference: the 640 demo model's `session.run` per frame (batch 1, ONNX Runtime on the CPU);
  - decide: `daemon.publish.capture.FrameCapture.offer` for every frame, on the event loop (the
    strategies and their limits; the frames picked queued), with the three strategies configured;
  - write: one capture written by the thread (`FrameCapture.write`: the whole frame as JPEG from its YUV
    planes, the label file, both written whole, the size cap applied) into a temporary directory.
The goal is stated per frame: (decide per frame + write per capture x captures per frame) over
inference per frame, at most 1 %. Captures per frame: the limits allow at most `per_minute` per
strategy and camera, so `--captured-per-min` (default 18: three strategies at 6) over the camera's
`--fps` x 60 frames. Medians over rounds; the machine is shared, so figures are noisy: read the ratio.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path

import av

from daemon.config.seam import CaptureConfig, CaptureStrategy
from daemon.core.seam import Detection, Frame, FrameResult, Letterbox, Metrics
from daemon.ingest.seam import scale
from daemon.publish.seam import FrameCapture, Job
from tools.bench.snapshots import inference_ms
from tools.kit.synth.video import render_video

SIZES = ((640, 480), (1280, 720), (1920, 1080))


def decoded(width: int, height: int, count: int, workdir: Path) -> list[av.VideoFrame]:
    clip = workdir / f"c{width}.mp4"
    render_video(clip, workdir / f"c{width}.json", width, height, 10, count / 10 + 0.2, seed=3)
    with av.open(str(clip)) as container:
        return list(itertools.islice(container.decode(video=0), count))


def frame_and_result(vframe: av.VideoFrame, i: int) -> tuple[Frame, FrameResult]:
    lb = Letterbox.fit(vframe.width, vframe.height, 640)
    frame = Frame("bench", i, 1_700_000_000_000 + i * 100, float(i), lb, partial(scale, vframe, lb))
    w, h = vframe.width, vframe.height
    dets = tuple(
        Detection(k % 4, "part", 0.3 + 0.1 * k, (w * 0.1 * k, h * 0.3, w * 0.1 * k + w * 0.08, h * 0.4), k)
        for k in range(1, 7)
    )
    weak = (Detection(0, "part", 0.15, (w * 0.5, h * 0.5, w * 0.56, h * 0.58)),)
    result = FrameResult("bench", i, frame.captured_ms, frame.captured_mono, w, h, 640, "m", dets, weak=weak)
    return frame, result


def capture(root: Path, queue: int) -> FrameCapture:
    strategies = [
        CaptureStrategy(type="close_to_threshold", epsilon=0.05, probability=0.5),
        CaptureStrategy(type="weak_track"),
        CaptureStrategy(type="random", probability=0.01),
    ]
    cfg = CaptureConfig(dir=root, strategies=strategies, queue=queue, max_mb=64)
    return FrameCapture(cfg, Metrics(), names=["bolt", "hex_nut", "washer", "l_bracket"], thresholds={"bench": 0.5})


def decide_us(frames: list[av.VideoFrame], rounds: int, root: Path) -> float:
    """CPU per frame of `observe` + `offer` on the loop (the capture's queue is never drained here, so
    after the first few frames every pick finds it full: the dearest path, a drop counted)."""
    pairs = [frame_and_result(v, i) for i, v in enumerate(frames)]
    times = []
    for _ in range(rounds):
        cap = capture(root, queue=4)
        started = time.process_time()
        for _ in range(50):
            for frame, result in pairs:
                cap.observe([frame], [result])
                cap.offer(result, result)
        times.append((time.process_time() - started) / (50 * len(pairs)) * 1e6)
    return statistics.median(times)


def write_ms(frames: list[av.VideoFrame], rounds: int, root: Path) -> tuple[float, int]:
    cap = capture(root, queue=4)
    cap._prepare()
    jobs = []
    for i, v in enumerate(frames):
        frame, result = frame_and_result(v, i)
        jobs.append(Job("bench", result.captured_ms, frame, result.detections, result.width, result.height, "b"))
    times = []
    for r in range(rounds):
        started = time.process_time()
        for job in jobs:
            cap.write(dataclasses.replace(job, captured_ms=job.captured_ms + r * 10**6))
        times.append((time.process_time() - started) / len(jobs) * 1000)
    sizes = [p.stat().st_size for p in root.rglob("*.jpg")]
    return statistics.median(times), int(statistics.median(sizes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fps", type=float, default=10.0, help="frames inferred per second for the camera")
    parser.add_argument("--captured-per-min", type=float, default=18.0, help="captures per camera and minute")
    args = parser.parse_args()
    infer_ms = inference_ms(args.rounds)
    per_frame = args.captured_per_min / (args.fps * 60)
    print(f"640 model session.run, batch 1: {infer_ms:.1f} ms CPU per frame")
    print(f"captures per frame: {per_frame:.3f} ({args.captured_per_min:g}/min at {args.fps:g} fps)")
    print(f"{'frame':>10} {'decide us/frame':>16} {'write ms/capture':>17} {'JPEG KiB':>9} {'per frame':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for width, height in SIZES:
            frames = decoded(width, height, args.frames, Path(tmp))
            decide = decide_us(frames, args.rounds, Path(tmp) / f"d{width}")
            write, size = write_ms(frames, args.rounds, Path(tmp) / f"w{width}")
            share = (decide / 1000 + write * per_frame) / infer_ms
            print(f"{width}x{height:<5} {decide:>16.1f} {write:>17.2f} {size / 1024:>9.0f} {share:>10.3%}")


if __name__ == "__main__":
    main()
