"""Reading and checking a YOLO ONNX file before any inference session is built for it.

`load_model_info` opens the file with ONNX Runtime on the CPU, checks its one image input
(float32 or float16 `[N, 3, S, S]`, S fixed; N fixed for a static-batch file), runs one
probe image, and hands the outputs to `daemon.inference.recognise.recognise` to find the layout
(yolov8, yolov5, yolox, end2end; see `daemon.inference.layouts`). What metadata and config say
key by key is read by `daemon.inference.model_meta`. Labels come from `[models.<size>]`
`labels`, else metadata `names` (a JSON list, or Ultralytics' dict literal), else the class
ids. The input convention (colour, scale, padding, pad value) comes from the config, else
metadata (`color`, `scale`, `padding`, `pad_value`), else the layout's own ecosystem's
defaults. Every problem is a `ModelError` naming the file and what was found.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import structlog

from daemon.core.frames import LETTERBOX_PAD_VALUE
from daemon.core.model_spec import ModelOverrides
from daemon.inference.layouts import (
    InputConvention,
    LayoutError,
    ModelLayout,
    OutputInfo,
    family_of,
)
from daemon.inference.model_meta import (
    MetadataError,
    check_imgsz,
    convention_of,
    dynamic_size,
    labels_of,
    layout_override,
    names_of,
    strides_of,
)
from daemon.inference.recognise import recognise

log = structlog.get_logger("beltsight.model")

_DTYPES = {"tensor(float)": ("float32", np.float32), "tensor(float16)": ("float16", np.float16)}


class ModelError(Exception):
    """A model file is missing, unreadable or does not follow a supported layout."""

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
    model_layout: ModelLayout
    """How the outputs are read (recognised, or named by config or metadata)."""
    version: str = ""
    description: str = ""
    pad_value: int = LETTERBOX_PAD_VALUE
    convention: InputConvention = field(default_factory=InputConvention)
    labels_origin: str = "metadata"
    class_agnostic_nms: bool = False
    """Dense layouts: one NMS across all classes instead of one per class."""
    iou_plus_one: bool = False
    """YOLOX files: IoU as YOLOX's demo `nms` computes it, widths and heights + 1 camera pixel."""

    @property
    def decoding(self) -> ModelLayout:
        """The output layout post-processing reads."""
        return self.model_layout

    @property
    def output_names(self) -> tuple[str, ...]:
        return self.model_layout.outputs

    @property
    def input_dtype(self) -> Any:
        return np.float16 if self.convention.dtype == "float16" else np.float32

    def lines(self) -> list[str]:
        """What doctor and check-config print about this model."""
        shown = ", ".join(self.names[:12]) + (f", ... ({len(self.names)})" if len(self.names) > 12 else "")
        nms = (
            "in the graph"
            if family_of(self.decoding).nms_in_graph
            else ("class-agnostic" if self.class_agnostic_nms else "class-aware")
            + (", IoU with YOLOX demo's +1 pixel areas" if self.iou_plus_one else "")
        )
        return [
            f"layout: {self.decoding.describe()}; NMS {nms}",
            f"classes: {len(self.names)} [{shown}] ({self.labels_origin})",
            f"input '{self.input_name}': {self.convention.describe()}",
        ]


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


def _check_input(
    path: Path, inputs: Sequence[Any], expected_size: int | None, meta: Mapping[str, str]
) -> tuple[str, int, int | None, str]:
    """(input name, size S, fixed batch or None, dtype)."""
    if len(inputs) != 1:
        raise ModelError(path, f"has {len(inputs)} inputs {[i.name for i in inputs]}; expected one image input")
    inp = inputs[0]
    if inp.type not in _DTYPES:
        raise ModelError(path, f"input '{inp.name}' is {inp.type}; expected float32 or float16 (tensor(float))")
    shape = list(inp.shape)
    if len(shape) == 4 and not isinstance(shape[2], int) and not isinstance(shape[3], int):
        dynamic = dynamic_size(meta, expected_size)
        shape[2:] = [dynamic, dynamic] if dynamic is not None else shape[2:]
    square = len(shape) == 4 and isinstance(shape[2], int) and shape[2] == shape[3] and shape[2] > 0
    if not square or shape[1] != 3:
        raise ModelError(
            path,
            f"input '{inp.name}' has shape {list(inp.shape)}; expected [N, 3, S, S] with a "
            "square size S (one of the model sizes)",
        )
    size = int(shape[2])
    if expected_size is not None and size != expected_size:
        raise ModelError(
            path, f"input is {size}x{size} but the file is configured as the {expected_size} model ([models])"
        )
    batch = shape[0] if isinstance(shape[0], int) and shape[0] > 0 else None
    return inp.name, size, batch, _DTYPES[inp.type][0]


