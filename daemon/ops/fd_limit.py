"""The open-files limit: raised at startup from systemd's default soft 1,024 to the hard limit.

Cameras, Redis, the spool, ONNX Runtime and every HTTP client hold descriptors; running out means
a camera or Redis that reconnects cannot get a socket. `raise_nofile_limit()` sets the soft
RLIMIT_NOFILE to the hard one (the unit's `LimitNOFILE`), capped by the kernel's `nr_open`.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path

NR_OPEN = Path("/proc/sys/fs/nr_open")


@dataclass(frozen=True, slots=True)
class NofileLimit:
    before: int
    soft: int
    hard: int
    error: str | None = None


def _cap(hard: int) -> int:
    if hard != resource.RLIM_INFINITY:
        return hard
    try:
        return int(NR_OPEN.read_text())
    except (OSError, ValueError):
        return 1 << 20


def raise_nofile_limit() -> NofileLimit:
    """Soft limit := hard limit; what it was, what it is, and why not if that failed."""
    before, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _cap(hard)
    error = None
    if before < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError) as exc:
            error = str(exc)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return NofileLimit(before, soft, hard, error)
