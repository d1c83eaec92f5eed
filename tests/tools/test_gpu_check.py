"""tools/checks/gpu_check.py (`python -m tools.checks.gpu_check`), the script a GPU host runs first,
also runs here: every CPU-side check passes, and every GPU check it cannot run is listed as skipped
with the reason (never passed)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from daemon.core.xp import cupy_status

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


@pytest.mark.skipif(not (REPO / "models" / "conveyor-640.onnx").is_file(), reason="demo models not built")
def test_gpu_check_runs_and_says_what_it_skipped(tmp_path: Path) -> None:
    out = tmp_path / "gpu_check.json"
    done = subprocess.run(
        [sys.executable, "-m", "tools.checks.gpu_check", "--batch", "2", "--json", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["checks"] and all(c["ok"] for c in report["checks"])
    names = {c["name"] for c in report["checks"]}
    assert "IO binding vs session.run on the CPU (conveyor-640.onnx)" in names
    assert {"decode", "pre-processing", "inference", "post-processing"} <= set(report["timings"])
    if not cupy_status(0)[0]:
        assert len(report["skipped"]) >= 4
        assert all(s["why"] for s in report["skipped"])
        assert "[SKIP]" in done.stdout
        strict = subprocess.run(
            [sys.executable, "-m", "tools.checks.gpu_check", "--batch", "1", "--require-gpu"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=280,
            check=False,
        )
        assert strict.returncode == 1  # on a host meant to prove the GPU path, a skip is a failure
