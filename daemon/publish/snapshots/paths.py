"""Snapshot paths: the name each crossing's JPEG gets, and the safe way back from a requested path to a file."""

from __future__ import annotations

import time
from pathlib import Path

from daemon.core.objects import ObjectEvent
from daemon.publish.files.paths import resolve as resolve_file

SUFFIX = ".jpg"


def snapshot_path(event: ObjectEvent) -> str:
    """`<camera>/<YYYY-MM-DD>/<at_ms>-<track>-<line>-<direction>.jpg` (UTC date of the crossing): unique per
    crossing (a track crosses a line in one direction once at a time), sorted by time within a day."""
    day = time.strftime("%Y-%m-%d", time.gmtime(event.at_ms / 1000))
    return f"{event.camera}/{day}/{event.at_ms}-{event.track}-{event.line}-{event.direction}{SUFFIX}"


def resolve(root: Path, relative: str) -> Path | None:
    """The JPEG file `relative` names inside `root`, or None (`daemon.publish.files.paths.resolve`: no
    absolute paths, no `..`, `.`, empty or odd components, no symlinks leading out, nothing missing)."""
    return resolve_file(root, relative, SUFFIX)


__all__ = ["SUFFIX", "resolve", "snapshot_path"]
