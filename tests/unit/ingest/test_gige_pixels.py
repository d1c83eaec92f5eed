"""GigE pixel formats (Mono8, Bayer, RGB8, BGR8) to the model's R, G, B planes, against known arrays."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from daemon.core.frames import Letterbox
from daemon.ingest.decoding import scale
from daemon.ingest.gige.pixels import PIXEL_FORMATS, UnsupportedPixelFormatError, bins, layout_of, video_frame

W, H = 64, 48
"""A letterbox of the same size (no scaling): what comes out is the conversion alone."""
CODES = {layout.name: code for code, layout in PIXEL_FORMATS.items()}


def planes(data: bytes, name: str) -> npt.NDArray[np.uint8]:
    vframe = video_frame(data, W, H, layout_of(CODES[name]))
    lb = Letterbox.fit(W, H, W)
    assert (lb.new_w, lb.new_h) == (W, H)
    return np.stack(scale(vframe, lb))


def test_mono8_is_grey_in_all_three_planes() -> None:
    grey = np.random.default_rng(1).integers(0, 256, (H, W), dtype=np.uint8)
    out = planes(grey.tobytes(), "Mono8")
    for plane in out:
        np.testing.assert_array_equal(plane, grey)


def test_rgb8_and_bgr8_keep_each_channel() -> None:
    rgb = np.random.default_rng(2).integers(0, 256, (H, W, 3), dtype=np.uint8)
    np.testing.assert_array_equal(planes(rgb.tobytes(), "RGB8"), rgb.transpose(2, 0, 1))
    bgr = rgb[:, :, ::-1].copy()
    np.testing.assert_array_equal(planes(bgr.tobytes(), "BGR8"), rgb.transpose(2, 0, 1))


def mosaic(pattern: str, left: tuple[int, int, int], right: tuple[int, int, int]) -> npt.NDArray[np.uint8]:
    """A Bayer mosaic (`pattern`: the 2x2 tile's colours, e.g. "RGGB") of a picture whose left half
    is colour `left` and right half `right`."""
    rgb = np.zeros((H, W, 3), np.uint8)
    rgb[:, : W // 2] = left
    rgb[:, W // 2 :] = right
    out = np.empty((H, W), np.uint8)
    channel = {"R": 0, "G": 1, "B": 2}
    for i, colour in enumerate(pattern):
        dy, dx = divmod(i, 2)
        out[dy::2, dx::2] = rgb[dy::2, dx::2, channel[colour]]
    return out


@pytest.mark.parametrize(
    ("name", "pattern"), [("BayerRG8", "RGGB"), ("BayerGB8", "GBRG"), ("BayerGR8", "GRBG"), ("BayerBG8", "BGGR")]
)
def test_bayer_is_debayered_to_the_colours_it_was_made_of(name: str, pattern: str) -> None:
    left, right = (200, 100, 50), (30, 60, 220)
    out = planes(mosaic(pattern, left, right).tobytes(), name)
    inner = slice(4, H - 4)
    for c in range(3):  # well inside each half: every neighbour the interpolation reads has the same colour
        np.testing.assert_array_equal(out[c, inner, 4 : W // 2 - 4], left[c])
        np.testing.assert_array_equal(out[c, inner, W // 2 + 4 : W - 4], right[c])


def test_a_mosaic_read_as_the_wrong_pattern_gives_other_colours() -> None:
    out = planes(mosaic("RGGB", (200, 100, 50), (200, 100, 50)).tobytes(), "BayerBG8")
    assert tuple(int(out[c, H // 2, W // 4]) for c in range(3)) != (200, 100, 50)


def test_unsupported_format_and_short_data_are_refused() -> None:
    with pytest.raises(UnsupportedPixelFormatError, match="0x01100003"):
        layout_of(0x01100003)  # Mono10
    with pytest.raises(ValueError, match="needs"):
        video_frame(b"\0" * (W * H - 1), W, H, layout_of(CODES["Mono8"]))


@pytest.mark.parametrize(
    ("name", "pattern"), [("BayerRG8", "RGGB"), ("BayerGB8", "GBRG"), ("BayerGR8", "GRBG"), ("BayerBG8", "BGGR")]
)
def test_a_bayer_frame_shrunk_to_half_or_less_is_binned_2x2(name: str, pattern: str) -> None:
    layout = layout_of(CODES[name])
    assert bins(layout, W, H, W // 2, H // 2) and not bins(layout, W, H, W // 2 + 1, H // 2)
    assert not bins(layout_of(CODES["Mono8"]), W, H, W // 4, H // 4)
    left, right = (200, 100, 50), (30, 60, 220)
    raw = mosaic(pattern, left, right)
    vframe = video_frame(raw.tobytes(), W, H, layout, binned=True)
    assert (vframe.width, vframe.height) == (W // 2, H // 2)
    lb = Letterbox.fit(W // 2, H // 2, W // 2)
    out = np.stack(scale(vframe, lb))
    for c in range(3):  # every cell one colour, to the edges: no interpolation across cells
        np.testing.assert_array_equal(out[c, :, : W // 4], left[c])
        np.testing.assert_array_equal(out[c, :, W // 4 :], right[c])


def test_binning_averages_the_two_greens() -> None:
    tile = np.array([[9, 100], [51, 7]], np.uint8)  # RGGB: R 9, greens 100 and 51, B 7
    raw = np.tile(tile, (H // 2, W // 2))
    vframe = video_frame(raw.tobytes(), W, H, layout_of(CODES["BayerRG8"]), binned=True)
    rgb = vframe.to_ndarray()
    assert rgb.shape == (H // 2, W // 2, 3)
    assert {tuple(int(v) for v in px) for row in rgb for px in row} == {(9, 75, 7)}
