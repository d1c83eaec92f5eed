"""CameraSource against a real RTSP server (GStreamer) and real H.264 clips."""

from __future__ import annotations

import itertools
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import av
import numpy as np
import pytest
import structlog.testing

from daemon.config.cameras import CameraConfig
from daemon.core.backoff import Backoff
from daemon.core.frames import Frame, StatusEvent
from daemon.core.metrics import Metrics
from daemon.ingest.reader import MAX_CONSECUTIVE_DECODE_ERRORS
from daemon.ingest.sources import CameraSource
from tests.support.fixtures_rtsp import Clip, RtspServer
from tests.support.source_doubles import RecordingConsumer, route
from tests.support.waits import wait_until

FAST = {"read_timeout_s": 1.0, "stall_s": 2.0, "open_timeout_s": 2.0}


class StatusLog:
    def __init__(self) -> None:
        self.events: list[StatusEvent] = []
        self._lock = threading.Lock()

    def __call__(self, event: StatusEvent) -> None:
        with self._lock:
            self.events.append(event)

    def kinds(self, camera_id: str | None = None) -> list[str]:
        with self._lock:
            return [e.kind for e in self.events if camera_id is None or e.camera_id == camera_id]

    def of(self, kind: str) -> list[StatusEvent]:
        with self._lock:
            return [e for e in self.events if e.kind == kind]


def sample(metrics: Metrics, name: str, camera_id: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, {"camera": camera_id, **labels})
    return value or 0.0


class Harness:
    def __init__(self) -> None:
        self.consumer = RecordingConsumer()
        self.status = StatusLog()
        self.metrics = Metrics()
        self.sources: list[CameraSource] = []

    def start(
        self, camera_id: str, url: str, router: Callable[[str, int, int], int | None] = route, **options: object
    ) -> CameraSource:
        camera = CameraConfig.model_validate({"id": camera_id, "url": url, **FAST, **options})
        source = CameraSource(
            camera,
            consumer=self.consumer,
            route=router,
            on_status=self.status,
            metrics=self.metrics,
            backoff=Backoff(base_s=0.1, cap_s=0.5, healthy_reset_s=5.0),
        )
        self.sources.append(source)
        source.start()
        return source


@pytest.fixture
def harness() -> Iterator[Harness]:
    h = Harness()
    yield h
    for source in h.sources:
        source.stop()
    for source in h.sources:
        # A frozen server needs up to 2 x read_timeout_s to surface; stop must not take longer.
        assert source.join(timeout=5.0), f"source {source.camera_id} did not stop"


@pytest.fixture
def clips(clip_factory: Callable[..., Clip]) -> dict[str, Clip]:
    return {
        "vga": clip_factory(640, 480, fps=10, seconds=2.0, synthetic=False),
        "hd": clip_factory(1280, 720, fps=10, seconds=2.0, synthetic=False),
    }


def test_rtsp_frames_are_routed_letterboxed_and_numbered(
    harness: Harness, rtsp_server: Callable[..., RtspServer], clips: dict[str, Clip]
) -> None:
    server = rtsp_server({"vga": clips["vga"].path, "hd": clips["hd"].path})
    t0_ms = time.time() * 1000
    vga = harness.start("vga", server.url("vga"))
    hd = harness.start("hd", server.url("hd"))
    wait_until(lambda: len(harness.consumer.of("vga")) >= 15 and len(harness.consumer.of("hd")) >= 15, 60, "frames")

    for cam, size, new_w, new_h in (("vga", 640, 640, 480), ("hd", 800, 800, 450)):
        frames = harness.consumer.of(cam)
        assert [f.seq for f in frames] == list(range(len(frames)))
        for f in frames:
            assert f.model_size == size
            assert (f.letterbox.new_w, f.letterbox.new_h) == (new_w, new_h)
            assert [p.shape for p in f.planes] == [(new_h, new_w)] * 3
            assert t0_ms - 1000 <= f.captured_ms <= time.time() * 1000
        assert frames[-1].captured_mono > frames[0].captured_mono
        assert np.stack(frames[-1].planes).std() > 0  # real picture content, not a blank buffer
    assert (hd.width, hd.height) == (1280, 720)
    assert vga.state == hd.state == "up"
    # the clip is 10 fps, served in real time: never faster (a slow machine may decode fewer)
    assert 0.0 < vga.fps < 20.0
    ups = harness.status.of("camera_up")
    assert {e.camera_id for e in ups} == {"vga", "hd"}
    assert any("1280x720" in e.detail and "h264" in e.detail for e in ups)
    assert sample(harness.metrics, "beltsight_camera_up", "vga") == 1.0
    assert sample(harness.metrics, "beltsight_frames_decoded_total", "hd") >= 15
    assert set(harness.consumer.waited) == {False}  # live: latest-frame-wins hand-off


