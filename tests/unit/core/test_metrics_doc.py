"""The README's metrics table is what operators read: it must name every metric the daemon exports,
with its labels."""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import Counter
from prometheus_client.metrics import MetricWrapperBase

from daemon.core.metrics import Metrics

README = Path(__file__).resolve().parents[3] / "docs" / "operations" / "metrics.md"


def test_readme_lists_every_metric_with_its_labels() -> None:
    rows = re.findall(r"^\| `(beltsight_\w+)(?:\{([\w,]*)\})?` \|", README.read_text(), re.M)
    documented = {name: tuple(labels.split(",")) if labels else () for name, labels in rows}
    exported = {}
    for metric in vars(Metrics()).values():
        if isinstance(metric, MetricWrapperBase):
            name = metric._name + "_total" if isinstance(metric, Counter) else metric._name
            exported[name] = tuple(metric._labelnames)
    assert len(exported) >= 15
    assert documented == exported
