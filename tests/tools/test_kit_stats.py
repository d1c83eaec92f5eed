"""The lab's one percentile: linear interpolation (numpy's default), q in 0..100, in the unit of the values."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from tools.kit.stats import Summary, percentile, percentiles


def test_linear_interpolation_between_the_nearest_ranks() -> None:
    values = list(range(1, 101))
    assert percentile(values, 50) == 50.5  # nearest rank would say 50
    assert percentile(values, 99) == pytest.approx(99.01)
    assert percentile(values, 0) == 1 and percentile(values, 100) == 100
    assert percentile([7], 99) == 7


def test_same_numbers_as_numpy_and_the_median() -> None:
    rng = np.random.default_rng(3)
    values = list(rng.exponential(5.0, size=999))
    for q in (1, 50, 90, 99):
        assert percentile(values, q) == float(np.percentile(values, q))
    assert percentile(values, 50) == pytest.approx(statistics.median(values))


def test_no_unit_conversion_and_rounding_on_request() -> None:
    assert percentile([0.001, 0.003], 50) == pytest.approx(0.002)  # seconds stay seconds
    assert percentile(np.array([1.04, 1.26]), 50, 1) == 1.1


def test_empty_is_nan() -> None:
    assert math.isnan(percentile([], 99)) and math.isnan(percentile([], 50, 1))
    assert math.isnan(Summary.of([]).p99) and Summary.of([]).n == 0


def test_percentiles_and_summary() -> None:
    assert percentiles([1.0, 2.0, 3.0], (50, 100)) == {"p50": 2.0, "p100": 3.0}
    s = Summary.of([4.0, 1.0, 3.0, 2.0])
    assert (s.n, s.p50, s.mean, s.max) == (4, 2.5, 2.5, 4.0)
    assert s.p99 == pytest.approx(3.97)
