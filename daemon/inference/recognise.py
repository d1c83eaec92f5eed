"""Recognising a detector's layout from its graph: output ranks and shapes, anchor counts
against the strides, a probe run, metadata (`recognise`; the layouts themselves are described
in `daemon.inference.layouts`). Unsupported tasks (rotated boxes, classifiers) and outputs that
fit no layout raise `LayoutError` saying what was found.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from daemon.inference.layouts import (
    LAYOUTS,
    LayoutError,
    ModelLayout,
    OutputInfo,
    anchor_grid,
    expected_anchors,
)

UNSUPPORTED_TASKS = {"obb": "rotated boxes", "classify": "no boxes", "semantic": "no boxes"}
GRID_CORRELATION = 0.8
"""A decoded output's x column follows the anchor grid (corr ~1); a raw head's does not."""


def _shape_text(outputs: Sequence[OutputInfo]) -> str:
    return ", ".join(f"'{o.name}' {list(o.shape)}" for o in outputs)


def _meta_flag(meta: Mapping[str, str], key: str) -> bool:
    return meta.get(key, "").strip().lower() in ("true", "1", "yes")


def _export_args_nms(meta: Mapping[str, str]) -> bool:
    """Ultralytics `nms=True` exports say so only in metadata `args` (a dict literal; `end2end` stays
    "False"): their output is rows after NMS, as Ultralytics' own AutoBackend reads it."""
    raw = meta.get("args", "")
    if "nms" not in raw:
        return False
    try:
        args = ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return False
    return isinstance(args, dict) and args.get("nms") is True


def _find_four_outputs(outputs: Sequence[OutputInfo]) -> ModelLayout | None:
    """num_dets [N, 1], boxes [N, K, 4], scores [N, K], classes [N, K] (names or dtype tell the last two)."""
    if len(outputs) != 4:
        return None
    boxes = [o for o in outputs if len(o.shape) == 3 and o.shape[2] == 4]
    counts = [o for o in outputs if len(o.shape) in (1, 2) and (len(o.shape) == 1 or o.shape[1] == 1)]
    pairs = [o for o in outputs if len(o.shape) == 2 and o not in counts]
    if len(boxes) != 1 or len(counts) != 1 or len(pairs) != 2:
        return None
    k = boxes[0].shape[1]
    if any(p.shape[1] != k for p in pairs):
        return None

    def is_classes(o: OutputInfo) -> bool:
        lowered = o.name.lower()
        return "class" in lowered or "label" in lowered or ("score" not in lowered and "int" in o.dtype)

    classes = [p for p in pairs if is_classes(p)]
    if len(classes) != 1:
        return None
    scores = next(p for p in pairs if p is not classes[0])
    names = (counts[0].name, boxes[0].name, scores.name, classes[0].name)
    return ModelLayout("end2end", "four-outputs", names, 0, k, 0, (), 0, f"four outputs {_shape_text(outputs)}")


def _main_output(outputs: Sequence[OutputInfo]) -> tuple[OutputInfo, int]:
    """The detection output, and the mask count of a segment model's prototype output (else 0)."""
    ranked = [o for o in outputs if len(o.shape) in (2, 3)]
    protos = [o for o in outputs if len(o.shape) == 4]
    if not ranked:
        raise LayoutError(f"no output of rank 2 or 3 among {_shape_text(outputs)}; not a YOLO detector")
    main = next((o for o in ranked if o.name == "output0"), ranked[0])
    others = [o for o in outputs if o is not main]
    if any(len(o.shape) < 4 for o in others) or len(protos) > 1:
        raise LayoutError(f"several unrelated outputs {_shape_text(outputs)}; expected one detection output")
    # beside it: a segment model's prototypes [N, M, H/4, W/4], or YOLOv5's per-level raw maps (rank 5)
    return main, (protos[0].shape[1] if protos else 0)


@dataclass(frozen=True, slots=True)
class _Found:
    """What recognition knows besides the main output's shape."""

    size: int
    strides: tuple[int, ...]
    names: int | None
    override: str
    override_from: str
    task: str
    masks: int
    ultralytics: bool
    end2end_meta: bool
    names_from: str

    @property
    def anchors(self) -> int:
        return expected_anchors(self.size, self.strides)

    @property
    def grid(self) -> str:
        return f"strides {'/'.join(map(str, self.strides))} at {self.size}"


