"""Procedural renderer of conveyor-belt scenes with exact ground truth.

Everything is deterministic by seed (numpy ``default_rng`` + PIL drawing, no global state).

Classes (ids 0..3, shape differs, colour/material is random and independent of class)::

    0 bolt       hex-head bolt lying flat: narrow shaft + wider head
    1 hex_nut    hexagon with a round hole
    2 washer     flat ring (round outline, round hole)
    3 l_bracket  L-shaped angle bracket with mounting holes

Part size ("length" = longest dimension) is a fraction of the frame's LONGER side (6 %..20 % by default),
so a camera frame of any resolution, letterboxed to a model size, shows parts at a similar fraction of the
model input.  Ground-truth boxes are the tight box of the part's visible pixels (computed from the rendered,
occlusion- and frame-clipped alpha mask, threshold 0.5), in pixel-edge coordinates: a part covering pixel
columns 10..19 has x1=10, x2=20.  Parts with less than ``MIN_VISIBLE`` of their area visible get no label.

CLI::

    python tools/synth.py images --out DIR --count N --size S --seed K [--width W --height H]
        -> DIR/000000.jpg ... + DIR/annotations.json (COCO; category ids 0..3, bbox [x, y, w, h])
    python tools/synth.py video --out clip.mp4 --gt clip.json --size WxH --fps F --seconds T --seed K
        -> H.264 MP4 (libx264, yuv420p, no B-frames, GOP = fps) + per-frame GT JSON (camera pixels, xyxy)

Python API: ``render_image``, ``render_scene``; clips: ``render_video`` in ``tools/synth_video.py``.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

NAMES = ["bolt", "hex_nut", "washer", "l_bracket"]
SS = 3  # supersampling factor for antialiased part masks
MIN_VISIBLE = 0.4  # parts less visible than this (occlusion + frame cut) are not labelled
SIZE_RANGE = (0.06, 0.20)  # part length as a fraction of the reference (longer) side


# --------------------------------------------------------------------------------------------- helpers
def _smooth_noise(rng: np.random.Generator, h: int, w: int, scale: float) -> np.ndarray:
    """Periodic (wrap-around) smooth noise in [-1, 1] with feature size ~``scale`` px, via FFT filtering."""
    white = rng.standard_normal((h, w)).astype(np.float32)
    fy = np.fft.fftfreq(h)[:, None]
    fx = np.fft.rfftfreq(w)[None, :]
    filt = np.exp(-((fx**2 + fy**2) * (scale**2) * 2.0)).astype(np.float32)
    out = np.fft.irfft2(np.fft.rfft2(white) * filt, s=(h, w)).astype(np.float32)
    out /= max(float(np.abs(out).max()), 1e-6)
    return out


def _blur(a: np.ndarray, radius: float) -> np.ndarray:
    """Gaussian blur of a 2-D float array in [0, 1] (through PIL, 8-bit is enough for shading)."""
    if radius <= 0:
        return a
    im = Image.fromarray(np.clip(a * 255.0, 0, 255).astype(np.uint8))
    return np.asarray(im.filter(ImageFilter.GaussianBlur(radius)), dtype=np.float32) / 255.0


# --------------------------------------------------------------------------------------------- belt
def make_belt(rng: np.random.Generator, width: int, height: int, ref: float) -> np.ndarray:
    """Belt background texture (H x width x 3 float32, 0..255), periodic along x (belt moves along x).

    Contains: rubber/fabric texture, transverse seams, optional side rails, unlabelled debris.
    """
    h, w = height, width
    base = rng.uniform(35, 120)
    tint = rng.uniform(-12, 12, size=3)
    if rng.random() < 0.25:  # coloured belts (green/blue PVC)
        tint += rng.choice([np.array([-15.0, 18.0, -5.0]), np.array([-10.0, 0.0, 25.0])])
    lo = _smooth_noise(rng, h, w, scale=rng.uniform(0.05, 0.2) * ref)
    mid = _smooth_noise(rng, h, w, scale=rng.uniform(0.005, 0.02) * ref)
    fine = rng.standard_normal((h, w)).astype(np.float32)
    tex = base + lo * rng.uniform(4, 14) + mid * rng.uniform(2, 8) + fine * rng.uniform(1, 5)
    # fabric weave: faint periodic lines, periodic in the texture width so the wrap is seamless
    if rng.random() < 0.6:
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        period_x = w / max(1, round(w / rng.uniform(3, 9)))
        tex += rng.uniform(1, 5) * np.sin(2 * np.pi * xx / period_x) * np.sin(2 * np.pi * yy / rng.uniform(3, 9))
    img = tex[..., None] + tint[None, None, :]
    # transverse seams (splices) every so often
    n_seams = max(1, round(w / (rng.uniform(0.5, 1.5) * ref)))
    for _ in range(n_seams):
        x = rng.uniform(0, w)
        thick = rng.uniform(0.002, 0.008) * ref
        shade = rng.uniform(-35, 25)
        slant = rng.uniform(-0.15, 0.15)
        xs = np.arange(w, dtype=np.float32)[None, :]
        ys = np.arange(h, dtype=np.float32)[:, None]
        d = np.abs(((xs - x - slant * ys) + w / 2) % w - w / 2)
        img += (shade * np.clip(1.0 - d / max(thick, 0.6), 0, 1))[..., None]
    # debris: small specks, scratches, blobs (unlabelled)
    pil = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))
    dr = ImageDraw.Draw(pil)
    n_debris = int(rng.poisson(rng.uniform(2, 25) * w * h / (ref * ref)))
    for _ in range(n_debris):
        x, y = rng.uniform(0, w), rng.uniform(0, h)
        s = rng.uniform(0.002, 0.02) * ref
        col = tuple(int(c) for c in np.clip(rng.uniform(10, 230) + rng.uniform(-15, 15, 3), 0, 255))
        kind = rng.random()
        if kind < 0.4:
            dr.ellipse([x - s, y - s * rng.uniform(0.4, 1), x + s, y + s], fill=col)
        elif kind < 0.7:
            a = rng.uniform(0, np.pi)
            ln = s * rng.uniform(2, 5)
            dr.line([x, y, x + ln * math.cos(a), y + ln * math.sin(a)], fill=col, width=max(1, int(s / 3)))
        else:
            k = rng.integers(4, 8)
            ang = np.sort(rng.uniform(0, 2 * np.pi, k))
            rad = s * rng.uniform(0.5, 1.3, k)
            dr.polygon([(x + r * math.cos(t), y + r * math.sin(t)) for r, t in zip(rad, ang, strict=True)],
                       fill=col)
    img = np.asarray(pil, dtype=np.float32).copy()
    # side rails (metal guides) at top/bottom
    if rng.random() < 0.6:
        for top in (True, False):
            if rng.random() < 0.8:
                rh = int(rng.uniform(0.02, 0.07) * h)
                if rh < 2:
                    continue
                metal = rng.uniform(110, 200)
                prof = metal + 40 * np.sin(np.linspace(0, np.pi, rh)) - 20
                band = prof[:, None, None] + rng.standard_normal((rh, w, 1)) * 3
                band = np.broadcast_to(band, (rh, w, 3)).copy()
                band[-1 if top else 0] *= 0.4
                if top:
                    img[:rh] = band
                else:
                    img[h - rh:] = band[::-1]
    return img


def lighting(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """Camera-fixed lighting multiplier (H x W x 1): linear gradient and vignette."""
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    xx = xx / max(width, height)
    yy = yy / max(width, height)
    a = rng.uniform(0, 2 * np.pi)
    g = 1.0 + rng.uniform(0.0, 0.35) * ((xx - xx.mean()) * math.cos(a) + (yy - yy.mean()) * math.sin(a)) * 2
    cx, cy = rng.uniform(0.2, 0.8) * xx.max(), rng.uniform(0.2, 0.8) * yy.max()
    r2 = (xx - cx) ** 2 + (yy - cy) ** 2
    g *= 1.0 - rng.uniform(0.0, 0.5) * np.clip(r2 / 0.5, 0, 1)
    g *= rng.uniform(0.75, 1.3)
    return g[..., None].astype(np.float32)


# --------------------------------------------------------------------------------------------- parts
@dataclass
class Part:
    cls: int
    length: float  # px, longest dimension
    angle: float  # rad
    cx: float
    cy: float
    color: np.ndarray  # base RGB 0..255
    shape: dict = field(default_factory=dict)
    shade: dict = field(default_factory=dict)


def _material(rng: np.random.Generator) -> tuple[np.ndarray, dict]:
    kind = rng.random()
    if kind < 0.35:  # bright steel
        v = rng.uniform(130, 215)
        col = np.array([v, v, v * rng.uniform(0.97, 1.05)])
        spec = rng.uniform(0.3, 0.7)
    elif kind < 0.5:  # black oxide
        v = rng.uniform(30, 70)
        col = np.array([v, v, v])
        spec = rng.uniform(0.2, 0.6)
    elif kind < 0.65:  # brass
        col = np.array([rng.uniform(170, 215), rng.uniform(135, 170), rng.uniform(50, 90)])
        spec = rng.uniform(0.3, 0.6)
    elif kind < 0.78:  # yellow zinc
        col = np.array([rng.uniform(190, 225), rng.uniform(175, 205), rng.uniform(100, 140)])
        spec = rng.uniform(0.2, 0.5)
    else:  # painted / plastic: any colour
        col = rng.uniform(20, 235, size=3)
        spec = rng.uniform(0.0, 0.3)
    shade = {
        "grad": rng.uniform(0.05, 0.35), "grad_dir": rng.uniform(0, 2 * np.pi),
        "spec": spec, "spec_off": rng.uniform(-0.3, 0.3), "spec_w": rng.uniform(0.05, 0.2),
        "rim": rng.uniform(0.15, 0.5), "grain": rng.uniform(0, 10), "facet": rng.uniform(0.08, 0.25),
    }
    return col.astype(np.float32), shade


def sample_part(rng: np.random.Generator, ref: float, cx: float, cy: float, cls: int | None = None,
                size_range: tuple[float, float] = SIZE_RANGE) -> Part:
    """Random part of random class at (cx, cy); length is a log-uniform fraction of ``ref``."""
    c = int(rng.integers(0, 4)) if cls is None else cls
    lo, hi = size_range
    length = ref * math.exp(rng.uniform(math.log(lo), math.log(hi)))
    if c == 1:
        shape = {"hole": rng.uniform(0.42, 0.58)}
    elif c == 2:
        shape = {"hole": rng.uniform(0.38, 0.6)}
    elif c == 0:
        shape = {"shaft_w": rng.uniform(0.13, 0.2), "head_w": rng.uniform(0.26, 0.36),
                 "head_l": rng.uniform(0.12, 0.2), "threads": rng.random() < 0.8}
    else:
        shape = {"arm2": rng.uniform(0.5, 0.85), "thick": rng.uniform(0.2, 0.3),
                 "holes": int(rng.integers(0, 3))}
    col, shade = _material(rng)
    return Part(c, length, rng.uniform(0, 2 * np.pi), cx, cy, col, shape, shade)


def _rot(pts: np.ndarray, a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return pts @ np.array([[c, s], [-s, c]], dtype=np.float64)


def render_part(p: Part) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Render a part: returns (rgb HxWx3 float32 0..255, alpha HxW float32 0..1, x0, y0) where (x0, y0)
    is the integer image position of the patch's top-left pixel."""
    L = p.length
    half = math.ceil(L * 0.75) + 3
    x0, y0 = math.floor(p.cx) - half, math.floor(p.cy) - half
    n = 2 * half + 1
    ox = (p.cx - x0) * SS  # centre in supersampled patch coordinates
    oy = (p.cy - y0) * SS
    m = Image.new("L", (n * SS, n * SS), 0)
    dr = ImageDraw.Draw(m)
    s = L * SS

    def poly(pts: np.ndarray, fill: int) -> None:
        q = _rot(np.asarray(pts, dtype=np.float64) * s, p.angle) + np.array([ox, oy])
        dr.polygon([tuple(v) for v in q], fill=fill)

    def circle(cx: float, cy: float, r: float, fill: int) -> None:
        q = _rot(np.array([[cx, cy]]) * s, p.angle)[0] + np.array([ox, oy])
        dr.ellipse([q[0] - r * s, q[1] - r * s, q[0] + r * s, q[1] + r * s], fill=fill)

    sh = p.shape
    if p.cls == 0:  # bolt along local x, length 1
        hl, hw, sw = sh["head_l"], sh["head_w"], sh["shaft_w"]
        x_head = -0.5
        poly(np.array([[x_head, -hw / 2], [x_head + hl, -hw / 2], [x_head + hl, hw / 2], [x_head, hw / 2]]), 255)
        tip = 0.5
        ch = sw * 0.3
        poly(np.array([[x_head + hl - 0.01, -sw / 2], [tip - ch, -sw / 2], [tip, -sw / 2 + ch],
                       [tip, sw / 2 - ch], [tip - ch, sw / 2], [x_head + hl - 0.01, sw / 2]]), 255)
    elif p.cls == 1:  # hex nut: across-corners = 1
        ang = np.arange(6) * np.pi / 3
        poly(np.stack([0.5 * np.cos(ang), 0.5 * np.sin(ang)], 1), 255)
        circle(0, 0, 0.5 * sh["hole"] * 0.87, 0)
    elif p.cls == 2:  # washer: diameter 1
        circle(0, 0, 0.5, 255)
        circle(0, 0, 0.5 * sh["hole"], 0)
    else:  # L bracket, long arm 1 along x, short arm along y
        t, a2 = sh["thick"], sh["arm2"]
        pts = np.array([[0, 0], [1, 0], [1, t], [t, t], [t, a2], [0, a2]]) - np.array([0.5, a2 / 2])
        poly(pts, 255)
        for k in range(sh["holes"]):
            hx = 0.55 + 0.3 * k if k < 2 else 0.0
            circle(hx - 0.5, t / 2 - a2 / 2, t * 0.22, 0)
        if sh["holes"] == 2:
            circle(t / 2 - 0.5, a2 * 0.72 - a2 / 2, t * 0.22, 0)
    alpha = np.asarray(m.resize((n, n), Image.Resampling.BOX), dtype=np.float32) / 255.0

    # shading in patch coordinates (unit = part length, origin = part centre)
    yy, xx = np.mgrid[0:n, 0:n].astype(np.float32)
    u = (xx + 0.5 - p.cx + x0) / L
    v = (yy + 0.5 - p.cy + y0) / L
    ca, sa = math.cos(p.angle), math.sin(p.angle)
    lu, lv = u * ca + v * sa, -u * sa + v * ca  # part-local coordinates
    d = p.shade
    g = 1.0 + d["grad"] * 2 * (u * math.cos(d["grad_dir"]) + v * math.sin(d["grad_dir"]))
    if p.cls in (1, 2):
        r = np.sqrt(lu**2 + lv**2)
        spec = np.exp(-(((r - 0.35 - d["spec_off"] * 0.2) / d["spec_w"]) ** 2))
    else:
        spec = np.exp(-(((lv - d["spec_off"] * 0.08) / (d["spec_w"] * 0.5)) ** 2))
    rgb = p.color[None, None, :] * g[..., None] + (d["spec"] * 120 * spec)[..., None]
    if p.cls == 0 and sh["threads"]:
        pitch = 0.035
        thr = (lu > -0.5 + sh["head_l"] + 0.05) & (np.abs(lv) < sh["shaft_w"] / 2)
        rgb -= (thr * (np.sin(lu / pitch * 2 * np.pi) > 0.3) * 35.0)[..., None]
    if p.cls == 1:  # a darker chamfer ring + six flat facets that catch the light differently
        r = np.sqrt(lu**2 + lv**2)
        rgb -= ((np.abs(r - 0.5 * sh["hole"] * 0.87 - 0.03) < 0.025) * 30.0)[..., None]
        face = np.floor(np.arctan2(lv, lu) / (np.pi / 3)) + 0.5  # facet k spans corners k..k+1
        facet = np.cos(face * np.pi / 3 + p.angle - d["grad_dir"]) * ((r > 0.36) * d["facet"])
        rgb *= (1.0 + facet)[..., None]
    # rim darkening from the blurred mask => 3D look
    rim = np.clip(alpha - _blur(alpha, max(0.8, L * 0.04)), 0, 1)
    rgb *= (1.0 - d["rim"] * rim * 2.0)[..., None]
    rgb += (np.asarray(np.random.default_rng(int(p.length * 1000) % 2**31).standard_normal((n, n)),
                       dtype=np.float32) * d["grain"])[..., None]
    return np.clip(rgb, 0, 255).astype(np.float32), alpha, x0, y0


