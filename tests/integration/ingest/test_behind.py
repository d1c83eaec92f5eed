"""A live camera whose reader cannot keep up skips to the live edge (daemon.ingest.lag), over a real
RTSP server: its backlog stays bounded, what it skipped is counted as dropped (`behind`), never as
decoded, and logged once; a reader that keeps up skips nothing, across the server's loop of the clip."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import structlog.testing

from daemon.config.cameras import CameraConfig
from daemon.core.backoff import Backoff
from daemon.core.frames import Frame
from daemon.core.metrics import Metrics
from daemon.ingest.sources import CameraSource
from tests.support.fixtures_rtsp import Clip, RtspServer
from tests.support.source_doubles import RecordingConsumer, route
from tests.support.waits import wait_until

FPS = 15


class SlowConsumer(RecordingConsumer):
    """Takes `cost_s` of the reader's thread per frame: a reader that decodes slower than its camera sends."""

    def __init__(self, cost_s: float) -> None:
        super().__init__()
        self.cost_s = cost_s

    def put(self, frame: Frame, *, wait: bool = False, stop: threading.Event | None = None) -> bool:
        time.sleep(self.cost_s)
        return super().put(frame, wait=wait, stop=stop)


def counter(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, {"camera": "cam", **labels}) or 0.0


def run(server: RtspServer, consumer: SlowConsumer, seconds: float) -> tuple[Metrics, list[dict[str, Any]], float]:
    """Read the camera for `seconds` after its first frames; the metrics, the logs, and the backlog in seconds:
    what the stream sent between the first and the last frame handed on that the reader neither decoded
    nor skipped."""
    metrics = Metrics()
    camera = CameraConfig.model_validate({"id": "cam", "url": server.url("cam"), "read_timeout_s": 2.0})
    source = CameraSource(
        camera,
        consumer=consumer,
        route=route,
        on_status=lambda event: None,
        metrics=metrics,
        backoff=Backoff(base_s=0.1, cap_s=0.5, healthy_reset_s=5.0),
    )
    with structlog.testing.capture_logs() as logs:
        source.start()
        try:
            wait_until(lambda: len(consumer.frames) >= 1, 30, "a first frame")
            time.sleep(seconds)
            last = len(consumer.frames)
            handled = counter(metrics, "beltsight_frames_decoded_total") + counter(
                metrics, "beltsight_frames_dropped_total", reason="behind"
            )
        finally:
            source.stop()
            assert source.join(timeout=5.0)
    frames = consumer.frames
    sent = (frames[last - 1].captured_mono - frames[0].captured_mono) * FPS + 1
    return metrics, logs, (sent - handled) / FPS


def test_a_reader_slower_than_its_camera_skips_to_the_live_edge(
    rtsp_server: Callable[..., RtspServer], clip_factory: Callable[..., Clip]
) -> None:
    server = rtsp_server({"cam": clip_factory(640, 480, fps=FPS, seconds=4.0, synthetic=False).path})
    consumer = SlowConsumer(cost_s=1.6 / FPS)  # 1.6 frame intervals a frame: 0.6 s more behind each second
    metrics, logs, backlog_s = run(server, consumer, 14.0)
    assert counter(metrics, "beltsight_frames_dropped_total", reason="behind") > FPS
    assert counter(metrics, "beltsight_frames_decoded_total") == len(consumer.frames)  # skipped: never decoded
    # without the skips the reader would be 14 x 0.6 / 1.6 = 5 s behind by now
    assert backlog_s < 3.0
    behind = [e for e in logs if e["event"] == "camera_behind"]
    assert len(behind) == 1  # at most once a minute
    assert behind[0]["log_level"] == "warning" and behind[0]["camera"] == "cam" and behind[0]["lag_ms"] > 1000


def test_a_reader_that_keeps_up_skips_nothing_across_the_clips_loop(
    rtsp_server: Callable[..., RtspServer], clip_factory: Callable[..., Clip]
) -> None:
    server = rtsp_server({"cam": clip_factory(640, 480, fps=FPS, seconds=3.0, synthetic=False).path})
    consumer = SlowConsumer(cost_s=0.0)
    metrics, logs, backlog_s = run(server, consumer, 8.0)  # the server loops the 3 s clip twice meanwhile
    assert counter(metrics, "beltsight_frames_dropped_total", reason="behind") == 0
    assert not [e for e in logs if e["event"] in ("camera_behind", "camera_caught_up")]
    assert abs(backlog_s) < 0.5
