"""Model layouts and input conventions: what a detector's outputs mean and what its input wants.

One family per module behind `base.LayoutFamily` (recognise its outputs, its ecosystem's input
convention, the output shape a warm-up run must give, decode into candidate boxes): `yolov8`,
`yolov5`, `yolox`, `end2end` (rows after NMS); `dense` holds what the three dense families share,
`registry.FAMILIES` lists them all. Adding a family is its module and one line in that table.

A `ModelLayout` (how to read the output; post-processing reads it) is recognised once per file by
`daemon.inference.recognise.recognise`, unless `[models.<size>]` or metadata names it; an
`InputConvention` (how to fill the input; pre-processing reads it) comes from
`daemon.inference.model_meta`. Both keep where they came from, which `doctor` and `check-config`
print. Boxes are always in model-input pixels.
"""

from daemon.core.model_spec import LayoutName
from daemon.inference.layouts.base import (
    MAX_LOG_WH,
    BoxMapping,
    InputConvention,
    InputDtype,
    LayoutError,
    LayoutFamily,
    ModelLayout,
    OutputInfo,
    anchor_grid,
    expected_anchors,
)
from daemon.inference.layouts.registry import (
    FAMILIES,
    default_convention,
    families,
    family,
    family_of,
    names,
    warm_up_mismatch,
)
from daemon.inference.layouts.yolov8 import yolov8_layout

__all__ = [
    "FAMILIES",
    "MAX_LOG_WH",
    "BoxMapping",
    "InputConvention",
    "InputDtype",
    "LayoutError",
    "LayoutFamily",
    "LayoutName",
    "ModelLayout",
    "OutputInfo",
    "anchor_grid",
    "default_convention",
    "expected_anchors",
    "families",
    "family",
    "family_of",
    "names",
    "warm_up_mismatch",
    "yolov8_layout",
]
