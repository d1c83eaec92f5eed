"""The `[models]` settings section: one ONNX file per input size, with its layout and input convention.

Either form, per size (both may be mixed):

    [models]
    640 = "models/conveyor-640.onnx"      # the plain form: layout and convention from the file

    [models.416]
    path = "models/their-yolox.onnx"
    layout = "yolox"          # auto (default) | yolov8 | yolov5 | yolox | end2end
    color = "bgr"             # rgb | bgr
    scale = 1.0               # multiplier for 0..255 pixels (1/255: 0..1 input)
    padding = "top-left"      # symmetric | top-left
    pad_value = 114
    labels = ["part"]         # when the file carries no names
    nms = "class-agnostic"    # auto (default: YOLOX files across classes, as YOLOX's demo; others per class)
                              # | class-aware | class-agnostic

A key left out comes from the file's metadata, else from the layout's own ecosystem (YOLOX:
BGR, 0..255, top-left; the others: RGB, 1/255, symmetric), else the defaults above. The names
follow DeepStream's `nvinfer` keys in meaning (`model-color-format`, `net-scale-factor`,
`symmetric-padding`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from daemon.config.base import Section
from daemon.core.model_spec import Color, LayoutChoice, ModelOverrides, Padding


class ModelConfig(Section):
    """One `[models.<size>]` entry (the plain `size = "path"` form sets only `path`)."""

    path: Path
    """The ONNX file (a relative path is relative to the config file)."""
    layout: LayoutChoice = "auto"
    """How the outputs are decoded; auto: the file's metadata `layout`, else recognised from the graph
    at startup (output shapes, metadata, a probe run)."""
    color: Color | None = None
    """Channel order the model takes (None: the file's metadata, else BGR for YOLOX files, RGB otherwise)."""
    scale: float | None = Field(None, gt=0)
    """Multiplier for 0..255 pixel values, 1/255 for a 0..1 input (None: the file's metadata, else
    1.0 for YOLOX files, 1/255 otherwise)."""
    padding: Padding | None = None
    """Where the letterbox puts the image: centred, or at the top-left with the padding right and
    below (None: the file's metadata, else top-left for YOLOX files, symmetric otherwise)."""
    pad_value: int | None = Field(None, ge=0, le=255)
    """Pixel value of the letterbox padding, 0..255 (None: the file's metadata, else 114)."""
    labels: list[str] | None = None
    """Class names in class-id order, one per model class (None: the file's `names`; without either,
    the class ids are published as labels)."""
    nms: Literal["auto", "class-aware", "class-agnostic"] = "auto"
    """Dense layouts: NMS per class (Ultralytics, YOLOv5) or across classes (YOLOX's own demo);
    `auto`: the layout's own ecosystem's choice."""

    @model_validator(mode="before")
    @classmethod
    def _plain_path(cls, value: Any) -> Any:
        """`640 = "file.onnx"` means `[models.640] path = "file.onnx"`."""
        return {"path": value} if isinstance(value, str | Path) else value

    @field_validator("labels")
    @classmethod
    def _check_labels(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and (not v or not all(isinstance(x, str) and x.strip() for x in v)):
            raise ValueError("must be a non-empty list of non-empty labels")
        if v is not None and len(set(v)) != len(v):
            raise ValueError("labels must be unique")
        return v

    def overrides(self) -> ModelOverrides:
        """What this entry sets, for `daemon.inference.model_file.load_model_info`."""
        return ModelOverrides(
            layout=self.layout,
            color=self.color,
            scale=self.scale,
            padding=self.padding,
            pad_value=self.pad_value,
            labels=tuple(self.labels) if self.labels is not None else None,
            nms=self.nms,
        )

    def resolved(self, base: Path) -> ModelConfig:
        """The same entry with `path` made absolute against `base` (the config file's folder)."""
        return self if self.path.is_absolute() else self.model_copy(update={"path": (base / self.path).resolve()})


def model_paths(models: dict[int, ModelConfig]) -> dict[int, Path]:
    """Size -> ONNX file."""
    return {size: m.path for size, m in models.items()}


def model_overrides(models: dict[int, ModelConfig]) -> dict[int, ModelOverrides]:
    """Size -> what its `[models.<size>]` entry sets."""
    return {size: m.overrides() for size, m in models.items()}
