"""GigE Vision cameras through Aravis, against Aravis' fake camera on loopback (the real GVCP/GVSP protocol)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace

import pytest
import structlog.testing

from daemon.config.cameras import CameraConfig
from daemon.core.backoff import Backoff
from daemon.core.frames import Frame, StatusEvent
from daemon.core.metrics import Metrics
from daemon.ingest.sources import CameraSource
from daemon.ops.http.report import health_report
from tests.support.fixtures_gige import FakeGigeCamera
from tests.support.source_doubles import RecordingConsumer, route
from tests.support.waits import wait_until

FAST = {"read_timeout_s": 1.0, "stall_s": 2.0}


class StampingConsumer(RecordingConsumer):
    """Keeps every frame and the wall-clock ms at which it was handed over."""

    def __init__(self) -> None:
        super().__init__()
        self.put_ms: list[int] = []

    def put(self, frame: Frame, *, wait: bool = False, stop: threading.Event | None = None) -> bool:
        self.put_ms.append(int(time.time() * 1000))
        return super().put(frame, wait=wait, stop=stop)


class Harness:
    def __init__(self) -> None:
        self.consumer = StampingConsumer()
        self.events: list[StatusEvent] = []
        self.metrics = Metrics()
        self.sources: list[CameraSource] = []

    def start(self, url: str, **options: object) -> CameraSource:
        camera = CameraConfig.model_validate({"id": "belt", "url": url, **FAST, **options})
        source = CameraSource(
            camera,
            consumer=self.consumer,
            route=route,
            on_status=self.events.append,
            metrics=self.metrics,
            backoff=Backoff(base_s=0.1, cap_s=0.5, healthy_reset_s=5.0),
        )
        self.sources.append(source)
        source.start()
        return source

    def frames(self) -> list[Frame]:
        return self.consumer.of("belt")

    def kinds(self) -> list[str]:
        return [e.kind for e in list(self.events)]

    def dropped(self, reason: str) -> float:
        value = self.metrics.registry.get_sample_value(
            "beltsight_frames_dropped_total", {"camera": "belt", "reason": reason}
        )
        return value or 0.0


@pytest.fixture
def harness() -> Iterator[Harness]:
    """Request it after `gige_camera`: the sources stop before the camera does."""
    h = Harness()
    yield h
    for source in h.sources:
        source.stop()
    for source in h.sources:
        assert source.join(timeout=10.0), "the GigE source did not stop"


def accounted(h: Harness, frames: list[Frame]) -> None:
    """Every camera frame of the connection is either handed on or counted as lost or incomplete."""
    seqs = [f.seq for f in frames]
    assert seqs == sorted(set(seqs)), "seq must increase"
    span = seqs[-1] + 1  # the connection's first frame is seq 0, handed on or not
    assert len(seqs) + h.dropped("incomplete") + h.dropped("frame_lost") >= span


def test_frames_at_the_camera_rate_numbered_and_timed_by_the_camera(
    gige_camera: Callable[..., FakeGigeCamera], harness: Harness
) -> None:
    fake = gige_camera()
    source = harness.start(fake.url, gige={"frame_rate": 20.0})
    wait_until(lambda: len(harness.frames()) >= 60, 60, "60 frames")
    source.stop()
    assert source.join(10)
    frames = harness.frames()
    accounted(harness, frames)
    if harness.dropped("incomplete") == harness.dropped("frame_lost") == 0:
        assert [f.seq for f in frames] == list(range(len(frames)))  # one per camera frame
    # the camera's rate (its own clock, mapped onto the host's): 20 fps within 10 %
    spacing_ms = (frames[-1].captured_ms - frames[0].captured_ms) / (frames[-1].seq - frames[0].seq)
    assert 1000 / 20 / 1.1 <= spacing_ms <= 1000 / 20 / 0.9
    captured = [f.captured_ms for f in frames]
    assert captured == sorted(set(captured))  # monotone
    # the camera's time on the host clock: never after the hand-off, and the quickest frame within
    # 200 ms of it (how long each one waited is the busy machine's, not the clock's)
    waits_ms = [put_ms - f.captured_ms for f, put_ms in zip(frames, harness.consumer.put_ms, strict=True)]
    assert min(waits_ms) >= -5 and min(waits_ms) <= 200, sorted(waits_ms)
    first = frames[0]
    assert (first.width, first.height, first.model_size) == (512, 512, 416)
    assert [p.shape for p in first.planes] == [(416, 416)] * 3
    assert [e.detail for e in harness.events if e.kind == "camera_up"][-1] == "512x512 Mono8"


def test_the_device_id_opens_the_same_camera(gige_camera: Callable[..., FakeGigeCamera], harness: Harness) -> None:
    fake = gige_camera(serial="BELT7")
    harness.start(f"gige://{fake.device_id}")
    wait_until(lambda: len(harness.frames()) >= 5, 60, "frames from the camera opened by its id")


def test_camera_killed_and_restarted(gige_camera: Callable[..., FakeGigeCamera], harness: Harness) -> None:
    fake = gige_camera()
    source = harness.start(fake.url)
    wait_until(lambda: "camera_up" in harness.kinds(), 60, "camera_up")
    fake.kill()
    wait_until(lambda: "camera_down" in harness.kinds(), 10, "camera_down after the camera died")
    assert source.state in ("down", "connecting", "stalled")
    before = len(harness.frames())
    down_at = len(harness.kinds())
    fake.start()
    wait_until(lambda: "camera_up" in harness.kinds()[down_at:], 20, "camera_up after the camera came back")
    wait_until(lambda: len(harness.frames()) > before + 10, 20, "frames again")
    after = harness.frames()[before:]
    assert after[0].seq == 0  # a new connection numbers from 0 again
    assert source.state == "up"


def test_packet_loss_frames_incomplete_are_counted_never_handed_on(
    gige_camera: Callable[..., FakeGigeCamera], harness: Harness
) -> None:
    fake = gige_camera(loss_per_thousand=20)  # 2 % of the stream's packets never sent
    with structlog.testing.capture_logs() as logs:
        harness.start(fake.url, gige={"packet_size": 9000}, stall_s=10.0)
        wait_until(lambda: len(harness.frames()) >= 20 and harness.dropped("incomplete") >= 5, 120, "frames and losses")
    frames = harness.frames()
    accounted(harness, frames)
    incomplete = harness.dropped("incomplete")
    handed = len(frames)
    # each incomplete frame took a seq number that no handed-on frame has: the gaps hold them all
    gaps = frames[-1].seq + 1 - handed
    assert gaps >= incomplete - 1  # (the newest may be counted before the next frame shows its gap)
    lines = [e for e in logs if e["event"] == "gige_frames_dropped" and e["reason"] == "incomplete"]
    assert 1 <= len(lines) < incomplete  # logged once per interval, not per frame


def test_a_refused_feature_is_reported_with_the_value_kept(
    gige_camera: Callable[..., FakeGigeCamera], harness: Harness
) -> None:
    fake = gige_camera()  # the fake camera has no BGR8
    with structlog.testing.capture_logs() as logs:
        source = harness.start(fake.url, gige={"pixel_format": "BGR8", "exposure_us": 2000.0})
        wait_until(lambda: len(harness.frames()) >= 5, 60, "frames despite the refused setting")
    assert source.refused["PixelFormat"]["wanted"] == "BGR8"
    assert source.refused["PixelFormat"]["kept"] == "Mono8"
    assert "ExposureTime" not in source.refused
    refused = [e for e in logs if e["event"] == "gige_feature_refused"]
    assert refused and refused[0]["feature"] == "PixelFormat" and refused[0]["kept"] == "Mono8"
    sink = SimpleNamespace(connected=True, buffered=0)
    report = health_report("running", sources=[source], sink=sink, models={}, thermal={}, paused=False)
    shown = report["cameras"]["belt"]["refused"]["PixelFormat"]
    assert (shown["wanted"], shown["kept"]) == ("BGR8", "Mono8")
    assert [e.detail for e in harness.events if e.kind == "camera_up"][-1] == "512x512 Mono8"


def test_software_trigger_paces_the_camera(gige_camera: Callable[..., FakeGigeCamera], harness: Harness) -> None:
    fake = gige_camera()
    harness.start(fake.url, gige={"trigger": "software", "frame_rate": 8.0})
    wait_until(lambda: len(harness.frames()) >= 17, 60, "triggered frames")
    frames = harness.frames()
    spacing_ms = (frames[-1].captured_ms - frames[1].captured_ms) / (len(frames) - 2)
    assert 1000 / 8 / 1.25 <= spacing_ms <= 1000 / 8 / 0.8  # triggered at 8 fps, not the free-run 25


def test_a_hardware_triggered_camera_is_up_without_frames_and_down_when_its_control_is_lost(
    gige_camera: Callable[..., FakeGigeCamera], harness: Harness
) -> None:
    fake = gige_camera()  # nothing drives its Line0: it sends no frame, as on an empty belt
    source = harness.start(fake.url, gige={"trigger": "Line0"})
    wait_until(lambda: "camera_up" in harness.kinds(), 60, "camera_up while acquiring")
    assert source.state == "up" and not harness.frames()
    fake.kill()  # only the control channel (Aravis' heartbeat) can tell
    wait_until(lambda: "camera_down" in harness.kinds(), 60, "camera_down once the control channel is lost")
    down = [e for e in harness.events if e.kind == "camera_down"]
    assert down[0].detail.startswith("control lost")
