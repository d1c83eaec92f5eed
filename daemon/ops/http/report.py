"""The /healthz report: the daemon's state, cameras, Redis, model lanes and thermal, as JSON.

`health_report` builds it from what `daemon.app` passes (the parts read live each request);
`daemon.ops.http.server.HealthServer` serves it (200 when `ok`, else 503) and the live view shows it.
`status` is "ok" when running and nothing is degraded: a camera not up, Redis not connected or
inference paused for heat make it "degraded" (still `ok`: the daemon is doing its job).
A GigE camera that refused some of its `[cameras.gige]` settings has them under `refused`
(feature -> the value wanted, the value the camera kept, and its error).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol


class CameraHealth(Protocol):
    """What the report reads of a camera source (`daemon.ingest.sources.CameraSource`)."""

    @property
    def camera_id(self) -> str: ...

    @property
    def state(self) -> str: ...

    @property
    def frames(self) -> int: ...

    @property
    def fps(self) -> float: ...

    @property
    def size_text(self) -> str: ...

    @property
    def refused(self) -> Mapping[str, Mapping[str, str]]: ...


class SinkHealth(Protocol):
    """What the report reads of the sink (`daemon.publish.sink.RedisSink`)."""

    @property
    def connected(self) -> bool: ...

    @property
    def buffered(self) -> int: ...


def health_report(
    state: str,
    *,
    sources: Sequence[CameraHealth],
    sink: SinkHealth,
    models: Mapping[str, dict[str, Any]],
    thermal: dict[str, Any],
    paused: bool,
) -> dict[str, Any]:
    """The /healthz JSON. `models`: each lane's report by size; `thermal`: the monitor's;
    `paused`: the thermal throttle has paused inference."""
    cameras: dict[str, dict[str, Any]] = {
        s.camera_id: {"state": s.state, "frames": s.frames, "fps": round(s.fps, 1), "size": s.size_text}
        for s in sources
    }
    for s in sources:
        if s.refused:  # a GigE camera's settings it refused: feature -> wanted, kept, error
            cameras[s.camera_id]["refused"] = {feature: dict(v) for feature, v in s.refused.items()}
    degraded = not sink.connected or paused or any(c["state"] != "up" for c in cameras.values())
    status = state if state != "running" else ("degraded" if degraded else "ok")
    return {
        "ok": state == "running",
        "status": status,
        "cameras": cameras,
        "redis": {"connected": sink.connected, "buffered": sink.buffered},
        "models": dict(models),
        "thermal": thermal,
    }
