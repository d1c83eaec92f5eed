"""Reading the daemon's Prometheus counters in tests: from a live `Metrics`, an in-process daemon,
or the JSON report a child daemon writes on exit (tests/support/daemon_child.py)."""

from __future__ import annotations

from typing import Any, Protocol

from daemon.core.metrics import Metrics


class HasMetrics(Protocol):
    """What carries a daemon's registry (an `InProcessDaemon`)."""

    @property
    def metrics(self) -> Metrics: ...


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    """One sample by its exact labels; 0 when it was never set."""
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def total(d: HasMetrics, name: str, **labels: str) -> float:
    """Sum of a metric's samples whose labels include `labels` (e.g. every model of a camera)."""
    value = 0.0
    for family in d.metrics.registry.collect():
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                value += s.value
    return value


def inferred(d: HasMetrics, camera: str) -> int:
    return int(total(d, "beltsight_frames_inferred_total", camera=camera))


def drops(d: HasMetrics, camera: str, *reasons: str) -> float:
    return sum(total(d, "beltsight_frames_dropped_total", camera=camera, reason=r) for r in reasons)


def metric(report: dict[str, Any], name: str, **labels: str) -> float:
    """`total` over a child daemon's final report (its samples as JSON)."""
    return float(
        sum(
            s["value"]
            for s in report["samples"]
            if s["name"] == name and all(s["labels"].get(k) == v for k, v in labels.items())
        )
    )
