"""Evaluate a BeltSight ONNX detector on held-out synthetic conveyor frames (ONNX Runtime, CPU).

    python -m tools.model.eval --model models/conveyor-800.onnx --size 800 --seed 12345678 --count 500

Each held-out image is a camera-like frame rendered by ``tools.kit.synth.scene.render_scene`` with seed ``seed + i``
(training only uses seeds < 1_000_000, so use seeds >= 1_000_000 here): aspect ratio drawn from 16:9, 4:3,
1:1 and 3:4, longer side S x U(1.0, 1.6) px (so the frame is downscaled, as a camera frame is).  Frames are
letterboxed to S x S exactly like the daemon does (aspect kept, centred, pad 114, RGB / 255), detections are
decoded and NMSed in numpy, mapped back to frame pixels and scored against the frame's ground truth with
faster-coco-eval (``tools.model.coco_eval.evaluate``).

The helpers ``letterbox``, ``decode`` and ``OnnxDetector`` are reused by the tests.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort
from PIL import Image

from daemon.inference.seam import grouped_nms
from tools.kit.synth.parts import NAMES
from tools.kit.synth.scene import render_scene
from tools.model.coco_eval import evaluate

PAD = 114


def letterbox(frame: np.ndarray, size: int, pad: int = PAD) -> tuple[np.ndarray, float, tuple[int, int]]:
    """uint8 HxWx3 RGB frame -> (float32 [3, S, S] in 0..1, scale r, (left, top) pad offsets).

    A frame pixel coordinate x maps to ``x * r + left`` in the model input.
    """
    h, w = frame.shape[:2]
    r = min(size / h, size / w)
    nw, nh = round(w * r), round(h * r)
    left, top = (size - nw) // 2, (size - nh) // 2
    img = (
        frame if (nw, nh) == (w, h) else np.asarray(Image.fromarray(frame).resize((nw, nh), Image.Resampling.BILINEAR))
    )
    canvas = np.full((size, size, 3), pad, dtype=np.uint8)
    canvas[top : top + nh, left : left + nw] = img
    return canvas.transpose(2, 0, 1).astype(np.float32) / 255.0, r, (left, top)


def decode(
    out: np.ndarray, conf: float = 0.001, iou: float = 0.65, max_det: int = 300, pre_nms: int = 3000
) -> np.ndarray:
    """One image's output [4 + nc, A] -> detections [N, 6] = (x1, y1, x2, y2, score, cls) in model pixels.

    Class-aware NMS: the daemon's own (`grouped_nms`), so the evaluation measures what it runs."""
    scores_all = out[4:]
    cls = scores_all.argmax(0)
    score = scores_all[cls, np.arange(out.shape[1])]
    m = score >= conf
    if not m.any():
        return np.zeros((0, 6), dtype=np.float32)
    cx, cy, w, h = out[:4, m]
    score, cls = score[m], cls[m]
    if score.size > pre_nms:
        top = np.argpartition(-score, pre_nms)[:pre_nms]
        cx, cy, w, h, score, cls = cx[top], cy[top], w[top], h[top], score[top], cls[top]
    boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], 1)
    kept = grouped_nms(np, boxes.astype(np.float32), score, cls, iou_threshold=iou, cap=pre_nms)
    keep = kept[np.argsort(-score[kept], kind="stable")][:max_det]
    return np.concatenate([boxes[keep], score[keep, None], cls[keep, None].astype(np.float32)], 1)


class OnnxDetector:
    """Letterbox + ONNX Runtime (CPU) + decode/NMS; returns detections in frame pixels."""

    def __init__(self, path: str | Path, threads: int = 2) -> None:
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        meta = self.session.get_modelmeta().custom_metadata_map
        self.names: list[str] = json.loads(meta["names"])
        self.size = int(json.loads(meta["imgsz"])[0])
        self.input = self.session.get_inputs()[0].name

    def raw(self, batch: np.ndarray) -> np.ndarray:
        if self.session.get_inputs()[0].type == "tensor(float16)":
            batch = batch.astype(np.float16)
        return np.asarray(self.session.run(None, {self.input: batch})[0], dtype=np.float32)

    def __call__(
        self, frame: np.ndarray, conf: float = 0.001, iou: float = 0.65
    ) -> list[tuple[int, float, list[float]]]:
        """uint8 HxWx3 RGB frame -> [(cls, score, [x1, y1, x2, y2] in frame pixels)]."""
        x, r, (left, top) = letterbox(frame, self.size)
        return self.to_frame(self.raw(x[None])[0], r, (left, top), frame.shape, conf, iou)

    def to_frame(
        self, out: np.ndarray, r: float, pad: tuple[int, int], shape: tuple[int, ...], conf: float, iou: float
    ) -> list[tuple[int, float, list[float]]]:
        """One image's raw output -> detections in frame pixels."""
        left, top = pad
        det = decode(out, conf, iou)
        h, w = shape[:2]
        res = []
        for x1, y1, x2, y2, s, c in det:
            box = [
                float(np.clip((x1 - left) / r, 0, w)),
                float(np.clip((y1 - top) / r, 0, h)),
                float(np.clip((x2 - left) / r, 0, w)),
                float(np.clip((y2 - top) / r, 0, h)),
            ]
            res.append((int(c), float(s), box))
        return res


