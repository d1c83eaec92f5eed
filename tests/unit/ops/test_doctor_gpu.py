"""`beltsight doctor` on the GPU pipeline: it says what it found, and a config asking for
`device = "cuda"` where CUDA cannot serve it exits non-zero (here: no GPU, no CuPy)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from daemon.config.settings import load_settings
from daemon.core.xp import cupy_status
from daemon.ops.doctor import run_doctor
from tests.support.onnx_models import write_yolo_model

CUDA_USABLE = cupy_status(0)[0]


def write_config(tmp_path: Path, engine: str) -> Path:
    model = write_yolo_model(tmp_path / "m416.onnx", 416)
    path = tmp_path / "beltsight.toml"
    path.write_text(f'[models]\n416 = "{model}"\n\n[engine]\n{engine}\n', encoding="utf-8")
    return path


def test_cpu_config_reports_the_cpu_path(tmp_path: Path) -> None:
    settings = load_settings(write_config(tmp_path, 'providers = ["cpu"]\ndevice = "cpu"'))
    out = io.StringIO()
    assert run_doctor(settings, out=out, as_json=True) == 0
    gpu = json.loads(out.getvalue())["gpu"]
    assert gpu["array_device"] == "cpu"
    assert gpu["device_asked"] == "cpu"
    assert isinstance(gpu["hardware_decode"]["available"], bool)
    if not CUDA_USABLE:
        assert gpu["hardware_decode"]["available"] is False
        assert gpu["nvml_ok"] is False


@pytest.mark.skipif(CUDA_USABLE, reason="CUDA works here: a cuda config is satisfiable")
def test_device_cuda_without_a_gpu_exits_non_zero(tmp_path: Path) -> None:
    settings = load_settings(write_config(tmp_path, 'providers = ["cpu"]\ndevice = "cuda"'))
    out = io.StringIO()
    assert run_doctor(settings, out=out) == 1
    text = out.getvalue()
    assert "array module: NOT OK" in text
    assert text.rstrip().splitlines()[-1].startswith("result: NOT OK")
    auto = load_settings(write_config(tmp_path, 'providers = ["cpu"]\ndevice = "auto"'))
    out = io.StringIO()
    assert run_doctor(auto, out=out, as_json=True) == 0  # auto settles for the CPU, and says so
    assert json.loads(out.getvalue())["gpu"]["array_device"] == "cpu"


def test_tensorrt_cache_state_is_reported(tmp_path: Path) -> None:
    cache = tmp_path / "trt"
    engine = f'providers = ["tensorrt", "cuda", "cpu"]\nallow_fallback = true\n[engine.tensorrt]\ncache_dir = "{cache}"'
    settings = load_settings(write_config(tmp_path, engine))
    out = io.StringIO()
    run_doctor(settings, out=out, as_json=True)
    state = json.loads(out.getvalue())["gpu"]["tensorrt_cache"]["416"]
    assert str(cache) in state
    assert ("not built yet" in state) != ("built (" in state)
