"""The child processes of `tools/soak.py` and what they are started with.

`RtspProc` (one `tools/rtsp_server.py` per camera, run by Debian's python3) and `RedisProc`
(`redis-server` with AOF, `appendfsync always`) restart on the same port, so a fault can kill one
and bring it back; `kill_proc` SIGKILLs a child (a SIGSTOPped one too). `render_clips` renders the
cameras' clips and `write_config` the daemon's config.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from tests.fixtures_redis import free_port

REPO = Path(__file__).resolve().parents[1]
SYSTEM_PYTHON = "/usr/bin/python3"
RTSP_SCRIPT = REPO / "tools" / "rtsp_server.py"
CAMERA_SIZES = ((640, 480), (1280, 720))


# -- child processes ----------------------------------------------------------------------------
class RtspProc:
    """One RTSP server for one camera; restarts keep the port."""

    def __init__(self, mount: str, clip: Path, log_path: Path) -> None:
        self.mount, self.clip, self.log_path = mount, clip, log_path
        self.port = 0
        self.proc: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"rtsp://127.0.0.1:{self.port}/{self.mount}"

    def start(self) -> None:
        deadline = time.monotonic() + 20
        while True:
            try:
                self._spawn()
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)  # the port may still be held right after a kill

    def _spawn(self) -> None:
        cmd = [SYSTEM_PYTHON, str(RTSP_SCRIPT), "--port", str(self.port), "--stream", f"{self.mount}={self.clip}"]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        with self.log_path.open("ab") as err:
            proc = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True, env=env
            )
        assert proc.stdout is not None
        ready: list[str] = []

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                if line.startswith("READY "):
                    ready.append(line.split()[1])
                    break
            for _line in proc.stdout:  # keep the pipe drained until the process ends
                pass

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + 20
        while not ready and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if not ready:
            kill_proc(proc)
            raise RuntimeError(f"rtsp_server for {self.mount} did not become ready")
        self.proc = proc
        self.port = int(ready[0].rsplit(":", 1)[1])

    def kill(self) -> None:
        kill_proc(self.proc)
        self.proc = None

    def signal(self, signum: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signum)


class RedisProc:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        import redis  # noqa: PLC0415

        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        argv += ["--dir", str(self.data_dir), "--logfile", str(self.data_dir / "redis.log")]
        argv += ["--appendonly", "yes", "--appendfsync", "always"]
        deadline = time.monotonic() + 15
        while True:
            self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            probe = redis.Redis(port=self.port, socket_timeout=0.5, socket_connect_timeout=0.5)
            try:
                while self.proc.poll() is None and time.monotonic() < deadline:
                    with contextlib.suppress(redis.ConnectionError, redis.BusyLoadingError):
                        if probe.ping():
                            return
                    time.sleep(0.02)
            finally:
                probe.close()
            kill_proc(self.proc)
            if time.monotonic() > deadline:
                raise RuntimeError(f"redis-server did not start on port {self.port}")
            time.sleep(0.2)

    def kill(self) -> None:
        kill_proc(self.proc)
        self.proc = None

    def client(self) -> Any:
        import redis  # noqa: PLC0415

        return redis.Redis(port=self.port, decode_responses=True, socket_timeout=30)


def kill_proc(proc: subprocess.Popen[Any] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.kill()  # SIGKILL also ends a SIGSTOPped process
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


# -- setup --------------------------------------------------------------------------------------
def render_clips(out: Path, cameras: int, seconds: float) -> list[Path]:
    from tools.synth_video import render_video  # noqa: PLC0415

    clips = []
    for i in range(cameras):
        w, h = CAMERA_SIZES[i % len(CAMERA_SIZES)]
        path = out / "clips" / f"cam{i}-{w}x{h}.mp4"
        if not path.exists():
            render_video(path, path.with_suffix(".json"), w, h, 10, seconds, 100 + i)
        clips.append(path)
    return clips


def write_config(
    path: Path, *, redis_url: str, health_port: int, spool: Path, cameras: list[tuple[str, str]], rebuild_every: int
) -> None:
    models = "\n".join(f'{s} = "{REPO / "models" / f"conveyor-{s}.onnx"}"' for s in (416, 640, 800))
    cams = "\n".join(
        f'[[cameras]]\nid = "{cid}"\nurl = "{url}"\nread_timeout_s = 2.0\nstall_s = 5.0\n' for cid, url in cameras
    )
    path.write_text(
        f"""shutdown_grace_s = 15.0

[redis]
url = "{redis_url}"
spool_dir = "{spool}"

[models]
{models}

[engine]
providers = ["cpu"]
max_batch = 4
max_wait_ms = 20

[engine.rebuild]
every_frames = {rebuild_every}

[health]
listen = "127.0.0.1:{health_port}"

[logging]
format = "json"

{cams}"""
    )