def test_file_replay_not_realtime_yields_every_frame_once(harness: Harness, clip_factory: Callable[..., Clip]) -> None:
    clip = clip_factory(416, 320, fps=10, seconds=2.0)  # synthetic scene when tools.kit.synth.video is there
    source = harness.start("replay", str(clip.path), realtime=False)
    assert source.join(timeout=60.0)
    frames = harness.consumer.of("replay")
    assert [f.seq for f in frames] == list(range(clip.frames))
    assert all(harness.consumer.waited)
    assert all(f.model_size == 416 and np.stack(f.planes).shape == (3, 320, 416) for f in frames)
    assert source.finished and source.state == "down"
    assert harness.status.kinds("replay") == ["camera_up", "camera_down"]
    assert sample(harness.metrics, "beltsight_frames_decoded_total", "replay") == clip.frames


def test_file_replay_realtime_loop_paces_and_restarts_seq(harness: Harness, clip_factory: Callable[..., Clip]) -> None:
    clip = clip_factory(320, 240, fps=20, seconds=0.5, synthetic=False)  # 10 frames, 0.5 s a pass
    started = time.monotonic()
    harness.start("loop", f"file://{clip.path}", realtime=True, loop=True)
    wait_until(lambda: len(harness.consumer.of("loop")) >= 2 * clip.frames + 1, 60, "two passes")
    elapsed = time.monotonic() - started
    seqs = [f.seq for f in harness.consumer.of("loop")]
    assert seqs[: 2 * clip.frames + 1] == [*range(clip.frames), *range(clip.frames), 0]
    assert elapsed >= 0.9  # two passes of 0.5 s at the file's frame rate, not as fast as possible


def test_no_model_frames_are_counted_as_dropped(harness: Harness, clips: dict[str, Clip]) -> None:
    clip = clips["vga"]
    source = harness.start("nomodel", str(clip.path), router=lambda c, w, h: None, realtime=False)
    assert source.join(timeout=60.0)
    assert harness.consumer.of("nomodel") == []
    dropped = sample(harness.metrics, "beltsight_frames_dropped_total", "nomodel", reason="no_model")
    assert dropped == clip.frames


def test_reconnects_after_server_is_killed_and_restarted(
    harness: Harness, rtsp_server: Callable[..., RtspServer], clips: dict[str, Clip]
) -> None:
    server = rtsp_server({"cam": clips["vga"].path})
    source = harness.start("cam", server.url("cam"))
    wait_until(lambda: len(harness.consumer.of("cam")) >= 5, 60, "first frames")
    server.kill()
    wait_until(lambda: "camera_down" in harness.status.kinds(), 60, "camera_down")
    assert source.state in ("down", "connecting")
    assert sample(harness.metrics, "beltsight_camera_up", "cam") == 0.0
    before = len(harness.consumer.of("cam"))
    server.restart()
    wait_until(lambda: len(harness.consumer.of("cam")) >= before + 5, 60, "frames after restart")
    kinds = harness.status.kinds("cam")
    # up, down at the kill, up again after the restart; once per connection (a stall on a loaded
    # machine after the restart is a down and an up more, not a second up in a row)
    assert kinds[:2] == ["camera_up", "camera_down"] and "camera_up" in kinds[2:], kinds
    assert all(not (a == b == "camera_up") for a, b in itertools.pairwise(kinds)), kinds
    assert harness.status.of("camera_down")[0].detail == "stream ended"
    after = harness.consumer.of("cam")[before:]
    assert [f.seq for f in after] == list(range(len(after)))  # a new connection numbers from 0
    assert sample(harness.metrics, "beltsight_camera_reconnects_total", "cam") >= 1
    assert harness.consumer.discards >= 1


def test_dead_url_reports_down_and_keeps_retrying(harness: Harness) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    source = harness.start("dead", f"rtsp://127.0.0.1:{port}/nothing")
    wait_until(lambda: sample(harness.metrics, "beltsight_camera_reconnects_total", "dead") >= 3, 60, "retries")
    downs = harness.status.of("camera_down")
    assert downs and downs[0].detail == "connection refused"
    assert len(downs) == 1  # the same reason while it stays down is not re-announced
    assert harness.consumer.of("dead") == []
    assert source.state in ("down", "connecting")
    assert source.join(timeout=0.01) is False  # still running


