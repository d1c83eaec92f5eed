"""The CUDA fast path of the YUV letterbox: one kernel, one thread per output pixel.

`daemon.inference.device_preprocess` is the reference: this kernel computes the same mapping (sample
positions, clamping, bilinear taps, matrix, clip, scale, pad) in float32 with the same
operation order, and writes a whole (3, S, S) slot of the batch tensor, padding included, so a
batch needs no separate fill. It runs only where `xp` is CuPy (`LetterboxKernel(cupy)`: a
`RawModule` compiled by NVRTC on first use); tools/checks/gpu_check.py compares it with the xp path
on the device, and tests/unit/inference/test_letterbox_kernel.py compiles `KERNEL_BODY` here as C++
(with a small CUDA shim) and runs it on the CPU against the xp path, and with nvcc to PTX
where nvcc exists. Only `daemon.core.xp` imports CuPy: the module comes in as `xp`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from daemon.core.frames import Letterbox
from daemon.core.xp import ArrayModule
from daemon.core.yuv import YuvFrame
from daemon.inference.device_preprocess import Coefficients
from daemon.inference.layouts import InputConvention

BLOCK = 256

CUDA_PRELUDE = r"""
#define BS_DEVICE __device__ __forceinline__
BS_DEVICE unsigned short bs_f2h(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
BS_DEVICE int bs_thread() { return blockDim.x * blockIdx.x + threadIdx.x; }
"""

KERNEL_BODY = r"""
BS_DEVICE float bs_sample(const unsigned char* p, int pitch, int step, int w, int h, float x, float y) {
    x = fminf(fmaxf(x, 0.0f), (float)(w - 1));
    y = fminf(fmaxf(y, 0.0f), (float)(h - 1));
    int x0 = (int)x, y0 = (int)y;
    int x1 = x0 + 1 < w ? x0 + 1 : w - 1;
    int y1 = y0 + 1 < h ? y0 + 1 : h - 1;
    float fx = x - (float)x0, fy = y - (float)y0;
    const unsigned char* r0 = p + (long long)y0 * pitch;
    const unsigned char* r1 = p + (long long)y1 * pitch;
    float a = r0[x0 * step], b = r0[x1 * step], c = r1[x0 * step], d = r1[x1 * step];
    float upper = a + (b - a) * fx;
    float lower = c + (d - c) * fx;
    return upper + (lower - upper) * fy;
}

BS_DEVICE float bs_clip(float v) { return fminf(fmaxf(v, 0.0f), 255.0f); }

/* Channel values (already scaled) of output pixel i of an S x S slot; false for padding. */
BS_DEVICE bool bs_pixel(
    int i, const unsigned char* y, int y_pitch, const unsigned char* u, const unsigned char* v,
    int c_pitch, int c_step, int w, int h, int nw, int nh, int px, int py, int size,
    float rx, float ry, const float* k, float scale, int bgr, float* out3)
{
    int cx = i % size - px, cy = i / size - py;
    if (cx < 0 || cy < 0 || cx >= nw || cy >= nh) return false;
    float sx = ((float)cx + 0.5f) * rx - 0.5f;
    float sy = ((float)cy + 0.5f) * ry - 0.5f;
    int cw = (w + 1) / 2, ch = (h + 1) / 2;
    float yy = bs_sample(y, y_pitch, 1, w, h, sx, sy);
    float uu = bs_sample(u, c_pitch, c_step, cw, ch, sx * 0.5f, sy * 0.5f - 0.25f);
    float vv = bs_sample(v, c_pitch, c_step, cw, ch, sx * 0.5f, sy * 0.5f - 0.25f);
    /* k: ky, y_off, kc, rv, gu, gv, bu */
    float l = (yy - k[1]) * k[0], cb = (uu - 128.0f) * k[2], cr = (vv - 128.0f) * k[2];
    float r = bs_clip(l + k[3] * cr), g = bs_clip(l - k[4] * cb - k[5] * cr), b = bs_clip(l + k[6] * cb);
    out3[0] = (bgr ? b : r) * scale;
    out3[1] = g * scale;
    out3[2] = (bgr ? r : b) * scale;
    return true;
}

#define BS_ARGS \
    const unsigned char* y, int y_pitch, const unsigned char* u, const unsigned char* v, int c_pitch, \
    int c_step, int w, int h, int nw, int nh, int px, int py, int size, float rx, float ry, \
    const float* k, float scale, float pad, int bgr
#define BS_PASS y, y_pitch, u, v, c_pitch, c_step, w, h, nw, nh, px, py, size, rx, ry, k, scale, bgr

extern "C" __global__ void letterbox_f32(BS_ARGS, float* out) {
    int i = bs_thread(), plane = size * size;
    if (i >= plane) return;
    float c[3] = {pad, pad, pad};
    bs_pixel(i, BS_PASS, c);
    out[i] = c[0]; out[plane + i] = c[1]; out[2 * plane + i] = c[2];
}

extern "C" __global__ void letterbox_f16(BS_ARGS, unsigned short* out) {
    int i = bs_thread(), plane = size * size;
    if (i >= plane) return;
    float c[3] = {pad, pad, pad};
    bs_pixel(i, BS_PASS, c);
    out[i] = bs_f2h(c[0]); out[plane + i] = bs_f2h(c[1]); out[2 * plane + i] = bs_f2h(c[2]);
}
"""

SOURCE = CUDA_PRELUDE + KERNEL_BODY
KERNELS = ("letterbox_f32", "letterbox_f16")


def coefficient_array(k: Coefficients) -> np.ndarray[Any, np.dtype[np.float32]]:
    """The kernel's `k` argument: ky, y_off, kc, rv, gu, gv, bu."""
    return np.array([k.ky, k.y_off, k.kc, k.rv, k.gu, k.gv, k.bu], np.float32)


def launch_args(frame: YuvFrame, lb: Letterbox, conv: InputConvention) -> tuple[Any, ...]:
    """The scalar arguments after the plane pointers, in BS_ARGS order (from `c_pitch` on)."""
    c_step = 2 if frame.nv12 else 1
    return (
        np.int32(frame.u.strides[0]),
        np.int32(c_step),
        np.int32(frame.width),
        np.int32(frame.height),
        np.int32(lb.new_w),
        np.int32(lb.new_h),
        np.int32(lb.pad_x),
        np.int32(lb.pad_y),
        np.int32(lb.size),
        np.float32(frame.width / lb.new_w),
        np.float32(frame.height / lb.new_h),
    )


class LetterboxKernel:
    """`DeviceBatchTensor(kernel=...)`: writes slots with the CUDA kernel. `xp` must be CuPy."""

    def __init__(self, xp: ArrayModule) -> None:
        self.xp = xp
        self._module = xp.RawModule(code=SOURCE, options=("--std=c++11",), name_expressions=None)
        self._coeffs: dict[Coefficients, Any] = {}

    def write(
        self, batch: Any, index: int, frame: YuvFrame, *, lb: Letterbox, k: Coefficients, conv: InputConvention
    ) -> None:
        """Letterbox `frame` into the whole slot `batch[index]` (padding included) on CuPy's
        current stream."""
        xp = self.xp
        coeffs = self._coeffs.get(k)
        if coeffs is None:
            coeffs = self._coeffs[k] = xp.asarray(coefficient_array(k))
        v = frame.v if frame.v is not None else frame.u[:, 1:]  # NV12: V is one byte after U
        if v.strides[0] != frame.u.strides[0]:
            raise ValueError("the U and V planes must have the same pitch")
        half = batch.dtype == xp.float16
        kernel = self._module.get_function(KERNELS[1] if half else KERNELS[0])
        slot = batch[index]
        if not slot.flags.c_contiguous:
            raise ValueError("the batch tensor's slots must be C-contiguous")
        pixels = lb.size * lb.size
        args = (
            frame.y,
            np.int32(frame.y.strides[0]),
            frame.u,
            v,
            *launch_args(frame, lb, conv),
            coeffs,
            np.float32(conv.scale),
            np.float32(conv.pad_value * conv.scale),
            np.int32(conv.color == "bgr"),
            slot.view(xp.uint16) if half else slot,
        )
        kernel(((pixels + BLOCK - 1) // BLOCK,), (BLOCK,), args)
