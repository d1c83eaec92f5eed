"""The `[clips]` section: a video clip around each line crossing, remuxed from the camera's own packets
(off by default; `daemon.publish.clips`, `docs/configuration/clips.md`)."""

from __future__ import annotations

from pathlib import Path
from typing import Self

from pydantic import Field, model_validator

from daemon.config.base import Section


class ClipsConfig(Section):
    """Which crossings get a clip, how much video around them, where clips go and how long they stay."""

    enabled: bool = False
    """true: each camera's reader keeps a ring of its last encoded packets, and each `crossed` event on a
    selected line names its clip (`clip`, a path relative to `dir`; `clip_offset_ms`, where in the clip the
    crossing is), served at `GET /clips/<path>` on the health endpoint. The file appears (whole) at most
    `post_s` + 5 s after the crossing."""
    dir: Path | None = None
    """The directory clips are written under (`<camera>/<YYYY-MM-DD>/<start_ms>-<at_ms>.mp4`, UTC dates);
    required when `enabled`. Relative paths are relative to the working directory."""
    pre_s: float = Field(default=5.0, ge=0, le=60)
    """Seconds of video before the crossing: the clip starts at the keyframe at or before this much before
    it, so the real pre-roll is up to one keyframe interval longer (or shorter, just after a reconnect), and
    `clip_offset_ms` says what it is. Each camera's packet ring holds this plus 3 s plus one keyframe interval."""
    post_s: float = Field(default=5.0, ge=0, le=60)
    """Seconds of video after the crossing."""
    max_s: float = Field(default=60.0, gt=0, le=600)
    """The longest a clip grows: a crossing inside an open clip extends it to its own `post_s` while the clip
    stays within `max_s` from its first packet (and within 3 s past its first crossing's `post_s`, so that
    every crossing it names finds it complete within `post_s` + 5 s); beyond that the crossing opens a clip
    of its own."""
    lines: list[str] = Field(default_factory=list)
    """Line ids whose crossings get clips (on any camera); empty: every line."""
    labels: list[str] = Field(default_factory=list)
    """Class labels whose crossings get clips; empty: every label."""
    retention_days: float = Field(default=7.0, gt=0)
    """Clips older than this are removed (checked after every clip and at least once a minute)."""
    max_mib: float = Field(default=4096.0, gt=0)
    """The most the clips may take on disk together, in MiB: the oldest go first beyond it."""

    @model_validator(mode="after")
    def _dir_when_enabled(self) -> Self:
        if self.enabled and self.dir is None:
            raise ValueError("dir: required when clips are enabled")
        if self.max_s < self.pre_s + self.post_s:
            raise ValueError("max_s: must be at least pre_s + post_s")
        return self


__all__ = ["ClipsConfig"]
