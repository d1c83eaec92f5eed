"""Third-party YOLO ONNX exports through the daemon, against their own ecosystem's reference decoding.

Four steps over one folder DIR (`exports.json` in it lists the files: ecosystem, size, thresholds,
optional `[models.<size>]` keys), run in two Python environments:

    # in a throwaway venv with torch, ultralytics, onnx, onnxruntime (and YOLOX / YOLOv5 checkouts):
    /work/tpv/bin/python -m tools.checks.exports export DIR --yolox /tmp/yolox --yolov5 /tmp/yolov5
    # in the project's venv: the daemon's real path (load_model_info, Engine, InferenceStage)
    .venv/bin/python -m tools.checks.exports daemon DIR
    # back in the ecosystem venv: the same input tensors through ONNX Runtime and the ecosystem's
    # own postprocess (Ultralytics non_max_suppression + scale_boxes, YOLOX demo_postprocess +
    # multiclass_nms, YOLOv5 non_max_suppression + scale_boxes), and its own preprocessing of
    # the same frames (to compare input conventions)
    /work/tpv/bin/python -m tools.checks.exports reference DIR --yolox /tmp/yolox --yolov5 /tmp/yolov5
    .venv/bin/python -m tools.checks.exports table DIR          # the table; exit 1 on a mismatch

`export` and `reference` live in `tools/checks/exports_ecosystem.py` and `exports_reference.py` (they
import torch and the ecosystems). `export` builds random-init nano models from the ecosystems' own model
definitions (no weights are downloaded), recomputes their batch-norm statistics on rendered frames and spreads their
class biases so that a threshold keeps boxes, and exports them as the ecosystems do; `--only NAME`
exports just the Ultralytics files whose name contains NAME into an existing folder (the `nms=True`
ones need a torchvision that loads). Run `reference` where torchvision loads too: Ultralytics' NMS
then keeps score ties in index order, as the daemon does. Nothing written belongs in the repository.
Frames are rendered by `tools/kit/synth/`; the table compares the reference's boxes mapped by the
daemon's letterbox ("decode") and by the ecosystem's own mapping, reference boxes clipped to the
frame (the daemon clips, and drops boxes empty once clipped). README "Checked against real
third-party exports" has the commands, the venvs and the last table.
"""

# ruff: noqa: PLC0415  (each step imports what its own environment has: torch/ultralytics or the daemon)
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from tools.checks.exports_common import MANIFEST, rendered_frames

TOL = 1e-3


# ---------------------------------------------------------------- daemon (project venv)


def _daemon_one(path: Path, entry: dict[str, Any], images: list[np.ndarray]) -> dict[str, Any]:
    from PIL import Image

    from daemon.config.seam import EngineConfig
    from daemon.core.seam import Frame, Letterbox, Metrics, ModelOverrides
    from daemon.inference.seam import BatchTensor, Engine, InferenceStage, PostprocessConfig, load_model_info

    info = load_model_info(path, entry["size"], ModelOverrides(**entry.get("config", {})))
    frames = []
    for i, img in enumerate(images):
        lb = Letterbox.fit(img.shape[1], img.shape[0], info.size)
        scaled = np.asarray(Image.fromarray(img).resize((lb.new_w, lb.new_h), Image.Resampling.BILINEAR))
        r, g, b = (np.ascontiguousarray(scaled[:, :, c]) for c in range(3))
        frames.append(Frame("cam", i, 0, 0.0, lb, (r, g, b)))
    engine = Engine.create(info, EngineConfig(providers=["cpu"], max_batch=4, worker_batch=4))
    try:
        post = PostprocessConfig(entry["conf"], entry["iou"], 300)
        stage = InferenceStage(info, engine, max_batch=engine.max_batch, post=post, rules={}, metrics=Metrics())
        step = engine.max_batch
        dets = [r.detections for i in range(0, len(frames), step) for r in stage.infer(frames[i : i + step])]
    finally:
        engine.close()
    inputs = [BatchTensor(1, info.size, replace_batch(info.convention)).fill([f])[0].copy() for f in frames]
    return {
        "layout": f"{info.decoding.name} ({info.decoding.form})",
        "reason": info.decoding.reason,
        "classes": len(info.names),
        "convention": info.convention.describe(),
        "boxes": info.convention.boxes,
        "batch": info.batch,
        "inputs": inputs,
        "dets": [np.array([[*d.box, d.score, d.cls] for d in ds], dtype=np.float64).reshape(-1, 6) for ds in dets],
    }


def replace_batch(convention: Any) -> Any:
    from dataclasses import replace

    return replace(convention, batch=None)


def cmd_daemon(out: Path) -> None:
    from daemon.inference.seam import ModelError

    images = rendered_frames()
    np.savez_compressed(out / "frames.npz", *images)
    for entry in json.loads((out / MANIFEST).read_text()):
        if "skipped" in entry:
            continue
        try:
            got = _daemon_one(out / entry["file"], entry, images)
        except ModelError as exc:
            got = {"refused": str(exc), "inputs": [], "dets": []}
        arrays = {f"input{i}": a for i, a in enumerate(got.pop("inputs"))}
        arrays |= {f"det{i}": d for i, d in enumerate(got.pop("dets"))}
        np.savez_compressed(out / f"{entry['file']}.daemon.npz", **arrays)
        (out / f"{entry['file']}.daemon.json").write_text(json.dumps(got))
        print(entry["file"], got.get("layout", got.get("refused")))


# ---------------------------------------------------------------- table


