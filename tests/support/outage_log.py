"""What the sink logs about an outage, checked as behaviour rather than counted in a time window.

The sink logs a Redis outage when it starts or changes kind (`daemon.publish.sink.report`), and
`redis_up` when it ends. How many outages a test window holds is timing: a retry that times out
on a loaded machine is an outage of another kind (`redis_down`) between two of the first. What
holds however slow the machine: no outage line follows its own twin, for no kind is logged twice
while it lasts."""

from __future__ import annotations

import itertools
from typing import Any

OUTAGE_EVENTS = (
    "redis_down",
    "redis_up",
    "redis_auth_failed",
    "redis_tls_failed",
    "redis_replicas_short",
    "redis_write_failed",
)


def outage_lines(logs: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    """The sink's outage lines in order, each as (event, refusal code or None)."""
    return [(e["event"], e.get("code")) for e in logs if e["event"] in OUTAGE_EVENTS]


def assert_once_per_change(logs: list[dict[str, Any]]) -> None:
    """No outage line is followed by its twin: once per outage and kind, never once per retry."""
    lines = outage_lines(logs)
    twins = [a for a, b in itertools.pairwise(lines) if a == b]
    assert not twins, f"logged again while the outage lasted: {twins} in {lines}"
