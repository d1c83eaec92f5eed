"""CPU per image of the worker's post-processing (decode + NMS + detections), against the
arg-max over the whole grid it replaced.

    .venv/bin/python -m tools.bench.postprocess [--frames 40] [--rounds 7]

It decodes a bench clip (the one `python -m tools.bench` renders for cam0) with PyAV, runs the 640
demo model on each frame (batch 1, as the CPU lanes run), and times on those real outputs:
  - baseline: the best class per anchor by an arg-max across the classes at every anchor of the
    grid, then the threshold (how `daemon.inference.layouts.dense` did it until this change);
  - daemon: `decode_batch` as the stage calls it (the best score per anchor by a max, the class
    only for the anchors over the threshold), and `to_detections`.
Both decode the same outputs with a tracked camera's floor (0.1) and publish at 0.4; the tool
checks that they find the same rows. The two alternate over `--rounds`; it prints CPU ms per image
and the ratio daemon/baseline (median over rounds, each round's ratio in the same run).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import av
import numpy as np
import onnxruntime as ort

from daemon.core.seam import Frame, Letterbox
from daemon.inference.seam import (
    BatchTensor,
    Candidates,
    Decode,
    decode_batch,
    dense,
    load_model_info,
    source_mapping,
    to_detections,
    yolov8,
)
from daemon.ingest.seam import scale
from tools.bench.procs import render_clips
from tools.kit.daemon_config import MODELS

FLOOR, PUBLISH = 0.1, 0.4


def grid_argmax_candidates(xp: Any, scores: Any, class_axis: int, cxcywh: dense.CxCyWh, how: Decode) -> Candidates:
    """The baseline: the arg-max across the classes at every anchor, then the threshold."""
    scores = dense.masked_scores(xp, scores, class_axis, how.class_mask)
    cls = scores.argmax(axis=class_axis)
    best = xp.squeeze(xp.take_along_axis(scores, xp.expand_dims(cls, class_axis), axis=class_axis), axis=class_axis)
    img, anchor = xp.nonzero(best >= how.thresholds)
    return dense.anchor_candidates(xp, img, anchor, score=best[img, anchor], cls=cls[img, anchor], cxcywh=cxcywh)


def model_outputs(frames: int) -> tuple[list[Any], Any, Letterbox]:
    """The 640 demo model's outputs on the first `frames` frames of the bench's cam0 clip."""
    info = load_model_info(MODELS[640], 640)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(MODELS[640]), options, providers=["CPUExecutionProvider"])
    clip = render_clips(1, 640, 480, 15, "1M")[0]
    lb = Letterbox.fit(640, 480, 640)
    tensor = BatchTensor(1, 640, info.convention)
    outputs = []
    with av.open(str(clip)) as container:
        for vframe in container.decode(video=0):
            batch = tensor.fill([Frame("cam0", 0, 0, 0.0, lb, scale(vframe, lb))])
            outputs.append(session.run(None, {session.get_inputs()[0].name: batch})[0])
            if len(outputs) == frames:
                break
    return outputs, info, lb


def post(outputs: list[Any], info: Any, lb: Letterbox) -> list[tuple[Any, ...]]:
    found = []
    for output in outputs:
        rows = decode_batch(
            np,
            output,
            conf_threshold=np.array([FLOOR], dtype=np.float32),
            iou_threshold=0.45,
            max_det=300,
            layout=info.decoding,
            images=1,
        )
        found.append(to_detections(rows[0], source_mapping(lb, "content"), info.names, conf_threshold=PUBLISH))
    return found


def cpu_ms(run: Callable[[], object], count: int) -> float:
    started = time.process_time()
    run()
    return 1000 * (time.process_time() - started) / count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    outputs, info, lb = model_outputs(args.frames)
    family = vars(yolov8)  # the demo models' family decodes with `candidates`, imported by name
    ours = family["candidates"]
    variants = {"baseline": grid_argmax_candidates, "daemon": ours}
    found = {}
    for name, impl in variants.items():
        family["candidates"] = impl
        found[name] = post(outputs, info, lb)
    if found["baseline"] != found["daemon"]:
        raise SystemExit("the two decodings differ: the comparison would mean nothing")
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, impl in variants.items():
            family["candidates"] = impl
            times[name].append(cpu_ms(lambda: post(outputs, info, lb), len(outputs)))
    family["candidates"] = ours
    ratios = [d / b for d, b in zip(times["daemon"], times["baseline"], strict=True)]
    detections = sum(len(f) for f in found["daemon"])
    print(
        f"post-processing, 640 demo model, {len(outputs)} frames ({detections} detections): "
        f"baseline {statistics.median(times['baseline']):.3f} ms, daemon {statistics.median(times['daemon']):.3f} ms "
        f"CPU per image; daemon/baseline {statistics.median(ratios):.2f} (rounds {min(ratios):.2f}-{max(ratios):.2f})"
    )


if __name__ == "__main__":
    main()
