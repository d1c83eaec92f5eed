"""CPU per frame from a GigE Vision camera against the same size over RTSP, latency and loss.

    .venv/bin/python -m tools.bench.gige [--seconds 20] [--packet-size 1400]

Each case runs a real `CameraSource` (as the daemon does) whose consumer converts every frame to the
model's planes at once (the worker's `Frame.planes`: swscale, de-Bayering for Bayer), so a frame's
cost is what the daemon pays before the model: reception (Aravis' stream thread, in this process)
or RTSP demux and H.264 decode, then conversion and scaling. The camera side runs elsewhere and is
not counted: Aravis' fake camera (`arv-fake-gv-camera-0.8 -i 127.0.0.1`, the real protocol) set to
the size, pixel format and 30 fps, and for RTSP the GStreamer server looping an H.264 clip of the
same size (a moving pattern, crf 23) at 30 fps. Cases: 1280x1024 Mono8 and 1920x1200 BayerRG8.

Printed per case: frames, CPU ms per frame (this process's user + system time over the frames),
and for GigE the capture-to-hand-off latency (hand-off wall clock minus `captured_ms`, p50/p99)
and the frames lost (`frame_lost`) and incomplete (`incomplete`) out of the camera's frames.
A second run of the GigE case with one core kept busy by a spinning process measures loss with
one core busy elsewhere. Timings on a shared machine: read them as ratios within one run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from daemon.config.seam import CameraConfig
from daemon.core.seam import Frame, Metrics, nearest_model_size
from daemon.ingest.seam import CameraSource
from tools.kit.gige_fake import FakeGigeCamera
from tools.kit.leash import spawn
from tools.kit.rtsp import RtspServer
from tools.kit.stats import percentile
from tools.kit.synth.video import h264_writer

CASES = ((1280, 1024, "Mono8"), (1920, 1200, "BayerRG8"))
FPS = 30


class Converting:
    """A consumer that converts every frame to planes at once (the worker's cost) and keeps timings."""

    def __init__(self) -> None:
        self.frames = 0
        self.latency_ms: list[int] = []
        self._lock = threading.Lock()

    def put(self, frame: Frame, *, wait: bool = False, stop: threading.Event | None = None) -> bool:
        handed_ms = int(time.time() * 1000)
        planes = frame.planes
        assert planes[0].size > 0
        with self._lock:
            self.frames += 1
            self.latency_ms.append(handed_ms - frame.captured_ms)
        return True

    def discard(self, camera_id: str) -> None:
        pass


def cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def measure(url: str, seconds: float, gige: dict[str, object] | None = None) -> tuple[Converting, float, Metrics]:
    """Run a source for `seconds` after its first frame; (consumer, CPU seconds over the measured frames, metrics)."""
    camera = CameraConfig.model_validate({"id": "bench", "url": url, **({"gige": gige} if gige else {})})
    consumer, metrics = Converting(), Metrics()
    source = CameraSource(
        camera,
        consumer=consumer,
        route=lambda _c, w, h: nearest_model_size(w, h),
        on_status=lambda _e: None,
        metrics=metrics,
    )
    source.start()
    try:
        deadline = time.monotonic() + 60
        while consumer.frames < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        frames0, cpu0 = consumer.frames, cpu_s()
        consumer.latency_ms.clear()
        time.sleep(seconds)
        frames, cpu = consumer.frames - frames0, cpu_s() - cpu0
    finally:
        source.stop()
        source.join(10)
    consumer.frames = frames
    return consumer, cpu, metrics


def configure_fake(width: int, height: int, pixel_format: str) -> None:
    """The fake camera keeps its registers between connections: set its size before the source opens it."""
    import gi  # noqa: PLC0415

    gi.require_version("Aravis", "0.8")
    from gi.repository import Aravis  # noqa: PLC0415

    camera = Aravis.Camera.new("127.0.0.1")
    camera.set_pixel_format_from_string(pixel_format)
    camera.set_region(0, 0, width, height)
    del camera


def clip(directory: Path, width: int, height: int) -> Path:
    path = directory / f"{width}x{height}.mp4"
    rng = np.random.default_rng(0)
    base = rng.integers(40, 200, size=(height, width, 3), dtype=np.uint8)
    with h264_writer(path, width, height, FPS, crf=23, preset="ultrafast") as write:
        for i in range(FPS * 4):
            img = base.copy()
            img[(i * 8) % (height - 100) :][:100, : width // 2] = 255
            write(img)
    return path


@contextlib.contextmanager
def busy_core() -> Iterator[None]:
    proc = spawn([sys.executable, "-c", "while True: pass"], stdout=subprocess.DEVNULL)
    try:
        yield
    finally:
        proc.kill()
        proc.wait(5)


def dropped(metrics: Metrics, reason: str) -> float:
    value = metrics.registry.get_sample_value("beltsight_frames_dropped_total", {"camera": "bench", "reason": reason})
    return value or 0.0


def report_gige(name: str, consumer: Converting, cpu: float, metrics: Metrics) -> None:
    lat = np.array(consumer.latency_ms or [0])
    lost, incomplete = dropped(metrics, "frame_lost"), dropped(metrics, "incomplete")
    print(
        f"{name}: {consumer.frames} frames, {1000 * cpu / max(1, consumer.frames):.2f} ms CPU/frame, "
        f"capture-to-hand-off p50 {percentile(lat, 50):.0f} ms p99 {percentile(lat, 99):.0f} ms, "
        f"lost {lost:.0f} incomplete {incomplete:.0f} (whole run)",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--packet-size", type=int, default=1400)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for width, height, pixel_format in CASES:
            gige = {"frame_rate": float(FPS), "pixel_format": pixel_format, "packet_size": args.packet_size}
            fake = FakeGigeCamera().start()
            try:
                configure_fake(width, height, pixel_format)
                report_gige(f"GigE {width}x{height} {pixel_format}", *measure(fake.url, args.seconds, gige))
                with busy_core():
                    report_gige(
                        f"GigE {width}x{height} {pixel_format}, one core busy", *measure(fake.url, args.seconds, gige)
                    )
            finally:
                fake.close()
            server = RtspServer({"cam": clip(Path(tmp), width, height)}).start()
            try:
                consumer, cpu, _metrics = measure(server.url("cam"), args.seconds)
                print(
                    f"RTSP {width}x{height} H.264: {consumer.frames} frames, "
                    f"{1000 * cpu / max(1, consumer.frames):.2f} ms CPU/frame",
                    flush=True,
                )
            finally:
                server.close()
    print(f"load average at end: {os.getloadavg()}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
