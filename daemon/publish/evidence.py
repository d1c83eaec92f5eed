"""The evidence writers a crossing or an unsure frame reaches, built from the config: the crossing
snapshots, the frame capture and the clips (each None when off). Wiring only: nothing starts here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from daemon.config.settings import Settings
from daemon.core.metrics import Metrics
from daemon.publish.capture import FrameCapture
from daemon.publish.clips import ClipRecorder
from daemon.publish.snapshots import SnapshotWriter


@dataclass(frozen=True, slots=True)
class Evidence:
    snapshots: SnapshotWriter | None
    capture: FrameCapture | None
    clips: ClipRecorder | None


def evidence_writers(settings: Settings, metrics: Metrics, labels: Sequence[Sequence[str]]) -> Evidence:
    """`labels`: each served model's class names; the frame capture labels its dataset with the longest
    list (every size serves the same classes)."""
    names = max(labels, key=len, default=())
    snapshots = SnapshotWriter(settings.snapshots, metrics) if settings.snapshots.enabled else None
    cameras = settings.instance_cameras()
    clips = ClipRecorder.build(settings.clips, [c.id for c in cameras if c.kind != "gige"], metrics)
    return Evidence(snapshots, _capture(settings, metrics, names), clips)


def _capture(settings: Settings, metrics: Metrics, names: Sequence[str]) -> FrameCapture | None:
    """The frame capture, when strategies are listed, with each camera's `conf_threshold`."""
    if not settings.capture.enabled:
        return None
    default = settings.engine.conf_threshold
    thresholds = {
        c.id: c.conf_threshold if c.conf_threshold is not None else default for c in settings.instance_cameras()
    }
    return FrameCapture(settings.capture, metrics, names=tuple(names), thresholds=thresholds)


__all__ = ["Evidence", "evidence_writers"]
