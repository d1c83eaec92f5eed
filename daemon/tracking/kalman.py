"""Constant-velocity Kalman filter over boxes, vectorised over tracks; time steps in seconds.

State per track (8): ``cx, cy, w, h, vx, vy, vw, vh`` in pixels and pixels per second. The process noise is
the continuous white-noise-acceleration model integrated over the real time step ``dt`` (seconds), so a frame
gap of 0.1 s widens the prediction exactly as much as three gaps of 1/30 s. Noise levels are relative to the
box size (a far, small part and a near, large one are equally uncertain in box units); they and the filter's
constants are the tracking rules' (``daemon.tracking.specs``: ``KalmanNoise``, ``MIN_SIZE_PX``, ``INIT_*``).

The transition, process noise, measurement and its noise never couple two of the four box dimensions, so a
covariance that starts block-diagonal stays so: the 8 x 8 filter is exactly four independent 2-state
(value, velocity) filters. The covariance is therefore stored as ``(N, 3, 4)``: per dimension the value's
variance, the value-velocity covariance and the velocity's variance; every step is elementwise.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from daemon.tracking.specs import INIT_POS_STD_MEAS, INIT_SIZE_VEL_FRAC, MIN_SIZE_PX, KalmanNoise

FloatArray = NDArray[np.float64]

STATE = 8
MEAS = 4
PP, PV, VV = 0, 1, 2  # rows of the (N, 3, 4) covariance
_WHWH = np.array([2, 3, 2, 3])  # the scale of cx, cy, w, h: w, h, w, h


def _scales(xywh: FloatArray) -> FloatArray:
    """(N, 4) per-dimension scale: w for cx and w, h for cy and h."""
    out: FloatArray = np.maximum(xywh[:, _WHWH], MIN_SIZE_PX)
    return out


def initiate(z: FloatArray, velocity: FloatArray, noise: KalmanNoise) -> tuple[FloatArray, FloatArray]:
    """New states from measurements ``z`` (M, 4) cx,cy,w,h and a prior centre velocity (M, 2) or (2,) px/s."""
    m = z.shape[0]
    x = np.zeros((m, STATE))
    x[:, :MEAS] = z
    x[:, 4:6] = velocity
    s = _scales(z)
    p = np.zeros((m, 3, MEAS))
    p[:, PP] = (INIT_POS_STD_MEAS * noise.meas_std * s) ** 2
    p[:, VV, :2] = (noise.init_vel_std * s[:, :2]) ** 2
    p[:, VV, 2:] = (noise.init_vel_std * INIT_SIZE_VEL_FRAC * s[:, 2:]) ** 2
    return x, p


def predict(
    x: FloatArray, p: FloatArray, dt_s: float | FloatArray, noise: KalmanNoise
) -> tuple[FloatArray, FloatArray]:
    """Advance every state by ``dt_s`` seconds (scalar or (N,)); rows with dt <= 0 are returned unchanged."""
    d: float | FloatArray
    if isinstance(dt_s, float | int):
        d = max(float(dt_s), 0.0)
    else:
        d = np.maximum(np.asarray(dt_s, dtype=np.float64), 0.0)[:, None]
    x_new = x.copy()
    x_new[:, :MEAS] += d * x[:, MEAS:]
    acc = np.array([noise.accel_std, noise.accel_std, noise.size_accel_std, noise.size_accel_std])
    q = (acc[None, :] * _scales(x)) ** 2  # (N, 4) spectral densities
    pp, pv, vv = p[:, PP], p[:, PV], p[:, VV]
    p_new = np.empty_like(p)
    p_new[:, PP] = pp + d * (2.0 * pv + d * vv) + q * d**3 / 3.0
    p_new[:, PV] = pv + d * vv + q * d**2 / 2.0
    p_new[:, VV] = vv + q * d
    return x_new, p_new


def update(x: FloatArray, p: FloatArray, z: FloatArray, noise: KalmanNoise) -> tuple[FloatArray, FloatArray]:
    """Correct states (N, 8) with measurements ``z`` (N, 4) cx,cy,w,h, one per row."""
    if x.shape[0] == 0:
        return x.copy(), p.copy()
    pp, pv, vv = p[:, PP], p[:, PV], p[:, VV]
    s = pp + (noise.meas_std * _scales(x)) ** 2
    k_pos, k_vel = pp / s, pv / s
    innov = z - x[:, :MEAS]
    x_new = np.concatenate([x[:, :MEAS] + k_pos * innov, x[:, MEAS:] + k_vel * innov], axis=1)
    p_new = np.empty_like(p)
    p_new[:, PP] = pp - k_pos * pp
    p_new[:, PV] = pv - k_pos * pv
    p_new[:, VV] = vv - k_vel * pv
    return x_new, p_new


def rescale(x: FloatArray, p: FloatArray, sx: float, sy: float) -> tuple[FloatArray, FloatArray]:
    """States in a frame scaled by (sx, sy) (a camera's resolution change)."""
    t = np.array([sx, sy, sx, sy])
    return x * np.concatenate([t, t])[None, :], p * (t**2)[None, None, :]


def full_covariance(p: FloatArray) -> FloatArray:
    """The (N, 8, 8) covariance that ``p`` (N, 3, 4) stands for (for checks and debugging)."""
    n = p.shape[0]
    out = np.zeros((n, STATE, STATE))
    i = np.arange(MEAS)
    out[:, i, i] = p[:, PP]
    out[:, i, i + MEAS] = p[:, PV]
    out[:, i + MEAS, i] = p[:, PV]
    out[:, i + MEAS, i + MEAS] = p[:, VV]
    return out
