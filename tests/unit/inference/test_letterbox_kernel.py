"""The CUDA letterbox kernel's source (daemon.inference.letterbox_kernel) against the xp path, on the CPU.

No GPU here, so the kernel body is compiled by g++ with a shim for the few CUDA names it uses
(blockIdx/blockDim/threadIdx become globals looped over, the float16 store uses _Float16) and
run through ctypes on the same frames as `DeviceBatchTensor` under NumPy. Where nvcc exists,
the real source (CUDA prelude with its inline PTX) is compiled to PTX as well. On a GPU,
tools/checks/gpu_check.py and tests/gpu run the kernel itself through CuPy.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from daemon.core.frames import Letterbox
from daemon.core.yuv import YuvFrame
from daemon.inference.device_preprocess import Coefficients, DeviceBatchTensor, placed
from daemon.inference.layouts import InputConvention
from daemon.inference.letterbox_kernel import BLOCK, KERNEL_BODY, SOURCE, coefficient_array, launch_args
from tests.support.yuv_planes import frame_of, planes

SHIM = r"""
#include <math.h>
#include <string.h>
struct bs_dim { int x; };
static bs_dim blockIdx, blockDim, threadIdx;
#define __global__
#define BS_DEVICE static inline
static inline unsigned short bs_f2h(float f) {
    _Float16 h = (_Float16)f;
    unsigned short u;
    memcpy(&u, &h, 2);
    return u;
}
static inline int bs_thread() { return blockDim.x * blockIdx.x + threadIdx.x; }
"""

RUNNER = r"""
#define BS_RUN(NAME, T) \
extern "C" void run_##NAME(BS_ARGS, T* out) { \
    blockDim.x = %(block)d; \
    for (int b = 0; b * %(block)d < size * size; b++) { \
        blockIdx.x = b; \
        for (int t = 0; t < %(block)d; t++) { \
            threadIdx.x = t; \
            NAME(y, y_pitch, u, v, c_pitch, c_step, w, h, nw, nh, px, py, size, rx, ry, k, scale, pad, bgr, out); \
        } \
    } \
}
BS_RUN(letterbox_f32, float)
BS_RUN(letterbox_f16, unsigned short)
""".replace("%(block)d", str(BLOCK))


@pytest.fixture(scope="module")
def cpu_kernel(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ is not installed: the kernel source cannot be compiled on the CPU")
    folder = tmp_path_factory.mktemp("kernel")
    src, lib = folder / "letterbox.cpp", folder / "letterbox.so"
    src.write_text(SHIM + KERNEL_BODY + RUNNER, encoding="utf-8")
    subprocess.run([gxx, "-O1", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True, capture_output=True)
    return ctypes.CDLL(str(lib))


def ptr(arr: npt.NDArray[Any]) -> ctypes.c_void_p:
    return ctypes.c_void_p(arr.ctypes.data)


def run_kernel(lib: ctypes.CDLL, frame: YuvFrame, lb: Letterbox, conv: InputConvention) -> npt.NDArray[Any]:
    k = coefficient_array(Coefficients.of(frame.matrix, frame.full_range))
    half = conv.dtype == "float16"
    out = np.full((3, lb.size, lb.size), -1, np.float16 if half else np.float32)
    v = frame.v if frame.v is not None else frame.u[:, 1:]
    scalars = launch_args(frame, lb, conv)
    fn = lib.run_letterbox_f16 if half else lib.run_letterbox_f32
    ints = [ctypes.c_int(int(x)) for x in scalars[:9]]
    fn(
        ptr(frame.y),
        ctypes.c_int(frame.y.strides[0]),
        ptr(frame.u),
        ptr(v),
        *ints,
        ctypes.c_float(float(scalars[9])),
        ctypes.c_float(float(scalars[10])),
        ptr(k),
        ctypes.c_float(conv.scale),
        ctypes.c_float(conv.pad_value * conv.scale),
        ctypes.c_int(conv.color == "bgr"),
        ptr(out),
    )
    return out


CASES = [
    (640, 480, 640, InputConvention()),
    (641, 361, 416, InputConvention(color="bgr", scale=1.0, pad_value=0)),
    (333, 500, 640, InputConvention(padding="top-left")),
    (1919, 1081, 800, InputConvention(dtype="float16")),
    (97, 55, 416, InputConvention(color="bgr", dtype="float16", padding="top-left")),
]


@pytest.mark.parametrize(("w", "h", "size", "conv"), CASES)
@pytest.mark.parametrize("nv12", [False, True], ids=["i420", "nv12"])
def test_kernel_source_matches_the_xp_path(
    cpu_kernel: ctypes.CDLL, w: int, h: int, size: int, conv: InputConvention, nv12: bool
) -> None:
    y, u, v = planes(w, h, seed=w * 3 + h)
    for matrix, full in (("bt601", False), ("bt709", True)):
        frame = frame_of(np, w, h, y, u, v, nv12=nv12, extra=32 + w % 5, matrix=matrix, full_range=full)
        lb = placed(Letterbox.fit(w, h, size), conv)
        want = DeviceBatchTensor(np, 1, size, conv).fill([(frame, Letterbox.fit(w, h, size))])[0]
        got = run_kernel(cpu_kernel, frame, lb, conv)
        if conv.dtype == "float16":  # the same float32 rounded to half: at most one ulp apart
            np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=1e-3)
        else:
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * max(conv.scale * 255, 1))
        assert not np.any(got == -1)  # every pixel of the slot written, padding included


@pytest.mark.gpu  # the CUDA toolkit: not in Debian main, installed where there is a GPU
def test_the_cuda_source_compiles_with_nvcc(tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed: the CUDA source is only compiled on the CPU")
    src = tmp_path / "letterbox.cu"
    src.write_text(SOURCE, encoding="utf-8")
    done = subprocess.run(
        [nvcc, "--ptx", "-arch=compute_75", "-o", str(tmp_path / "letterbox.ptx"), str(src)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    ptx = (tmp_path / "letterbox.ptx").read_text(encoding="utf-8")
    assert ".entry letterbox_f32" in ptx and ".entry letterbox_f16" in ptx
    assert "cvt.rn.f16.f32" in ptx
