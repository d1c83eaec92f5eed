"""The `[capture]` section: frames the model is unsure of, written as a YOLO dataset for relabelling
(off by default: on when `[[capture.strategies]]` lists at least one strategy)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from pydantic import Field, model_validator

from daemon.config.base import Section

StrategyType = Literal["close_to_threshold", "weak_track", "random"]


class CaptureStrategy(Section):
    """One reason to capture a frame, its chance and its per-camera limits (`docs/models/improving.md`)."""

    type: StrategyType
    """`close_to_threshold`: a detection scored within `epsilon` of the camera's `conf_threshold`, either
    side (under it: the weak detections a tracked camera keeps for its tracker); `weak_track`: a
    crossing made by a part the model saw only weakly (its best score under `conf_threshold + epsilon`),
    late (crossed before its track was confirmed) or on a weak detection, and a weak detection over a
    confirmed track's box; `random`: any frame."""
    epsilon: float = Field(default=0.1, gt=0, le=1)
    """How near the threshold counts as unsure (`close_to_threshold`, `weak_track`), in score units."""
    probability: float = Field(default=1.0, ge=0, le=1)
    """The chance that a frame this strategy picks is captured (`random`: the share of frames)."""
    per_minute: int = Field(default=6, ge=0)
    """Frames this strategy captures per camera in any 60 s at most."""
    per_hour: int = Field(default=60, ge=0)
    """Frames this strategy captures per camera in any hour at most."""


class CaptureConfig(Section):
    """Where captured frames go and which are captured (`docs/models/improving.md`)."""

    dir: Path | None = None
    """The dataset's directory: `images/<camera>/<ms>.jpg`, `labels/<camera>/<ms>.txt` (the model's
    published detections as pre-labels, `class cx cy w h` normalised) and `data.yaml` (class names);
    required when a strategy is listed. Relative paths are relative to the working directory."""
    max_mb: float = Field(default=2048.0, gt=0)
    """The most the images and labels may take on disk together, in MiB: the oldest go first beyond it."""
    quality: int = Field(default=90, ge=1, le=100)
    """JPEG quality (libjpeg's 1..100 scale)."""
    queue: int = Field(default=8, ge=1, le=1024)
    """Frames waiting for the encoder at most; a capture that finds the queue full is dropped (counted,
    `beltsight_capture_dropped_total{reason="queue_full"}`), never the frame."""
    strategies: list[CaptureStrategy] = Field(default_factory=list)
    """The `[[capture.strategies]]` entries, tried in order: a frame is captured once, for the first
    strategy that picks it, draws it (`probability`) and is within its limits."""

    @property
    def enabled(self) -> bool:
        return bool(self.strategies)

    @model_validator(mode="after")
    def _dir_when_enabled(self) -> Self:
        if self.strategies and self.dir is None:
            raise ValueError("dir: required when capture strategies are listed")
        return self


__all__ = ["CaptureConfig", "CaptureStrategy", "StrategyType"]
