"""One rule for lines and gates: what the lines API / a drop-in refuses (`lines_dropin.parse`, the body of
`PUT /api/cameras/{id}/lines`), the tracker's `LineSpec` / `GateSpec` refuse with the same message, and what
one accepts the other accepts. Each case is a difference the two validators used to have."""

from __future__ import annotations

from typing import Any

import pytest

from daemon.config.lines_dropin import LinesInvalidError, parse
from daemon.tracking.specs import GateSpec, LineSpec

LINE: dict[str, Any] = {"id": "L", "start": [0.5, 0.0], "end": [0.5, 1.0], "direction": [1.0, 0.0]}


def spec_of(line: dict[str, Any]) -> LineSpec:
    gates = tuple(GateSpec(g["id"], g["distance_mm"]) for g in line.get("gates", []))
    return LineSpec(line["id"], tuple(line["start"]), tuple(line["end"]), tuple(line["direction"]), gates)


def api_problem(line: dict[str, Any]) -> str | None:
    """The lines API's one problem with a body holding `line` (None: accepted), without its key path."""
    try:
        parse({"mm_per_px": 0.5, "lines": [line]})
    except LinesInvalidError as exc:
        assert len(exc.problems) == 1, exc.problems
        return exc.problems[0].split(": ", 1)[1]
    return None


REFUSED = [
    # the tracker allowed points 1e-9 outside the frame
    pytest.param({**LINE, "start": [1.0 + 1e-10, 0.0]}, "[1.0000000001, 0.0] is outside the frame", id="bounds"),
    # the tracker allowed any length from 1e-9
    pytest.param({**LINE, "end": [0.5, 5e-7]}, "start and end are the same point", id="min-length"),
    # the tracker allowed a gate on the line (distance 0)
    pytest.param({**LINE, "gates": [{"id": "g", "distance_mm": 0.0}]}, "greater than 0", id="distance-zero"),
    # and one a thousand kilometres down the belt
    pytest.param({**LINE, "gates": [{"id": "g", "distance_mm": 2e6}]}, "less than or equal to 1000000", id="far"),
    # the tracker allowed any non-empty id
    pytest.param({**LINE, "id": "line 1"}, "String should match pattern", id="line-id"),
    pytest.param({**LINE, "gates": [{"id": "9g", "distance_mm": 5.0}]}, "String should match pattern", id="gate-id"),
    # both refused these, in different words
    pytest.param({**LINE, "direction": [0.0, 1.0]}, "runs along the line", id="parallel"),
    pytest.param({**LINE, "direction": [0.0, 0.0]}, "has no direction", id="zero-direction"),
    pytest.param(
        {**LINE, "gates": [{"id": "g", "distance_mm": 1.0}, {"id": "g", "distance_mm": 2.0}]},
        "gate id 'g' is used twice",
        id="duplicate-gate",
    ),
]


@pytest.mark.parametrize(("line", "why"), REFUSED)
def test_refused_alike_with_the_same_message(line: dict[str, Any], why: str) -> None:
    problem = api_problem(line)
    assert problem is not None and why in problem
    with pytest.raises(ValueError) as refused:
        spec_of(line)
    assert str(refused.value).endswith(f": {problem}")


@pytest.mark.parametrize(
    "line",
    [
        {**LINE, "start": [0.0, 0.0], "end": [1.0, 1.0]},  # the frame's corners
        {**LINE, "end": [0.5, 2e-6]},  # short, yet longer than the least length
        {**LINE, "gates": [{"id": "flap-a", "distance_mm": 1e-3}, {"id": "b", "distance_mm": 1_000_000.0}]},
    ],
)
def test_accepted_alike(line: dict[str, Any]) -> None:
    assert api_problem(line) is None
    assert spec_of(line).id == "L"
