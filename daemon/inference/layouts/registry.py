"""Every layout family, in one explicit table (no registration by import): recognition asks them
in this order (the surest `Claim` wins, ties go to the earlier family), and config and metadata may
name them. Adding a family: its module, and one line here."""

from __future__ import annotations

from typing import Any

from daemon.core.model_spec import Color, LayoutName, Padding
from daemon.inference.layouts.base import LayoutError, LayoutFamily, ModelLayout
from daemon.inference.layouts.end2end import End2End
from daemon.inference.layouts.yolov5 import YoloV5
from daemon.inference.layouts.yolov8 import YoloV8
from daemon.inference.layouts.yolox import Yolox

FAMILIES: dict[LayoutName, LayoutFamily] = {
    "yolov8": YoloV8(),
    "yolov5": YoloV5(),
    "yolox": Yolox(),
    "end2end": End2End(),
}


def names() -> tuple[LayoutName, ...]:
    """The families' names, in registry order (what `layout` in config or metadata may say)."""
    return tuple(FAMILIES)


def families() -> tuple[LayoutFamily, ...]:
    return tuple(FAMILIES.values())


def family(name: str) -> LayoutFamily:
    found = next((f for n, f in FAMILIES.items() if n == name), None)
    if found is None:
        raise LayoutError(f"layout {name!r} is not one of {list(FAMILIES)}")
    return found


def family_of(layout: ModelLayout) -> LayoutFamily:
    """The family that reads `layout`."""
    return family(layout.name)


def default_convention(layout: str) -> tuple[Color, float, Padding, str]:
    """Colour, scale, padding and origin a layout's own ecosystem uses when nothing says otherwise."""
    found = family(layout)
    return found.color, found.scale, found.padding, found.convention_origin


def warm_up_mismatch(layout: ModelLayout, out: Any, batch: int) -> str:
    """Why a (joined) output of a `batch`-image run does not fit `layout`; "" when it fits."""
    return family_of(layout).mismatch(layout, tuple(int(d) for d in out.shape), batch)
