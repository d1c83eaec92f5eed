"""What operators see and change on a running daemon: the health endpoint with the live view,
and the controls behind its APIs and a reload.

`health` builds the endpoint (/healthz, /metrics, the live view, snapshots, clips) when
`[health] listen` is set; `lines` the running lines of each camera (`daemon.ops.lines`) with the
lines API; `models` the model each size serves (`daemon.ops.models`: swaps, kept in the models
drop-in) with the models API; `reloader` what a SIGHUP applies. Each API is registered on the
endpoint here; nothing is started or written: the drop-in's stale entries are removed by the
daemon's start-up (`ModelsControl.prune`), the endpoint listens from `HealthServer.start`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from daemon.config.settings import Settings
from daemon.core.metrics import Metrics
from daemon.core.netaddr import parse_host_port
from daemon.inference.build import LaneWorkers
from daemon.inference.lanes import Lanes
from daemon.inference.swap import ModelSwapper
from daemon.ops.cameras import CamerasControl
from daemon.ops.http import HealthServer, HttpLimits
from daemon.ops.http import clips as clip_route
from daemon.ops.http import snapshots as snapshot_route
from daemon.ops.http.api_lines import LinesApi
from daemon.ops.http.api_models import ModelsApi
from daemon.ops.lines import LinesControl
from daemon.ops.liveview import LiveView
from daemon.ops.models import ModelsControl
from daemon.ops.reload import Reloader
from daemon.publish.clips import ClipRecorder
from daemon.publish.sink import RedisSink
from daemon.publish.snapshots import SnapshotWriter
from daemon.tracking.stage import TrackingStage


def liveview(settings: Settings, metrics: Metrics, tracking: TrackingStage) -> LiveView:
    """The live view, drawing each camera's lines with the tracker's running counts."""
    view = LiveView(metrics, settings.health.snapshot_min_interval_s)
    for camera in settings.instance_cameras():
        view.set_lines(camera.id, camera.lines)
    view.count_from(tracking.counts)
    return view


def health(
    settings: Settings,
    metrics: Metrics,
    report: Callable[[], dict[str, Any]],
    view: LiveView,
    snapshots: SnapshotWriter | None,
    *,
    clips: ClipRecorder | None,
) -> HealthServer | None:
    """The health endpoint (/healthz, /metrics, the live view, snapshots, clips), when `[health] listen` is set."""
    cfg = settings.health
    if not cfg.listen:
        return None
    host, port = parse_host_port(cfg.listen)
    server = HealthServer(
        host,
        port,
        metrics.registry,
        report,
        limits=HttpLimits(cfg.max_connections, cfg.request_timeout_s),
        metrics=metrics,
        tls=cfg.tls_context(),
        users=cfg.basic_auth_users,
        healthz_open=cfg.healthz_open,
        allowed_hosts=cfg.allowed_hosts,
        allowed_origins=cfg.allowed_origins,
    )
    view.register(server, report)
    if snapshots is not None:
        snapshot_route.register(server, snapshots.root)
    if clips is not None:
        clip_route.register(server, clips.root)
    return server


def lines(
    settings: Settings, tracking: TrackingStage, view: LiveView, sink: RedisSink, server: HealthServer | None
) -> LinesControl:
    """The running lines of each camera and, on the endpoint, the lines API (`daemon.ops.http.api_lines`)."""
    control = LinesControl(
        settings.instance_cameras(), settings.tracking.lines_dir, tracking, view, on_event=sink.accept_event
    )
    if server is not None:
        LinesApi(server, control).register()
    return control


def models(
    settings: Settings, workers: LaneWorkers, lanes: Lanes, sink: RedisSink, server: HealthServer | None
) -> ModelsControl:
    """Model swaps (`daemon.inference.swap`, kept in the models drop-in by `daemon.ops.models`) and,
    on the endpoint, their API (`daemon.ops.http.api_models`)."""
    swapper = ModelSwapper(workers, lanes, on_event=sink.accept_event)
    control = ModelsControl(settings, swapper, serving=workers.models.infos.get)
    if server is not None:
        ModelsApi(server, control).register()
    return control


def reloader(
    settings: Settings,
    workers: LaneWorkers,
    *,
    server: HealthServer | None,
    tracking: TrackingStage,
    lines: LinesControl,
    models: ModelsControl,
    cameras: CamerasControl,
) -> Reloader:
    """What a re-read config (SIGHUP) applies, to the controls above."""
    return Reloader(
        settings,
        tracking=tracking,
        lines=lines,
        health=server,
        set_rules=workers.set_rules,
        models=models,
        cameras=cameras,
    )


__all__ = ["health", "lines", "liveview", "models", "reloader"]