# --------------------------------------------------------------------------------------------- scenes
def place_parts(rng: np.random.Generator, width: int, height: int, ref: float, count: int,
                margin: float = 0.3, size_range: tuple[float, float] = SIZE_RANGE,
                y_range: tuple[float, float] | None = None, x_range: tuple[float, float] | None = None
                ) -> list[Part]:
    """Place ``count`` parts with limited mutual overlap (rejection sampling on bounding circles).

    Centres may lie up to ``margin`` x length outside the frame so that some parts are cut by the edge.
    """
    parts: list[Part] = []
    for _ in range(count):
        for _try in range(30):
            p = sample_part(rng, ref, 0.0, 0.0, size_range=size_range)
            m = margin * p.length
            xr = x_range or (-m, width + m)
            yr = y_range or (-m, height + m)
            p.cx = float(rng.uniform(*xr))
            p.cy = float(rng.uniform(*yr))
            ok = True
            for q in parts:
                dist = math.hypot(p.cx - q.cx, p.cy - q.cy)
                if dist < 0.42 * (p.length + q.length):  # allows only partial overlap
                    ok = False
                    break
            if ok:
                parts.append(p)
                break
    return parts


def composite(img: np.ndarray, parts: list[Part], rng: np.random.Generator,
              shadow: tuple[float, float, float] | None = None) -> list[dict]:
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
        sa = _blur(alpha, max(1.0, p.length * 0.05)) * shadow[2]
        _paste(img, None, sa, x0 + sx, y0 + sy, mode="shadow")
        _paste(img, rgb, alpha, x0, y0, mode="over")
        rendered.append((alpha, x0, y0, n))
    # visibility: alpha of part i times (1 - alpha) of every later part, clipped to the frame
    out = []
    for i, (alpha, x0, y0, n) in enumerate(rendered):
        full = float((alpha >= 0.5).sum())
        vis = alpha.copy()
        for alpha_j, xj, yj, nj in rendered[i + 1:]:
            ix0, iy0 = max(x0, xj), max(y0, yj)
            ix1, iy1 = min(x0 + n, xj + nj), min(y0 + n, yj + nj)
            if ix0 < ix1 and iy0 < iy1:
                vis[iy0 - y0:iy1 - y0, ix0 - x0:ix1 - x0] *= 1.0 - alpha_j[iy0 - yj:iy1 - yj, ix0 - xj:ix1 - xj]
        fx0, fy0 = max(0, x0), max(0, y0)
        fx1, fy1 = min(w, x0 + n), min(h, y0 + n)
        rec: dict = {"cls": parts[i].cls, "box": None, "visible": 0.0, "mask": None}
        if fx0 < fx1 and fy0 < fy1 and full > 0:
            sub = vis[fy0 - y0:fy1 - y0, fx0 - x0:fx1 - x0] >= 0.5
            cnt = float(sub.sum())
            rec["visible"] = cnt / full
            if cnt > 0:
                ys, xs = np.nonzero(sub)
                rec["box"] = [int(xs.min()) + fx0, int(ys.min()) + fy0, int(xs.max()) + fx0 + 1,
                              int(ys.max()) + fy0 + 1]
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
    a = alpha[fy0 - y0:fy1 - y0, fx0 - x0:fx1 - x0, None]
    region = img[fy0:fy1, fx0:fx1]
    if mode == "shadow":
        region *= 1.0 - a
    else:
        assert rgb is not None
        region *= 1.0 - a
        region += a * rgb[fy0 - y0:fy1 - y0, fx0 - x0:fx1 - x0]


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


