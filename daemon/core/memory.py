"""Process and device memory samples, for rebuilding sessions whose memory keeps growing."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass

from daemon.core.nvml import gpu_memory_used_mb


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


def read_rss_mb(status_path: str = "/proc/self/status", *, peak: bool = False) -> float | None:
    """VmRSS of this process in MiB, or with `peak` VmHWM, its high-water mark (None where
    /proc is absent)."""
    key = "VmHWM:" if peak else "VmRSS:"
    try:
        with open(status_path, encoding="ascii") as fh:
            for line in fh:
                if line.startswith(key):
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

    A closed ONNX Runtime session's large blocks (its arena's regions) are unmapped at once,
    since `tune_malloc` fixes the mmap threshold; its many small allocations (graph, kernels)
    go back to glibc's heaps, which keep their pages until trimmed. Called after each rebuild.
    """
    if _LIBC is None:
        return False
    return bool(_LIBC.malloc_trim(0))


M_MMAP_THRESHOLD = -3  # glibc mallopt parameter numbers (malloc.h)
M_ARENA_MAX = -8
DEFAULT_ARENA_MAX = 2
DEFAULT_MMAP_THRESHOLD = 256 * 1024


def tune_malloc(arena_max: int = DEFAULT_ARENA_MAX, mmap_threshold: int = DEFAULT_MMAP_THRESHOLD) -> dict[str, int]:
    """Tune glibc's malloc for a process that runs for months; returns what was set.

    - `arena_max` (as `MALLOC_ARENA_MAX`): glibc gives threads that contend for the heap their
      own arena, up to 8 per core; decoder, ORT and rebuild threads each keep freed memory in
      theirs, and RSS creeps up with every session rebuild and reconnect.
    - `mmap_threshold` (as `MALLOC_MMAP_THRESHOLD_`): blocks this large (frames, batch outputs)
      get their own mapping, returned to the OS when freed. glibc's default raises the threshold
      to the largest block freed so far (up to 32 MiB), after which every ~1 MB frame is carved
      from the heap between long-lived objects, and the holes it leaves keep RSS growing in
      steps (the soak showed it at each session rebuild). Fixing it costs a few page faults per
      inferred frame.
    Each is skipped when the operator set its environment variable. Called first thing in
    `beltsight run`, before any thread starts, so it holds however the daemon is launched
    (systemd unit, shell, container). Empty where the C library is not glibc.
    """
    applied: dict[str, int] = {}
    if _LIBC is None or not hasattr(_LIBC, "mallopt"):
        return applied
    if "MALLOC_ARENA_MAX" not in os.environ and _LIBC.mallopt(M_ARENA_MAX, arena_max) == 1:
        applied["arena_max"] = arena_max
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ and _LIBC.mallopt(M_MMAP_THRESHOLD, mmap_threshold) == 1:
        applied["mmap_threshold"] = mmap_threshold
    return applied