def _probe(
    path: Path, session: ort.InferenceSession, size: int, batch: int | None
) -> tuple[list[OutputInfo], list[Any]]:
    """Run one black image (or a static batch of them): the outputs as found, and their arrays."""
    inp = session.get_inputs()[0]
    zeros = np.zeros((batch or 1, 3, size, size), dtype=_DTYPES[inp.type][1])
    outputs = session.get_outputs()
    if not outputs:
        raise ModelError(path, "has no outputs")
    try:
        arrays = session.run(None, {inp.name: zeros})
    except Exception as exc:
        shapes = ", ".join(f"'{o.name}' {list(o.shape)}" for o in outputs)
        raise ModelError(path, f"a probe run failed (outputs {shapes}): {str(exc)[:300]}") from None
    infos = [
        OutputInfo(o.name, tuple(o.shape), tuple(int(d) for d in np.shape(a)), o.type)
        for o, a in zip(outputs, arrays, strict=True)
    ]
    return infos, list(arrays)


def load_model_info(
    path: Path | str, expected_size: int | None = None, overrides: ModelOverrides | None = None
) -> ModelInfo:
    """Open and check one model file; raise ModelError naming the file and the problem."""
    path = Path(path)
    try:
        return _load(path, expected_size, overrides or ModelOverrides())
    except MetadataError as exc:
        raise ModelError(path, str(exc)) from None


def _load(path: Path, expected_size: int | None, overrides: ModelOverrides) -> ModelInfo:
    session = _open(path)
    meta = dict(session.get_modelmeta().custom_metadata_map)
    input_name, size, batch, dtype = _check_input(path, session.get_inputs(), expected_size, meta)
    if all(isinstance(d, int) for d in session.get_inputs()[0].shape[2:]):
        check_imgsz(meta, size)  # a file of dynamic height and width runs at any size
    strides = strides_of(meta)
    meta_names = names_of(meta)
    override, who = layout_override(meta, overrides)
    outputs, arrays = _probe(path, session, size, batch)
    known = overrides.labels if overrides.labels is not None else meta_names
    probe = arrays[[o.name for o in outputs].index(_main_name(outputs))]
    try:
        layout = recognise(
            outputs,
            size=size,
            strides=strides,
            meta=meta,
            names=len(known) if known is not None else None,
            override=override,
            override_from=who or "config",
            names_from="[models] labels" if overrides.labels is not None else "metadata 'names'",
            probe=probe,
        )
    except LayoutError as exc:
        prefix = f"metadata 'layout' is {override!r}: " if who == "metadata" else ""
        raise ModelError(path, prefix + str(exc)) from None
    names, labels_origin = labels_of(layout, meta_names, overrides.labels)
    if not layout.num_classes:
        layout = _with_classes(layout, len(names))
    convention = convention_of(meta, layout, overrides, dtype=dtype, batch=batch)
    family = family_of(layout)
    version = meta.get("version", "")
    return ModelInfo(
        path=path,
        name=f"{path.stem}@{version}" if version else path.stem,
        size=size,
        names=names,
        strides=strides,
        layout=layout.name,
        input_name=input_name,
        output_name=layout.outputs[0],
        num_classes=layout.num_classes,
        anchors=layout.rows,
        batch=batch,
        version=version,
        description=meta.get("description", ""),
        pad_value=convention.pad_value,
        model_layout=layout,
        convention=convention,
        labels_origin=labels_origin,
        class_agnostic_nms=overrides.nms == "class-agnostic" or (overrides.nms == "auto" and family.class_agnostic_nms),
        iou_plus_one=family.iou_plus_one,
    )


def _main_name(outputs: Sequence[OutputInfo]) -> str:
    ranked = [o for o in outputs if len(o.shape) in (2, 3)] or list(outputs)
    return next((o.name for o in ranked if o.name == "output0"), ranked[0].name)


def _with_classes(layout: ModelLayout, num_classes: int) -> ModelLayout:
    return replace(layout, num_classes=num_classes)


def log_model(info: ModelInfo) -> None:
    """Log what was recognised (`model_recognised`), and what the daemon ignores or lacks."""
    lay, conv = info.decoding, info.convention
    log.info(
        "model_recognised",
        model=info.name,
        size=info.size,
        layout=lay.name,
        form=lay.form,
        reason=lay.reason,
        classes=len(info.names),
        input=conv.describe(),
    )
    if lay.extra:
        log.warning("model_outputs_ignored", model=info.name, values=lay.extra, why=lay.reason)
    if info.labels_origin.startswith("no labels"):
        log.warning("model_labels_missing", model=info.name, classes=len(info.names))


def describe_models(models: Mapping[int, Any]) -> tuple[list[str], list[str]]:
    """(lines, errors) for `check-config`: each `[models]` entry's layout, classes and input.

    `models` maps size -> `ModelConfig`. A file not there yet is noted (startup checks it
    again); a file that is there but not a supported detector is an error.
    """
    lines: list[str] = []
    errors: list[str] = []
    for size, model in sorted(models.items()):
        try:
            info = load_model_info(model.path, expected_size=size, overrides=model.overrides())
        except ModelError as exc:
            if exc.what == "file not found":
                lines.append(f"model {size} ({model.path}): not checked here: file not found")
            else:
                errors.append(str(exc))
            continue
        lines.append(f"model {size} ({model.path}): {info.name}")
        lines += [f"  {line}" for line in info.lines()]
    return lines, errors
