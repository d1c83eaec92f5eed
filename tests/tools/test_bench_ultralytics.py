"""The bench's Ultralytics baseline (`--ultralytics PYTHON`, tools/bench/ultralytics_run.py).

Ultralytics needs PyTorch, which the project does not install: the runner is exercised here in this
interpreter against a stand-in `ultralytics` package that has the one call the runner makes
(`YOLO(file, task=...).predict(source=..., stream=True, ...)`, a generator of results) and, like the
real one, logs on stdout. The real package runs it in `python -m tools.bench --null-model --ultralytics`
(docs/reports/performance.md has that run)."""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tools.bench.baselines import ultralytics_phase
from tools.bench.cli import parse_args
from tools.bench.null_bench import ultralytics_lines

REPO = Path(__file__).resolve().parents[2]
RUNNER = REPO / "tools" / "bench" / "ultralytics_run.py"

STAND_IN = """
import sys, time
from pathlib import Path

class YOLO:
    def __init__(self, model, task=None):
        print(f"Loading {model} for ONNX Runtime inference...")  # Ultralytics logs on stdout
        self.model, self.task = model, task

    def predict(self, source, stream, imgsz, rect, verbose, save):
        urls = Path(source).read_text().split()
        print(f"predict {self.model} task={self.task} imgsz={imgsz} rect={rect} stream={stream} urls={urls}",
              file=sys.stderr, flush=True)
        for _ in range(MODE_FRAMES):
            print("0: 640x640 7 bolts, 0.2ms")
            yield object()
        if MODE_FAIL:
            raise RuntimeError("stream 1 ended")
        time.sleep(60)
"""


def stand_in(tmp_path: Path, *, frames: int, fail: bool) -> dict[str, str]:
    package = tmp_path / "ultralytics"
    package.mkdir()
    source = STAND_IN.replace("MODE_FRAMES", str(frames)).replace("MODE_FAIL", str(fail))
    (package / "__init__.py").write_text(textwrap.dedent(source) + '\n__version__ = "0.0-stand-in"\n')
    return {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}


def start(tmp_path: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    cmd = [sys.executable, str(RUNNER), "--model", "null.onnx", "--imgsz", "416", "rtsp://a/1", "rtsp://a/2"]
    return subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_runner_prints_only_its_counting_lines_on_stdout_and_predicts_every_stream_at_once(tmp_path: Path) -> None:
    proc = start(tmp_path, stand_in(tmp_path, frames=25, fail=False))
    assert proc.stdout is not None
    try:
        lines = [proc.stdout.readline().split() for _ in range(3)]
    finally:
        proc.kill()
        _, err = proc.communicate(timeout=10)
    assert all(len(line) == 3 for line in lines), lines  # the Ultralytics chatter went to stderr
    counts, cpu, at = ([float(line[i]) for line in lines] for i in range(3))
    assert counts[-1] == 25  # every result yielded is a predicted image
    assert cpu == sorted(cpu) and at == sorted(at) and at[-1] - at[0] >= 1.5
    assert "Loading null.onnx for ONNX Runtime inference" in err
    assert "task=detect imgsz=416 rect=False stream=True urls=['rtsp://a/1', 'rtsp://a/2']" in err


def test_a_predictor_that_stops_ends_the_runner_with_status_1(tmp_path: Path) -> None:
    proc = start(tmp_path, stand_in(tmp_path, frames=3, fail=True))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert "ultralytics_run: RuntimeError: stream 1 ended" in err


def test_an_interpreter_without_ultralytics_is_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--null-model", "--ultralytics", sys.executable, "--out", str(tmp_path)])
    assert "cannot import ultralytics and onnxruntime (ModuleNotFoundError" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["--ultralytics", str(tmp_path / "no-python"), "--out", str(tmp_path)])
    assert "cannot run it (FileNotFoundError" in capsys.readouterr().err


def interpreter(tmp_path: Path, env: dict[str, str]) -> Path:
    """An interpreter that finds the stand-in package, as a venv with ultralytics installed finds the real one."""
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={env["PYTHONPATH"]} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return python


def test_an_interpreter_with_it_is_taken_with_its_version(tmp_path: Path) -> None:
    python = interpreter(tmp_path, stand_in(tmp_path, frames=1, fail=False))
    args = parse_args(["--null-model", "--ultralytics", str(python), "--out", str(tmp_path)])
    assert args.ultralytics_version == "0.0-stand-in"


def test_a_predictor_that_never_runs_leaves_the_run_its_report(tmp_path: Path) -> None:
    python = interpreter(tmp_path, stand_in(tmp_path, frames=0, fail=True))
    args = argparse.Namespace(ultralytics=python, model=416, seconds=1.0)
    result = ultralytics_phase(args, ["rtsp://a/1"], tmp_path / "null.onnx")
    assert result is not None and math.isnan(result["fps"])
    assert "ultralytics_run.py did not start" in result["error"]
    assert ultralytics_phase(argparse.Namespace(ultralytics=None), ["rtsp://a/1"], tmp_path / "null.onnx") is None


def test_the_table_gives_the_daemons_frames_per_second_over_ultralytics() -> None:
    def row(cameras: int, fps: float, ultra: dict[str, Any] | None) -> dict[str, Any]:
        return {"cameras": cameras, "lanes": "gpu", "preprocess": "host", "processes": "auto", "fps": fps} | {
            "ultralytics": ultra
        }

    rows = [
        row(8, 120.0, {"fps": 80.0, "core_pct": 113.0, "ms_per_frame": 13.7}),
        row(16, 240.0, None),
        row(24, 360.0, {"fps": 0.0, "core_pct": 5.0, "ms_per_frame": float("nan")}),
    ]
    lines = ultralytics_lines(rows, "8.4.190")
    assert "Ultralytics 8.4.190" in lines[1]
    assert lines[3].split() == ["8", "gpu", "host", "auto", "80.0", "1.13", "13.70", "1.50"]
    assert lines[4].split()[-1] == "nan" and len(lines) == 5  # the count it did not run is left out
    assert ultralytics_lines([row(8, 120.0, None)], "") == []


def test_the_runner_needs_nothing_of_the_project() -> None:
    text = RUNNER.read_text()
    assert "from daemon" not in text and "from tools" not in text and "import daemon" not in text
    out = subprocess.run(  # -I: neither the project nor the script's folder on sys.path
        [sys.executable, "-I", str(RUNNER), "--help"], capture_output=True, text=True, check=True, timeout=60
    )
    assert "usage:" in out.stdout
