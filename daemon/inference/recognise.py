"""Recognising a detector's layout from its graph: output ranks and shapes, anchor counts
against the strides, a probe run, metadata (`recognise`). Each family in
`daemon.inference.layouts.registry` says how sure it is that the main output is its own; the surest
reads it. Unsupported tasks (rotated boxes, classifiers) and outputs that fit no layout raise
`LayoutError` saying what was found.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy.typing as npt

from daemon.inference.layouts import registry
from daemon.inference.layouts.base import Claim, Found, LayoutError, LayoutFamily, ModelLayout, OutputInfo, shape_text

UNSUPPORTED_TASKS = {"obb": "rotated boxes", "classify": "no boxes", "semantic": "no boxes"}


def _main_output(outputs: Sequence[OutputInfo]) -> tuple[OutputInfo, int]:
    """The detection output, and the mask count of a segment model's prototype output (else 0)."""
    ranked = [o for o in outputs if len(o.shape) in (2, 3)]
    protos = [o for o in outputs if len(o.shape) == 4]
    if not ranked:
        raise LayoutError(f"no output of rank 2 or 3 among {shape_text(outputs)}; not a YOLO detector")
    main = next((o for o in ranked if o.name == "output0"), ranked[0])
    others = [o for o in outputs if o is not main]
    if any(len(o.shape) < 4 for o in others) or len(protos) > 1:
        raise LayoutError(f"several unrelated outputs {shape_text(outputs)}; expected one detection output")
    # beside it: a segment model's prototypes [N, M, H/4, W/4], or YOLOv5's per-level raw maps (rank 5)
    return main, (protos[0].shape[1] if protos else 0)


def _expected(anchors: int) -> str:
    """Every family's output shapes: `a, b or c`."""
    shapes = [shape for fam in registry.families() for shape in fam.expected(anchors)]
    return ", ".join(shapes[:-1]) + " or " + shapes[-1] if len(shapes) > 1 else "".join(shapes)


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
    known = registry.names()
    if override not in ("auto", *known):
        raise LayoutError(f"layout {override!r} is not one of {['auto', *known]}")
    task = meta.get("task", "").strip().lower()
    if task in UNSUPPORTED_TASKS:
        raise LayoutError(f"metadata task {task!r} ({UNSUPPORTED_TASKS[task]}) is not a box detector we decode")
    found = Found(size, strides, names, override, override_from, meta, names_from, task)
    for fam in registry.families():
        spread = fam.from_outputs(outputs, found)
        if spread is not None:
            return spread
    main, masks = _main_output(outputs)
    found = replace(found, masks=masks)
    return _claimant(main, found).recognise(main, found, probe)


def _claimant(main: OutputInfo, found: Found) -> LayoutFamily:
    """The family surest that `main` is its own (ties: the earlier in the registry), or LayoutError."""
    shape, anchors = main.shape, found.anchors
    if len(shape) == 2 and shape[1] != 7:
        raise LayoutError(
            f"output '{main.name}' is {list(shape)}: not a detector output; a rank-2 output must be [D, 7] "
            f"rows after NMS (batch, x1, y1, x2, y2, class, score), else expected {_expected(anchors)}"
        )
    best: tuple[Claim, LayoutFamily] | None = None
    for fam in registry.families():
        claim = fam.claim(main, found)
        if claim is not None and (best is None or claim > best[0]):
            best = (claim, fam)
    if best is not None:
        return best[1]
    override = found.override
    raise LayoutError(
        f"output '{main.name}' is {list(shape)}; for a {found.size}x{found.size} input with strides "
        f"{list(found.strides)} expected {_expected(anchors)}"
        + (f"; layout {override!r} from {found.override_from}" if override != "auto" else "")
    )