def test_password_never_reaches_events_or_logs(
    harness: Harness, rtsp_server: Callable[..., RtspServer], clips: dict[str, Clip]
) -> None:
    password, wrong = "Hunter2xyzzy", "Wrong9pass"
    server = rtsp_server({"cam": clips["vga"].path}, user="op", password=password)
    with structlog.testing.capture_logs() as logs:
        harness.start("good", server.url("cam"))
        harness.start("bad", server.url("cam").replace(password, wrong))
        wait_until(lambda: len(harness.consumer.of("good")) >= 3, 60, "frames with credentials")
        wait_until(lambda: bool(harness.status.of("camera_down")), 60, "the 401 camera_down")
        server.kill()
        wait_until(lambda: len(harness.status.of("camera_down")) >= 2, 60, "camera_down after kill")
    bad_down = [e for e in harness.status.of("camera_down") if e.camera_id == "bad"]
    assert bad_down and "401" in bad_down[0].detail
    assert any(entry.get("url") == f"rtsp://op:***@127.0.0.1:{server.port}/cam" for entry in logs)
    for text in (repr(harness.status.events), repr(logs)):
        assert password not in text
        assert wrong not in text


def test_frozen_server_is_detected_as_stalled_and_recovers(
    harness: Harness, rtsp_server: Callable[..., RtspServer], clips: dict[str, Clip]
) -> None:
    server = rtsp_server({"cam": clips["vga"].path})
    source = harness.start("cam", server.url("cam"))
    wait_until(lambda: len(harness.consumer.of("cam")) >= 5, 60, "first frames")
    server.stop()
    # stall_s = 2 and read_timeout_s = 1 (a frozen read surfaces after ~2 x read timeout; how soon
    # is the source's own timers, waited for here with a deadline)
    wait_until(lambda: bool(harness.status.of("camera_stalled")), 60, "camera_stalled")
    assert source.state in ("down", "connecting")
    assert harness.status.of("camera_down")[0].detail.startswith("stalled")
    before = len(harness.consumer.of("cam"))
    server.cont()
    wait_until(lambda: len(harness.consumer.of("cam")) >= before + 5, 60, "frames after SIGCONT")
    assert harness.status.kinds("cam")[-1] == "camera_up"
    assert source.state == "up"


def corrupt_copy(src: Path, dst: Path, bad: range) -> None:
    """Remux `src` with the payload of packets `bad` replaced by noise (NAL length prefix kept)."""
    rng = np.random.default_rng(0)
    with av.open(str(src)) as inp, av.open(str(dst), "w") as out:
        stream = inp.streams.video[0]
        out_stream = out.add_stream_from_template(stream)
        for i, original in enumerate(p for p in inp.demux(stream) if p.size):
            packet = original
            if i in bad:
                data = bytes(original)
                packet = av.Packet(data[:4] + rng.integers(0, 256, len(data) - 4, dtype=np.uint8).tobytes())
                packet.pts, packet.dts, packet.time_base = original.pts, original.dts, original.time_base
            packet.stream = out_stream
            out.mux(packet)


def test_corrupt_packets_are_skipped_and_counted(
    harness: Harness, clip_factory: Callable[..., Clip], tmp_path: Path
) -> None:
    clip = clip_factory(320, 240, fps=10, seconds=3.0, synthetic=False)  # keyframes at 0, 10, 20
    damaged = tmp_path / "damaged.mp4"
    corrupt_copy(clip.path, damaged, range(3, 8))
    source = harness.start("damaged", str(damaged), realtime=False)
    assert source.join(timeout=60.0)
    corrupt = sample(harness.metrics, "beltsight_corrupt_packets_total", "damaged")
    frames = harness.consumer.of("damaged")
    assert corrupt >= 3
    assert clip.frames - 10 <= len(frames) < clip.frames
    assert [f.seq for f in frames] == list(range(len(frames)))
    assert harness.status.kinds("damaged") == ["camera_up", "camera_down"]  # no reconnect, just EOF
    assert source.finished


def test_persistent_garbage_triggers_a_reconnect(
    harness: Harness, clip_factory: Callable[..., Clip], tmp_path: Path
) -> None:
    clip = clip_factory(320, 240, fps=10, seconds=5.0, synthetic=False)
    damaged = tmp_path / "garbage.mp4"
    corrupt_copy(clip.path, damaged, range(1, clip.frames))
    harness.start("garbage", str(damaged), realtime=False)
    wait_until(lambda: len(harness.status.of("camera_down")) >= 1, 60, "camera_down")
    down = harness.status.of("camera_down")[0]
    assert down.detail.startswith("corrupt stream")
    wait_until(lambda: sample(harness.metrics, "beltsight_camera_reconnects_total", "garbage") >= 1, 60, "retry")
    assert sample(harness.metrics, "beltsight_corrupt_packets_total", "garbage") > MAX_CONSECUTIVE_DECODE_ERRORS


