"""The `[snapshots]` section: a JPEG of the frame each line crossing was found on (off by default)."""

from __future__ import annotations

from pathlib import Path
from typing import Self

from pydantic import Field, model_validator

from daemon.config.base import Section


class SnapshotsConfig(Section):
    """Where crossing snapshots go, what they show and how long they stay (`docs/operations/snapshots.md`)."""

    enabled: bool = False
    """true: each `crossed` event gets a JPEG, named in the event's `snapshot` field (a path relative to
    `dir`) and served at `GET /snapshots/<path>` on the health endpoint."""
    dir: Path | None = None
    """The directory snapshots are written under (`<camera>/<YYYY-MM-DD>/<at_ms>-<track>-<line>-<direction>.jpg`,
    UTC dates); required when `enabled`. Relative paths are relative to the working directory."""
    quality: int = Field(default=85, ge=1, le=100)
    """JPEG quality (libjpeg's 1..100 scale)."""
    crop: bool = False
    """true: only the crossing part with a margin (its box grown by a quarter of its size on each side);
    false: the whole frame."""
    draw_box: bool = True
    """true: the crossing part's box drawn in its class colour; false: a clean copy of the picture."""
    retain_days: float = Field(default=7.0, gt=0)
    """Snapshots older than this are removed (checked at every write and at least once a minute)."""
    max_mb: float = Field(default=1024.0, gt=0)
    """The most the snapshots may take on disk together, in MiB: the oldest go first beyond it."""
    queue: int = Field(default=16, ge=1, le=1024)
    """Snapshots waiting for the encoder at most; a crossing that finds the queue full gets no snapshot
    (counted, `beltsight_snapshots_dropped_total{reason="queue_full"}`)."""

    @model_validator(mode="after")
    def _dir_when_enabled(self) -> Self:
        if self.enabled and self.dir is None:
            raise ValueError("dir: required when snapshots are enabled")
        return self


__all__ = ["SnapshotsConfig"]
