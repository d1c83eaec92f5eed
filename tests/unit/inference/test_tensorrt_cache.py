"""TensorRT as an opt-in provider: options, cache directories keyed by what they were built for.

There is no TensorRT here (ORT lists the provider, but libnvinfer is absent), so the session
test checks what this machine can: the cache directory and key file are made before the build,
and a session that could not get TensorRT is refused (or, with allow_fallback, served on the CPU).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pydantic
import pytest

from daemon.config.engine import CudaOptions, EngineConfig, TensorRTOptions
from daemon.inference import tensorrt_cache
from daemon.inference.engine import Engine
from daemon.inference.model_file import load_model_info
from daemon.inference.providers import ProviderError, placement_providers, provider_specs
from tests.support.onnx_models import write_yolo_model

SIZE = 416


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return write_yolo_model(tmp_path / "m.onnx", SIZE)


def test_providers_tensorrt_then_cuda_then_cpu(tmp_path: Path) -> None:
    trt = TensorRTOptions(fp16=True, max_workspace_mb=512, builder_optimization_level=2)
    specs = provider_specs(
        ["tensorrt", "cuda", "cpu"], CudaOptions(device_id=1), 1234, tensorrt=trt, trt_cache_dir=tmp_path
    )
    names = [s[0] if isinstance(s, tuple) else s for s in specs]
    assert names == ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    opts = specs[0][1]  # type: ignore[index]
    assert opts["trt_engine_cache_enable"] == "1"
    assert opts["trt_engine_cache_path"] == str(tmp_path)
    assert opts["trt_timing_cache_enable"] == "1"
    assert opts["trt_timing_cache_path"] == str(tmp_path)
    assert opts["trt_fp16_enable"] == "1"
    assert opts["trt_max_workspace_size"] == str(512 * 2**20)
    assert opts["trt_builder_optimization_level"] == "2"
    assert (opts["device_id"], opts["user_compute_stream"], opts["has_user_compute_stream"]) == ("1", "1234", "1")
    with pytest.raises(ValueError, match="cache directory"):
        provider_specs(["tensorrt", "cuda"], CudaOptions())


def test_tensorrt_needs_cuda_after_it_and_the_breaker_primary_keeps_it() -> None:
    with pytest.raises(pydantic.ValidationError, match='needs "cuda" after it'):
        EngineConfig(providers=["tensorrt", "cpu"])
    cfg = EngineConfig(providers=["tensorrt", "cuda", "cpu"])
    assert placement_providers(cfg, "cuda") == (["tensorrt", "cuda", "cpu"], False)
    assert placement_providers(EngineConfig(providers=["cpu"]), "cuda") == (["cuda", "cpu"], False)
    assert placement_providers(cfg, "cpu") == (["cpu"], False)


def test_cache_key_changes_with_model_ort_tensorrt_and_precision(
    tmp_path: Path, model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opts = TensorRTOptions(cache_dir=tmp_path / "cache")
    monkeypatch.setattr(tensorrt_cache, "tensorrt_version", lambda: "10.3.0")
    base = tensorrt_cache.cache_key(opts, model).name
    assert base.startswith("m-") and "-trt10.3.0-fp32" in base
    assert tensorrt_cache.cache_key(TensorRTOptions(fp16=True), model).name != base
    monkeypatch.setattr(tensorrt_cache, "tensorrt_version", lambda: "10.4.0")
    assert tensorrt_cache.cache_key(opts, model).name != base
    monkeypatch.setattr(tensorrt_cache, "tensorrt_version", lambda: "10.3.0")
    monkeypatch.setattr(tensorrt_cache.ort, "__version__", "9.9.9")
    assert tensorrt_cache.cache_key(opts, model).name != base
    monkeypatch.undo()
    monkeypatch.setattr(tensorrt_cache, "tensorrt_version", lambda: "10.3.0")
    other = write_yolo_model(tmp_path / "m.onnx", SIZE, image_gain=2.0)  # same name, other weights
    assert tensorrt_cache.cache_key(opts, other).name != base


def test_prepare_removes_a_cache_built_for_another_version(
    tmp_path: Path, model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opts = TensorRTOptions(cache_dir=tmp_path / "cache")
    monkeypatch.setattr(tensorrt_cache, "tensorrt_version", lambda: "10.3.0")
    old = tensorrt_cache.prepare(opts, model)
    (old.directory / "TensorrtExecutionProvider_TRTKernel_graph_0_sm89.engine").write_bytes(b"engine")
    assert tensorrt_cache.cache_state(opts, model).ready
    unrelated = tmp_path / "cache" / "m-notacache"
    unrelated.mkdir()  # no key.json: not ours, left alone
    monkeypatch.setattr(tensorrt_cache, "tensorrt_version", lambda: "10.4.0")
    fresh = tensorrt_cache.cache_state(opts, model)
    assert not fresh.ready
    assert fresh.stale == (old.directory,)
    assert "not built yet" in fresh.line() and "stale" in fresh.line()
    tensorrt_cache.prepare(opts, model)
    assert not old.directory.exists()
    assert unrelated.exists()
    assert (fresh.directory / tensorrt_cache.KEY_FILE).is_file()


def test_state_directory_follows_systemd_then_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("STATE_DIRECTORY", str(tmp_path / "state"))
    assert tensorrt_cache.cache_root(TensorRTOptions()) == tmp_path / "state" / "tensorrt"
    monkeypatch.delenv("STATE_DIRECTORY")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert tensorrt_cache.cache_root(TensorRTOptions()) == tmp_path / "xdg" / "beltsight" / "tensorrt"


def test_a_session_asked_for_tensorrt_here(tmp_path: Path, model: Path) -> None:
    """No TensorRT library here: refused without allow_fallback; with it, served on the CPU.
    Either way the keyed cache directory was made before the build."""
    info = load_model_info(model, SIZE)
    trt = TensorRTOptions(cache_dir=tmp_path / "cache")
    cfg = EngineConfig(providers=["tensorrt", "cuda", "cpu"], tensorrt=trt, max_batch=1)
    try:
        engine = Engine.create(info, cfg)
    except ProviderError as exc:
        assert "TensorrtExecutionProvider" in str(exc)
    else:  # a host with TensorRT
        assert "TensorrtExecutionProvider" in engine.providers
        engine.close()
    state = tensorrt_cache.cache_state(trt, model)
    assert (state.directory / tensorrt_cache.KEY_FILE).is_file()
    fallback = Engine.create(info, cfg.model_copy(update={"allow_fallback": True}))
    assert fallback.run(np.zeros((1, 3, SIZE, SIZE), np.float32)).shape[0] == 1
    fallback.close()
