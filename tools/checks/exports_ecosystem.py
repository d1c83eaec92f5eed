"""The ecosystem side of `tools/checks/exports.py`, exporting: models built from the ecosystems' own code and
exported as they export them (`cmd_export`); their decoding is `tools/checks/exports_reference.py`.

Runs in a venv with torch, ultralytics, onnx and onnxruntime (and YOLOX / YOLOv5 checkouts on the
command line); see `tools/checks/exports.py` for the steps and README "Checked against real third-party
exports". Imports of torch and the ecosystems stay inside the functions: the project's venv has none.
"""

# ruff: noqa: PLC0415  (torch and the ecosystems exist only in the ecosystem venv)
from __future__ import annotations

import functools
import json
import os
import shutil
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tools.checks.exports_common import MANIFEST, SEED, rendered_frames
from tools.kit.daemon_config import REPO

# ---------------------------------------------------------------- export


def with_checkouts_on_pythonpath(checkouts: list[Path], argv: list[str]) -> None:
    """The YOLOX and YOLOv5 checkouts import themselves by top-level names (`yolox`, `models`,
    `utils`, `export`): unless they are on PYTHONPATH already, run this same command again with the
    repository and them on it (the interpreter finds them; nothing edits sys.path)."""
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    missing = [str(c.resolve()) for c in checkouts if str(c.resolve()) not in paths]
    if missing:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), *missing, *paths]))
        os.execve(sys.executable, [sys.executable, "-m", "tools.checks.exports", *argv], env)


def _calibrate(model: Any, size: int, *, raw_bgr: bool = False) -> None:
    """Random-init batch norms hold mean 0 / var 1, which makes every anchor of every image give
    the same output (ties everywhere). Recompute their statistics on rendered frames (the
    ecosystem's input convention) so that outputs depend on the image, as a trained model's do."""
    import torch
    from PIL import Image

    images = []
    for img in rendered_frames() + [_frames_extra(i) for i in range(5)]:
        x = np.asarray(Image.fromarray(img).resize((size, size)), dtype=np.float32)
        images.append(x[:, :, ::-1] if raw_bgr else x / 255.0)
    batch = torch.from_numpy(np.ascontiguousarray(np.stack(images).transpose(0, 3, 1, 2)))
    model.eval()
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average over the calibration batch
        m.train()
    with torch.no_grad():
        model(batch)
    model.eval()


@functools.cache
def _frames_extra(i: int) -> np.ndarray:
    from tools.kit.synth.scene import render_scene

    return render_scene(SEED + 100 + i, 640, 480)[0]


def _spread(head: Any, nc: int, lo: float, hi: float, gen: Any) -> None:
    """Class (and YOLOX objectness) biases of the head's final convs spread over [lo, hi]."""
    import torch

    for mod in head.modules():
        if isinstance(mod, torch.nn.Conv2d) and mod.bias is not None and mod.out_channels in (nc, 1):
            with torch.no_grad():
                mod.bias.copy_(torch.rand(mod.out_channels, generator=gen) * (hi - lo) + lo)


class _Stub(types.ModuleType):
    """Import-time stand-in for torchvision parts YOLOX/YOLOv5 name but never call here."""

    __version__: str

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value: Any = type(name, (), {}) if name[:1].isupper() else _Stub(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


def torchvision_stub() -> None:
    """YOLOX and YOLOv5 import torchvision at the top; with a CPU torch whose torchvision wheel cannot
    load, give them Ultralytics' TorchNMS (documented to match torchvision.ops.nms exactly) as
    `torchvision.ops.nms`; nothing else of torchvision is used by the export or the postprocess."""
    try:
        import torchvision  # noqa: F401
    except Exception:
        from ultralytics.utils.nms import TorchNMS

        def batched_nms(boxes: Any, scores: Any, idxs: Any, iou: float) -> Any:  # torchvision's offset trick
            offsets = idxs.to(boxes) * (boxes.max() + 1)
            return TorchNMS.nms(boxes + offsets[:, None], scores, iou)

        for name in [m for m in sys.modules if m.split(".")[0] == "torchvision"]:
            del sys.modules[name]
        stub = _Stub("torchvision")
        stub.__version__ = "0.0-stub"
        stub.ops.nms = TorchNMS.nms
        stub.ops.batched_nms = batched_nms
        for sub in ("ops", "transforms", "datasets", "models", "utils", "io"):
            sys.modules[f"torchvision.{sub}"] = getattr(stub, sub)
        sys.modules["torchvision"] = stub


ULTRALYTICS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("ul-v8n-416.onnx", "yolov8n.yaml", {"imgsz": 416}),
    ("ul-v11n-640-dynamic.onnx", "yolo11n.yaml", {"imgsz": 640, "dynamic": True}),
    ("ul-v11n-416-batch2.onnx", "yolo11n.yaml", {"imgsz": 416, "batch": 2}),
    ("ul-v8n-seg-416.onnx", "yolov8n-seg.yaml", {"imgsz": 416}),
    ("ul-v11n-seg-416-nms.onnx", "yolo11n-seg.yaml", {"imgsz": 416, "nms": True}),
    ("ul-v8n-416-nms.onnx", "yolov8n.yaml", {"imgsz": 416, "nms": True}),
    ("ul-v10n-416.onnx", "yolov10n.yaml", {"imgsz": 416}),
    ("ul-v10n-416-e2e.onnx", "yolov10n.yaml", {"imgsz": 416, "nms": False}),
    ("ul-v26n-416.onnx", "yolo26n.yaml", {"imgsz": 416}),
    ("ul-v26n-640-e2e-dynamic.onnx", "yolo26n.yaml", {"imgsz": 640, "nms": False, "dynamic": True}),
    ("ul-v26n-seg-416-e2e.onnx", "yolo26n-seg.yaml", {"imgsz": 416, "nms": False}),
    ("ul-v8n-416-half.onnx", "yolov8n.yaml", {"imgsz": 416, "half": True}),
)


