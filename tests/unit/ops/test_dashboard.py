"""configs/grafana-dashboard.json queries only what `daemon.core.metrics.Metrics` exports, with its labels.

Exported names follow prometheus_client: a counter `x` is scraped as `x_total` (and `x_created`),
a histogram as `x_bucket` / `x_sum` / `x_count`, a gauge as `x`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client.metrics import MetricWrapperBase

from daemon.core.metrics import Metrics

DASHBOARD = Path(__file__).resolve().parents[3] / "configs/grafana-dashboard.json"
SCRAPE_LABELS = {"instance", "job"}  # added by Prometheus
METRIC = re.compile(r"\bbeltsight_[a-z0-9_]+\b")
REQUIRED = (  # what the dashboard exists to show
    "beltsight_frames_decoded_total",
    "beltsight_frames_dropped_total",
    "beltsight_latency_seconds_bucket",
    "beltsight_inference_seconds_bucket",
    "beltsight_batch_size_bucket",
    "beltsight_sink_buffered_entries",
    "beltsight_sink_spooled_entries",
    "beltsight_breaker_open",
    "beltsight_session_builds_total",
    "beltsight_temperature_celsius",
    "beltsight_throttle_share",
    "beltsight_throttle_level",
)


def exported() -> dict[str, set[str]]:
    """Every sample name the registry can export -> the labels it carries."""
    metrics = Metrics()
    out: dict[str, set[str]] = {}
    for collector in vars(metrics).values():
        if not isinstance(collector, MetricWrapperBase):
            continue
        name, kind, labels = collector._name, collector._type, set(collector._labelnames)
        suffixes = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created")}
        for suffix in suffixes.get(kind, ("",)):
            out[name + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
    return out


def queries(node: Any) -> Iterator[str]:
    """Every PromQL string in the dashboard: panel targets and template-variable queries."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "definition") and isinstance(value, str):
                yield value
            elif key == "query" and isinstance(value, dict) and isinstance(value.get("query"), str):
                yield value["query"]
            else:
                yield from queries(value)
    elif isinstance(node, list):
        for item in node:
            yield from queries(item)


def labels_used(expr: str) -> set[str]:
    """Label names in selectors `{a=..., b=~...}`, `by (...)` / `without (...)` and label_values()."""
    used = {m[1] for m in re.finditer(r"[{,]\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", expr)}
    for group in re.finditer(r"\b(?:by|without)\s*\(([^)]*)\)", expr):
        used |= {s.strip() for s in group[1].split(",") if s.strip()}
    lv = re.search(r"label_values\([^,]+,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)", expr)
    if lv:
        used.add(lv[1])
    return used


def load() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return doc


def test_every_metric_the_dashboard_queries_is_exported() -> None:
    known = exported()
    exprs = list(queries(load()))
    assert len(exprs) > 20
    unknown = sorted({name for e in exprs for name in METRIC.findall(e)} - set(known))
    assert unknown == [], f"the dashboard queries metrics that daemon.core.metrics does not export: {unknown}"


def test_every_label_the_dashboard_uses_belongs_to_a_metric_of_that_query() -> None:
    known = exported()
    bad = []
    for expr in queries(load()):
        names = METRIC.findall(expr)
        if not names:
            continue
        have = set().union(*(known.get(n, set()) for n in names)) | SCRAPE_LABELS
        missing = labels_used(expr) - have
        if missing:
            bad.append((expr, sorted(missing)))
    assert bad == [], bad


def test_the_dashboard_shows_what_operators_need() -> None:
    referenced = {name for e in queries(load()) for name in METRIC.findall(e)}
    assert [m for m in REQUIRED if m not in referenced] == []


def test_the_label_checker_catches_a_wrong_label() -> None:
    known = exported()
    expr = 'sum by (camera, colour) (rate(beltsight_frames_dropped_total{model="640"}[5m]))'
    have = known["beltsight_frames_dropped_total"] | SCRAPE_LABELS
    assert labels_used(expr) - have == {"colour", "model"}


def test_the_dashboard_is_importable() -> None:
    doc = load()
    assert doc["uid"] == "beltsight" and doc["title"]
    panels = doc["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in doc["templating"]["list"]}
    assert {"datasource", "instance", "camera", "model"} <= variables
    for p in panels:
        assert {"h", "w", "x", "y"} <= set(p["gridPos"]) and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
        for target in p.get("targets", []):
            assert target["datasource"]["uid"] == "${datasource}"  # the data source is picked on import
