"""Whole scenes: parts composited on a belt with shadows and occlusion, camera effects, exact ground truth."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageFilter

from tools.kit.synth.belt import blur, lighting, make_belt, scratches
from tools.kit.synth.parts import MIN_VISIBLE, NAMES, SIZE_RANGE, Part, place_parts, render_part


def composite(
    img: np.ndarray, parts: list[Part], rng: np.random.Generator, shadow: tuple[float, float, float] | None = None
) -> list[dict[str, Any]]:
    """Draw ``parts`` (in order, later ones on top) with shadows into ``img`` (H x W x 3 float32, in place).

    Returns one dict per part: cls, box (xyxy, visible pixels) or None, visible fraction, mask (full-frame
    bool mask of visible pixels, alpha >= 0.5, or None when nothing is visible).
    """
    h, w = img.shape[:2]
    if shadow is None:
        a = rng.uniform(0, 2 * np.pi)
        shadow = (math.cos(a), math.sin(a), rng.uniform(0.25, 0.6))
    rendered = []
    for p in parts:
        rgb, alpha, x0, y0 = render_part(p)
        n = alpha.shape[0]
        # shadow: blurred, shifted alpha
        off = p.length * 0.06
        sx, sy = round(shadow[0] * off), round(shadow[1] * off)
        sa = blur(alpha, max(1.0, p.length * 0.05)) * shadow[2]
        _paste(img, None, sa, x0 + sx, y0 + sy, mode="shadow")
        _paste(img, rgb, alpha, x0, y0, mode="over")
        rendered.append((alpha, x0, y0, n))
    # visibility: alpha of part i times (1 - alpha) of every later part, clipped to the frame
    out = []
    for i, (alpha, x0, y0, n) in enumerate(rendered):
        full = float((alpha >= 0.5).sum())
        vis = alpha.copy()
        for alpha_j, xj, yj, nj in rendered[i + 1 :]:
            ix0, iy0 = max(x0, xj), max(y0, yj)
            ix1, iy1 = min(x0 + n, xj + nj), min(y0 + n, yj + nj)
            if ix0 < ix1 and iy0 < iy1:
                vis[iy0 - y0 : iy1 - y0, ix0 - x0 : ix1 - x0] *= 1.0 - alpha_j[iy0 - yj : iy1 - yj, ix0 - xj : ix1 - xj]
        fx0, fy0 = max(0, x0), max(0, y0)
        fx1, fy1 = min(w, x0 + n), min(h, y0 + n)
        rec: dict[str, Any] = {"cls": parts[i].cls, "box": None, "visible": 0.0, "mask": None}
        if fx0 < fx1 and fy0 < fy1 and full > 0:
            sub = vis[fy0 - y0 : fy1 - y0, fx0 - x0 : fx1 - x0] >= 0.5
            cnt = float(sub.sum())
            rec["visible"] = cnt / full
            if cnt > 0:
                ys, xs = np.nonzero(sub)
                rec["box"] = [
                    int(xs.min()) + fx0,
                    int(ys.min()) + fy0,
                    int(xs.max()) + fx0 + 1,
                    int(ys.max()) + fy0 + 1,
                ]
                mask = np.zeros((h, w), dtype=bool)
                mask[fy0:fy1, fx0:fx1] = sub
                rec["mask"] = mask
        out.append(rec)
    return out


def _paste(img: np.ndarray, rgb: np.ndarray | None, alpha: np.ndarray, x0: int, y0: int, mode: str) -> None:
    h, w = img.shape[:2]
    n = alpha.shape[0]
    fx0, fy0, fx1, fy1 = max(0, x0), max(0, y0), min(w, x0 + n), min(h, y0 + n)
    if fx0 >= fx1 or fy0 >= fy1:
        return
    a = alpha[fy0 - y0 : fy1 - y0, fx0 - x0 : fx1 - x0, None]
    region = img[fy0:fy1, fx0:fx1]
    if mode == "shadow":
        region *= 1.0 - a
    else:
        assert rgb is not None
        region *= 1.0 - a
        region += a * rgb[fy0 - y0 : fy1 - y0, fx0 - x0 : fx1 - x0]


def camera_effects(rng: np.random.Generator, img: np.ndarray, jpeg: bool = True) -> np.ndarray:
    """Blur, sensor noise and (optionally) JPEG artefacts. Input float HxWx3 0..255 -> uint8."""
    out = np.clip(img, 0, 255).astype(np.uint8)
    pil = Image.fromarray(out)
    r = rng.uniform(0, 1.4) if rng.random() < 0.6 else 0.0
    if r > 0.2:
        pil = pil.filter(ImageFilter.GaussianBlur(r))
    arr = np.asarray(pil, dtype=np.float32)
    sigma = rng.uniform(0, 7)
    arr = arr + rng.standard_normal(arr.shape, dtype=np.float32) * sigma
    out = np.clip(arr, 0, 255).astype(np.uint8)
    if jpeg and rng.random() < 0.7:
        buf = io.BytesIO()
        Image.fromarray(out).save(buf, format="JPEG", quality=int(rng.integers(35, 95)))
        buf.seek(0)
        out = np.asarray(Image.open(buf).convert("RGB"))
    return out


def render_scene(
    seed: int,
    width: int,
    height: int,
    ref: float | None = None,
    density: float | None = None,
    jpeg: bool = True,
    keep_masks: bool = False,
    *,
    size_range: tuple[float, float] = SIZE_RANGE,
    margin: float = 0.3,
    wear: float = 0.0,
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Render one still scene. Returns (uint8 HxWx3 RGB, labels).

    ``ref`` is the length the part sizes are relative to (default: the longer side of the frame), so a crop of
    a larger virtual frame can be rendered directly.  Labels: ``{"cls", "label", "box": [x1, y1, x2, y2]}``
    for parts at least ``MIN_VISIBLE`` visible (plus ``"mask"`` when ``keep_masks``; all parts, with
    ``"visible"``, are then returned under ``"all"`` semantics: use :func:`render_scene_full`).
    ``size_range`` (part length as a fraction of ``ref``) and ``margin`` (how far outside the frame a part's
    centre may lie, in part lengths) are :func:`place_parts`'s; ``wear`` > 0 adds that much belt wear
    (:func:`scratches`: unlabelled strokes of a part's length) from a random stream of its own, so the
    scene is otherwise the one ``wear`` = 0 renders.
    """
    img, recs = render_scene_full(
        seed, width, height, ref, density, jpeg, size_range=size_range, margin=margin, wear=wear
    )
    labels = []
    for r in recs:
        if r["box"] is not None and r["visible"] >= MIN_VISIBLE:
            d = {"cls": r["cls"], "label": NAMES[r["cls"]], "box": r["box"]}
            if keep_masks:
                d["mask"] = r["mask"]
            labels.append(d)
    return img, labels


