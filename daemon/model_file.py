"""Reading and checking a YOLO ONNX file before any inference session is built for it.

The contract (`layout` "yolov8"): input float32 [N, 3, S, S]; output float32 [N, 4 + C, A]
with rows cx, cy, w, h (input pixels) then C sigmoid class scores, A = sum((S / s)^2) over
the strides; metadata `names` (JSON list, or Ultralytics' dict repr), `imgsz`, `strides`,
`version`, `description`, `pad_value`. An Ultralytics YOLOv8 export (metadata `stride`,
no `layout`) is accepted too. Every problem is a `ModelError` naming the file and what is wrong.
The file is opened with ONNX Runtime on the CPU (the `onnx` package is a dev-only dependency).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from daemon.frames import LETTERBOX_PAD_VALUE

DEFAULT_STRIDES: tuple[int, ...] = (8, 16, 32)
SUPPORTED_LAYOUTS = ("yolov8",)


class ModelError(Exception):
    """A model file is missing, unreadable or does not follow the model contract."""

    def __init__(self, path: Path | str, what: str) -> None:
        self.path = Path(path)
        self.what = what
        super().__init__(f"model file {self.path}: {what}")


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the daemon needs to know about one model file (read once, before any session)."""

    path: Path
    name: str
    """File stem plus version, e.g. `conveyor-640@1.0.0` (what the stream entries carry)."""
    size: int
    """Input size S (square)."""
    names: tuple[str, ...]
    strides: tuple[int, ...]
    layout: str
    input_name: str
    output_name: str
    num_classes: int
    anchors: int
    batch: int | None
    """Fixed batch size of the input, or None when the batch dimension is dynamic."""
    version: str = ""
    description: str = ""
    pad_value: int = LETTERBOX_PAD_VALUE


