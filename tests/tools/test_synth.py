"""The synthetic conveyor renderer: exact boxes, determinism, video writer."""

from __future__ import annotations

import json

import av
import numpy as np
import pytest
from av.video.frame import PictureType

from tools.kit.synth.parts import MIN_VISIBLE, NAMES, Part
from tools.kit.synth.scene import composite, render_image, render_scene, render_scene_full
from tools.kit.synth.video import belt_shift, h264_writer, render_video


def _mask_box(mask: np.ndarray) -> list[int]:
    ys, xs = np.nonzero(mask)
    return [int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1]


@pytest.mark.parametrize("cls", range(len(NAMES)))
def test_single_part_box_is_tight_box_of_its_pixels(cls: int) -> None:
    """A part fully inside a black frame: box == box of its alpha>=0.5 pixels, and the drawn pixels
    (any coverage) extend at most one antialiasing pixel beyond it."""
    part = Part(
        cls=cls,
        length=60.3,
        angle=0.7,
        cx=100.4,
        cy=90.6,
        color=np.array([200.0, 180.0, 160.0]),
        shape={
            0: {"shaft_w": 0.16, "head_w": 0.3, "head_l": 0.15, "threads": True},
            1: {"hole": 0.5},
            2: {"hole": 0.5},
            3: {"arm2": 0.7, "thick": 0.25, "holes": 2},
        }[cls],
        shade={
            "grad": 0.1,
            "grad_dir": 0.0,
            "spec": 0.3,
            "spec_off": 0.0,
            "spec_w": 0.1,
            "rim": 0.3,
            "grain": 0.0,
            "facet": 0.15,
        },
    )
    img = np.zeros((200, 220, 3), dtype=np.float32)
    (rec,) = composite(img, [part], np.random.default_rng(0), shadow=(1.0, 0.0, 0.0))
    assert rec["visible"] == pytest.approx(1.0)
    assert rec["box"] == _mask_box(rec["mask"])
    x1, y1, x2, y2 = rec["box"]
    drawn = img.max(axis=2) > 0
    dx1, dy1, dx2, dy2 = _mask_box(drawn)
    assert x1 - 1 <= dx1 <= x1 and y1 - 1 <= dy1 <= y1
    assert x2 <= dx2 <= x2 + 1 and y2 <= dy2 <= y2 + 1
    # size follows the part length (longest dimension of the unrotated part; the rotated axis-aligned box of
    # an L bracket can be up to ~1.25x that)
    assert 0.5 * part.length < max(x2 - x1, y2 - y1) <= 1.3 * part.length + 2


def test_scene_boxes_match_visible_masks() -> None:
    img, labels = render_scene(3, 416, 320, keep_masks=True)
    assert img.shape == (320, 416, 3) and img.dtype == np.uint8
    assert labels
    for lab in labels:
        assert lab["box"] == _mask_box(lab["mask"])
        assert lab["label"] == NAMES[lab["cls"]]
        x1, y1, x2, y2 = lab["box"]
        assert 0 <= x1 < x2 <= 416 and 0 <= y1 < y2 <= 320


def test_parts_scale_with_the_longer_side_and_occluded_parts_are_dropped() -> None:
    longest = []
    for seed in range(6):
        _, recs = render_scene_full(seed, 480, 270)
        for r in recs:
            if r["box"] is not None and r["visible"] > 0.99:
                x1, y1, x2, y2 = r["box"]
                longest.append(max(x2 - x1, y2 - y1) / 480)
    assert longest and min(longest) > 0.04 and max(longest) < 0.2 * 1.3
    _, labels = render_scene(0, 480, 270)
    _, recs = render_scene_full(0, 480, 270)
    assert len(labels) == sum(1 for r in recs if r["box"] is not None and r["visible"] >= 0.4)


def test_determinism_by_seed() -> None:
    a, la = render_image(11, 256, 192)
    b, lb = render_image(11, 256, 192)
    c, _ = render_image(12, 256, 192)
    assert a.tobytes() == b.tobytes() and la == lb
    assert a.tobytes() != c.tobytes()


def test_video_writer(tmp_path) -> None:
    mp4, gt_path = tmp_path / "clip.mp4", tmp_path / "clip.json"
    render_video(mp4, gt_path, 320, 240, fps=10, seconds=1.5, seed=5)
    gt = json.loads(gt_path.read_text())
    assert (gt["width"], gt["height"], gt["fps"], gt["frames"]) == (320, 240, 10, 15)
    assert gt["names"] == NAMES
    assert sorted(gt["annotations"], key=int) == [str(i) for i in range(15)]
    n = 0
    with av.open(str(mp4)) as c:
        s = c.streams.video[0]
        assert s.codec_context.name == "h264"
        for frame in c.decode(s):
            assert (frame.width, frame.height) == (320, 240)
            assert frame.pict_type != PictureType.B
            n += 1
    assert n == gt["frames"]
    boxes = [o["box"] for objs in gt["annotations"].values() for o in objs]
    assert boxes and all(0 <= b[0] < b[2] <= 320 and 0 <= b[1] < b[3] <= 240 for b in boxes)
    # the belt moves: the same video, re-rendered, is identical (deterministic by seed)
    render_video(tmp_path / "b.mp4", tmp_path / "b.json", 320, 240, fps=10, seconds=1.5, seed=5)
    assert json.loads((tmp_path / "b.json").read_text()) == gt