def render_scene_full(
    seed: int,
    width: int,
    height: int,
    ref: float | None = None,
    density: float | None = None,
    jpeg: bool = True,
    *,
    size_range: tuple[float, float] = SIZE_RANGE,
    margin: float = 0.3,
    wear: float = 0.0,
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Like :func:`render_scene` but returns every part's record (cls, box or None, visible, mask)."""
    rng = np.random.default_rng([seed, 7])
    ref = float(ref if ref is not None else max(width, height))
    img = make_belt(rng, width, height, ref)
    if wear > 0:
        img = scratches(np.random.default_rng([seed, 13]), img, ref, wear)
    mean_len = ref * 0.12
    dens = rng.uniform(0.05, 0.22) if density is None else density
    count = int(rng.poisson(dens * width * height / (mean_len * mean_len)))
    parts = place_parts(rng, width, height, ref, count, margin=margin, size_range=size_range)
    recs = composite(img, parts, rng)
    img *= lighting(rng, width, height)
    return camera_effects(rng, img, jpeg=jpeg), recs


def render_image(seed: int, width: int, height: int | None = None) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Render a still image (uint8 RGB array, H x W x 3) and its labels ``[{"cls", "label", "box"}]``.

    Boxes are xyxy in pixel-edge coordinates of this image.
    """
    return render_scene(seed, width, height if height is not None else width)


# --------------------------------------------------------------------------------------------- CLI
def write_images(out: Path, count: int, width: int, height: int, seed: int) -> None:
    """Write ``count`` JPEG images + COCO ``annotations.json`` (category ids 0..3 = NAMES index)."""
    out.mkdir(parents=True, exist_ok=True)
    images: list[dict[str, Any]] = []
    anns: list[dict[str, Any]] = []
    for i in range(count):
        img, labels = render_scene(seed * 1_000_003 + i, width, height)
        name = f"{i:06d}.jpg"
        Image.fromarray(img).save(out / name, quality=95)
        images.append({"id": i, "file_name": name, "width": width, "height": height})
        for lab in labels:
            x1, y1, x2, y2 = lab["box"]
            anns.append(
                {
                    "id": len(anns) + 1,
                    "image_id": i,
                    "category_id": lab["cls"],
                    "bbox": [x1, y1, x2 - x1, y2 - y1],
                    "area": (x2 - x1) * (y2 - y1),
                    "iscrowd": 0,
                }
            )
    cats = [{"id": k, "name": n, "supercategory": "part"} for k, n in enumerate(NAMES)]
    (out / "annotations.json").write_text(json.dumps({"images": images, "annotations": anns, "categories": cats}))
