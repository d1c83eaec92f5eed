"""The bundled demo: synthetic conveyor cameras over real RTSP into a real local Redis.

    .venv/bin/python tools/demo.py [--seconds N]

1. renders three demo clips with tools/synth_video.py (once; cached in demo-data/),
2. starts redis-server on 127.0.0.1:6389 and the GStreamer RTSP server on 127.0.0.1:8554
   (tools/rtsp_server.py, run by Debian's python3, which has GStreamer's bindings),
3. runs `beltsight run -c configs/demo.toml` (JSON logs to demo-data/daemon.log),
4. prints detections live with `beltsight tail` until Ctrl-C (or --seconds).
Everything it started is stopped on exit.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "demo-data"
CONFIG = REPO / "configs" / "demo.toml"
REDIS_PORT = 6389
RTSP_PORT = 8554
SYSTEM_PYTHON = "/usr/bin/python3"

# camera id -> (width, height, fps, seed): one camera per model size.
CAMERAS = {
    "line1-infeed": (1280, 720, 10, 101),
    "line1-sorter": (640, 480, 10, 202),
    "line2-reject": (480, 360, 10, 303),
}
CLIP_SECONDS = 12


def render_clips() -> dict[str, Path]:
    sys.path.insert(0, str(REPO))
    from tools.synth_video import render_video  # noqa: PLC0415

    DATA.mkdir(exist_ok=True)
    clips = {}
    for cam, (w, h, fps, seed) in CAMERAS.items():
        clip = DATA / f"{cam}-{w}x{h}.mp4"
        if not clip.exists():
            print(f"demo: rendering {clip.name} ({w}x{h}, {fps} fps, {CLIP_SECONDS} s)", flush=True)
            render_video(clip, clip.with_suffix(".json"), w, h, fps, CLIP_SECONDS, seed)
        clips[cam] = clip
    return clips


def wait_for_line(proc: subprocess.Popen[str], prefix: str, timeout_s: float) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith(prefix):
            return line.strip()
        if not line and proc.poll() is not None:
            break
    raise RuntimeError(f"{proc.args!r} did not print {prefix!r} (exit code {proc.poll()})")


def start_redis() -> subprocess.Popen[str]:
    redis = shutil.which("redis-server")
    if redis is None:
        raise SystemExit("redis-server is not installed: run tools/bootstrap.sh first")
    proc = subprocess.Popen(
        [redis, "--port", str(REDIS_PORT), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.monotonic() + 10
    import redis as redis_py  # noqa: PLC0415

    client = redis_py.Redis(port=REDIS_PORT)
    while True:
        try:
            client.ping()
            break
        except redis_py.ConnectionError:
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"redis-server did not start on port {REDIS_PORT} (is the port taken?)") from None
            time.sleep(0.05)
    client.close()
    return proc


def start_rtsp(clips: dict[str, Path]) -> subprocess.Popen[str]:
    args = [SYSTEM_PYTHON, str(REPO / "tools" / "rtsp_server.py"), "--port", str(RTSP_PORT)]
    for cam, clip in clips.items():
        args += ["--stream", f"{cam}={clip}"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
    print("demo:", wait_for_line(proc, "READY", 20), flush=True)
    return proc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=0, help="stop after this long (default: Ctrl-C)")
    args = parser.parse_args()
    clips = render_clips()
    beltsight = str(Path(sys.executable).with_name("beltsight"))
    procs: list[subprocess.Popen[str]] = []
    try:
        procs.append(start_redis())
        procs.append(start_rtsp(clips))
        log = (DATA / "daemon.log").open("w")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        daemon = subprocess.Popen(
            [beltsight, "run", "-c", str(CONFIG)], stdout=log, stderr=subprocess.STDOUT, text=True, env=env
        )
        procs.append(daemon)
        print(f"demo: daemon started (logs: {log.name}); health: curl http://127.0.0.1:9108/healthz", flush=True)
        tail = subprocess.Popen([beltsight, "tail", "-c", str(CONFIG)], text=True)
        procs.append(tail)
        deadline = time.monotonic() + args.seconds if args.seconds else None
        while deadline is None or time.monotonic() < deadline:
            if daemon.poll() is not None:
                print(f"demo: the daemon exited with {daemon.returncode}; see {log.name}", file=sys.stderr)
                return 1
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        # One at a time, newest first: the daemon flushes to Redis before Redis goes away.
        for proc in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
