"""Rows after NMS in the graph (`end2end`): `[N, K, 6 (+ M)]` rows x1, y1, x2, y2, score, class (`rows`,
YOLOv10 / Ultralytics `nms=True`); `[N, K, 7]` or `[D, 7]` rows batch, x1, y1, x2, y2, class, score
(`batch-rows`, YOLOv7's end-to-end export; `batch-class-rows` for an output named
`batchno_classid_x1y1x2y2_score`); the four outputs num_dets, boxes, scores, classes
(`four-outputs`, joined into `rows` by `join`). Post-processing only filters and orders the rows."""

from __future__ import annotations

import ast
from collections.abc import Mapping, Sequence
from typing import Any

from daemon.core.xp import ArrayModule
from daemon.inference.layouts.base import (
    Candidates,
    Claim,
    Decode,
    Found,
    LayoutError,
    LayoutFamily,
    ModelLayout,
    OutputInfo,
    shape_text,
)

ROW = 6
"""x1, y1, x2, y2, score, class."""
BATCH_ROW = 7
"""batch, x1, y1, x2, y2, class, score (or batch, class, x1, y1, x2, y2, score)."""


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


def _metadata_says(meta: Mapping[str, str]) -> str:
    """Why the metadata says rows after NMS ("" when it does not)."""
    if _meta_flag(meta, "end2end"):
        return "metadata end2end"
    return "metadata args nms=True (Ultralytics NMS export)" if _export_args_nms(meta) else ""


def _four_outputs(outputs: Sequence[OutputInfo]) -> tuple[tuple[str, ...], int] | None:
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
    return (counts[0].name, boxes[0].name, scores.name, classes[0].name), k


def _int_or(xp: ArrayModule, values: Any, missing: int) -> Any:
    """Float ids as int64, `missing` where a value is not finite."""
    return xp.where(xp.isfinite(values), values, xp.float32(missing)).astype(xp.int64)