def held_out(seed: int, count: int, size: int) -> list[tuple[np.ndarray, list[tuple[int, list[float]]]]]:
    """The held-out frames and their ground truth (rendered once, shared by every model compared)."""
    frames = []
    for i in range(count):
        w, h = eval_frame_size(seed + i, size)
        img, labels = render_scene(seed + i, w, h)
        frames.append((img, [(d["cls"], d["box"]) for d in labels]))
    return frames


def compare_models(
    paths: list[Path],
    *,
    count: int = 100,
    seed: int = 12_345_678,
    threads: int = 2,
    conf: float = 0.001,
    iou: float = 0.65,
) -> list[dict[str, float]]:
    """mAP50, mAP50-95 and session.run time per image of each model on the same held-out frames.

    The models are timed in turns, image by image (A, B, A, B, ...), so a change in the host's
    speed during the run hits each model alike. Prints one line per model and returns the figures.
    """
    dets = [OnnxDetector(p, threads) for p in paths]
    size = dets[0].size
    if any(d.size != size for d in dets):
        sys.exit(f"models differ in input size: {[d.size for d in dets]}")
    frames = held_out(seed, count, size)
    found: list[dict[int, list[tuple[int, float, list[float]]]]] = [{} for _ in dets]
    run_s = [0.0] * len(dets)
    for i, (img, _) in enumerate(frames):
        x, r, (left, top) = letterbox(img, size)
        for k, det in enumerate(dets):
            t = time.perf_counter()
            raw = det.raw(x[None])
            run_s[k] += time.perf_counter() - t
            found[k][i] = det.to_frame(raw[0], r, (left, top), img.shape, conf, iou)
    gts = {i: gt for i, (_, gt) in enumerate(frames)}
    results = []
    for k, path in enumerate(paths):
        res = evaluate(gts, found[k], NAMES, size, size)
        ms = run_s[k] / count * 1000
        results.append({"mAP50": res["mAP50"], "mAP50_95": res["mAP50_95"], "ms_per_image": ms})
        speed = f"  {run_s[0] / run_s[k]:.2f}x the first" if k else ""
        print(
            f"{path}: mAP50={res['mAP50']:.3f} mAP50-95={res['mAP50_95']:.3f} session.run {ms:.1f} ms/img"
            f" ({count} images, seed {seed}, {threads} threads){speed}"
        )
    return results


ASPECTS = ((16, 9), (4, 3), (1, 1), (3, 4))


def eval_frame_size(seed: int, size: int) -> tuple[int, int]:
    """Camera-like frame size for held-out image ``seed`` evaluated at model size ``size``."""
    rng = np.random.default_rng([seed, 5])
    aw, ah = ASPECTS[int(rng.integers(0, len(ASPECTS)))]
    longer = size * rng.uniform(1.0, 1.6)
    if aw >= ah:
        return round(longer), round(longer * ah / aw)
    return round(longer * aw / ah), round(longer)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--seed", type=int, default=12_345_678)
    ap.add_argument("--count", type=int, default=500)
    ap.add_argument("--conf", type=float, default=0.001)
    ap.add_argument("--iou", type=float, default=0.65)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--compare", type=Path, nargs="+", help="other files of the same model: same frames, same run")
    args = ap.parse_args()
    if args.compare:
        compare_models(
            [args.model, *args.compare],
            count=args.count,
            seed=args.seed,
            threads=args.threads,
            conf=args.conf,
            iou=args.iou,
        )
        return
    if args.seed < 1_000_000:
        print("warning: seeds < 1_000_000 overlap the training data", file=sys.stderr)
    det = OnnxDetector(args.model, args.threads)
    if det.size != args.size:
        sys.exit(f"model is {det.size}x{det.size}, --size says {args.size}")
    gts, dets = {}, {}
    t0 = time.time()
    t_inf = 0.0
    for i in range(args.count):
        s = args.seed + i
        w, h = eval_frame_size(s, args.size)
        img, labels = render_scene(s, w, h)
        gts[i] = [(d["cls"], d["box"]) for d in labels]
        t = time.time()
        dets[i] = det(img, args.conf, args.iou)
        t_inf += time.time() - t
        if (i + 1) % 100 == 0:
            print(f"  {i + 1}/{args.count} images, {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    res = evaluate(gts, dets, NAMES, args.size, args.size)
    print(
        f"model {args.model}  size {args.size}  seed {args.seed}  images {args.count}  gt {res['n_gt']}  "
        f"infer {t_inf / args.count * 1000:.0f} ms/img"
    )
    print(f"mAP50={res['mAP50']:.3f} mAP50-95={res['mAP50_95']:.3f}")
    for n in NAMES:
        print(f"  {n:10s} AP50={res['per_class_AP50'][n]:.3f} AP50-95={res['per_class_AP50_95'][n]:.3f}")


if __name__ == "__main__":
    main()
