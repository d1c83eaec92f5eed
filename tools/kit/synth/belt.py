"""The belt under the parts: textures (rubber/PVC, fabric weave, seams, rails) and lighting."""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageDraw, ImageFilter


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


def blur(a: np.ndarray, radius: float) -> np.ndarray:
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
    img = _texture(rng, width, height, ref)
    _seams(rng, img, ref)
    img = _debris(rng, img, ref)
    _rails(rng, img)
    return img


def _texture(rng: np.random.Generator, width: int, height: int, ref: float) -> np.ndarray:
    """The belt's rubber or fabric: a tinted base, noise at three scales, a faint weave (float64)."""
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
    img: np.ndarray = tex[..., None] + tint[None, None, :]  # float64 here, float32 once drawn on
    return img


def _seams(rng: np.random.Generator, img: np.ndarray, ref: float) -> None:
    """Transverse seams (splices), lighter or darker, slightly slanted, drawn into ``img``."""
    h, w = img.shape[:2]
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


def _debris(rng: np.random.Generator, img: np.ndarray, ref: float) -> np.ndarray:
    """Unlabelled specks, scratches and blobs on ``img``: the belt as float32."""
    h, w = img.shape[:2]
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
            dr.polygon([(x + r * math.cos(t), y + r * math.sin(t)) for r, t in zip(rad, ang, strict=True)], fill=col)
    return np.asarray(pil, dtype=np.float32).copy()


def _rails(rng: np.random.Generator, img: np.ndarray) -> None:
    """Metal side rails (guides) at the top and bottom, sometimes, drawn into ``img``."""
    h, w = img.shape[:2]
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
                    img[h - rh :] = band[::-1]


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
    return np.asarray(g[..., None], dtype=np.float32)


def scratches(rng: np.random.Generator, img: np.ndarray, ref: float, rate: float) -> np.ndarray:
    """Belt wear drawn onto a belt image (H x W x 3 float, 0..255): straight and bent scratches, metal
    shavings, scuffs; unlabelled, so a detector trained on them learns that a thin bright or dark stroke
    of a part's length is not a bolt. ``rate`` scales their number (about 4-20 per ``ref`` squared at 1)."""
    h, w = img.shape[:2]
    pil = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8))
    dr = ImageDraw.Draw(pil)
    mean = float(np.asarray(pil, dtype=np.float32).mean())
    for _ in range(int(rng.poisson(rate * rng.uniform(4, 20) * w * h / (ref * ref)))):
        x, y = rng.uniform(0, w), rng.uniform(0, h)
        length = ref * rng.uniform(0.03, 0.18)
        width = max(1, round(rng.uniform(0.002, 0.025) * ref))
        kind = rng.random()
        tone = rng.random()
        base = (
            rng.uniform(150, 240) if tone < 0.45 else rng.uniform(5, 60) if tone < 0.75 else mean + rng.uniform(-45, 45)
        )
        col = tuple(int(c) for c in np.clip(base + rng.uniform(-12, 12, 3), 0, 255))
        a = rng.uniform(0, np.pi)
        if kind < 0.5:  # straight scratch or shaving
            dr.line([x, y, x + length * math.cos(a), y + length * math.sin(a)], fill=col, width=width)
        elif kind < 0.8:  # bent scratch: a few segments turning a little
            pts = [(x, y)]
            for _seg in range(int(rng.integers(2, 5))):
                a += rng.uniform(-0.5, 0.5)
                step = length / 3
                x, y = x + step * math.cos(a), y + step * math.sin(a)
                pts.append((x, y))
            dr.line(pts, fill=col, width=width, joint="curve")
        else:  # scuff: a long thin ellipse, rotated
            t = np.linspace(0, 2 * np.pi, 16, endpoint=False)
            rx, ry = length / 2, max(1.0, width * rng.uniform(0.6, 1.5))
            dr.polygon(
                [
                    (
                        x + rx * math.cos(u) * math.cos(a) - ry * math.sin(u) * math.sin(a),
                        y + rx * math.cos(u) * math.sin(a) + ry * math.sin(u) * math.cos(a),
                    )
                    for u in t
                ],
                fill=col,
            )
    return np.asarray(pil, dtype=np.float32).copy()
