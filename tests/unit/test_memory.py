"""The allocator cap `beltsight run` applies before its threads start."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from daemon import memory


def test_operator_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert memory.limit_malloc_arenas() is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")
def test_arena_cap_is_applied_in_a_fresh_process() -> None:
    code = "from daemon.memory import limit_malloc_arenas\nprint(limit_malloc_arenas())"
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == str(memory.DEFAULT_ARENA_MAX)
