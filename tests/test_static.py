"""The code stays `mypy --strict`, `ruff check` and `ruff format` clean (the same commands a developer runs).

`mypy` with no arguments checks what pyproject's `[tool.mypy]` names: the daemon and the tools, strict.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=600, check=False
    )


def test_ruff_is_clean() -> None:
    result = run("ruff", "check", "daemon", "tests", "tools")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean() -> None:
    result = run("ruff", "format", "--check", "daemon", "tools", "tests")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_configured_strict_for_the_daemon_and_the_tools() -> None:
    mypy = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert mypy["strict"] is True
    assert {"daemon", "tools"} <= set(mypy["files"])
    ours = [o for o in mypy.get("overrides", []) if any(str(m).startswith(("daemon", "tools")) for m in o["module"])]
    assert not [o for o in ours if o.get("ignore_errors")], "no `ignore_errors` on our own code"


def test_mypy_strict_is_clean_on_the_daemon_and_the_tools() -> None:
    result = run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
