"""Fixtures for video tests: H.264 clips made with PyAV, and a real GStreamer RTSP server.

`clip_factory(width, height, fps=10, seconds=2.0, seed=0, synthetic=None) -> Clip` renders an MP4
(libx264, yuv420p, no B-frames, GOP = fps) once per session per argument set. With
`synthetic=None` it uses `tools.synth_video.render_video` (conveyor scenes with ground truth) when that
exists, else a fast moving-pattern clip; `synthetic=False` always makes the fast pattern clip.

`rtsp_server(streams, port=0, user=None, password=None) -> RtspServer` runs
`/usr/bin/python3 tools/rtsp_server.py` (Debian's Python: a venv cannot import gi) and waits for
its READY line. The server can be killed (SIGKILL), frozen (SIGSTOP), thawed (SIGCONT) and
restarted on the same port; every server is closed at the end of the test.
"""

from __future__ import annotations

import importlib
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tools.synth_video import h264_writer

SYSTEM_PYTHON = "/usr/bin/python3"
SERVER_SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "rtsp_server.py"
READY_TIMEOUT_S = 20.0


@dataclass(frozen=True, slots=True)
class Clip:
    path: Path
    gt_path: Path | None
    width: int
    height: int
    fps: int
    frames: int


def _synth_renderer() -> Callable[..., None] | None:
    try:
        synth = importlib.import_module("tools.synth_video")
    except ImportError:
        return None
    render = getattr(synth, "render_video", None)
    return render if callable(render) else None


