"""The four part classes: materials, shapes rendered as supersampled masks, and placement."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from tools.kit.synth.belt import blur

NAMES = ["bolt", "hex_nut", "washer", "l_bracket"]
SS = 3  # supersampling factor for antialiased part masks
MIN_VISIBLE = 0.4  # parts less visible than this (occlusion + frame cut) are not labelled
SIZE_RANGE = (0.06, 0.20)  # part length as a fraction of the reference (longer) side


# --------------------------------------------------------------------------------------------- parts
@dataclass
class Part:
    cls: int
    length: float  # px, longest dimension
    angle: float  # rad
    cx: float
    cy: float
    color: np.ndarray  # base RGB 0..255
    shape: dict[str, Any] = field(default_factory=dict)
    shade: dict[str, Any] = field(default_factory=dict)


def _material(rng: np.random.Generator) -> tuple[np.ndarray, dict[str, Any]]:
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
        "grad": rng.uniform(0.05, 0.35),
        "grad_dir": rng.uniform(0, 2 * np.pi),
        "spec": spec,
        "spec_off": rng.uniform(-0.3, 0.3),
        "spec_w": rng.uniform(0.05, 0.2),
        "rim": rng.uniform(0.15, 0.5),
        "grain": rng.uniform(0, 10),
        "facet": rng.uniform(0.08, 0.25),
    }
    return col.astype(np.float32), shade


def sample_part(
    rng: np.random.Generator,
    ref: float,
    cx: float,
    cy: float,
    cls: int | None = None,
    size_range: tuple[float, float] = SIZE_RANGE,
) -> Part:
    """Random part of random class at (cx, cy); length is a log-uniform fraction of ``ref``."""
    c = int(rng.integers(0, 4)) if cls is None else cls
    lo, hi = size_range
    length = ref * math.exp(rng.uniform(math.log(lo), math.log(hi)))
    if c == 1:
        shape = {"hole": rng.uniform(0.42, 0.58)}
    elif c == 2:
        shape = {"hole": rng.uniform(0.38, 0.6)}
    elif c == 0:
        shape = {
            "shaft_w": rng.uniform(0.13, 0.2),
            "head_w": rng.uniform(0.26, 0.36),
            "head_l": rng.uniform(0.12, 0.2),
            "threads": rng.random() < 0.8,
        }
    else:
        shape = {"arm2": rng.uniform(0.5, 0.85), "thick": rng.uniform(0.2, 0.3), "holes": int(rng.integers(0, 3))}
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
    alpha = _silhouette(p, n, x0, y0)
    return _shaded(p, alpha, x0, y0), alpha, x0, y0


def _silhouette(p: Part, n: int, x0: int, y0: int) -> np.ndarray:
    """The part's alpha (n x n float32 0..1, its holes 0), drawn supersampled ``SS`` times and box-filtered
    down; (x0, y0) the patch's top-left pixel in the image."""
    L = p.length
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
        poly(
            np.array(
                [
                    [x_head + hl - 0.01, -sw / 2],
                    [tip - ch, -sw / 2],
                    [tip, -sw / 2 + ch],
                    [tip, sw / 2 - ch],
                    [tip - ch, sw / 2],
                    [x_head + hl - 0.01, sw / 2],
                ]
            ),
            255,
        )
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
    return np.asarray(m.resize((n, n), Image.Resampling.BOX), dtype=np.float32) / 255.0


def _shaded(p: Part, alpha: np.ndarray, x0: int, y0: int) -> np.ndarray:
    """The part's colour over its patch (n x n x 3 float32 0..255): gradient, specular highlight, bolt
    threads, nut facets, rim darkening from the blurred ``alpha``, and grain."""
    L = p.length
    n = alpha.shape[0]
    sh = p.shape
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
    rim = np.clip(alpha - blur(alpha, max(0.8, L * 0.04)), 0, 1)
    rgb *= (1.0 - d["rim"] * rim * 2.0)[..., None]
    rgb += (
        np.asarray(np.random.default_rng(int(p.length * 1000) % 2**31).standard_normal((n, n)), dtype=np.float32)
        * d["grain"]
    )[..., None]
    out: np.ndarray = np.clip(rgb, 0, 255).astype(np.float32)
    return out


# --------------------------------------------------------------------------------------------- scenes
def place_parts(
    rng: np.random.Generator,
    width: int,
    height: int,
    ref: float,
    count: int,
    margin: float = 0.3,
    size_range: tuple[float, float] = SIZE_RANGE,
    y_range: tuple[float, float] | None = None,
    x_range: tuple[float, float] | None = None,
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
