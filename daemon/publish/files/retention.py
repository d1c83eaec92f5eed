"""Retention of a directory of written files: by age and by total size, the oldest removed first.

The index (each file's time, path and size, oldest first) is built by one walk of the directory when
the writer starts; after that each written file is appended and each removal pops the oldest, so a
write costs no directory walk. A file may have companions (a captured image's label file): they are
counted in its size and removed with it. Owned by the writer's thread only (not thread-safe)."""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

Companions = Callable[[Path], Sequence[Path]]
"""The files that belong to an indexed file and go with it (none by default)."""


def _alone(_path: Path) -> Sequence[Path]:
    return ()


@dataclass(frozen=True, slots=True)
class Entry:
    written_s: float
    """Wall-clock Unix seconds (the file's mtime)."""
    path: Path
    size: int
    """Bytes, its companions' included."""


class Retention:
    """The directory's files ending in `suffix` (and their companions), oldest first, and their total size."""

    def __init__(
        self,
        root: Path,
        *,
        retain_s: float,
        max_bytes: int,
        suffix: str = ".jpg",
        companions: Companions = _alone,
    ) -> None:
        self.root = root
        self.retain_s = retain_s
        self.max_bytes = max_bytes
        self.suffix = suffix
        self.companions = companions
        self._entries: deque[Entry] = deque()
        self.total_bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def scan(self) -> None:
        """Index what is on disk (once, at start): every file ending in `suffix` under the root, by mtime."""
        found: list[Entry] = []
        for folder, _dirs, files in os.walk(self.root):
            for name in files:
                if not name.endswith(self.suffix):
                    continue
                path = Path(folder, name)
                try:
                    st = path.stat()
                except OSError:
                    continue
                found.append(Entry(st.st_mtime, path, st.st_size + sum(map(_size, self.companions(path)))))
        found.sort(key=lambda e: e.written_s)
        self._entries = deque(found)
        self.total_bytes = sum(e.size for e in found)

    def added(self, path: Path, size: int, written_s: float) -> None:
        self._entries.append(Entry(written_s, path, size))
        self.total_bytes += size

    def expire(self, now_s: float, incoming: int = 0) -> tuple[int, int]:
        """Remove the oldest files while they are older than `retain_s`, or while the total plus
        `incoming` bytes is over `max_bytes`; returns (removed for age, removed for size)."""
        by_age = by_size = 0
        while self._entries:
            oldest = self._entries[0]
            if now_s - oldest.written_s > self.retain_s:
                by_age += 1
            elif self.total_bytes + incoming > self.max_bytes:
                by_size += 1
            else:
                break
            self._entries.popleft()
            self.total_bytes -= oldest.size
            self._remove(oldest.path)
        return by_age, by_size

    def _remove(self, path: Path) -> None:
        for companion in self.companions(path):
            with contextlib.suppress(FileNotFoundError):
                companion.unlink()
        with contextlib.suppress(FileNotFoundError):  # removed by hand: already gone
            path.unlink()
        folder = path.parent
        if folder != self.root and (not self._entries or self._entries[0].path.parent != folder):
            with contextlib.suppress(OSError):  # not empty: a newer file of that day, or something else's
                folder.rmdir()  # a day's folder, once its last file is gone


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


__all__ = ["Companions", "Entry", "Retention"]