def render_scene(seed: int, width: int, height: int, ref: float | None = None, density: float | None = None,
                 jpeg: bool = True, keep_masks: bool = False) -> tuple[np.ndarray, list[dict]]:
    """Render one still scene. Returns (uint8 HxWx3 RGB, labels).

    ``ref`` is the length the part sizes are relative to (default: the longer side of the frame), so a crop of
    a larger virtual frame can be rendered directly.  Labels: ``{"cls", "label", "box": [x1, y1, x2, y2]}``
    for parts at least ``MIN_VISIBLE`` visible (plus ``"mask"`` when ``keep_masks``; all parts, with
    ``"visible"``, are then returned under ``"all"`` semantics: use :func:`render_scene_full`).
    """
    img, recs = render_scene_full(seed, width, height, ref, density, jpeg)
    labels = []
    for r in recs:
        if r["box"] is not None and r["visible"] >= MIN_VISIBLE:
            d = {"cls": r["cls"], "label": NAMES[r["cls"]], "box": r["box"]}
            if keep_masks:
                d["mask"] = r["mask"]
            labels.append(d)
    return img, labels


def render_scene_full(seed: int, width: int, height: int, ref: float | None = None,
                      density: float | None = None, jpeg: bool = True) -> tuple[np.ndarray, list[dict]]:
    """Like :func:`render_scene` but returns every part's record (cls, box or None, visible, mask)."""
    rng = np.random.default_rng([seed, 7])
    ref = float(ref if ref is not None else max(width, height))
    img = make_belt(rng, width, height, ref)
    mean_len = ref * 0.12
    dens = rng.uniform(0.05, 0.22) if density is None else density
    count = int(rng.poisson(dens * width * height / (mean_len * mean_len)))
    parts = place_parts(rng, width, height, ref, count)
    recs = composite(img, parts, rng)
    img *= lighting(rng, width, height)
    return camera_effects(rng, img, jpeg=jpeg), recs