def _export_ultralytics(out: Path, entries: list[dict[str, Any]], recipes: tuple[Any, ...] = ULTRALYTICS) -> None:
    import torch
    from ultralytics import YOLO, __version__

    for name, yaml, kw in recipes:
        entry: dict[str, Any] = {"file": name, "ecosystem": "ultralytics", "version": __version__, "size": kw["imgsz"]}
        entry["torch"] = torch.__version__
        entry |= {"conf": 0.25, "iou": 0.7, "export": f"YOLO({yaml!r}).export(format='onnx', simplify=False, {kw})"}
        try:
            torch.manual_seed(0)
            model = YOLO(yaml)
            _calibrate(model.model, kw["imgsz"])
            _spread(model.model.model[-1], len(model.model.names), -8.0, -2.0, torch.Generator().manual_seed(7))
            path = model.export(format="onnx", simplify=False, **kw)
            shutil.move(str(path), out / name)
        except Exception as exc:
            entry["skipped"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        entries.append(entry)


def _export_yolox(out: Path, repo: Path, entries: list[dict[str, Any]]) -> None:
    import torch

    torchvision_stub()
    from yolox.exp import get_exp
    from yolox.models.network_blocks import SiLU
    from yolox.utils import replace_module

    for exp_name, decode in (("yolox_nano", False), ("yolox_nano", True), ("yolox_s", False)):
        exp = get_exp(str(repo / "exps" / "default" / f"{exp_name}.py"), None)
        name = f"yolox-{exp_name.split('_')[1]}-{exp.test_size[0]}-{'decoded' if decode else 'raw'}.onnx"
        model = exp.get_model()
        _calibrate(model, exp.test_size[0], raw_bgr=True)
        _spread(model.head, exp.num_classes, -3.0, 1.0, torch.Generator().manual_seed(11))
        model = replace_module(model, torch.nn.SiLU, SiLU)
        model.head.decode_in_inference = decode  # tools/export_onnx.py --decode_in_inference
        dummy = torch.randn(1, 3, *exp.test_size)
        torch.onnx.export(
            model,
            dummy,
            str(out / name),
            input_names=["images"],
            output_names=["output"],
            opset_version=11,
            dynamo=False,
        )
        entries.append(
            {
                "file": name,
                "ecosystem": "yolox",
                "version": "git HEAD",
                "size": exp.test_size[0],
                "conf": 0.8,
                "iou": 0.45,
                "raw": not decode,
                "export": f"{exp_name} Exp, head.decode_in_inference={decode}, torch.onnx.export opset 11",
                "torch": torch.__version__,
            }
        )


def _export_yolov5(out: Path, repo: Path, entries: list[dict[str, Any]]) -> None:
    import torch

    torchvision_stub()
    # the YOLOv5 checkout's own modules, on sys.path from --yolov5 (untyped, or absent where mypy runs)
    import export as v5export  # type: ignore[import-not-found, import-untyped, unused-ignore]
    from models.yolo import Model  # type: ignore[import-not-found, import-untyped, unused-ignore]

    for size in (416, 640):
        torch.manual_seed(5)
        model = Model(str(repo / "models" / "yolov5n.yaml"), ch=3, nc=80)
        _calibrate(model, size)
        detect = model.model[-1]
        gen = torch.Generator().manual_seed(5)
        for conv in detect.m:
            b = conv.bias.view(detect.na, -1)
            with torch.no_grad():
                b[:, 4] = torch.rand(detect.na, generator=gen) * 3.0 - 2.0
                b[:, 5:] = torch.rand(detect.na, detect.nc, generator=gen) * 5.0 - 5.0
        model.names = {i: f"class{i}" for i in range(80)}
        pt = out / f"v5n-{size}.pt"
        torch.save({"model": model, "epoch": -1}, pt)
        v5export.run(weights=pt, imgsz=(size, size), include=("onnx",), simplify=False, device="cpu")
        name = f"yolov5n-{size}.onnx"
        shutil.move(str(pt.with_suffix(".onnx")), out / name)
        pt.unlink()
        entries.append(
            {
                "file": name,
                "ecosystem": "yolov5",
                "version": "git HEAD",
                "size": size,
                "conf": 0.6,
                "iou": 0.45,
                "export": f"export.run(weights, imgsz=({size}, {size}), include=('onnx',))",
                "torch": torch.__version__,
            }
        )


def cmd_export(out: Path, yolox: Path | None, yolov5: Path | None, only: str | None = None) -> None:
    """Export every file (or, with `only`, the Ultralytics ones whose name contains it, merged into
    an existing manifest: e.g. the `nms=True` files from a venv whose torchvision loads)."""
    out.mkdir(parents=True, exist_ok=True)
    entries: list[dict[str, Any]] = []
    recipes = ULTRALYTICS
    if only is not None:
        recipes = tuple(u for u in ULTRALYTICS if only in u[0])
        previous = json.loads((out / MANIFEST).read_text()) if (out / MANIFEST).exists() else []
        done = {u[0] for u in recipes}
        entries = [e for e in previous if e["file"] not in done]
        yolox = yolov5 = None
    steps: list[Callable[[], None]] = [lambda: _export_ultralytics(out, entries, recipes)]
    if yolox is not None:
        steps.append(lambda: _export_yolox(out, yolox, entries))
    if yolov5 is not None:
        steps.append(lambda: _export_yolov5(out, yolov5, entries))
    for step in steps:
        step()
        (out / MANIFEST).write_text(json.dumps(entries, indent=1))
    for e in entries:
        print(e["file"], e.get("skipped", "ok"))
