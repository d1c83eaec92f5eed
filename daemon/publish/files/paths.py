"""`resolve`: the safe way back from a requested relative path to a written file (snapshots, clips)."""

from __future__ import annotations

import re
from pathlib import Path

PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
"""One path component: camera ids, dates, file names. No empty part, no `.`/`..`, no leading dot."""
MAX_DEPTH = 3


def resolve(root: Path, relative: str, suffix: str) -> Path | None:
    """The file ending in `suffix` that `relative` names inside `root`, or None: a path that is absolute,
    has a `..`, `.`, empty or odd component, has another suffix, does not exist, or leads outside `root`
    through a symlink (both `root` and the file are resolved, so a link inside the directory to a file
    inside it still works)."""
    parts = relative.split("/")
    if not relative.endswith(suffix) or len(parts) > MAX_DEPTH or not all(PART.fullmatch(p) for p in parts):
        return None
    try:
        base = root.resolve(strict=True)
        path = base.joinpath(*parts).resolve(strict=True)
    except (OSError, RuntimeError):  # missing, or a symlink loop
        return None
    if not path.is_relative_to(base) or not path.is_file():
        return None
    return path


__all__ = ["MAX_DEPTH", "PART", "resolve"]
