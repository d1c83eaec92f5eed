"""The package stays `mypy --strict` and `ruff` clean (the same commands a developer runs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=600, check=False
    )


def test_ruff_is_clean() -> None:
    result = run("ruff", "check", "daemon", "tests", "tools")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean_on_the_package() -> None:
    result = run("mypy", "daemon")
    assert result.returncode == 0, result.stdout + result.stderr