def render_image(seed: int, width: int, height: int | None = None) -> tuple[np.ndarray, list[dict]]:
    """Render a still image (uint8 RGB array, H x W x 3) and its labels ``[{"cls", "label", "box"}]``.

    Boxes are xyxy in pixel-edge coordinates of this image.
    """
    return render_scene(seed, width, height if height is not None else width)


# --------------------------------------------------------------------------------------------- CLI
def write_images(out: Path, count: int, width: int, height: int, seed: int) -> None:
    """Write ``count`` JPEG images + COCO ``annotations.json`` (category ids 0..3 = NAMES index)."""
    out.mkdir(parents=True, exist_ok=True)
    images, anns = [], []
    for i in range(count):
        img, labels = render_scene(seed * 1_000_003 + i, width, height)
        name = f"{i:06d}.jpg"
        Image.fromarray(img).save(out / name, quality=95)
        images.append({"id": i, "file_name": name, "width": width, "height": height})
        for lab in labels:
            x1, y1, x2, y2 = lab["box"]
            anns.append({"id": len(anns) + 1, "image_id": i, "category_id": lab["cls"],
                         "bbox": [x1, y1, x2 - x1, y2 - y1], "area": (x2 - x1) * (y2 - y1), "iscrowd": 0})
    cats = [{"id": k, "name": n, "supercategory": "part"} for k, n in enumerate(NAMES)]
    (out / "annotations.json").write_text(json.dumps({"images": images, "annotations": anns,
                                                      "categories": cats}))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("images", help="still images + COCO annotations.json (category ids 0..3)")
    a.add_argument("--out", type=Path, required=True)
    a.add_argument("--count", type=int, default=100)
    a.add_argument("--size", type=int, default=640)
    a.add_argument("--width", type=int)
    a.add_argument("--height", type=int)
    a.add_argument("--seed", type=int, default=0)
    v = sub.add_parser("video", help="H.264 MP4 + per-frame GT JSON")
    v.add_argument("--out", type=Path, required=True)
    v.add_argument("--gt", type=Path, required=True)
    v.add_argument("--size", default="1280x720", help="WxH")
    v.add_argument("--fps", type=int, default=10)
    v.add_argument("--seconds", type=float, default=5.0)
    v.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.cmd == "images":
        write_images(args.out, args.count, args.width or args.size, args.height or args.size, args.seed)
    else:
        repo = str(Path(__file__).resolve().parents[1])
        if repo not in sys.path:  # run as `python tools/synth.py`: make `tools.*` importable
            sys.path.insert(0, repo)
        from tools.synth_video import render_video  # noqa: PLC0415 - tools.synth_video imports this module

        w, h = (int(x) for x in args.size.lower().split("x"))
        render_video(args.out, args.gt, w, h, args.fps, args.seconds, args.seed)


if __name__ == "__main__":
    main()
