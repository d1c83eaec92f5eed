"""Kalman filter: time steps in seconds, exact composition of steps, no step for dt <= 0, and the per-dimension
covariance equal to the textbook 8 x 8 filter."""

from __future__ import annotations

import numpy as np

from daemon.tracking.kalman import full_covariance, initiate, predict, rescale, update
from daemon.tracking.specs import KalmanNoise

NOISE = KalmanNoise()


def _state() -> tuple[np.ndarray, np.ndarray]:
    z = np.array([[100.0, 50.0, 40.0, 30.0], [10.0, 20.0, 8.0, 6.0]])
    return initiate(z, np.array([[300.0, -30.0], [0.0, 60.0]]), NOISE)


def _dense_predict(x: np.ndarray, p: np.ndarray, dt: float) -> tuple[np.ndarray, np.ndarray]:
    """The textbook form: x' = F x, P' = F P F^T + Q (white-noise acceleration), one track at a time."""
    f = np.eye(8)
    f[range(4), range(4, 8)] = dt
    xs, ps = [], []
    for xi, pi in zip(x, p, strict=True):
        w, h = max(xi[2], 1.0), max(xi[3], 1.0)
        q = (
            np.array([NOISE.accel_std, NOISE.accel_std, NOISE.size_accel_std, NOISE.size_accel_std])
            * np.array([w, h, w, h])
        ) ** 2
        qm = np.zeros((8, 8))
        for i in range(4):
            qm[i, i], qm[i, i + 4], qm[i + 4, i], qm[i + 4, i + 4] = (
                q[i] * dt**3 / 3,
                q[i] * dt**2 / 2,
                q[i] * dt**2 / 2,
                q[i] * dt,
            )
        xs.append(f @ xi)
        ps.append(f @ pi @ f.T + qm)
    return np.array(xs), np.array(ps)


def _dense_update(x: np.ndarray, p: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    hm = np.hstack([np.eye(4), np.zeros((4, 4))])
    xs, ps = [], []
    for xi, pi, zi in zip(x, p, z, strict=True):
        w, h = max(xi[2], 1.0), max(xi[3], 1.0)
        r = np.diag((NOISE.meas_std * np.array([w, h, w, h])) ** 2)
        k = pi @ hm.T @ np.linalg.inv(hm @ pi @ hm.T + r)
        xs.append(xi + k @ (zi - hm @ xi))
        ps.append((np.eye(8) - k @ hm) @ pi)
    return np.array(xs), np.array(ps)


def test_equals_the_dense_filter() -> None:
    x, p = _state()
    xd, pd = x.copy(), full_covariance(p)
    rng = np.random.default_rng(0)
    for dt in (1 / 30, 0.1, 0.05, 1 / 30):
        x, p = predict(x, p, dt, NOISE)
        xd, pd = _dense_predict(xd, pd, dt)
        z = x[:, :4] + rng.normal(0, 2.0, (2, 4))
        x, p = update(x, p, z, NOISE)
        xd, pd = _dense_update(xd, pd, z)
        np.testing.assert_allclose(x, xd, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(full_covariance(p), pd, rtol=1e-9, atol=1e-9)


def test_predict_moves_by_velocity_times_seconds() -> None:
    x, p = _state()
    x1, _ = predict(x, p, 0.5, NOISE)
    np.testing.assert_allclose(x1[0, :2], [100.0 + 150.0, 50.0 - 15.0])
    np.testing.assert_allclose(x1[1, :2], [10.0, 20.0 + 30.0])
    np.testing.assert_allclose(x1[:, 2:4], x[:, 2:4])


def test_one_long_step_equals_three_short_ones() -> None:
    """The white-noise-acceleration discretisation composes exactly: a dropped frame costs nothing extra."""
    x, p = _state()
    x_long, p_long = predict(x, p, 0.1, NOISE)
    xs, ps = x, p
    for _ in range(3):
        xs, ps = predict(xs, ps, 0.1 / 3, NOISE)
    np.testing.assert_allclose(x_long, xs, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(p_long, ps, rtol=1e-9, atol=1e-6)


def test_uncertainty_grows_with_dt_and_dt_le_zero_is_no_step() -> None:
    x, p = _state()
    _, p_short = predict(x, p, 1 / 30, NOISE)
    _, p_long = predict(x, p, 0.5, NOISE)
    assert np.all(p_long[:, 0] > p_short[:, 0]) and np.all(p_long[:, 2] > p_short[:, 2])
    for dt in (0.0, -0.2):
        x0, p0 = predict(x, p, dt, NOISE)
        np.testing.assert_array_equal(x0, x)
        np.testing.assert_array_equal(p0, p)
    x_mixed, _ = predict(x, p, np.array([0.5, -1.0]), NOISE)
    np.testing.assert_array_equal(x_mixed[1], x[1])
    assert x_mixed[0, 0] == 250.0


def test_update_pulls_towards_measurement_and_shrinks_variance() -> None:
    x, p = _state()
    x, p = predict(x, p, 0.1, NOISE)
    z = x[:, :4] + np.array([[4.0, 0.0, 0.0, 0.0], [0.0, -2.0, 0.0, 0.0]])
    x2, p2 = update(x, p, z, NOISE)
    assert x[0, 0] < x2[0, 0] < z[0, 0]
    assert z[1, 1] < x2[1, 1] < x[1, 1]
    assert np.all(p2[:, 0] < p[:, 0]) and np.all(p2[:, 2] <= p[:, 2])


def test_velocity_converges_on_a_constant_speed_track_with_gaps() -> None:
    rng = np.random.default_rng(1)
    x, p = initiate(np.array([[0.0, 100.0, 50.0, 40.0]]), np.zeros(2), NOISE)
    t = 0.0
    for _ in range(40):
        dt = rng.choice([1 / 30, 2 / 30, 3 / 30])
        t += dt
        x, p = predict(x, p, dt, NOISE)
        z = np.array([[250.0 * t + rng.normal(0, 0.5), 100.0 + rng.normal(0, 0.5), 50.0, 40.0]])
        x, p = update(x, p, z, NOISE)
    assert abs(x[0, 4] - 250.0) < 10.0
    assert abs(x[0, 5]) < 10.0


def test_rescale_maps_states_into_the_new_frame() -> None:
    x, p = _state()
    x2, p2 = rescale(x, p, 0.5, 2.0)
    np.testing.assert_allclose(x2[0], [50.0, 100.0, 20.0, 60.0, 150.0, -60.0, 0.0, 0.0])
    t = np.array([0.5, 2.0, 0.5, 2.0] * 2)
    np.testing.assert_allclose(full_covariance(p2)[0], full_covariance(p)[0] * np.outer(t, t))
