"""The array-module choice (daemon.core.xp): `[engine] device` against what the session really got.

No GPU and no CuPy here: "cuda" must refuse with the reasons, "auto" must pick the CPU and say
why, "cpu" is NumPy. On a GPU host with CuPy, "auto" with a CUDA session picks CuPy.
"""

from __future__ import annotations

import numpy as np
import pytest
import structlog

from daemon.core.xp import GpuUnavailableError, choose_device, cupy_status, is_device_array, pinned_empty, to_host

CUDA_SESSION = ("CUDAExecutionProvider", "CPUExecutionProvider")
CPU_SESSION = ("CPUExecutionProvider",)
CUPY_OK, CUPY_WHY = cupy_status(0)


def test_cpu_is_numpy_whatever_the_session() -> None:
    for providers in (CUDA_SESSION, CPU_SESSION):
        choice = choose_device("cpu", providers)
        assert (choice.device, choice.xp) == ("cpu", np)


def test_auto_needs_a_cuda_session_and_cupy() -> None:
    with structlog.testing.capture_logs() as logs:
        choice = choose_device("auto", CPU_SESSION)
    assert (choice.device, choice.xp) == ("cpu", np)
    assert "did not get CUDAExecutionProvider" in choice.reason
    assert [(e["event"], e["device"]) for e in logs] == [("array_device", "cpu")]
    on_gpu = choose_device("auto", CUDA_SESSION)
    if CUPY_OK:
        assert on_gpu.device == "cuda"
        assert on_gpu.xp.__name__ == "cupy"
    else:
        assert on_gpu.device == "cpu"
        assert CUPY_WHY in on_gpu.reason


def test_cuda_refuses_with_every_reason() -> None:
    with pytest.raises(GpuUnavailableError, match="did not get CUDAExecutionProvider"):
        choose_device("cuda", CPU_SESSION)
    if not CUPY_OK:
        with pytest.raises(GpuUnavailableError, match="CuPy"):
            choose_device("cuda", CUDA_SESSION)
    with pytest.raises(ValueError, match="'cpu', 'cuda' or 'auto'"):
        choose_device("gpu", CUDA_SESSION)


def test_pinned_host_buffers_and_host_copies() -> None:
    buf = pinned_empty((4, 6), np.uint8, "cpu")
    assert buf.shape == (4, 6) and buf.dtype == np.uint8
    arr = np.arange(6, dtype=np.float32)
    assert to_host(arr) is arr
    assert not is_device_array(arr)
    if CUPY_OK:
        pinned = pinned_empty((4, 6), np.uint8, "cuda")
        pinned[:] = 7
        assert int(pinned.sum()) == 7 * 24
    else:
        with pytest.raises(GpuUnavailableError):
            pinned_empty((4, 6), np.uint8, "cuda")