def _split_classes(total: int, found: _Found, what: str) -> tuple[int, int, str]:
    """(classes, ignored trailing values, note) from the class+extra channel count."""
    names, extra_hint, task = found.names, found.masks, found.task
    if names is not None:
        if names == total:
            return names, 0, ""
        if 0 < names < total and (task in ("segment", "pose") or extra_hint):
            what_kind = "mask" if extra_hint or task == "segment" else "keypoint"
            return names, total - names, f"; {total - names} {what_kind} values after the classes ignored"
        raise LayoutError(f"{found.names_from} has {names} labels but the output has {total} classes ({what})")
    if extra_hint and total > extra_hint:
        return total - extra_hint, extra_hint, f"; {extra_hint} mask coefficients after the classes ignored"
    return total, 0, ""


def _end2end(main: OutputInfo, found: _Found, why: str) -> ModelLayout:
    size, names, task, masks = found.size, found.names, found.task, found.masks
    what = f"output '{main.name}' {list(main.shape)}"
    if len(main.shape) == 2:
        if main.shape[1] != 7:
            raise LayoutError(f"{what}: rows after NMS must be [D, 7] (batch, x1, y1, x2, y2, class, score)")
        form = "batch-class-rows" if "classid_x1y1x2y2" in main.name.lower() else "batch-rows"
        return ModelLayout("end2end", form, (main.name,), names or 0, 0, size, (), 0, f"{what}: {why}")
    k, width = main.shape[1], main.shape[2]
    if width == 7 and task not in ("segment", "pose"):
        return ModelLayout("end2end", "batch-rows", (main.name,), names or 0, k, size, (), 0, f"{what}: {why}")
    if width < 6:
        raise LayoutError(f"{what}: rows after NMS need 6 values (x1, y1, x2, y2, score, class), got {width}")
    extra = width - 6
    task = "segment" if masks and extra == masks else task  # prototypes beside: mask coefficients
    if extra and task not in ("segment", "pose"):
        raise LayoutError(f"{what}: {width} values per row after NMS; expected 6 or 7 (task {task or 'detect'})")
    note = f"; {extra} {task} values per row ignored" if extra else ""
    return ModelLayout("end2end", "rows", (main.name,), names or 0, k, size, (), extra, f"{what}: {why}{note}")


def _grid_correlation(probe: npt.NDArray[Any], size: int, strides: tuple[int, ...]) -> float:
    cells, steps = anchor_grid(np, size, strides)
    centre_x = (cells[:, 0] + 0.5) * steps
    x = probe[0, :, 0].astype(np.float64)
    if not np.all(np.isfinite(x)) or float(x.std()) == 0.0:
        return 0.0
    return float(np.corrcoef(x, centre_x)[0, 1])


def recognise(
    outputs: Sequence[OutputInfo],
    *,
    size: int,
    strides: tuple[int, ...],
    meta: Mapping[str, str],
    names: int | None,
    override: str = "auto",
    override_from: str = "config",
    names_from: str = "metadata 'names'",
    probe: npt.NDArray[Any] | None = None,
) -> ModelLayout:
    """The layout of a model with these outputs (shapes from a probe run), or LayoutError.

    `names`: the number of labels the file or config gives (None: unknown); `override`: a
    layout named by `override_from` (config or metadata); `probe`: the main output of one
    probe run (tells a YOLOX raw head from a decoded one).
    """
    if override not in ("auto", *LAYOUTS):
        raise LayoutError(f"layout {override!r} is not one of {['auto', *LAYOUTS]}")
    task = meta.get("task", "").strip().lower()
    if task in UNSUPPORTED_TASKS:
        raise LayoutError(f"metadata task {task!r} ({UNSUPPORTED_TASKS[task]}) is not a box detector we decode")
    four = _find_four_outputs(outputs)
    if four is not None:
        if override not in ("auto", "end2end"):
            raise LayoutError(f"configured layout {override!r} but the outputs are the NMS form {_shape_text(outputs)}")
        return ModelLayout(four.name, four.form, four.outputs, names or 0, four.rows, size, (), 0, four.reason)
    main, masks = _main_output(outputs)
    ultralytics = "stride" in meta or "task" in meta
    found = _Found(
        size,
        strides,
        names,
        override,
        override_from,
        task,
        masks,
        ultralytics,
        _meta_flag(meta, "end2end") or _export_args_nms(meta),
        names_from,
    )
    kind = _classify(main, found)
    if kind == "end2end":
        why = "rows after NMS in the graph"
        if found.end2end_meta:
            ultralytics_nms = "metadata args nms=True (Ultralytics NMS export)"
            why = "metadata end2end" if _meta_flag(meta, "end2end") else ultralytics_nms
        return _end2end(main, found, why if override == "auto" else "configured end2end")
    return _dense(main, kind, found, probe)