def test_unexpected_exception_is_logged_and_retried(harness: Harness, clip_factory: Callable[..., Clip]) -> None:
    clip = clip_factory(320, 240, fps=10, seconds=1.0, synthetic=False)
    calls: list[tuple[int, int]] = []

    def flaky_router(camera_id: str, width: int, height: int) -> int | None:
        calls.append((width, height))
        if len(calls) == 1:
            raise RuntimeError("router bug")
        return 416

    with structlog.testing.capture_logs() as logs:
        source = harness.start("flaky", str(clip.path), router=flaky_router, realtime=False)
        assert source.join(timeout=60.0)
    assert [e["event"] for e in logs].count("camera_thread_crashed") == 1
    crash = next(e for e in logs if e["event"] == "camera_thread_crashed")
    assert "router bug" in crash["traceback"]
    downs = harness.status.of("camera_down")
    assert downs[0].detail == "internal error (RuntimeError)"
    assert downs[-1].detail == "end of file"  # the retry replayed the whole file
    assert harness.status.of("camera_resolution_changed") == []
    assert [f.seq for f in harness.consumer.of("flaky")] == list(range(clip.frames))


def test_resolution_change_after_reconnect_is_reported_and_rerouted(
    harness: Harness, rtsp_server: Callable[..., RtspServer], clips: dict[str, Clip]
) -> None:
    server = rtsp_server({"cam": clips["vga"].path})
    source = harness.start("cam", server.url("cam"))
    wait_until(lambda: len(harness.consumer.of("cam")) >= 3, 60, "first frames")
    server.streams["cam"] = clips["hd"].path  # the camera comes back configured for 720p
    server.restart()
    wait_until(lambda: any(f.model_size == 800 for f in harness.consumer.of("cam")), 60, "720p frames")
    changes = harness.status.of("camera_resolution_changed")
    assert [e.detail for e in changes] == ["640x480 -> 1280x720"]
    sizes = [f.model_size for f in harness.consumer.of("cam")]
    assert sizes == sorted(sizes)  # 640 until the reconnect, 800 after, never mixed
    assert source.size_text == "1280x720"


class HeldBackConsumer(RecordingConsumer):
    """A busy host: one hand-off in five takes 150-300 ms (the others up to 20), so the next frames
    wait in the socket and then come in a burst."""

    def __init__(self) -> None:
        super().__init__()
        self.handed_mono: list[float] = []
        rng = np.random.default_rng(11)
        held = rng.random(10_000) < 0.2
        self._delays = iter(np.where(held, rng.uniform(0.15, 0.3, 10_000), rng.uniform(0.0, 0.02, 10_000)))

    def put(self, frame: Frame, *, wait: bool = False, stop: threading.Event | None = None) -> bool:
        self.handed_mono.append(time.monotonic())
        super().put(frame, wait=wait, stop=stop)
        time.sleep(next(self._delays))
        return True


def test_a_held_back_reader_stamps_frames_with_the_streams_spacing(
    harness: Harness, rtsp_server: Callable[..., RtspServer], clip_factory: Callable[..., Clip]
) -> None:
    """Frames are stamped from their presentation time, not when the host got to them: a reader held
    back by up to 300 ms at a time still gives the tracker the camera's 100 ms spacing."""
    server = rtsp_server({"cam": clip_factory(320, 240, fps=10, seconds=6.0).path})
    harness.consumer = consumer = HeldBackConsumer()
    t0_ms = time.time() * 1000
    harness.start("cam", server.url("cam"))
    wait_until(lambda: len(consumer.of("cam")) >= 40, 60, "frames")
    frames = consumer.of("cam")[:40]
    handed = consumer.handed_mono[: len(frames)]
    decode_steps = np.diff(handed[5:])
    assert np.abs(decode_steps - 0.1).max() > 0.08  # the host did hold the reader back
    captured_steps = np.diff([f.captured_mono for f in frames[5:]])
    assert np.abs(captured_steps - 0.1).max() < 0.015, captured_steps.round(3).tolist()
    ms_steps = np.diff([f.captured_ms for f in frames[5:]])
    assert np.abs(ms_steps - 100).max() <= 16
    for f, at in zip(frames, handed, strict=True):
        assert f.captured_mono <= at + 0.002  # never later than the frame reached the host
        assert t0_ms - 1000 <= f.captured_ms <= time.time() * 1000
