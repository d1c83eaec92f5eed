"""The lab's one statistics helper: the percentile every bench, soak, eval and demo reports, and the
latency summary the benches print.

`percentile(values, q)` takes `q` in 0..100 and uses numpy's default method: linear interpolation
between the two nearest ranks (Hyndman and Fan's type 7, what `numpy.percentile` and
`statistics.median` give), so p50 is the median and p100 the maximum. It answers in the unit of
`values`, converting nothing: a bench that measured seconds multiplies by 1000 itself before it prints
milliseconds. An empty `values` gives nan, so a report with nothing to say says so instead of failing.
`ndigits` rounds the answer (the bench's JSON reports keep one decimal).

`Summary.of(values)` is the count, p50, p99, mean and maximum of one series, in its unit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Values = Iterable[float] | npt.NDArray[np.floating] | npt.NDArray[np.integer]


def _array(values: Values) -> npt.NDArray[np.float64]:
    return np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=float)


def percentile(values: Values, q: float, ndigits: int | None = None) -> float:
    """The `q`-th percentile (0..100) of `values` by linear interpolation; nan when empty."""
    a = _array(values)
    out = float(np.percentile(a, q)) if a.size else math.nan
    return out if ndigits is None or math.isnan(out) else round(out, ndigits)


def percentiles(values: Values, qs: Sequence[int], ndigits: int | None = None) -> dict[str, float]:
    """`{"p50": ..., "p99": ...}` for each `q` of `qs`."""
    a = _array(values)
    return {f"p{q}": percentile(a, q, ndigits) for q in qs}


@dataclass(frozen=True)
class Summary:
    """One series' count, median, 99th percentile, mean and maximum, in the unit of its values."""

    n: int
    p50: float
    p99: float
    mean: float
    max: float

    @classmethod
    def of(cls, values: Values) -> Summary:
        a = _array(values)
        if not a.size:
            return cls(0, math.nan, math.nan, math.nan, math.nan)
        return cls(int(a.size), percentile(a, 50), percentile(a, 99), float(a.mean()), float(a.max()))