class End2End(LayoutFamily):
    name = "end2end"
    nms_in_graph = True

    def from_outputs(self, outputs: Sequence[OutputInfo], found: Found) -> ModelLayout | None:
        four = _four_outputs(outputs)
        if four is None:
            return None
        if not found.allows(self.name):
            raise LayoutError(
                f"configured layout {found.override!r} but the outputs are the NMS form {shape_text(outputs)}"
            )
        names, k = four
        why = f"four outputs {shape_text(outputs)}"
        return ModelLayout(self.name, "four-outputs", names, found.names or 0, k, found.size, (), 0, why)

    def claim(self, main: OutputInfo, found: Found) -> Claim | None:
        shape, anchors = main.shape, found.anchors
        if len(shape) == 2 or found.override == self.name or _metadata_says(found.meta):
            return Claim.DECLARED
        after_nms = shape[2] in (ROW, BATCH_ROW) or (found.masks > 0 and shape[2] == ROW + found.masks)
        if found.override == "auto" and after_nms and shape[1] not in (anchors, 3 * anchors):
            return Claim.FALLBACK
        return None

    def recognise(self, main: OutputInfo, found: Found, probe: Any | None) -> ModelLayout:
        why = (_metadata_says(found.meta) or "rows after NMS in the graph") if found.override == "auto" else ""
        why = why or "configured end2end"
        what, size, names, task = f"output '{main.name}' {list(main.shape)}", found.size, found.names, found.task
        if len(main.shape) == 2:
            if main.shape[1] != BATCH_ROW:
                raise LayoutError(f"{what}: rows after NMS must be [D, 7] (batch, x1, y1, x2, y2, class, score)")
            form = "batch-class-rows" if "classid_x1y1x2y2" in main.name.lower() else "batch-rows"
            return ModelLayout(self.name, form, (main.name,), names or 0, 0, size, (), 0, f"{what}: {why}")
        k, width = main.shape[1], main.shape[2]
        if width == BATCH_ROW and task not in ("segment", "pose"):
            return ModelLayout(self.name, "batch-rows", (main.name,), names or 0, k, size, (), 0, f"{what}: {why}")
        if width < ROW:
            raise LayoutError(f"{what}: rows after NMS need 6 values (x1, y1, x2, y2, score, class), got {width}")
        extra = width - ROW
        task = "segment" if found.masks and extra == found.masks else task  # prototypes beside: mask coefficients
        if extra and task not in ("segment", "pose"):
            raise LayoutError(f"{what}: {width} values per row after NMS; expected 6 or 7 (task {task or 'detect'})")
        note = f"; {extra} {task} values per row ignored" if extra else ""
        return ModelLayout(self.name, "rows", (main.name,), names or 0, k, size, (), extra, f"{what}: {why}{note}")

    def expected(self, anchors: int) -> tuple[str, ...]:
        return ("[N, K, 6|7] rows after NMS (end2end)",)

    def mismatch(self, layout: ModelLayout, shape: tuple[int, ...], batch: int) -> str:
        if layout.form in ("batch-rows", "batch-class-rows"):
            fits = shape[-1] == BATCH_ROW and (len(shape) == 2 or shape[0] == batch)
            return "" if fits else f"expected [{batch}, K, 7] or [D, 7] rows after NMS"
        if len(shape) != 3 or shape[0] != batch or shape[2] != ROW + layout.extra:
            return f"expected [{batch}, K, {ROW + layout.extra}] rows after NMS"
        return ""

    def join(self, xp: ArrayModule, outputs: Sequence[Any], layout: ModelLayout) -> Any:
        """The four-output form as `[N, K, 6]` rows, the rows at or past an image's `num_dets` with
        score -1 (never above a threshold)."""
        if layout.form != "four-outputs":
            return outputs[0]
        num_dets, boxes, scores, classes = outputs
        n, k = int(boxes.shape[0]), int(boxes.shape[1])
        count = xp.asarray(num_dets).reshape(n, -1)[:, :1].astype(xp.int64)
        valid = xp.arange(k)[None, :] < count
        rows = xp.empty((n, k, ROW), dtype=xp.float32)
        rows[..., :4] = boxes
        rows[..., 4] = xp.where(valid, scores.astype(xp.float32), xp.float32(-1.0))
        rows[..., 5] = classes
        return rows

    def decode(self, xp: ArrayModule, output: Any, layout: ModelLayout, how: Decode) -> Candidates:
        """Rows kept: a real image, score >= its threshold, a known allowed class, a finite non-empty box."""
        images, class_mask = how.images, how.class_mask
        img, boxes, scores, cls_f = _rows(xp, output, layout, images)
        in_batch = (img >= 0) & (img < images)
        img = xp.where(in_batch, img, 0)
        cls = _int_or(xp, cls_f, -1)
        ok = in_batch & xp.isfinite(boxes).all(axis=1) & (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
        ok &= (scores >= xp.broadcast_to(how.thresholds, (images, 1))[img, 0]) & (cls >= 0) & (cls_f == cls)
        if layout.num_classes:
            ok &= cls < layout.num_classes
        if class_mask is not None:
            mask = xp.asarray(class_mask, dtype=bool)
            mask = xp.broadcast_to(mask.reshape(1, -1) if mask.ndim == 1 else mask, (images, int(mask.shape[-1])))
            known = ok & (cls < int(mask.shape[1]))
            ok = known & mask[img, xp.where(known, cls, 0)]
        return Candidates(img[ok], boxes[ok], scores[ok], cls[ok])


def _rows(xp: ArrayModule, output: Any, layout: ModelLayout, images: int) -> tuple[Any, Any, Any, Any]:
    """All rows: image index, xyxy boxes, scores, classes (as floats)."""
    if layout.form in ("batch-rows", "batch-class-rows"):
        flat = output.reshape(-1, BATCH_ROW).astype(xp.float32, copy=False)
        if output.ndim == 3:
            img = xp.repeat(xp.arange(int(output.shape[0])), int(output.shape[1]))
        else:
            img = _int_or(xp, flat[:, 0], -1)
        if layout.form == "batch-class-rows":  # batch, class, x1, y1, x2, y2, score (PINTO's post-process)
            return img, flat[:, 2:6], flat[:, 6], flat[:, 1]
        return img, flat[:, 1:5], flat[:, 6], flat[:, 5]  # batch, x1, y1, x2, y2, class, score (YOLOv7)
    flat = output[:images, :, :ROW].reshape(-1, ROW).astype(xp.float32, copy=False)
    img = xp.repeat(xp.arange(images), int(output.shape[1]))
    return img, flat[:, :4], flat[:, 4], flat[:, 5]
