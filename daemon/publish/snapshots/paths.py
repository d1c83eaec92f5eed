"""Snapshot paths: the name each crossing's JPEG gets, and the safe way back from a requested path to a file."""

from __future__ import annotations

import re
import time
from pathlib import Path

from daemon.core.objects import ObjectEvent

SUFFIX = ".jpg"
_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
"""One path component: camera ids, dates, file names. No empty part, no `.`/`..`, no leading dot."""
MAX_DEPTH = 3


def snapshot_path(event: ObjectEvent) -> str:
    """`<camera>/<YYYY-MM-DD>/<at_ms>-<track>-<line>-<direction>.jpg` (UTC date of the crossing): unique per
    crossing (a track crosses a line in one direction once at a time), sorted by time within a day."""
    day = time.strftime("%Y-%m-%d", time.gmtime(event.at_ms / 1000))
    return f"{event.camera}/{day}/{event.at_ms}-{event.track}-{event.line}-{event.direction}{SUFFIX}"


def resolve(root: Path, relative: str) -> Path | None:
    """The JPEG file `relative` names inside `root`, or None: a path that is absolute, has a `..`, `.`,
    empty or odd component, is not a `.jpg`, does not exist, or leads outside `root` through a symlink
    (both `root` and the file are resolved, so a link inside the directory to a file inside it still works)."""
    parts = relative.split("/")
    if not relative.endswith(SUFFIX) or len(parts) > MAX_DEPTH or not all(_PART.fullmatch(p) for p in parts):
        return None
    try:
        base = root.resolve(strict=True)
        path = base.joinpath(*parts).resolve(strict=True)
    except (OSError, RuntimeError):  # missing, or a symlink loop
        return None
    if not path.is_relative_to(base) or not path.is_file():
        return None
    return path


__all__ = ["SUFFIX", "resolve", "snapshot_path"]
