"""Fixtures for video tests: H.264 clips made with PyAV, and a real GStreamer RTSP server.

`clip_factory(width, height, fps=10, seconds=2.0, seed=0, synthetic=None) -> Clip` renders an MP4
(libx264, yuv420p, no B-frames, GOP = fps) once per session per argument set. With
`synthetic=None` it uses `tools.kit.synth.video.render_video` (conveyor scenes with ground truth) when that
exists, else a fast moving-pattern clip; `synthetic=False` always makes the fast pattern clip.

`rtsp_server(streams, port=0, user=None, password=None) -> RtspServer` starts
tools.kit.rtsp.RtspServer: `/usr/bin/python3 tools/kit/rtsp_server.py` (Debian's Python: a
venv cannot import gi), waiting for its READY line. The server can be killed (SIGKILL), frozen
(SIGSTOP), thawed (SIGCONT) and restarted on the same port; every server is closed at the end of the test.
"""

from __future__ import annotations

import importlib
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tools.kit.rtsp import SYSTEM_PYTHON, RtspServer
from tools.kit.synth.video import h264_writer

__all__ = ["Clip", "RtspServer", "clip_factory", "render_pattern_clip", "rtsp_server"]


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
        synth = importlib.import_module("tools.kit.synth.video")
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
            pytest.skip("tools.kit.synth.video.render_video is not available")
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
        return server.start()

    yield start
    for server in servers:
        server.close()
