"""The ecosystem side of `tools/checks/exports.py`, the `reference` step: the daemon's input tensors through
ONNX Runtime (or Ultralytics' AutoBackend) and each ecosystem's own postprocess and preprocessing
(`cmd_reference`: Ultralytics non_max_suppression + scale_boxes, YOLOX demo_postprocess + multiclass_nms,
YOLOv5 non_max_suppression + scale_boxes). Runs in the ecosystem venv, like the export
(`tools/checks/exports_ecosystem.py`).
"""

# ruff: noqa: PLC0415  (torch and the ecosystems exist only in the ecosystem venv)
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from tools.checks.exports_common import MANIFEST
from tools.checks.exports_ecosystem import torchvision_stub


def _run_ort(path: Path, tensor: np.ndarray) -> list[np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    inp = session.get_inputs()[0]
    batch = inp.shape[0] if isinstance(inp.shape[0], int) else 1
    x = np.repeat(tensor[None], batch, axis=0).astype(np.float16 if "16" in inp.type else np.float32)
    return [np.asarray(o)[:1].astype(np.float32) for o in session.run(None, {inp.name: x})]


def _ultralytics_ref(path: Path, entry: dict[str, Any], tensor: np.ndarray, img: np.ndarray) -> tuple[Any, Any, Any]:
    """Ultralytics' own AutoBackend on the file (its metadata: names, end2end from `end2end` or
    `args.nms`), its non_max_suppression (no wall-clock limit) and scale_boxes; its LetterBox."""
    import torch
    from ultralytics.data.augment import LetterBox
    from ultralytics.nn.autobackend import AutoBackend
    from ultralytics.utils.nms import non_max_suppression
    from ultralytics.utils.ops import scale_boxes

    backend = AutoBackend(str(path), device=torch.device("cpu"), verbose=False)
    size = entry["size"]
    x = torch.from_numpy(np.repeat(tensor[None], backend.batch, axis=0).astype(np.float32))
    y = backend(x)
    pred = (y[0] if isinstance(y, list | tuple) else y)[:1].float()
    det = non_max_suppression(
        pred,
        entry["conf"],
        entry["iou"],
        nc=len(backend.names),
        max_det=300,
        end2end=backend.end2end,
        max_time_img=1e6,
    )[0][:, :6]
    raw = det.numpy().astype(np.float64)
    det[:, :4] = scale_boxes((size, size), det[:, :4].clone(), img.shape[:2])
    pre = LetterBox((size, size), auto=False, stride=32)(image=np.ascontiguousarray(img[:, :, ::-1]))
    return det.numpy().astype(np.float64), raw, pre[:, :, ::-1].transpose(2, 0, 1).astype(np.float32) / 255.0


def _yolox_ref(repo: Path, entry: dict[str, Any], out: np.ndarray, img: np.ndarray) -> tuple[Any, Any, Any]:
    import importlib.util

    spec = importlib.util.spec_from_file_location("yolox_demo_utils", repo / "yolox" / "utils" / "demo_utils.py")
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    size = entry["size"]
    # yolox/data/data_augment.py preproc, verbatim in substance (cv2 resize to int(w*r), top-left, 114)
    import cv2

    bgr = np.ascontiguousarray(img[:, :, ::-1])
    r = min(size / bgr.shape[0], size / bgr.shape[1])
    padded = np.ones((size, size, 3), dtype=np.uint8) * 114
    resized = cv2.resize(bgr, (int(bgr.shape[1] * r), int(bgr.shape[0] * r)), interpolation=cv2.INTER_LINEAR)
    padded[: int(bgr.shape[0] * r), : int(bgr.shape[1] * r)] = resized
    pre = padded.transpose(2, 0, 1).astype(np.float32)
    pred = demo.demo_postprocess(out.copy(), (size, size))[0] if entry.get("raw") else out[0]
    boxes = pred[:, :4]
    scores = pred[:, 4:5] * pred[:, 5:]
    xyxy = (
        np.stack(
            (
                boxes[:, 0] - boxes[:, 2] / 2,
                boxes[:, 1] - boxes[:, 3] / 2,
                boxes[:, 0] + boxes[:, 2] / 2,
                boxes[:, 1] + boxes[:, 3] / 2,
            ),
            axis=1,
        )
        / r
    )
    dets = demo.multiclass_nms(xyxy, scores, nms_thr=entry["iou"], score_thr=entry["conf"])
    rows = np.zeros((0, 6)) if dets is None else dets[:, [0, 1, 2, 3, 4, 5]]
    rows = rows[np.argsort(-rows[:, 4], kind="stable")][:300]  # YOLOX's demo has no cap: the daemon's max_det
    raw = rows.copy()
    raw[:, :4] *= r
    return rows.astype(np.float64), raw.astype(np.float64), pre


def _yolov5_ref(repo: Path, entry: dict[str, Any], out: np.ndarray, img: np.ndarray) -> tuple[Any, Any, Any]:
    import torch

    torchvision_stub()
    from utils.augmentations import letterbox  # type: ignore[import-not-found, import-untyped, unused-ignore]
    from utils.general import non_max_suppression, scale_boxes  # type: ignore[import-not-found, import-untyped, unused-ignore]

    size = entry["size"]
    det = non_max_suppression(torch.from_numpy(out), entry["conf"], entry["iou"], None, False, max_det=300)[0]
    raw = det.numpy().astype(np.float64)
    det[:, :4] = scale_boxes((size, size), det[:, :4].clone(), img.shape[:2])
    pre = letterbox(np.ascontiguousarray(img[:, :, ::-1]), size, stride=32, auto=False)[0]
    return det.numpy().astype(np.float64), raw, pre[:, :, ::-1].transpose(2, 0, 1).astype(np.float32) / 255.0


def _clipped(det: np.ndarray, img: np.ndarray, i: int, pre: np.ndarray) -> dict[str, np.ndarray]:
    """Reference rows clipped to the frame, empty ones dropped (what the daemon publishes)."""
    h, w = img.shape[:2]
    det[:, [0, 2]] = det[:, [0, 2]].clip(0, w)
    det[:, [1, 3]] = det[:, [1, 3]].clip(0, h)
    return {f"det{i}": det[(det[:, 2] > det[:, 0]) & (det[:, 3] > det[:, 1])], f"pre{i}": pre}


def cmd_reference(out: Path, yolox: Path | None, yolov5: Path | None) -> None:
    try:  # Ultralytics' NMS uses torchvision when it is imported: score ties kept in index order
        import torchvision  # noqa: F401
    except Exception:
        print("torchvision does not load: Ultralytics falls back to TorchNMS (score ties in argsort order)")
    images = list(np.load(out / "frames.npz").values())
    for entry in json.loads((out / MANIFEST).read_text()):
        daemon = out / f"{entry['file']}.daemon.npz"
        if "skipped" in entry or not daemon.exists():
            continue
        arrays = np.load(daemon)
        saved: dict[str, np.ndarray] = {}
        for i, img in enumerate(images):
            if f"input{i}" not in arrays:
                break
            eco, path, tensor = entry["ecosystem"], out / entry["file"], arrays[f"input{i}"]
            if eco == "ultralytics":
                det, raw, pre = _ultralytics_ref(path, entry, tensor, img)
            elif eco == "yolox":
                assert yolox is not None, "--yolox checkout needed"
                det, raw, pre = _yolox_ref(yolox, entry, _run_ort(path, tensor)[0], img)
            else:
                assert yolov5 is not None, "--yolov5 checkout needed"
                det, raw, pre = _yolov5_ref(yolov5, entry, _run_ort(path, tensor)[0], img)
            saved |= _clipped(det, img, i, pre) | {f"raw{i}": raw}
        np.savez_compressed(out / f"{entry['file']}.ref.npz", allow_pickle=False, **saved)
        print(entry["file"], [len(saved.get(f"det{i}", [])) for i in range(len(images))])