def _match(got: np.ndarray, want: np.ndarray) -> tuple[float, float, bool]:
    """(max box diff, max score diff, same set): each reference row against the daemon's nearest same-class row."""
    if len(got) != len(want):
        return float("nan"), float("nan"), False
    box = score = 0.0
    used: set[int] = set()
    for row in want:
        same = [j for j in range(len(got)) if got[j, 5] == row[5] and j not in used]
        if not same:
            return float("nan"), float("nan"), False
        j = min(same, key=lambda k: float(np.abs(got[k, :4] - row[:4]).max()))
        used.add(j)
        box = max(box, float(np.abs(got[j, :4] - row[:4]).max()))
        score = max(score, abs(float(got[j, 4] - row[4])))
    return box, score, box <= TOL and score <= TOL


def _worst(values: Any) -> str:
    """The largest difference, or "count differs" when any image's kept sets differ in size/classes."""
    values = list(values)
    return "sets differ" if any(np.isnan(v) for v in values) else f"{max(values):.1e}"


def _input_diff(daemon_in: np.ndarray, pre: np.ndarray, scale: float) -> float:
    """Mean |daemon input - ecosystem preprocessing| in 0..255 pixel units (resizers differ by a few)."""
    return float(np.abs(daemon_in.astype(np.float32) - pre).mean() / scale)


HEADER = (
    "| file | ecosystem | recognised as | input vs ecosystem's preprocessing (mean abs, 0..255) "
    "| kept per frame (daemon:ref) | decode: max box / score diff | ecosystem's own box mapping: max diff (px) "
    "| agree |"
)


def _daemon_mapped(raw: np.ndarray, img: np.ndarray, size: int, top_left: bool, boxes: str) -> np.ndarray:
    """Reference rows in model-input pixels mapped to the camera as the daemon maps its own."""
    from daemon.core.seam import Letterbox
    from daemon.inference.seam import source_mapping

    lb = Letterbox.fit(img.shape[1], img.shape[0], size)
    if top_left:
        lb = Letterbox(lb.size, lb.src_w, lb.src_h, lb.scale, lb.new_w, lb.new_h, 0, 0)
    rows = raw.copy()
    rows[:, :4] = source_mapping(lb, boxes).to_source(np.ascontiguousarray(raw[:, :4], dtype=np.float32))
    return rows[(rows[:, 2] > rows[:, 0]) & (rows[:, 3] > rows[:, 1])]


def _row(entry: dict[str, Any], out: Path, images: list[np.ndarray]) -> tuple[str, bool]:
    name, eco = entry["file"], f"{entry['ecosystem']} {entry['version']}"
    if "skipped" in entry:
        return f"| {name} | {eco} | export failed: {entry['skipped'][:80]} | | | | | n/a |", True
    info = json.loads((out / f"{name}.daemon.json").read_text())
    if "refused" in info:
        return f"| {name} | {eco} | refused: {info['refused'][:150]} | | | | | no |", False
    got, want = np.load(out / f"{name}.daemon.npz"), np.load(out / f"{name}.ref.npz")
    conv = info["convention"]
    scale = 1.0 if "pixel x 1," in conv else 1 / 255
    frames = range(len(images))
    top_left = "top-left" in conv
    decode = [
        _match(got[f"det{i}"], _daemon_mapped(want[f"raw{i}"], img, entry["size"], top_left, info["boxes"]))
        for i, img in enumerate(images)
    ]
    mapped = [_match(got[f"det{i}"], want[f"det{i}"]) for i in frames]
    diffs = [_input_diff(got[f"input{i}"], want[f"pre{i}"], scale) for i in frames]
    kept = " / ".join(f"{len(got[f'det{i}'])}:{len(want[f'det{i}'])}" for i in frames)
    ok = all(r[2] for r in decode)
    recognised = f"{info['layout']}, {info['classes']} classes, {conv.split(' (')[0]}"
    return (
        f"| {name} | {eco} | {recognised} | {max(diffs):.2f} | {kept} | {_worst(r[0] for r in decode)} / "
        f"{_worst(r[1] for r in decode)} | {_worst(r[0] for r in mapped)} | {'yes' if ok else 'NO'} |",
        ok,
    )


def cmd_table(out: Path) -> int:
    """Print the table; exit status 1 when a file is refused or its decoding differs."""
    images = list(np.load(out / "frames.npz").values())
    rows = [_row(entry, out, images) for entry in json.loads((out / MANIFEST).read_text())]
    print(HEADER)
    print("|---" * 8 + "|")
    print("\n".join(r[0] for r in rows))
    for entry in json.loads((out / MANIFEST).read_text()):
        info = out / f"{entry['file']}.daemon.json"
        if info.exists():
            print(f"- {entry['file']}: {json.loads(info.read_text()).get('reason', '')}")
    return 0 if all(r[1] for r in rows) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=("export", "daemon", "reference", "table"))
    parser.add_argument("dir", type=Path)
    parser.add_argument("--yolox", type=Path, help="a YOLOX checkout (Megvii-BaseDetection/YOLOX)")
    parser.add_argument("--yolov5", type=Path, help="a YOLOv5 checkout (ultralytics/yolov5)")
    parser.add_argument("--only", help="export: only the Ultralytics files whose name contains this, merged in")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    out = args.dir.resolve()
    if args.step in ("export", "reference"):
        from tools.checks import exports_ecosystem as eco

        eco.with_checkouts_on_pythonpath([c for c in (args.yolox, args.yolov5) if c is not None], argv)
        if args.step == "export":
            eco.cmd_export(out, args.yolox, args.yolov5, args.only)
        else:
            from tools.checks import exports_reference

            exports_reference.cmd_reference(out, args.yolox, args.yolov5)
    elif args.step == "daemon":
        cmd_daemon(out)
    else:
        return cmd_table(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
