"""The allocator cap `beltsight run` applies before its threads start."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from daemon.core import memory


def tuned(env: dict[str, str]) -> str:
    """What `tune_malloc()` applies in a fresh process (mallopt must run before threads start)."""
    code = "from daemon.core.memory import tune_malloc\nprint(sorted(tune_malloc().items()))"
    base = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=base | env, check=True)
    return out.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")
def test_arena_cap_and_mmap_threshold_are_applied_in_a_fresh_process() -> None:
    expected = [("arena_max", memory.DEFAULT_ARENA_MAX), ("mmap_threshold", memory.DEFAULT_MMAP_THRESHOLD)]
    assert tuned({}) == str(expected)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")
def test_operator_settings_win() -> None:
    assert tuned({"MALLOC_ARENA_MAX": "4"}) == str([("mmap_threshold", memory.DEFAULT_MMAP_THRESHOLD)])
    assert tuned({"MALLOC_MMAP_THRESHOLD_": "65536"}) == str([("arena_max", memory.DEFAULT_ARENA_MAX)])
