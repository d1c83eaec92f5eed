"""The captured dataset's layout, in the YOLO (Ultralytics) format any labelling tool imports:

    <dir>/data.yaml                      path, train/val (the images folder), names (class id -> name)
    <dir>/images/<camera>/<ms>.jpg       the whole frame (`<ms>`: its capture time, Unix ms)
    <dir>/labels/<camera>/<ms>.txt       one line per published detection: `class cx cy w h`,
                                         centre and size normalised to the image (0..1)

Ultralytics finds each image's labels by replacing `images` with `labels` in its path; an empty label
file is a frame with no part in it (a hard negative, once checked).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from daemon.core.frames import Detection

IMAGES = "images"
LABELS = "labels"
IMAGE_SUFFIX = ".jpg"
LABEL_SUFFIX = ".txt"
DATA_YAML = "data.yaml"


def image_path(camera: str, captured_ms: int) -> str:
    """The image's path relative to the dataset directory."""
    return f"{IMAGES}/{camera}/{captured_ms}{IMAGE_SUFFIX}"


def label_of(image: Path) -> Path:
    """The label file beside an image of the dataset (`images/c/t.jpg` -> `labels/c/t.txt`)."""
    camera_dir = image.parent
    return camera_dir.parent.parent / LABELS / camera_dir.name / (image.stem + LABEL_SUFFIX)


def label_text(
    detections: Sequence[Detection], width: int, height: int, class_of: Callable[[Detection], int] | None = None
) -> str:
    """The YOLO label lines of `detections` (camera pixels) in a `width` x `height` frame; `class_of`
    gives each one's class id in the dataset (default: the model's own `cls`)."""
    lines = []
    for d in detections:
        x1, y1, x2, y2 = d.box
        cx, cy = (x1 + x2) / 2 / width, (y1 + y2) / 2 / height
        w, h = (x2 - x1) / width, (y2 - y1) / height
        lines.append(f"{d.cls if class_of is None else class_of(d)} {cx:.6f} {cy:.6f} {w:.6f} {h:.6f}\n")
    return "".join(lines)


class DatasetClasses:
    """The dataset's class list: ids never change once given. It starts from the `data.yaml` a previous
    run left (its labels keep their meaning) and the served model's names; a label it has not seen
    (a model swapped in with other classes) is appended, and `changed` says `data.yaml` must be
    written again before a label file uses the new id. A detection's class is its *label*, the name
    the model that served the frame gave it, so a swap never mislabels the dataset."""

    def __init__(self, earlier: Sequence[str], served: Sequence[str]) -> None:
        self.names = list(dict.fromkeys([*earlier, *served]))
        self._ids = {name: i for i, name in enumerate(self.names)}
        self.changed = False

    def id_of(self, detection: Detection) -> int:
        found = self._ids.get(detection.label)
        if found is None:
            found = self._ids[detection.label] = len(self.names)
            self.names.append(detection.label)
            self.changed = True
        return found


def names_in(text: str) -> list[str]:
    """The class names of a `data.yaml` this module wrote (`  <id>: "<name>"` under `names:`), by id;
    [] for anything else."""
    found: dict[int, str] = {}
    inside = False
    for line in text.splitlines():
        if line.strip() == "names:":
            inside = True
            continue
        m = re.fullmatch(r"\s+(\d+):\s*(\".*\")\s*", line) if inside else None
        if m is None:
            inside = inside and line.startswith(" ")
            continue
        with contextlib.suppress(json.JSONDecodeError):
            found[int(m.group(1))] = str(json.loads(m.group(2)))
    return [found[i] for i in range(len(found))] if sorted(found) == list(range(len(found))) else []


def data_yaml(root: Path, names: Sequence[str]) -> str:
    """The dataset's `data.yaml` (names quoted as JSON strings, which YAML reads as they are)."""
    lines = [
        "# BeltSight capture: frames the model was unsure of, its own detections as pre-labels.",
        "# Check and correct the labels before training (docs/models/improving.md).",
        f"path: {json.dumps(str(root.resolve()))}",
        f"train: {IMAGES}",
        f"val: {IMAGES}",
        "names:",
        *(f"  {i}: {json.dumps(name)}" for i, name in enumerate(names)),
    ]
    return "\n".join(lines) + "\n"


__all__ = [
    "DATA_YAML",
    "IMAGES",
    "IMAGE_SUFFIX",
    "LABELS",
    "LABEL_SUFFIX",
    "DatasetClasses",
    "data_yaml",
    "image_path",
    "label_of",
    "label_text",
    "names_in",
]