def expected_anchors(size: int, strides: Sequence[int]) -> int:
    return sum((size // s) ** 2 for s in strides)


def _open(path: Path) -> ort.InferenceSession:
    if not path.exists():
        raise ModelError(path, "file not found")
    if path.is_dir():
        raise ModelError(path, "is a directory, not an ONNX file")
    try:
        with path.open("rb") as fh:
            head = fh.read(16)
    except PermissionError:
        raise ModelError(path, "cannot be read: permission denied (make it readable by the daemon's user)") from None
    except OSError as exc:
        raise ModelError(path, f"cannot be read: {exc.strerror}") from None
    if not head:
        raise ModelError(path, "file is empty, not an ONNX model")
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.log_severity_level = 4
    try:
        return ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ModelError(path, f"not a loadable ONNX model (ONNX Runtime: {first[:300]})") from None


def _check_input(path: Path, inputs: Sequence[Any], expected_size: int | None) -> tuple[str, int, int | None]:
    """(input name, size S, fixed batch or None)."""
    if len(inputs) != 1:
        raise ModelError(path, f"has {len(inputs)} inputs {[i.name for i in inputs]}; expected one image input")
    inp = inputs[0]
    if inp.type != "tensor(float)":
        raise ModelError(path, f"input '{inp.name}' is {inp.type}; expected float32 (tensor(float))")
    shape = list(inp.shape)
    square = len(shape) == 4 and isinstance(shape[2], int) and shape[2] == shape[3] and shape[2] > 0
    if not square or shape[1] != 3:
        raise ModelError(path, f"input '{inp.name}' has shape {shape}; expected [N, 3, S, S] with a fixed size S")
    size = int(shape[2])
    if expected_size is not None and size != expected_size:
        raise ModelError(
            path, f"input is {size}x{size} but the file is configured as the {expected_size} model ([models])"
        )
    batch = shape[0] if isinstance(shape[0], int) and shape[0] > 0 else None
    return inp.name, size, batch


def _output_dims(path: Path, session: ort.InferenceSession, out: Any, size: int) -> tuple[int, int]:
    """The two trailing output dims; runs one zero image when the file leaves them symbolic."""
    shape = list(out.shape)
    if len(shape) != 3:
        raise ModelError(path, f"output '{out.name}' has shape {shape}; expected [N, 4 + C, A]")
    if isinstance(shape[1], int) and isinstance(shape[2], int):
        return shape[1], shape[2]
    zeros = np.zeros((1, 3, size, size), dtype=np.float32)
    try:
        probed = session.run([out.name], {session.get_inputs()[0].name: zeros})[0]
    except Exception as exc:
        raise ModelError(path, f"output shape {shape} is symbolic and a probe run failed: {exc}") from None
    return int(probed.shape[1]), int(probed.shape[2])


def _check_output(
    path: Path, session: ort.InferenceSession, size: int, strides: tuple[int, ...]
) -> tuple[str, int, int]:
    """(output name, number of classes, anchors)."""
    outputs = session.get_outputs()
    if not outputs:
        raise ModelError(path, "has no outputs")
    out = next((o for o in outputs if o.name == "output0"), outputs[0])
    if out.type != "tensor(float)":
        raise ModelError(path, f"output '{out.name}' is {out.type}; expected float32 (tensor(float))")
    rows, cols = _output_dims(path, session, out, size)
    anchors = expected_anchors(size, strides)
    if cols == anchors and rows > 4:
        return out.name, rows - 4, anchors
    if rows == anchors and cols > 4:
        raise ModelError(
            path,
            f"output '{out.name}' is [N, {rows}, {cols}], the transposed layout [N, A, 4 + C]; "
            f"export the YOLOv8 layout [N, 4 + C, A] (no transpose after the head)",
        )
    raise ModelError(
        path,
        f"output '{out.name}' is [N, {rows}, {cols}]; expected [N, 4 + C, {anchors}] for a {size}x{size} "
        f"input with strides {list(strides)} (A = sum((S/s)^2))",
    )


def _strides(path: Path, meta: Mapping[str, str]) -> tuple[int, ...]:
    if "strides" in meta:
        try:
            strides = json.loads(meta["strides"])
        except json.JSONDecodeError:
            strides = None
        if not isinstance(strides, list) or not strides or not all(isinstance(s, int) and s > 0 for s in strides):
            raise ModelError(path, f"metadata 'strides' must be a JSON list of positive ints, got {meta['strides']!r}")
        return tuple(strides)
    if "stride" in meta:  # Ultralytics: the largest stride; P3..P5 (or P6) heads below it
        try:
            largest = int(float(meta["stride"]))
        except ValueError:
            raise ModelError(path, f"metadata 'stride' is not a number: {meta['stride']!r}") from None
        return tuple(s for s in (8, 16, 32, 64) if s <= largest) or DEFAULT_STRIDES
    return DEFAULT_STRIDES


def _parse_literal(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _names(path: Path, meta: Mapping[str, str], num_classes: int) -> tuple[str, ...]:
    raw = meta.get("names")
    if not raw:
        raise ModelError(path, "metadata has no 'names' (the class labels, a JSON list)")
    value = _parse_literal(raw)
    if isinstance(value, dict):  # Ultralytics: "{0: 'bolt', 1: 'nut'}" (or JSON with string keys)
        try:
            by_id = {int(k): v for k, v in value.items()}
        except (TypeError, ValueError):
            by_id = {}
        value = [by_id.get(i) for i in range(len(by_id))] if by_id else None
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ModelError(path, f"metadata 'names' is not a list of labels (or a dict of id -> label): {raw[:120]!r}")
    if len(value) != num_classes:
        raise ModelError(path, f"metadata 'names' has {len(value)} labels but the output has {num_classes} classes")
    return tuple(value)


def _check_meta(path: Path, meta: Mapping[str, str], size: int) -> tuple[str, int]:
    """(layout, pad value); checks `imgsz` against the input."""
    layout = meta.get("layout", "yolov8")  # an Ultralytics export has no key: the shape said yolov8
    if layout not in SUPPORTED_LAYOUTS:
        raise ModelError(path, f"metadata 'layout' is {layout!r}; supported: {list(SUPPORTED_LAYOUTS)}")
    if "imgsz" in meta:
        imgsz = _parse_literal(meta["imgsz"])
        if imgsz not in ([size, size], [size], size):
            raise ModelError(path, f"metadata 'imgsz' is {meta['imgsz']} but the input is {size}x{size}")
    try:
        pad = int(meta.get("pad_value", LETTERBOX_PAD_VALUE))
    except ValueError:
        raise ModelError(path, f"metadata 'pad_value' is not an integer: {meta['pad_value']!r}") from None
    return layout, pad


def load_model_info(path: Path | str, expected_size: int | None = None) -> ModelInfo:
    """Open and check one model file; raise ModelError naming the file and the problem."""
    path = Path(path)
    session = _open(path)
    meta = dict(session.get_modelmeta().custom_metadata_map)
    input_name, size, batch = _check_input(path, session.get_inputs(), expected_size)
    layout, pad_value = _check_meta(path, meta, size)
    strides = _strides(path, meta)
    output_name, num_classes, anchors = _check_output(path, session, size, strides)
    names = _names(path, meta, num_classes)
    version = meta.get("version", "")
    return ModelInfo(
        path=path,
        name=f"{path.stem}@{version}" if version else path.stem,
        size=size,
        names=names,
        strides=strides,
        layout=layout,
        input_name=input_name,
        output_name=output_name,
        num_classes=num_classes,
        anchors=anchors,
        batch=batch,
        version=version,
        description=meta.get("description", ""),
        pad_value=pad_value,
    )
