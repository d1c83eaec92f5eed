"""Synthetic YUV 4:2:0 pictures for the device letterbox tests: smooth random planes, pitched rows,
and `YuvFrame`s (NV12 or I420) built from them on any array module."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from daemon.core.yuv import YuvFrame


def smooth(rng: np.random.Generator, h: int, w: int, lo: float, hi: float) -> npt.NDArray[np.uint8]:
    """A smooth random picture (a coarse random grid, bilinearly enlarged)."""
    small = rng.uniform(lo, hi, (h // 8 + 2, w // 8 + 2))
    ys, xs = np.linspace(0, small.shape[0] - 1.001, h), np.linspace(0, small.shape[1] - 1.001, w)
    y0, x0 = ys.astype(int), xs.astype(int)
    fy, fx = (ys - y0)[:, None], (xs - x0)[None, :]
    top = small[y0][:, x0] * (1 - fx) + small[y0][:, x0 + 1] * fx
    bottom = small[y0 + 1][:, x0] * (1 - fx) + small[y0 + 1][:, x0 + 1] * fx
    return np.round(top * (1 - fy) + bottom * fy).astype(np.uint8)


def pitched(plane: npt.NDArray[np.uint8], extra: int) -> npt.NDArray[np.uint8]:
    """The plane inside rows `extra` bytes longer (filled with junk the code must never read)."""
    out = np.full((plane.shape[0], plane.shape[1] + extra), 255, np.uint8)
    out[:, : plane.shape[1]] = plane
    return out


def planes(w: int, h: int, seed: int) -> tuple[npt.NDArray[np.uint8], ...]:
    """(Y, U, V) of a smooth random w x h picture; chroma at half resolution, rounded up."""
    rng = np.random.default_rng(seed)
    cw, ch = (w + 1) // 2, (h + 1) // 2
    return smooth(rng, h, w, 20, 235), smooth(rng, ch, cw, 40, 215), smooth(rng, ch, cw, 40, 215)


def frame_of(xp: Any, w: int, h: int, y: Any, u: Any, v: Any, *, nv12: bool, extra: int = 0, **kw: Any) -> YuvFrame:
    """The planes as a `YuvFrame` on `xp`: NV12 (interleaved UV) or I420, rows `extra` bytes pitched."""
    if nv12:
        uv = np.empty((u.shape[0], 2 * u.shape[1]), np.uint8)
        uv[:, 0::2], uv[:, 1::2] = u, v
        return YuvFrame(w, h, xp.asarray(pitched(y, extra)), xp.asarray(pitched(uv, extra)), None, **kw)
    y_, u_, v_ = (xp.asarray(pitched(p, extra)) for p in (y, u, v))
    return YuvFrame(w, h, y_, u_, v_, **kw)
