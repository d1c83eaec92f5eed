"""What the configuration says about one model, as a value the model room reads: its overrides
of the layout, the input convention and the labels (`[models.<size>]`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Color = Literal["rgb", "bgr"]
Padding = Literal["symmetric", "top-left"]
LayoutName = Literal["yolov8", "yolov5", "yolox", "end2end"]
"""The output layout families, named once: `[models.<size>] layout` accepts them (or `auto`) and
`daemon.inference.layouts.registry.FAMILIES` holds one family for each."""
LayoutChoice = Literal["auto", LayoutName]


@dataclass(frozen=True, slots=True)
class ModelOverrides:
    """What `[models.<size>]` sets for one model; None: from the file, else the layout's default."""

    layout: str = "auto"
    color: Color | None = None
    scale: float | None = None
    padding: Padding | None = None
    pad_value: int | None = None
    labels: tuple[str, ...] | None = None
    nms: str = "auto"
    """Dense layouts: NMS per class (`class-aware`: Ultralytics, YOLOv5), across classes
    (`class-agnostic`), or `auto`: what the layout's own ecosystem does (YOLOX's demo: across classes)."""
