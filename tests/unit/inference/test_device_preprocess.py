"""The YUV 4:2:0 / NV12 letterbox (daemon.inference.device_preprocess) through the array-module seam.

Every test runs under NumPy and under `array_api_strict` (the array API standard's minimal
namespace: what passes there uses nothing CuPy lacks). Checked against:
- a plain NumPy reference written independently here (float64, the published BT.601/709
  matrices, per-pixel coordinates), on frames of several sizes and aspect ratios, odd widths
  and heights, pitched planes, NV12 and I420, limited and full range;
- swscale's output through PyAV's reformat to `gbrp` (what the CPU path feeds the model).
"""

from __future__ import annotations

from typing import Any

import av
import numpy as np
import numpy.typing as npt
import pytest

from daemon.core.frames import Letterbox
from daemon.core.yuv import YuvFrame, matrix_for
from daemon.inference.device_preprocess import DeviceBatchTensor
from daemon.inference.layouts import InputConvention
from tests.support.yuv_planes import frame_of, planes

array_api_strict = pytest.importorskip("array_api_strict")
MODULES = {"numpy": np, "array_api_strict": array_api_strict}

# (width, height, model size): landscape, portrait, odd widths/heights, up- and downscaling
SIZES = [(640, 480, 640), (641, 361, 416), (1280, 720, 800), (333, 500, 640), (1919, 1081, 640), (97, 55, 416)]

# Published limited-range matrices (ITU-R BT.601 / BT.709, 8 bit): R, G, B from Y-16, U-128, V-128
PUBLISHED = {
    "bt601": ((1.164383, 0.0, 1.596027), (1.164383, -0.391762, -0.812968), (1.164383, 2.017232, 0.0)),
    "bt709": ((1.164383, 0.0, 1.792741), (1.164383, -0.213249, -0.532909), (1.164383, 2.112402, 0.0)),
}


@pytest.fixture(params=list(MODULES))
def xp(request: pytest.FixtureRequest) -> Any:
    return MODULES[request.param]


def reference(
    y: npt.NDArray[np.uint8],
    u: npt.NDArray[np.uint8],
    v: npt.NDArray[np.uint8],
    lb: Letterbox,
    matrix: str,
    full: bool,
) -> npt.NDArray[np.float64]:
    """(3, new_h, new_w) RGB 0..255, float64: the documented mapping, written out plainly."""
    h, w = y.shape

    def sample(plane: npt.NDArray[np.uint8], px: npt.NDArray[np.float64], py: npt.NDArray[np.float64]) -> Any:
        ph, pw = plane.shape
        px, py = np.clip(px, 0, pw - 1), np.clip(py, 0, ph - 1)
        x0, y0 = np.floor(px).astype(int), np.floor(py).astype(int)
        x1, y1 = np.minimum(x0 + 1, pw - 1), np.minimum(y0 + 1, ph - 1)
        fx, fy = (px - x0)[None, :], (py - y0)[:, None]
        p = plane.astype(np.float64)
        return (
            p[y0][:, x0] * (1 - fx) * (1 - fy)
            + p[y0][:, x1] * fx * (1 - fy)
            + p[y1][:, x0] * (1 - fx) * fy
            + p[y1][:, x1] * fx * fy
        )

    sx = (np.arange(lb.new_w) + 0.5) * (w / lb.new_w) - 0.5
    sy = (np.arange(lb.new_h) + 0.5) * (h / lb.new_h) - 0.5
    yy = sample(y, sx, sy)
    uu = sample(u, sx / 2, sy / 2 - 0.25) - 128
    vv = sample(v, sx / 2, sy / 2 - 0.25) - 128
    if full:
        kr, kb = (0.299, 0.114) if matrix == "bt601" else (0.2126, 0.0722)
        kg = 1 - kr - kb
        rows = ((1, 0, 2 - 2 * kr), (1, -2 * kb * (1 - kb) / kg, -2 * kr * (1 - kr) / kg), (1, 2 - 2 * kb, 0))
        base = yy
    else:
        rows, base = PUBLISHED[matrix], yy - 16
    return np.stack([np.clip(a * base + b * uu + c * vv, 0, 255) for a, b, c in rows])


