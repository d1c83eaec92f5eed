"""The demo's processes: redis-server, the RTSP server and `beltsight run` / `beltsight bridge` started (each in
a session of its own, so Ctrl-C reaches the demo only), waited for until READY (`/healthz`), watched while
the demo runs (`Children`) and stopped one at a time, newest first (`stop_all`). `DemoFailed` is how any
of it fails; `say` how the demo speaks.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.kit.redis_server import RedisServer
from tools.kit.rtsp import RtspServer

READY_TIMEOUT_S = 180.0


class DemoFailed(Exception):
    """The demo did not work; `str()` is the one-line reason."""


def say(message: str, *, err: bool = False) -> None:
    print(f"demo: {message}", file=sys.stderr if err else sys.stdout, flush=True)


def start_redis(redis_server: str, port: int) -> RedisServer:
    server = RedisServer(redis_server, None, port=port, new_session=True, start_timeout_s=10)
    try:
        return server.start()
    except RuntimeError as exc:
        raise DemoFailed(f"redis-server did not start on {exc}") from None


def start_rtsp(system_python: str, port: int, clips: dict[str, Path], log: Path) -> RtspServer:
    server = RtspServer(clips, port, log_path=log, system_python=system_python, new_session=True, ready_timeout_s=30)
    try:
        server.start()
    except RuntimeError as exc:
        raise DemoFailed(f"the RTSP server did not start: {exc}") from None
    say(server.ready_line)
    return server


def fetch_health(port: int) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=0.5) as resp:
            body: dict[str, Any] = json.load(resp)
            return body
    except urllib.error.HTTPError as exc:  # 503 while degraded still carries the report
        with contextlib.suppress(ValueError):
            report: dict[str, Any] = json.loads(exc.read())
            return report
        return None
    except (OSError, ValueError):
        return None


def wait_ready(proc: subprocess.Popen[str], health_port: int, log: Path, what: str = "the daemon") -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise DemoFailed(f"{what} exited with code {proc.returncode} before READY; see {log}")
        report = fetch_health(health_port)
        if report is not None and report.get("ok"):
            return
        time.sleep(0.25)
    raise DemoFailed(f"{what} was not READY within {READY_TIMEOUT_S:.0f} s; see {log}")


def start_beltsight(command: str, config: Path, log: Path) -> subprocess.Popen[str]:
    """`beltsight <command> -c config`, its output into `log`, in a session of its own (Ctrl-C reaches
    the demo only; it stops each child once, in order)."""
    beltsight = str(Path(sys.executable).with_name("beltsight"))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with log.open("w") as log_file:
        return subprocess.Popen(
            [beltsight, command, "-c", str(config)],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
        )


@dataclass(frozen=True, slots=True)
class Children:
    """The processes the demo watches, with their logs."""

    daemon: subprocess.Popen[str]
    daemon_log: Path
    bridge: subprocess.Popen[str]
    bridge_log: Path

    def check_running(self) -> None:
        for what, proc, log in (("daemon", self.daemon, self.daemon_log), ("bridge", self.bridge, self.bridge_log)):
            if proc.poll() is not None:
                raise DemoFailed(f"the {what} exited with code {proc.returncode}; see {log}")


def stop_all(stops: list[Callable[[], None]]) -> None:
    # One at a time, newest first: the daemon flushes to Redis before Redis goes away.
    for stop in reversed(stops):
        stop()
