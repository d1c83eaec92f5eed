"""YOLO-format datasets (Ultralytics layout) as training crops, without torch: what
`python -m tools.model.train --extra DIR` mixes into the synthetic stream.

A dataset directory holds `data.yaml` (`names`: a list, or a dict of class id -> name; `path` and
`train`: where the images are, default `images`) and, beside each image under `images/`, its labels
under `labels/` (same relative path, `.txt`): one `class cx cy w h` line per box, normalised to the
image. This is what the daemon's `[capture]` writes and what CVAT, Label Studio and Roboflow export
as "YOLO" / "Ultralytics YOLO". A missing label file is an image with no parts (a hard negative).

Class ids are mapped by name to the trainer's classes; a name the trainer does not know is an error
(a dataset labelled for another model). `crop` turns an image into one training crop the way the
synthetic data is made: the image scaled so its longer side is one model input size, then a random
`imgsz` square cut from it (padded with the letterbox grey where the image is smaller), boxes in
crop pixels (`cls, x1, y1, x2, y2`), boxes cut to less than `MIN_VISIBLE` of their area dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml  # type: ignore[import-untyped]  # PyYAML ships no stubs; types-PyYAML is not a dependency
from PIL import Image

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp")
PAD = 114
MIN_VISIBLE = 0.4
MODEL_SIZES = (416, 640, 800)


@dataclass(frozen=True, slots=True)
class Sample:
    """One labelled image: its path and its boxes (n, 5: trainer class, cx, cy, w, h normalised)."""

    image: Path
    labels: np.ndarray


def read_names(root: Path) -> list[str]:
    """The class names of the dataset at `root` (its `data.yaml`), in class id order."""
    data = _data_yaml(root)
    names = data.get("names")
    if isinstance(names, dict):
        return [str(names[k]) for k in sorted(names, key=int)]
    if isinstance(names, list):
        return [str(n) for n in names]
    raise ValueError(f"{root / 'data.yaml'}: `names` must be a list or a mapping of class id to name")


def images_dir(root: Path) -> Path:
    """Where `data.yaml`'s `train` points (relative to its `path`, else to `root`), default `images`."""
    data = _data_yaml(root)
    base = Path(str(data["path"])) if data.get("path") else root
    if not base.is_absolute():
        base = root / base
    train = data.get("train", "images")
    folder = Path(str(train[0] if isinstance(train, list) else train))
    folder = folder if folder.is_absolute() else base / folder
    return folder if folder.is_dir() else root / "images"  # a dataset moved since data.yaml was written


def label_path(image: Path, images: Path) -> Path:
    """The label file of `image` (`images/a/b.jpg` -> `labels/a/b.txt`)."""
    return images.parent / "labels" / image.relative_to(images).with_suffix(".txt")


def parse_labels(text: str, mapping: Sequence[int], where: str = "") -> np.ndarray:
    """YOLO label lines -> (n, 5) float32: trainer class (through `mapping`), cx, cy, w, h."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 5:
            raise ValueError(f"{where}:{number}: expected `class cx cy w h`, got {line!r}")
        cls = int(fields[0])
        if not 0 <= cls < len(mapping):
            raise ValueError(f"{where}:{number}: class {cls} is not in data.yaml's names")
        rows.append([mapping[cls], *(float(v) for v in fields[1:])])
    return np.array(rows, dtype=np.float32).reshape(-1, 5)


def load(root: Path, names: Sequence[str]) -> list[Sample]:
    """Every labelled image of the dataset at `root`, classes mapped to `names` (the trainer's)."""
    theirs = read_names(root)
    unknown = [n for n in theirs if n not in names]
    if unknown:
        raise ValueError(f"{root}: classes {unknown} are not the model's ({list(names)})")
    mapping = [list(names).index(n) for n in theirs]
    images = images_dir(root)
    samples = []
    for image in sorted(p for p in images.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES):
        label = label_path(image, images)
        text = label.read_text() if label.is_file() else ""
        samples.append(Sample(image, parse_labels(text, mapping, str(label))))
    return samples


def crop(sample: Sample, imgsz: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One training crop of `sample`: (uint8 imgsz x imgsz x 3 RGB, labels (n, 5) cls, x1, y1, x2, y2)."""
    with Image.open(sample.image) as opened:
        picture = opened.convert("RGB")
    side = float(rng.choice(MODEL_SIZES)) * rng.uniform(0.9, 1.1)
    scale = side / max(picture.size)
    w, h = max(1, round(picture.width * scale)), max(1, round(picture.height * scale))
    pixels = np.asarray(picture.resize((w, h), Image.Resampling.BILINEAR))
    x0 = int(rng.integers(0, w - imgsz + 1)) if w > imgsz else 0
    y0 = int(rng.integers(0, h - imgsz + 1)) if h > imgsz else 0
    canvas = np.full((imgsz, imgsz, 3), PAD, dtype=np.uint8)
    cut = pixels[y0 : y0 + imgsz, x0 : x0 + imgsz]
    canvas[: cut.shape[0], : cut.shape[1]] = cut
    return canvas, _boxes_in_crop(sample.labels, w, h, x0, y0, cut.shape[1], cut.shape[0])


def _boxes_in_crop(labels: np.ndarray, w: int, h: int, x0: int, y0: int, cw: int, ch: int) -> np.ndarray:
    if not len(labels):
        return np.zeros((0, 5), dtype=np.float32)
    cls, cx, cy, bw, bh = (labels[:, i] for i in range(5))
    x1, x2 = (cx - bw / 2) * w - x0, (cx + bw / 2) * w - x0
    y1, y2 = (cy - bh / 2) * h - y0, (cy + bh / 2) * h - y0
    area = (x2 - x1) * (y2 - y1)
    cx1, cx2 = np.clip(x1, 0, cw), np.clip(x2, 0, cw)
    cy1, cy2 = np.clip(y1, 0, ch), np.clip(y2, 0, ch)
    visible = (cx2 - cx1) * (cy2 - cy1)
    keep = (area > 0) & (visible >= MIN_VISIBLE * area)
    return np.stack([cls, cx1, cy1, cx2, cy2], axis=1)[keep].astype(np.float32)


def _data_yaml(root: Path) -> dict[str, object]:
    path = root / "data.yaml"
    if not path.is_file():
        raise ValueError(f"{root}: no data.yaml (a YOLO dataset directory has one)")
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a mapping")
    return data


__all__ = ["Sample", "crop", "images_dir", "label_path", "load", "parse_labels", "read_names"]