def content(out: Any, lb: Letterbox, index: int = 0) -> npt.NDArray[np.float64]:
    arr = np.asarray(out)[index].astype(np.float64)
    return arr[:, lb.pad_y : lb.pad_y + lb.new_h, lb.pad_x : lb.pad_x + lb.new_w]


@pytest.mark.parametrize(("w", "h", "size"), SIZES)
@pytest.mark.parametrize("nv12", [False, True], ids=["i420", "nv12"])
def test_matches_the_plain_reference(xp: Any, w: int, h: int, size: int, nv12: bool) -> None:
    y, u, v = planes(w, h, seed=w + h)
    lb = Letterbox.fit(w, h, size)
    for matrix, full in (("bt601", False), ("bt709", False), ("bt709", True)):
        frame = frame_of(xp, w, h, y, u, v, nv12=nv12, extra=48 + (w % 7), matrix=matrix, full_range=full)
        tensor = DeviceBatchTensor(xp, 2, size, InputConvention(scale=1.0))
        out = tensor.fill([(frame, lb)])
        assert tuple(out.shape) == (1, 3, size, size)
        diff = np.abs(content(out, lb) - reference(y, u, v, lb, matrix, full))
        assert diff.max() < 0.02, (matrix, full, diff.max())
        pad = np.asarray(out)[0].copy()
        pad[:, lb.pad_y : lb.pad_y + lb.new_h, lb.pad_x : lb.pad_x + lb.new_w] = 114
        assert np.all(pad == 114)  # everything outside the content is the pad value


@pytest.mark.parametrize(
    ("w", "h", "size"), [(640, 480, 640), (641, 361, 416), (1280, 720, 800), (333, 500, 640), (320, 240, 640)]
)
def test_agrees_with_swscale_gbrp(xp: Any, w: int, h: int, size: int) -> None:
    """Against swscale (PyAV's reformat, as the CPU path scales): luma resampling and the matrix
    with flat chroma (siting does not matter there), both matrices; scaling up or down to 0.6x."""
    lb = Letterbox.fit(w, h, size)
    for colorspace in (2, 1):  # unspecified (swscale: BT.601), BT.709
        vf = av.VideoFrame(w, h, "yuv420p")
        vf.colorspace = colorspace
        y, _, _ = planes(w, h, seed=3)
        cw, ch = (w + 1) // 2, (h + 1) // 2
        values = (y, np.full((ch, cw), 100, np.uint8), np.full((ch, cw), 150, np.uint8))
        views = []
        for plane, arr in zip(vf.planes, values, strict=True):
            view = np.frombuffer(memoryview(plane), np.uint8).reshape(plane.height, plane.line_size)
            view[:, : arr.shape[1]] = arr
            views.append(view)  # pitched: swscale's own line sizes
        gbr = vf.reformat(width=lb.new_w, height=lb.new_h, format="gbrp", interpolation="BILINEAR")
        sws = np.stack(
            [np.frombuffer(memoryview(gbr.planes[i]), np.uint8).reshape(lb.new_h, -1)[:, : lb.new_w] for i in (2, 0, 1)]
        ).astype(np.float64)
        frame = YuvFrame(w, h, *(xp.asarray(p) for p in views), matrix=matrix_for(vf.colorspace))
        out = DeviceBatchTensor(xp, 1, size, InputConvention(scale=1.0)).fill([(frame, lb)])
        diff = np.abs(content(out, lb) - sws)
        assert diff.mean() < 1.5, diff.mean()
        assert np.percentile(diff, 99) < 6.0, np.percentile(diff, 99)  # swscale widens its filter to shrink


def test_chroma_siting_agrees_with_swscale_upsampling(xp: Any) -> None:
    """Chroma interpolated to full size as swscale does for yuv420p -> yuv444p (bilinear)."""
    w, h = 320, 240
    y, u, v = planes(w, h, seed=5)
    vf = av.VideoFrame(w, h, "yuv420p")
    for plane, arr in zip(vf.planes, (y, u, v), strict=True):
        np.frombuffer(memoryview(plane), np.uint8).reshape(plane.height, plane.line_size)[:, : arr.shape[1]] = arr
    f444 = vf.reformat(format="yuv444p", interpolation="BILINEAR")
    sws_u = np.frombuffer(memoryview(f444.planes[1]), np.uint8).reshape(h, -1)[:, :w].astype(np.float64)
    from daemon.inference.device_preprocess import Geometry, bilinear  # noqa: PLC0415 - the building blocks

    frame = frame_of(xp, w, h, y, u, v, nv12=False)
    geometry = Geometry.build(xp, w, h, w, h)
    mine = np.asarray(bilinear(xp, frame.chroma_planes()[0], geometry.chroma_y, geometry.chroma_x))
    assert np.abs(mine - sws_u).mean() < 1.5


