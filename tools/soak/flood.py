"""The child processes of `tools/soak.py` and what they are started with.

`RtspProc` (one `tools/rtsp_server.py` per camera, run by Debian's python3) and `RedisProc`
(`redis-server` with AOF, `appendfsync always`) restart on the same port, so a fault can kill one
and bring it back; `kill_proc` SIGKILLs a child (a SIGSTOPped one too). `FloodProc` floods the
health endpoint from its own process (`Flood`, also used by tests/integration/ops/test_http_flood.py):

    python -m tools.soak_procs flood PORT CONNECTIONS

`render_clips` renders the cameras' clips and `write_config` the daemon's config.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import resource
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.fixtures_redis import free_port

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


FLOOD_KINDS = ("slow", "slow", "idle", "slow", "idle", "oversized", "garbage")


@dataclass
class Flood:
    """`connections` hostile HTTP clients on their own event loop in a thread, each reconnecting
    0.3-1 s after the server closed it: slow senders (a request line, then a header line every
    3 s, never the end), idle connections, 64 KiB request lines, and binary garbage."""

    port: int
    connections: int
    opened: int = 0
    closed_by_server: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), name="http-flood", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    async def _main(self) -> None:
        kinds = itertools.cycle(FLOOD_KINDS)
        clients = [asyncio.create_task(self._client(next(kinds), i)) for i in range(self.connections)]
        await asyncio.to_thread(self._stop.wait)
        for task in clients:
            task.cancel()
        await asyncio.gather(*clients, return_exceptions=True)

    async def _client(self, kind: str, index: int) -> None:
        rng = random.Random(index)
        await asyncio.sleep(rng.uniform(0, 1.0))
        while not self._stop.is_set():
            writer = None
            try:
                reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", self.port), 5)
                self.opened += 1
                await self._behave(kind, rng, reader, writer)
                self.closed_by_server += 1
            except (OSError, TimeoutError):
                pass
            finally:
                if writer is not None:
                    writer.close()
            await asyncio.sleep(rng.uniform(0.3, 1.0))

    @staticmethod
    async def _behave(
        kind: str, rng: random.Random, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Misbehave until the server closes the connection (read returns EOF)."""
        if kind == "slow":
            writer.write(b"GET /healthz HTTP/1.1\r\n")
            while not reader.at_eof():
                writer.write(f"X-Slow-{rng.randrange(10**6)}: {'a' * 20}\r\n".encode())
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(reader.read(4096), 3.0)
            return
        if kind == "oversized":
            writer.write(b"GET /" + b"a" * 65536 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        elif kind == "garbage":
            writer.write(bytes(rng.randrange(256) for _ in range(2048)))
        with contextlib.suppress(OSError):
            await writer.drain()
        while await reader.read(65536):
            pass


class FloodProc:
    """A `Flood` in a child process (its descriptors are its own): `end` asks it to stop without
    waiting, `stop` waits for it and returns its counts."""

    def __init__(self, port: int, connections: int, log_path: Path) -> None:
        self.port, self.connections, self.log_path = port, connections, log_path
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        cmd = [sys.executable, "-m", "tools.soak_procs", "flood", str(self.port), str(self.connections)]
        with self.log_path.open("ab") as err:
            self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=err, text=True)

    def end(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def stop(self) -> dict[str, int]:
        if self.proc is None:
            return {}
        self.end()
        try:
            out, _ = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            kill_proc(self.proc)
            return {}
        finally:
            self.proc = None
        with contextlib.suppress(ValueError):
            return dict(json.loads(out.strip().splitlines()[-1]))
        return {}


def flood_main(port: int, connections: int) -> None:
    """Flood until SIGTERM, then print the counts as one JSON line."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + 256
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(
            resource.RLIMIT_NOFILE, (wanted if hard == resource.RLIM_INFINITY else min(wanted, hard), hard)
        )
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda _s, _f: done.set())
    flood = Flood(port, connections)
    flood.start()
    while not done.wait(0.5):
        pass
    print(json.dumps({"opened": flood.opened, "closed_by_server": flood.closed_by_server}), flush=True)
    os._exit(0)  # at once: the kernel closes the flood's connections (cancelling 1500 clients took seconds)


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


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "flood":
        flood_main(int(sys.argv[2]), int(sys.argv[3]))
    else:
        sys.exit(f"usage: python -m tools.soak_procs flood PORT CONNECTIONS (got {sys.argv[1:]})")
