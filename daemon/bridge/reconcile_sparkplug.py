"""The reconciliation on Sparkplug B: each reconciled line's `<line>/Count<Dir>State` and
`<line>/Count<Dir>Drift` metrics in its camera's DBIRTH, and a DDATA when the line's state changes
(report by exception: the drift with it)."""

from __future__ import annotations

from pysparkplug import Metric

from daemon.bridge import sparkplug_payloads as sp
from daemon.bridge.reconcile_service import LineVerdict, ReconcileService
from daemon.bridge.sparkplug import SparkplugEdge


def attach(edge: SparkplugEdge, service: ReconcileService) -> None:
    """Wire the service's verdicts and current states into the edge node."""

    def birth(camera: str) -> list[Metric]:
        items = []
        for cfg in service.entries:
            if cfg.camera == camera:
                rec = service.reconcilers[cfg.key]
                items.append((cfg.line, cfg.direction, str(rec.state), rec.last.drift if rec.last else 0))
        return sp.reconcile_metrics(items, sp.now_ms())

    def on_verdict(v: LineVerdict) -> None:
        edge.publish_metrics(v.camera, sp.reconcile_metrics([(v.line, v.direction, v.state, v.drift)], sp.now_ms()))

    edge.birth_extra = birth
    service.listeners.append(on_verdict)


__all__ = ["attach"]