def test_nv12_and_i420_of_one_picture_are_identical(xp: Any) -> None:
    w, h, size = 641, 361, 416
    y, u, v = planes(w, h, seed=9)
    lb = Letterbox.fit(w, h, size)
    a = DeviceBatchTensor(xp, 1, size).fill([(frame_of(xp, w, h, y, u, v, nv12=False), lb)])
    b = DeviceBatchTensor(xp, 1, size).fill([(frame_of(xp, w, h, y, u, v, nv12=True, extra=64), lb)])
    assert np.array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_the_models_convention(xp: Any, dtype: str) -> None:
    """BGR order, 0..255 scale, top-left content, float16 (not in the array API standard: NumPy
    and CuPy only), a static batch."""
    if not hasattr(xp, dtype):
        with pytest.raises(ValueError, match="has no float16"):
            DeviceBatchTensor(xp, 1, 416, InputConvention(dtype="float16"))
        return
    w, h, size = 320, 180, 416
    y, u, v = planes(w, h, seed=11)
    lb = Letterbox.fit(w, h, size)
    rgb = DeviceBatchTensor(xp, 1, size, InputConvention()).fill([(frame_of(xp, w, h, y, u, v, nv12=True), lb)])
    conv = InputConvention(color="bgr", scale=1.0, padding="top-left", pad_value=0, dtype=dtype, batch=3)  # type: ignore[arg-type]
    tensor = DeviceBatchTensor(xp, 2, size, conv)
    out = tensor.fill([(frame_of(xp, w, h, y, u, v, nv12=True), lb)])
    assert tuple(out.shape) == (3, 3, size, size)
    assert out.dtype == getattr(xp, dtype)
    got = np.asarray(out).astype(np.float32)
    want = np.asarray(rgb)[0, ::-1, lb.pad_y : lb.pad_y + lb.new_h, :] * 255  # RGB at 1/255, centred
    np.testing.assert_allclose(got[0, :, : lb.new_h, :], want, atol=0.13, rtol=1e-3)  # float16 of 0..255
    assert not got[0, :, lb.new_h :, :].any()  # padding below, value 0
    assert not got[1:].any()  # the unused static-batch slots are padding only
    np.testing.assert_allclose(np.asarray(rgb)[0, :, 0, 0], 114 / 255, rtol=1e-6)


def test_padding_is_restored_when_a_slot_changes_geometry(xp: Any) -> None:
    size = 416
    tensor = DeviceBatchTensor(xp, 1, size)
    big = planes(400, 400, seed=1)
    wide = planes(400, 200, seed=2)
    tensor.fill([(frame_of(xp, 400, 400, *big, nv12=False), Letterbox.fit(400, 400, size))])
    lb = Letterbox.fit(400, 200, size)
    out = np.asarray(tensor.fill([(frame_of(xp, 400, 200, *wide, nv12=False), lb)]))
    assert np.all(out[0, :, : lb.pad_y, :] == np.float32(114 / 255))
    np.testing.assert_allclose(content(out, lb), reference(*wide, lb, "bt601", False) / 255, atol=1e-4)


def test_bad_input_is_refused(xp: Any) -> None:
    tensor = DeviceBatchTensor(xp, 1, 416)
    frame = frame_of(xp, 64, 48, *planes(64, 48, seed=0), nv12=False)
    with pytest.raises(ValueError, match="size 640 in a 416 batch"):
        tensor.fill([(frame, Letterbox.fit(64, 48, 640))])
    with pytest.raises(ValueError, match="letterbox for 100x48"):
        tensor.fill([(frame, Letterbox.fit(100, 48, 416))])
    with pytest.raises(ValueError, match="2 frames for a batch tensor of 1"):
        tensor.fill([(frame, Letterbox.fit(64, 48, 416))] * 2)
    with pytest.raises(ValueError, match="static batch of 1"):
        DeviceBatchTensor(xp, 4, 416, InputConvention(batch=1))
