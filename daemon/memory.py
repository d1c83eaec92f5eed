"""Process and device memory samples, for rebuilding sessions whose memory keeps growing."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass

from daemon.engine import gpu_memory_used_mb


@dataclass(frozen=True, slots=True)
class MemorySample:
    """Process RSS and device memory in MiB; None where it cannot be read."""

    rss_mb: float | None
    device_mb: float | None = None

    def growth_mb(self, since: MemorySample) -> float | None:
        """The larger growth of the two since `since` (None when nothing is comparable)."""
        pairs = ((self.rss_mb, since.rss_mb), (self.device_mb, since.device_mb))
        growths = [now - then for now, then in pairs if now is not None and then is not None]
        return max(growths) if growths else None


def read_rss_mb(status_path: str = "/proc/self/status") -> float | None:
    """VmRSS of this process in MiB (None where /proc is absent)."""
    try:
        with open(status_path, encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def process_memory(device_id: int | None) -> MemorySample:
    """RSS, plus device memory via NVML when `device_id` is given and NVML reports it."""
    device_mb = gpu_memory_used_mb(device_id)[0] if device_id is not None else None
    return MemorySample(read_rss_mb(), device_mb)


def _load_libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


_LIBC = _load_libc()


def release_free_memory() -> bool:
    """Give freed heap pages back to the OS (glibc `malloc_trim(0)`); False where unavailable.

    A closed ONNX Runtime session frees its arena into glibc's heaps, which keep the pages:
    the soak showed RSS stepping up at each rebuild without this.
    """
    if _LIBC is None:
        return False
    return bool(_LIBC.malloc_trim(0))


M_ARENA_MAX = -8  # glibc mallopt parameter numbers (malloc.h)
DEFAULT_ARENA_MAX = 2


def limit_malloc_arenas(arena_max: int = DEFAULT_ARENA_MAX) -> int | None:
    """Cap glibc's malloc arenas, as `MALLOC_ARENA_MAX` would, unless that variable is set.

    glibc gives threads that contend for the heap their own arena, up to 8 per core; decoder,
    ORT and rebuild threads each keep freed memory in theirs, and RSS then creeps up with every
    session rebuild and reconnect. Called first thing in `beltsight run`, before any thread
    starts, so the cap holds however the daemon is launched (systemd unit, shell, container).
    Returns the cap set, or None (variable set by the operator, or not glibc).
    """
    if "MALLOC_ARENA_MAX" in os.environ or _LIBC is None or not hasattr(_LIBC, "mallopt"):
        return None
    return arena_max if _LIBC.mallopt(M_ARENA_MAX, arena_max) == 1 else None
