"""Constant-velocity Kalman filter over boxes, vectorised over tracks; time steps in seconds.

State per track (8): ``cx, cy, w, h, vx, vy, vw, vh`` in pixels and pixels per second. The process noise is
the continuous white-noise-acceleration model integrated over the real time step ``dt`` (seconds), so a frame
gap of 0.1 s widens the prediction exactly as much as three gaps of 1/30 s. Noise levels are relative to the
box size (a far, small part and a near, large one are equally uncertain in box units).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

STATE = 8
MEAS = 4
_MIN_SIZE_PX = 1.0


@dataclass(frozen=True, slots=True)
class KalmanNoise:
    """Noise levels, each relative to the box's own width (x terms) or height (y terms).

    meas_std: detector jitter, box sizes. accel_std: random acceleration of the centre, box sizes per s^2.
    size_accel_std: the same for w and h. init_vel_std: prior uncertainty of a new track's velocity,
    box sizes per s.
    """

    meas_std: float = 0.05
    accel_std: float = 2.0
    size_accel_std: float = 0.5
    init_vel_std: float = 10.0


def _scales(xywh: FloatArray) -> FloatArray:
    """(N, 4) per-dimension scale: w for cx and w, h for cy and h."""
    w = np.maximum(xywh[:, 2], _MIN_SIZE_PX)
    h = np.maximum(xywh[:, 3], _MIN_SIZE_PX)
    return np.stack([w, h, w, h], axis=1)


def initiate(z: FloatArray, velocity: FloatArray, noise: KalmanNoise) -> tuple[FloatArray, FloatArray]:
    """New states from measurements ``z`` (M, 4) cx,cy,w,h and a prior centre velocity (M, 2) or (2,) px/s."""
    m = z.shape[0]
    x = np.zeros((m, STATE))
    x[:, :MEAS] = z
    x[:, 4:6] = velocity
    s = _scales(z)
    var = np.empty((m, STATE))
    var[:, :MEAS] = (2.0 * noise.meas_std * s) ** 2
    var[:, 4:6] = (noise.init_vel_std * s[:, :2]) ** 2
    var[:, 6:8] = (noise.init_vel_std * 0.1 * s[:, 2:]) ** 2
    p = np.zeros((m, STATE, STATE))
    idx = np.arange(STATE)
    p[:, idx, idx] = var
    return x, p


def predict(
    x: FloatArray, p: FloatArray, dt_s: float | FloatArray, noise: KalmanNoise
) -> tuple[FloatArray, FloatArray]:
    """Advance every state by ``dt_s`` seconds (scalar or (N,)); rows with dt <= 0 are returned unchanged."""
    n = x.shape[0]
    dt = np.broadcast_to(np.asarray(dt_s, dtype=np.float64), (n,)).copy()
    dt[~(dt > 0.0)] = 0.0
    idx = np.arange(MEAS)
    if np.isscalar(dt_s):  # one transition for all rows: (8, 8) @ (N, 8, 8) broadcasts
        f = np.eye(STATE)
        f[idx, idx + MEAS] = dt[0] if n else 0.0
    else:
        f = np.broadcast_to(np.eye(STATE), (n, STATE, STATE)).copy()
        f[:, idx, idx + MEAS] = dt[:, None]
    x_new = x.copy()
    x_new[:, :MEAS] += dt[:, None] * x[:, MEAS:]
    s = _scales(x)
    acc = np.array([noise.accel_std, noise.accel_std, noise.size_accel_std, noise.size_accel_std])
    q = (acc[None, :] * s) ** 2  # (N, 4) spectral densities
    d = dt[:, None]
    qm = np.zeros((n, STATE, STATE))
    qm[:, idx, idx] = q * d**3 / 3.0
    qm[:, idx, idx + MEAS] = q * d**2 / 2.0
    qm[:, idx + MEAS, idx] = q * d**2 / 2.0
    qm[:, idx + MEAS, idx + MEAS] = q * d
    p_new = f @ p @ np.swapaxes(f, -1, -2) + qm
    return x_new, p_new


def update(x: FloatArray, p: FloatArray, z: FloatArray, noise: KalmanNoise) -> tuple[FloatArray, FloatArray]:
    """Correct states (N, 8) with measurements ``z`` (N, 4) cx,cy,w,h, one per row."""
    n = x.shape[0]
    if n == 0:
        return x.copy(), p.copy()
    r = (noise.meas_std * _scales(x)) ** 2
    idx = np.arange(MEAS)
    s = p[:, :MEAS, :MEAS].copy()
    s[:, idx, idx] += r
    pht = p[:, :, :MEAS]  # P H^T, (N, 8, 4)
    k = np.linalg.solve(s, pht.transpose(0, 2, 1)).transpose(0, 2, 1)  # S symmetric
    innov = z - x[:, :MEAS]
    x_new = x + (k @ innov[:, :, None])[:, :, 0]
    p_new = p - k @ p[:, :MEAS, :]
    p_new = 0.5 * (p_new + p_new.transpose(0, 2, 1))
    return x_new, p_new


def rescale(x: FloatArray, p: FloatArray, sx: float, sy: float) -> tuple[FloatArray, FloatArray]:
    """States in a frame scaled by (sx, sy) (a camera's resolution change)."""
    t = np.array([sx, sy, sx, sy, sx, sy, sx, sy])
    return x * t[None, :], p * np.outer(t, t)[None, :, :]
