"""The training side of the capture: a YOLO-format dataset (as the daemon writes it, or as a labelling
tool exports it) read into training crops, without torch (`tools.model.yolo_dataset`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from daemon.core.frames import Detection
from daemon.publish.capture.dataset import data_yaml, image_path, label_of, label_text
from tools.model import yolo_dataset

NAMES = ["bolt", "hex_nut", "washer", "l_bracket"]


def captured(root: Path, names: list[str], frames: dict[int, tuple[Detection, ...]]) -> None:
    """A dataset as the daemon's capture writes it (its own layout functions), 640x480 grey frames."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "data.yaml").write_text(data_yaml(root, names))
    for ms, dets in frames.items():
        image = root / image_path("cam1", ms)
        image.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((480, 640, 3), 90, np.uint8)).save(image)
        label = label_of(image)
        label.parent.mkdir(parents=True, exist_ok=True)
        label.write_text(label_text(dets, 640, 480))


def test_a_captured_dataset_reads_back_with_its_boxes(tmp_path: Path) -> None:
    washer = Detection(2, "washer", 0.7, (320.0, 240.0, 384.0, 288.0))
    captured(tmp_path / "cap", NAMES, {1: (washer,), 2: ()})
    samples = yolo_dataset.load(tmp_path / "cap", NAMES)
    assert [s.image.name for s in samples] == ["1.jpg", "2.jpg"]
    np.testing.assert_allclose(samples[0].labels, [[2, 0.55, 0.55, 0.1, 0.1]], atol=1e-6)
    assert samples[1].labels.shape == (0, 5)  # an empty label file: no part (a hard negative)


def test_classes_are_mapped_by_name_and_unknown_ones_refused(tmp_path: Path) -> None:
    root = tmp_path / "export"
    (root / "images").mkdir(parents=True)
    (root / "labels").mkdir()
    (root / "data.yaml").write_text("path: .\ntrain: images\nval: images\nnames: [washer, bolt]\n")  # a tool's order
    Image.fromarray(np.zeros((10, 20, 3), np.uint8)).save(root / "images" / "a.png")
    (root / "labels" / "a.txt").write_text("0 0.5 0.5 0.2 0.2\n1 0.1 0.1 0.1 0.1\n\n")
    (root / "images" / "unlabelled.jpg").write_bytes((root / "images" / "a.png").read_bytes())
    samples = yolo_dataset.load(root, NAMES)
    by_name = {s.image.name: s for s in samples}
    assert by_name["a.png"].labels[:, 0].tolist() == [2, 0]  # washer -> 2, bolt -> 0
    assert by_name["unlabelled.jpg"].labels.shape == (0, 5)
    (root / "data.yaml").write_text("names: {0: washer, 1: gasket}\n")
    with pytest.raises(ValueError, match="gasket"):
        yolo_dataset.load(root, NAMES)


def test_malformed_labels_are_errors_with_their_place() -> None:
    with pytest.raises(ValueError, match=r"x\.txt:2"):
        yolo_dataset.parse_labels("0 0.5 0.5 0.1 0.1\n0 0.5 0.5\n", [0], "x.txt")
    with pytest.raises(ValueError, match="class 3"):
        yolo_dataset.parse_labels("3 0.5 0.5 0.1 0.1\n", [0, 1], "x.txt")


def test_a_crop_keeps_the_boxes_in_crop_pixels(tmp_path: Path) -> None:
    box = Detection(1, "hex_nut", 0.8, (300.0, 220.0, 340.0, 260.0))  # the frame's centre
    captured(tmp_path / "cap", NAMES, {1: (box,)})
    sample = yolo_dataset.load(tmp_path / "cap", NAMES)[0]
    rng = np.random.default_rng(0)
    for _ in range(20):
        img, lab = yolo_dataset.crop(sample, 320, rng)
        assert img.shape == (320, 320, 3) and img.dtype == np.uint8
        assert lab.shape[1] == 5 and len(lab) <= 1
        if len(lab):
            cls, x1, y1, x2, y2 = lab[0]
            assert cls == 1 and 0 <= x1 < x2 <= 320 and 0 <= y1 < y2 <= 320
            assert abs(img[int((y1 + y2) / 2), int((x1 + x2) / 2)].astype(int) - 90).max() <= 3  # the image, not pad


def test_a_crop_of_a_small_image_is_padded_and_keeps_the_box_scaled() -> None:
    labels = np.array([[0, 0.5, 0.5, 0.5, 0.5]], np.float32)
    boxes = yolo_dataset._boxes_in_crop(labels, 200, 100, 0, 0, 200, 100)
    np.testing.assert_allclose(boxes, [[0, 50, 25, 150, 75]])
    cut = yolo_dataset._boxes_in_crop(labels, 200, 100, 120, 0, 80, 100)  # 30 of 100 px wide left: dropped
    assert cut.shape == (0, 5)


def test_a_dataset_without_data_yaml_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"data\.yaml"):
        yolo_dataset.load(tmp_path, NAMES)
