"""CPU per inferred frame of the worker's pre-processing, against PyAV's default scaler.

    .venv/bin/python -m tools.bench.preprocess [--frames 60] [--rounds 5] [--handoff]

For each camera geometry the daemon meets (640x480 into the 640 model, 1280x720 and 1920x1080
into the 800 model), it times, on the same decoded-like frames:
  - baseline: `VideoFrame.reformat` as PyAV does it by default (a scaler made for each frame and
    freed with it, one swscale slice thread per core), its planes copied out into one 3 x H x W
    array (as `to_ndarray` copies);
  - daemon: `daemon.ingest.decoding.scale` (a scaler kept per thread and geometry, one thread, the
    frame's planes used where FFmpeg put them).
Each then fills the batch tensor (`BatchTensor.fill`) and drops the frame, as a worker does.
The two alternate over `--rounds` rounds of fresh frames; it prints CPU ms per frame (the
process's CPU time, so other threads a scaler wakes are counted) and the ratio daemon/baseline,
median over rounds. Timings are for this machine and load; the ratio is what to compare.
`--handoff` compares instead the two ways a decoder process hands a frame on (`[engine] processes`):
  - rgb (the CPU path): the decoder scales the frame to the letterbox's RGB planes and copies them
    into its shared-memory slot; the daemon fills the float batch tensor from the slot;
  - yuv (lanes on the device): the decoder copies the decoded I420 planes into the slot; the daemon's
    share is the copy into pinned staging buffers (`YuvUploader`: the upload and the letterbox are
    queued on the GPU, not counted here: there is no GPU on this machine).
glibc's malloc is tuned first, as `beltsight run` does (`daemon.core.memory.tune_malloc`): with its
fixed mmap threshold every large block is fresh pages, and that cost is part of the figure.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import av
import numpy as np

from daemon.core.seam import Frame, Letterbox, RGBPlanes, tune_malloc, yuv
from daemon.inference.seam import BatchTensor
from daemon.ingest.seam import SlotRing, rgb_planes, scale

CASES = ((640, 480, 640), (1280, 720, 800), (1920, 1080, 800))


def pyav_default(vframe: av.VideoFrame, letterbox: Letterbox) -> RGBPlanes:
    """The same conversion through `VideoFrame.reformat` with PyAV's defaults, copied into one array."""
    shrink = letterbox.new_w < vframe.width or letterbox.new_h < vframe.height
    w, h = letterbox.new_w, letterbox.new_h
    gbr = vframe.reformat(width=w, height=h, format="gbrp", interpolation="AREA" if shrink else "BILINEAR")
    image = np.stack(rgb_planes(gbr))
    return image[0], image[1], image[2]


def make_frames(width: int, height: int, count: int, seed: int) -> list[av.VideoFrame]:
    """Distinct yuv420p frames (a gradient with noise, shifted per frame), as a decoder hands over."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = ((x + y) * 255 // (width + height)).astype(np.int16)
    out = []
    for i in range(count):
        rgb = np.clip(base + rng.integers(-20, 20, (height, width), dtype=np.int16), 0, 255).astype(np.uint8)
        rgb = np.roll(np.stack((rgb, rgb[::-1], rgb[:, ::-1]), axis=-1), i, axis=1)
        out.append(av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24").reformat(format="yuv420p"))
    return out


def cpu_ms_per_frame(
    convert: Callable[[av.VideoFrame, Letterbox], RGBPlanes], frames: list[av.VideoFrame], lb: Letterbox
) -> float:
    tensor = BatchTensor(1, lb.size)
    start = time.process_time()
    while frames:
        vframe = frames.pop()
        tensor.fill([Frame("cam", 0, 0, 0.0, lb, convert(vframe, lb))])
        del vframe  # the last reference: the frame (and with PyAV's default, its scaler) is freed here
    return 1000 * (time.process_time() - start)


def handoff_ms(kind: str, frames: list[av.VideoFrame], lb: Letterbox) -> float:
    """Process CPU for `frames` through one hand-off (see the module text), decoder and daemon sides."""
    rgb = kind == "rgb"
    shape = (lb.new_h, lb.new_w) if rgb else (lb.src_h, lb.src_w)
    ring = SlotRing.create(shape, slots=2, yuv=not rgb)
    writer = SlotRing.attach(ring.name, ring.slots, shape, yuv=not rgb)
    tensor = BatchTensor(1, lb.size)
    staging = [np.empty(s, np.uint8) for s in ring.plane_shapes]  # YuvUploader's pinned buffers, one set
    start = time.process_time()
    for vframe in frames:
        slot = writer.acquire()
        assert slot is not None
        if rgb:
            writer.write(slot, scale(vframe, lb))
            view = ring.lease(slot)
            tensor.fill([Frame("cam", 0, 0, 0.0, lb, (view[0], view[1], view[2]))])
            del view  # the slot is free again
        else:
            planes = yuv.yuv_frame(vframe, np)
            writer.write(slot, (planes.y, *planes.chroma_planes()))
            for buffer, plane in zip(staging, ring.lease_planes(slot), strict=True):
                np.copyto(buffer, plane)
    spent = 1000 * (time.process_time() - start)
    writer.close()
    ring.retire()
    return spent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=60, help="frames per round and variant")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--handoff", action="store_true", help="a decoder process's hand-off: RGB slots against YUV")
    args = ap.parse_args()
    print(f"malloc: {tune_malloc() or 'not glibc, left as is'}", flush=True)
    if args.handoff:
        compare(args, ("rgb", "yuv"), handoff_ms)
        return
    compare(args, ("baseline", "daemon"), lambda name, frames, lb: cpu_ms_per_frame(CONVERT[name], frames, lb))


def compare(
    args: argparse.Namespace, names: tuple[str, str], run: Callable[[str, list[av.VideoFrame], Letterbox], float]
) -> None:
    """Both variants alternating over `--rounds` rounds of fresh frames, per geometry; medians and ratio."""
    first, second = names
    for width, height, size in CASES:
        lb = Letterbox.fit(width, height, size)
        results: dict[str, list[float]] = {first: [], second: []}
        for r in range(args.rounds):
            for name in names:
                frames = make_frames(width, height, args.frames, seed=r)
                results[name].append(run(name, frames, lb) / args.frames)
        base, ours = statistics.median(results[first]), statistics.median(results[second])
        ratios = [o / b for o, b in zip(results[second], results[first], strict=True)]
        print(
            f"{width}x{height} -> {lb.new_w}x{lb.new_h} ({size} model): {first} {base:.2f} ms, "
            f"{second} {ours:.2f} ms CPU per frame; {second}/{first} {statistics.median(ratios):.2f} "
            f"(rounds {min(ratios):.2f}-{max(ratios):.2f})",
            flush=True,
        )


CONVERT: dict[str, Callable[[av.VideoFrame, Letterbox], RGBPlanes]] = {"baseline": pyav_default, "daemon": scale}


if __name__ == "__main__":
    main()
