"""The record built from settings: the recorder over this instance's cameras, its routes on the endpoint."""

from __future__ import annotations

from daemon.config.settings import Settings
from daemon.config.tracking import LineConfig
from daemon.ops.http.server import HealthServer
from daemon.ops.lines import LinesControl
from daemon.ops.review.api import ReviewApi
from daemon.ops.review.consumer import Recorder, retention_days


def recorder(settings: Settings, lines: LinesControl, health: HealthServer | None) -> Recorder | None:
    """The recorder when `[review] enabled` (None otherwise), its API registered on `health` when there is one."""
    if not settings.review.enabled:
        return None

    def line_of(camera_id: str, line_id: str) -> LineConfig | None:
        try:
            running = lines.current(camera_id).lines
        except KeyError:
            return None
        return next((line for line in running if line.id == line_id), None)

    record = Recorder(
        settings.review,
        settings.redis,
        [c.id for c in settings.instance_cameras()],
        retention_days(settings),
        line_of=line_of,
    )
    if health is not None:
        ReviewApi(health, record).register()
    return record


__all__ = ["recorder"]
