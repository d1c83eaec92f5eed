"""`decoding.scale`: planar RGB from swscale; packed RGB's pixels without scaling, the picture scaled with it."""

from __future__ import annotations

import threading

import av
import numpy as np
import numpy.typing as npt
import pytest

from daemon.core.frames import LETTERBOX_PAD_VALUE, Frame, Letterbox
from daemon.core.yuv import YuvFrame, yuv_frame
from daemon.inference.stage import BatchTensor
from daemon.ingest import decoding
from daemon.ingest.decoding import rgb_planes, scale, scale_yuv


def _picture(width: int, height: int) -> npt.NDArray[np.uint8]:
    """A smooth RGB picture with a red patch (R, G and B must not swap)."""
    y, x = np.mgrid[0:height, 0:width]
    rgb = np.stack(((x * 255 // width), (y * 255 // height), ((x + y) * 127 // (width + height))), axis=-1)
    rgb = rgb.astype(np.uint8)
    rgb[: height // 3, : width // 3] = (200, 30, 40)
    return rgb


def _yuv_frame(rgb: npt.NDArray[np.uint8]) -> av.VideoFrame:
    """What a camera's decoder hands over: the picture in yuv420p."""
    return av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")


def _interpolation(lb: Letterbox) -> str:
    return "AREA" if lb.new_w < lb.src_w or lb.new_h < lb.src_h else "BILINEAR"


@pytest.mark.parametrize(
    ("src", "size"),
    [
        ((640, 480), 640),  # scale 1: conversion only
        ((1280, 720), 800),  # shrink (AREA)
        ((301, 400), 416),  # enlarge (BILINEAR) to an odd width: planes are padded past it
    ],
)
def test_planes_are_the_picture_scaled(src: tuple[int, int], size: int) -> None:
    """Without scaling, the very pixels of swscale's packed RGB. When scaling, the planar path
    filters in RGB rather than in YUV, so values differ from packed RGB by a level or two; it is
    the closer of the two to the source picture scaled in RGB (rendered scenes, 1280x720 ->
    800x450: 0.6 against 1.9 levels mean error)."""
    rgb = _picture(*src)
    vframe = _yuv_frame(rgb)
    lb = Letterbox.fit(*src, size)
    planes = np.stack(scale(vframe, lb))
    assert planes.shape == (3, lb.new_h, lb.new_w) and planes.dtype == np.uint8
    how = {"width": lb.new_w, "height": lb.new_h, "format": "rgb24", "interpolation": _interpolation(lb)}
    packed = vframe.reformat(**how).to_ndarray().transpose(2, 0, 1).astype(np.int16)
    if (lb.new_w, lb.new_h) == src:
        np.testing.assert_array_equal(planes, packed)
        return
    truth = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(**how).to_ndarray().transpose(2, 0, 1)
    planar_error = np.abs(planes - truth.astype(np.int16)).mean()
    packed_error = np.abs(packed - truth.astype(np.int16)).mean()
    assert planar_error <= packed_error and planar_error < 2.0, (planar_error, packed_error)


def test_planes_are_views_of_the_frame_and_the_fill_reads_them_whole() -> None:
    """No copy between swscale and the batch tensor: the planes are views of the converted frame,
    rows padded past an odd width, and the fill writes exactly them (scaled to 0..1) into the
    letterbox's content, leaving its padding grey."""
    lb = Letterbox.fit(301, 400, 416)
    planes = scale(_yuv_frame(_picture(301, 400)), lb)
    assert all(p.shape == (lb.new_h, lb.new_w) and not p.flags["OWNDATA"] for p in planes)
    assert planes[0].strides[0] > lb.new_w  # FFmpeg's row padding, seen through the view
    batch = BatchTensor(1, 416).fill([Frame("cam", 0, 0, 0.0, lb, planes)])[0]
    rows, cols = slice(lb.pad_y, lb.pad_y + lb.new_h), slice(lb.pad_x, lb.pad_x + lb.new_w)
    want = np.stack(planes).astype(np.float32) * np.float32(1 / 255)
    np.testing.assert_array_equal(batch[:, rows, cols], want)
    padding = np.ones(batch.shape, bool)
    padding[:, rows, cols] = False
    assert lb.pad_x > 0 and np.all(batch[padding] == np.float32(LETTERBOX_PAD_VALUE / 255))


def test_red_stays_red() -> None:
    lb = Letterbox.fit(640, 480, 640)
    planes = scale(_yuv_frame(_picture(640, 480)), lb)
    r, g, b = (float(p[20:140, 20:190].mean()) for p in planes)
    assert r > 150 and g < 80 and b < 80, (r, g, b)


def test_one_thread_alternating_geometries_gets_each_frame_right() -> None:
    """A worker serving cameras of several sizes keeps one scaler per geometry: each result is
    what a fresh scaler makes, whatever came before it on the thread, and the thread keeps a
    bounded number of scalers."""
    sources = [(640, 480, 640), (1280, 720, 800), (301, 400, 416), (800, 600, 800), (320, 240, 416), (1920, 1080, 800)]
    frames = [(_yuv_frame(_picture(w, h)), Letterbox.fit(w, h, size)) for w, h, size in sources]
    for vframe, lb in frames * 2:
        fresh = vframe.reformat(
            width=lb.new_w, height=lb.new_h, format="gbrp", interpolation=_interpolation(lb), threads=1
        )
        np.testing.assert_array_equal(np.stack(scale(vframe, lb)), np.stack(rgb_planes(fresh)))
    assert len(decoding._local.reformatters) == decoding._REFORMATTERS_PER_THREAD


def test_threads_scale_side_by_side() -> None:
    """Scalers are per thread: two workers converting at once each get their own frames right."""
    lb_a, lb_b = Letterbox.fit(640, 480, 640), Letterbox.fit(1280, 720, 800)
    a, b = _yuv_frame(_picture(640, 480)), _yuv_frame(_picture(1280, 720))
    want = {id(a): scale(a, lb_a), id(b): scale(b, lb_b)}
    errors: list[str] = []

    def work(vframe: av.VideoFrame, lb: Letterbox) -> None:
        for _ in range(40):
            if not np.array_equal(scale(vframe, lb), want[id(vframe)]):
                errors.append(f"{lb.src_w}x{lb.src_h}")

    threads = [threading.Thread(target=work, args=args) for args in ((a, lb_a), (b, lb_b), (b, lb_b), (a, lb_a))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


@pytest.mark.parametrize(
    ("src", "size", "bt709", "full"), [((640, 480), 640, False, False), ((1280, 720), 800, True, True)]
)
def test_planes_from_a_yuv_slot_are_those_of_the_decoded_frame(
    src: tuple[int, int], size: int, bt709: bool, full: bool
) -> None:
    """A decoder process's YUV slot (lanes on the device) holds the decoded frame's I420 planes; where the
    host needs RGB (the live view, a breaker's CPU fallback), `scale_yuv` gives what `scale` gives from
    the decoded frame itself, with its matrix and range."""
    vframe = _yuv_frame(_picture(*src))
    vframe.colorspace = 1 if bt709 else 5
    vframe.color_range = 2 if full else 1
    yuv = yuv_frame(vframe, np)
    assert (yuv.matrix, yuv.full_range) == ("bt709" if bt709 else "bt601", full)
    lb = Letterbox.fit(*src, size)
    slot = tuple(np.array(p) for p in (yuv.y[:, : src[0]], *yuv.chroma_planes()))  # copied out, as into the slot
    copied = YuvFrame(yuv.width, yuv.height, *slot, matrix=yuv.matrix, full_range=yuv.full_range)
    for got, want in zip(scale_yuv(copied, lb), scale(vframe, lb), strict=True):
        np.testing.assert_array_equal(got, want)
    other = YuvFrame(yuv.width, yuv.height, *slot, matrix="bt601" if bt709 else "bt709", full_range=not full)
    assert any((a != b).any() for a, b in zip(scale_yuv(other, lb), scale(vframe, lb), strict=True))


def test_planes_from_a_yuv_slot_need_even_i420() -> None:
    planes = (np.zeros((5, 6), np.uint8), np.zeros((3, 3), np.uint8), np.zeros((3, 3), np.uint8))
    with pytest.raises(ValueError, match="6x5 I420 frame: even-sized I420 only"):
        scale_yuv(YuvFrame(6, 5, *planes), Letterbox.fit(6, 5, 416))