def test_video_writer_caps_the_bit_rate_like_a_camera_encoder(tmp_path) -> None:
    """`maxrate` bounds what noisy frames cost (crf alone lets them take what they need)."""
    rng = np.random.default_rng(3)
    frames = [rng.integers(0, 256, (240, 320, 3), dtype=np.uint8) for _ in range(30)]  # 2 s at 15 fps
    sizes = {}
    for name, cap in (("free", None), ("capped", "200k")):
        path = tmp_path / f"{name}.mp4"
        with h264_writer(path, 320, 240, 15, maxrate=cap) as write:
            for frame in frames:
                write(frame)
        sizes[name] = path.stat().st_size
    assert sizes["capped"] * 8 / 2 <= 2 * 200_000  # within the 2 s VBV buffer of the cap
    assert sizes["free"] > 5 * sizes["capped"]


def test_video_parts_keep_their_ids_and_stand_still_while_the_belt_stops(tmp_path) -> None:
    """Every GT box names its part (`id`, an index into `parts`), the same part in every frame; a stop
    halts the belt (the parts keep their place) and it starts again."""
    gt_path = tmp_path / "stop.json"
    render_video(
        tmp_path / "stop.mp4",
        gt_path,
        320,
        240,
        fps=10,
        seconds=3.0,
        seed=4,
        speed_px_s=100.0,
        density=0.2,
        stops=[(0.8, 1.2)],
    )
    gt = json.loads(gt_path.read_text())
    parts, shift = gt["parts"], gt["belt"]["shift_px"]
    assert len(shift) == gt["frames"] == 30 and gt["belt"]["speed_px_s"] == 100.0
    seen: dict[int, list[int]] = {}
    for i, objs in gt["annotations"].items():
        for o in objs:
            assert parts[o["id"]]["cls"] == o["cls"]
            x1, _, x2, _ = o["box"]
            if x1 > 2 and x2 < 318:  # whole part in the frame: its box moves with its centre
                centre = parts[o["id"]]["x0"] + shift[int(i)]
                assert x1 < centre < x2
            seen.setdefault(o["id"], []).append(int(i))
    assert any(len(frames) >= 5 for frames in seen.values())
    # standing: frames 11..14 (1.1 s .. 1.4 s, inside the stop minus its ramps) show the same boxes
    assert shift[11] == shift[12] == shift[13] == shift[14]
    boxes = [sorted((o["id"], o["box"]) for o in gt["annotations"][str(i)]) for i in (11, 12, 13, 14)]
    assert boxes[0] and all(b == boxes[0] for b in boxes)
    # and moving again at full speed afterwards; before the stop at full speed
    assert shift[25] - shift[24] == pytest.approx(10.0) and shift[5] - shift[4] == pytest.approx(10.0)
    assert belt_shift(np.array([3.0]), 100.0, [(0.8, 1.2)])[0] == pytest.approx(100.0 * (3.0 - 1.2 + 0.3))


def test_video_defaults_unchanged_by_the_new_knobs(tmp_path) -> None:
    """Speed and density given as the seed would draw them: the same frames' boxes as without them."""
    render_video(tmp_path / "a.mp4", tmp_path / "a.json", 160, 120, fps=10, seconds=0.5, seed=2)
    gt = json.loads((tmp_path / "a.json").read_text())
    render_video(
        tmp_path / "b.mp4",
        tmp_path / "b.json",
        160,
        120,
        fps=10,
        seconds=0.5,
        seed=2,
        speed_px_s=gt["belt"]["speed_px_s"],
    )
    assert json.loads((tmp_path / "b.json").read_text())["annotations"] == gt["annotations"]


def test_video_gt_lists_the_hardly_visible_parts_apart(tmp_path) -> None:
    """Parts in view but under MIN_VISIBLE are the GT's ``ignore`` boxes: never also a labelled box."""
    render_video(tmp_path / "c.mp4", tmp_path / "c.json", 320, 240, fps=10, seconds=3.0, seed=8, density=0.35)
    gt = json.loads((tmp_path / "c.json").read_text())
    assert sorted(gt["ignore"], key=int) == [str(i) for i in range(gt["frames"])]
    faint = [o for objs in gt["ignore"].values() for o in objs]
    assert faint and all(0.0 < o["visible"] < MIN_VISIBLE for o in faint)
    for i, objs in gt["ignore"].items():
        assert not {o["id"] for o in objs} & {o["id"] for o in gt["annotations"][i]}


def test_belt_wear_adds_unlabelled_strokes_and_leaves_the_parts_alone() -> None:
    # the hard negatives of the training crops: the same parts and boxes, only the belt under them changes
    plain, plain_labels = render_scene(21, 320, 320, ref=640.0)
    worn, worn_labels = render_scene(21, 320, 320, ref=640.0, wear=2.0)
    assert worn_labels == plain_labels and plain_labels
    changed = np.any(worn != plain, axis=2)
    assert changed.mean() > 0.01
    inside = np.zeros(changed.shape, dtype=bool)
    for lab in plain_labels:
        x1, y1, x2, y2 = lab["box"]
        inside[y1:y2, x1:x2] = True
    # strokes lie under the parts, which hide them: the boxes (mostly part) change far less than the belt
    assert changed[inside].mean() < 0.5 * changed[~inside].mean()


def test_small_parts_and_wider_margins_follow_their_knobs() -> None:
    lengths, cut = [], 0
    for seed in range(8):
        _, recs = render_scene_full(seed, 320, 320, ref=416.0, size_range=(0.045, 0.12), margin=0.5)
        for r in recs:
            if r["box"] is not None and r["visible"] > 0.99:
                x1, y1, x2, y2 = r["box"]
                lengths.append(max(x2 - x1, y2 - y1) / 416)
            elif r["box"] is not None and (r["box"][0] == 0 or r["box"][1] == 0 or r["box"][2] == 320):
                cut += 1
    assert lengths and max(lengths) < 0.12 * 1.3 and min(lengths) < 0.06
    assert cut > 0
