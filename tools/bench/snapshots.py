"""Crossing snapshots: JPEG encoders compared on real decoded frames, and the daemon's cost against inference.

    .venv/bin/python -m tools.bench.snapshots [--frames 20] [--rounds 3] [--crossings-per-s 2]

It renders H.264 clips with the test kit (`tools.kit.synth`), decodes them with PyAV (yuv420p, as the
daemon's sources hand them over) and, on the same frames, times the process's CPU per JPEG of:
  - daemon: `daemon.publish.files.jpeg` (libjpeg-turbo's YUV entry point through simplejpeg, the
    frame's planes as decoded, levels stretched to full range by a lookup table; whole frame, box drawn);
  - simplejpeg-yuv-raw: the same without the level stretch (what a full-range camera costs);
  - pyav-mjpeg-yuv: FFmpeg's `mjpeg` encoder fed the YUV frame (no RGB), as it is;
  - pillow-rgb / simplejpeg-rgb: the frame converted to RGB (`to_ndarray("rgb24")`), then encoded.
In the same run it times the 640 demo model's `session.run` per frame (batch 1, ONNX Runtime on the
CPU), and prints the ratio the goal is stated in: the daemon's snapshot CPU per second at
`--crossings-per-s`, over the inference CPU of the camera's `--fps` frames in that second. Medians over rounds; the
machine is shared, so absolute figures are noisy: compare the columns within one run.
"""

from __future__ import annotations

import argparse
import io
import itertools
import statistics
import tempfile
import time
from collections.abc import Callable
from fractions import Fraction
from functools import partial
from pathlib import Path

import av
import numpy as np
import onnxruntime as ort
import simplejpeg
from PIL import Image

from daemon.core.seam import Frame, Letterbox
from daemon.ingest.seam import scale
from daemon.publish.seam import picture_of, render
from tools.kit.daemon_config import MODELS
from tools.kit.synth.video import render_video

SIZES = ((640, 480), (1280, 720), (1920, 1080))
Encoder = Callable[[av.VideoFrame], bytes]


def decoded(width: int, height: int, count: int, workdir: Path) -> list[av.VideoFrame]:
    clip = workdir / f"c{width}.mp4"
    render_video(clip, workdir / f"c{width}.json", width, height, 10, count / 10 + 0.2, seed=3)
    with av.open(str(clip)) as container:
        return list(itertools.islice(container.decode(video=0), count))


def daemon_encoder(vframe: av.VideoFrame) -> bytes:
    lb = Letterbox.fit(vframe.width, vframe.height, 640)
    frame = Frame("bench", 0, 0, 0.0, lb, partial(scale, vframe, lb))
    box = (vframe.width * 0.4, vframe.height * 0.4, vframe.width * 0.55, vframe.height * 0.6)
    return render(picture_of(frame), box, 1, crop=False, draw_box=True, quality=85)


def raw_yuv(vframe: av.VideoFrame) -> bytes:
    w = vframe.width
    y, u, v = (
        np.frombuffer(memoryview(p), np.uint8).reshape(p.height, p.line_size)[:, :pw]
        for p, pw in zip(vframe.planes, (w, (w + 1) // 2, (w + 1) // 2), strict=True)
    )
    return bytes(simplejpeg.encode_jpeg_yuv_planes(y, u, v, 85))


def mjpeg_encoder() -> Encoder:
    contexts: dict[tuple[int, int], av.VideoCodecContext] = {}
    pts = itertools.count()

    def encode(vframe: av.VideoFrame) -> bytes:
        ctx = contexts.get((vframe.width, vframe.height))
        if ctx is None:
            ctx = av.CodecContext.create("mjpeg", "w")
            ctx.width, ctx.height, ctx.pix_fmt, ctx.color_range = vframe.width, vframe.height, "yuv420p", 2
            ctx.time_base = Fraction(1, 25)
            ctx.options = {"qmin": "3", "qmax": "3"}
            contexts[(vframe.width, vframe.height)] = ctx
        vframe.pts, vframe.time_base, vframe.color_range = next(pts), ctx.time_base, 2
        return b"".join(bytes(p) for p in ctx.encode(vframe))

    return encode


def pillow_rgb(vframe: av.VideoFrame) -> bytes:
    out = io.BytesIO()
    Image.fromarray(vframe.to_ndarray(format="rgb24")).save(out, "JPEG", quality=85)
    return out.getvalue()


def simplejpeg_rgb(vframe: av.VideoFrame) -> bytes:
    return bytes(simplejpeg.encode_jpeg(vframe.to_ndarray(format="rgb24"), 85, "RGB", "420"))


def cpu_ms(encode: Encoder, frames: list[av.VideoFrame], rounds: int) -> tuple[float, int]:
    encode(frames[0])
    times = []
    for _ in range(rounds):
        started = time.process_time()
        sizes = [len(encode(f)) for f in frames]
        times.append((time.process_time() - started) / len(frames) * 1000)
    return statistics.median(times), int(statistics.median(sizes))


def inference_ms(rounds: int) -> float:
    options = ort.SessionOptions()
    session = ort.InferenceSession(str(MODELS[640]), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    batch = np.random.default_rng(0).random((1, 3, 640, 640), dtype=np.float32)
    session.run(None, {name: batch})
    times = []
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(10):
            session.run(None, {name: batch})
        times.append((time.process_time() - started) / 10 * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--crossings-per-s", type=float, default=2.0)
    parser.add_argument("--fps", type=float, default=10.0, help="frames inferred per second for the camera")
    args = parser.parse_args()
    encoders: dict[str, Encoder] = {
        "daemon": daemon_encoder,
        "simplejpeg-yuv-raw": raw_yuv,
        "pyav-mjpeg-yuv": mjpeg_encoder(),
        "pillow-rgb": pillow_rgb,
        "simplejpeg-rgb": simplejpeg_rgb,
    }
    infer_ms = inference_ms(args.rounds)
    print(f"640 model session.run, batch 1: {infer_ms:.1f} ms CPU per frame")
    print(f"{'frame':>10} " + " ".join(f"{name:>20}" for name in encoders) + "   (CPU ms per JPEG, KiB)")
    with tempfile.TemporaryDirectory() as tmp:
        for width, height in SIZES:
            frames = decoded(width, height, args.frames, Path(tmp))
            cells = [cpu_ms(enc, frames, args.rounds) for enc in encoders.values()]
            print(f"{width}x{height:<5} " + " ".join(f"{ms:>11.2f} ({kib // 1024:>4} K)" for ms, kib in cells))
            share = cells[0][0] * args.crossings_per_s / (infer_ms * args.fps)
            rate = f"{args.crossings_per_s:g} crossings/s over {args.fps:g} inferred frames/s"
            print(f"{'':>10} daemon, {rate}: {share:.2%}")


if __name__ == "__main__":
    main()
