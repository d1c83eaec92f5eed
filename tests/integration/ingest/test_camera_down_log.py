"""A camera that stays down logs each backoff step, not every attempt (a real refused RTSP port)."""

from __future__ import annotations

import socket
import time

import structlog.testing

from daemon.config.cameras import CameraConfig
from daemon.core.backoff import Backoff
from daemon.core.frames import StatusEvent
from daemon.core.metrics import Metrics
from daemon.ingest.sources import CameraSource
from tests.support.source_doubles import RecordingConsumer, route


def _refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_dead_camera_logs_its_backoff_steps_not_every_attempt() -> None:
    camera = CameraConfig.model_validate(
        {"id": "dead", "url": f"rtsp://viewer:pw-123@127.0.0.1:{_refused_port()}/x", "open_timeout_s": 2.0}
    )
    metrics = Metrics()
    events: list[StatusEvent] = []
    source = CameraSource(
        camera,
        consumer=RecordingConsumer(),
        route=route,
        on_status=events.append,
        metrics=metrics,
        backoff=Backoff(base_s=0.01, cap_s=0.04, healthy_reset_s=5.0),  # steps 0.01, 0.02, 0.04
    )

    def reconnects() -> float:
        return metrics.registry.get_sample_value("beltsight_camera_reconnects_total", {"camera": "dead"}) or 0.0

    with structlog.testing.capture_logs() as logs:
        source.start()
        deadline = time.monotonic() + 30
        while reconnects() < 20 and time.monotonic() < deadline:
            time.sleep(0.02)
        source.stop()
        assert source.join(timeout=60.0)  # a deadline for a loaded machine (an open may take open_timeout_s)
    attempts = reconnects()
    assert attempts >= 20
    downs = [e for e in logs if e["event"] == "camera_down"]
    assert [d["failures"] for d in downs] == [1, 2, 3]  # one line per backoff step
    assert all(d["suppressed"] == 0 for d in downs)
    assert len([e for e in logs if e["event"] == "camera_connecting"]) <= 4
    assert [e.kind for e in events].count("camera_down") == 1  # the status stream: once per reason