def render_pattern_clip(path: Path, width: int, height: int, fps: int, frames: int, seed: int) -> None:
    """A cheap clip: a bright square moving over bars, so every frame differs."""
    rng = np.random.default_rng(seed)
    base = np.zeros((height, width, 3), np.uint8)
    bars = rng.integers(40, 200, size=(16, 3), dtype=np.uint8)
    base[:] = bars[(np.arange(width) * 16 // width)][None, :, :]
    side = max(8, min(width, height) // 6)
    with h264_writer(path, width, height, fps, crf=23, preset="ultrafast") as write:
        for i in range(frames):
            img = base.copy()
            x = (i * 7) % max(1, width - side)
            y = (i * 5) % max(1, height - side)
            img[y : y + side, x : x + side] = 255
            write(img)


@pytest.fixture(scope="session")
def clip_factory(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Clip]:
    cache: dict[tuple[object, ...], Clip] = {}
    out_dir = tmp_path_factory.mktemp("clips")
    lock = threading.Lock()

    def make(
        width: int,
        height: int,
        fps: int = 10,
        seconds: float = 2.0,
        seed: int = 0,
        synthetic: bool | None = None,
    ) -> Clip:
        render = _synth_renderer() if synthetic is not False else None
        if synthetic and render is None:
            pytest.skip("tools.synth_video.render_video is not available")
        key = (width, height, fps, seconds, seed, render is not None)
        with lock:
            if key not in cache:
                stem = f"{width}x{height}_{fps}fps_{seconds}s_seed{seed}_{'synth' if render else 'pattern'}"
                path, gt = out_dir / f"{stem}.mp4", out_dir / f"{stem}.json"
                frames = max(1, round(seconds * fps))
                if render is not None:
                    render(path, gt, width, height, fps, seconds, seed)
                else:
                    render_pattern_clip(path, width, height, fps, frames, seed)
                cache[key] = Clip(path, gt if render else None, width, height, fps, frames)
            return cache[key]

    return make


class RtspServer:
    """One `tools/rtsp_server.py` process; see the module docstring for its controls."""

    def __init__(
        self, streams: dict[str, Path], port: int = 0, user: str | None = None, password: str | None = None
    ) -> None:
        self.streams = dict(streams)
        self.port = port
        self.user = user
        self.password = password
        self._proc: subprocess.Popen[str] | None = None
        self._pump: threading.Thread | None = None
        self._stderr: tempfile._TemporaryFileWrapper[bytes] | None = None
        self._spawn()

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def url(self, mount: str, *, credentials: bool = True) -> str:
        auth = f"{self.user}:{self.password}@" if credentials and self.user is not None else ""
        return f"rtsp://{auth}127.0.0.1:{self.port}/{mount}"

    def _spawn(self) -> None:
        cmd = [SYSTEM_PYTHON, str(SERVER_SCRIPT), "--port", str(self.port)]
        for mount, path in self.streams.items():
            cmd += ["--stream", f"{mount}={path}"]
        if self.user is not None and self.password is not None:
            cmd += ["--user", self.user, "--password", self.password]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        self._stderr = tempfile.NamedTemporaryFile(prefix="rtsp_server_", suffix=".err")  # noqa: SIM115
        self._proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self._stderr, stdin=subprocess.DEVNULL, text=True, env=env
        )
        line = self._wait_ready()
        self.port = int(line.rsplit(":", 1)[1])

    def _wait_ready(self) -> str:
        assert self._proc is not None and self._proc.stdout is not None
        lines: queue.Queue[str] = queue.Queue()
        stdout = self._proc.stdout

        def pump() -> None:
            for text in stdout:
                lines.put(text.strip())
            lines.put("")  # EOF

        self._pump = threading.Thread(target=pump, daemon=True, name="rtsp-server-stdout")
        self._pump.start()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while (left := deadline - time.monotonic()) > 0:
            try:
                text = lines.get(timeout=left)
            except queue.Empty:
                break
            if text.startswith("READY "):
                return text.split(" ", 1)[1]
            if text == "" and self._proc.poll() is not None:
                break
        self._terminate()
        raise RuntimeError(f"rtsp_server did not become ready: {self._stderr_text()}")

    def _stderr_text(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-4000:]

    def _signal(self, signum: int) -> None:
        assert self._proc is not None
        self._proc.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL: clients see their stream end (no error)."""
        self._terminate()

    def stop(self) -> None:
        """SIGSTOP: the server freezes with connections open (clients hit their read timeout)."""
        self._signal(signal.SIGSTOP)

    def cont(self) -> None:
        self._signal(signal.SIGCONT)

    def restart(self) -> None:
        """Kill if running, then start again with the same port and streams."""
        self._terminate()
        deadline = time.monotonic() + 10.0
        while True:
            try:
                self._spawn()
                return
            except RuntimeError:
                if time.monotonic() > deadline:  # e.g. the port is still held
                    raise
                time.sleep(0.2)

    def _terminate(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.kill()  # SIGKILL works on a stopped process too
            proc.wait(timeout=10)
            if self._pump is not None:
                self._pump.join(timeout=5)  # it ends at EOF; closing under it would raise there
            if proc.stdout is not None:
                proc.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def close(self) -> None:
        self._terminate()


_gi_ok: bool | None = None


def _system_python_has_rtsp_server() -> bool:
    global _gi_ok  # noqa: PLW0603
    if _gi_ok is None:
        probe = (
            "import gi; gi.require_version('Gst', '1.0'); gi.require_version('GstRtspServer', '1.0'); "
            "from gi.repository import Gst, GstRtspServer"
        )
        try:
            cmd = [SYSTEM_PYTHON, "-c", probe]
            result = subprocess.run(cmd, capture_output=True, timeout=30, check=False)
            _gi_ok = result.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _gi_ok = False
    return _gi_ok


@pytest.fixture
def rtsp_server() -> Iterator[Callable[..., RtspServer]]:
    if not _system_python_has_rtsp_server():
        reason = f"{SYSTEM_PYTHON} cannot import gi / GstRtspServer (python3-gi, gir1.2-gst-rtsp-server-1.0)"
        pytest.skip(reason)
    servers: list[RtspServer] = []

    def start(
        streams: dict[str, Path], port: int = 0, user: str | None = None, password: str | None = None
    ) -> RtspServer:
        server = RtspServer(streams, port, user, password)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()