def _anchors_first(cols: int, found: _Found) -> str:
    """yolov8 (transposed) or yolox for `[N, A, cols]` with one anchor per cell."""
    if found.override in ("yolov8", "yolox"):
        return found.override
    if found.names is not None and cols == 4 + found.names:
        return "yolov8"
    if found.names is not None and cols == 5 + found.names:
        return "yolox"
    return "yolov8" if found.ultralytics else "yolox"


def _classify(main: OutputInfo, found: _Found) -> str:
    shape, override, anchors = main.shape, found.override, found.anchors
    if len(shape) == 2 and shape[1] != 7:
        raise LayoutError(
            f"output '{main.name}' is {list(shape)}: not a detector output; a rank-2 output must be [D, 7] "
            f"rows after NMS (batch, x1, y1, x2, y2, class, score), else expected [N, 4 + C, {anchors}] (yolov8), "
            f"[N, {3 * anchors}, 5 + C] (yolov5), [N, {anchors}, 5 + C] (yolox) or [N, K, 6] (end2end)"
        )
    if len(shape) == 2 or override == "end2end" or found.end2end_meta:
        return "end2end"
    rows, cols = shape[1], shape[2]
    if override == "yolov5" or (override == "auto" and rows == 3 * anchors and cols > 5):
        if rows != 3 * anchors or cols <= 5:
            raise LayoutError(f"output '{main.name}' {list(shape)}: yolov5 needs [N, {3 * anchors}, 5 + C]")
        return "yolov5"
    if cols == anchors and rows > 4 and override in ("auto", "yolov8"):
        return "yolov8"
    if rows == anchors and cols > 4 and override in ("auto", "yolov8", "yolox"):
        return _anchors_first(cols, found)
    after_nms = cols in (6, 7) or (found.masks > 0 and cols == 6 + found.masks)
    if override == "auto" and after_nms and rows not in (anchors, 3 * anchors):
        return "end2end"
    raise LayoutError(
        f"output '{main.name}' is {list(shape)}; for a {found.size}x{found.size} input with strides "
        f"{list(found.strides)} expected [N, 4 + C, {anchors}] (yolov8), [N, {anchors}, 4 + C] "
        f"(yolov8 transposed), [N, {anchors}, 5 + C] (yolox), [N, {3 * anchors}, 5 + C] (yolov5) or "
        f"[N, K, 6|7] rows after NMS (end2end)"
        + (f"; layout {override!r} from {found.override_from}" if override != "auto" else "")
    )


def _dense(main: OutputInfo, kind: str, found: _Found, probe: npt.NDArray[Any] | None) -> ModelLayout:
    shape, what = main.shape, f"output '{main.name}' {list(main.shape)}"
    size, strides, anchors, grid = found.size, found.strides, found.anchors, found.grid
    origin = f"layout {found.override!r} from {found.override_from}" if found.override != "auto" else "recognised"

    def split(total: int) -> tuple[int, int, str]:
        return _split_classes(total, found, what)

    if kind == "yolov8" and shape[2] == anchors:
        classes, extra, note = split(shape[1] - 4)
        why = f"{what}: 4 + {shape[1] - 4} values by {anchors} anchors ({grid}), {origin}{note}"
        return ModelLayout("yolov8", "channels-first", (main.name,), classes, anchors, size, strides, extra, why)
    if kind == "yolov8":
        classes, extra, note = split(shape[2] - 4)
        why = f"{what}: {anchors} anchors ({grid}) by 4 + {shape[2] - 4} values, no objectness, {origin}{note}"
        return ModelLayout("yolov8", "anchors-first", (main.name,), classes, anchors, size, strides, extra, why)
    classes, extra, note = split(shape[2] - 5)
    if kind == "yolov5":
        why = f"{what}: 3 anchors per cell ({grid}) by 5 + {shape[2] - 5} values (objectness), {origin}{note}"
        return ModelLayout("yolov5", "decoded", (main.name,), classes, 3 * anchors, size, strides, extra, why)
    corr = _grid_correlation(probe, size, strides) if probe is not None else 0.0
    form = "decoded" if corr >= GRID_CORRELATION else "raw-head"
    follows = "follows" if form == "decoded" else "does not follow"
    why = (
        f"{what}: one anchor per cell ({grid}) by 5 + {shape[2] - 5} values (objectness), {origin}; "
        f"column x {follows} the anchor grid (correlation {corr:.2f}): {form}{note}"
    )
    return ModelLayout("yolox", form, (main.name,), classes, anchors, size, strides, extra, why)
