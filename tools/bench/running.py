"""The one way a bench runs the real daemon in its own process: `start_daemon(config)` loads the config,
runs `Daemon` on a thread's event loop and waits until it serves; `RunningDaemon.stop` asks it to stop
as SIGTERM would and joins it. The bench then reads the daemon's own objects (metrics, pipeline)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from daemon.app import Daemon
from daemon.config.seam import load_settings


def wait(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Until `predicate()` holds; SystemExit naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.01)


@dataclass(frozen=True, slots=True)
class RunningDaemon:
    daemon: Daemon
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread

    def stop(self, timeout_s: float = 60.0) -> None:
        self.loop.call_soon_threadsafe(self.daemon.request_stop)
        self.thread.join(timeout_s)


def start_daemon(config: Path, timeout_s: float = 120.0) -> RunningDaemon:
    """The daemon of `config`, running (its health endpoint up) on a thread of its own."""
    daemon = Daemon(load_settings(config), config_path=config)
    loops: list[asyncio.AbstractEventLoop] = []

    def serve() -> None:
        async def run() -> None:
            loops.append(asyncio.get_running_loop())
            await daemon.run()

        asyncio.run(run())

    thread = threading.Thread(target=serve, name="daemon")
    thread.start()
    wait(lambda: bool(loops) and daemon.state == "running" and daemon.health is not None, timeout_s, "the daemon")
    return RunningDaemon(daemon, loops[0], thread)


__all__ = ["RunningDaemon", "start_daemon", "wait"]
