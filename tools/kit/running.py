"""The one way a tool starts the real daemon for a measurement, in two forms:

- `start_daemon(config)`: in this process, `Daemon` on a thread's event loop (the benches, which read
  the daemon's own objects: metrics, pipeline), returned once it serves (/healthz up);
  `RunningDaemon.stop` asks it to stop as SIGTERM would and joins it, `error` is what ended it early;
- `spawn_daemon(config, log)`: `python -m daemon run -c config` as its own process, its output
  appended to `log` (the soak, which kills and starves it, and the tracking eval); `stop_process`
  ends it with SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from daemon.config.seam import load_settings
from tools.kit.daemon_config import REPO

if TYPE_CHECKING:  # the daemon itself is imported when one starts: the demo only stops processes
    from daemon.app import Daemon
    from daemon.core.seam import Metrics


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
    errors: list[BaseException] = field(default_factory=list)

    @property
    def error(self) -> BaseException | None:
        return self.errors[0] if self.errors else None

    def stop(self, timeout_s: float = 60.0) -> None:
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.daemon.request_stop)
        self.thread.join(timeout_s)


def start_daemon(
    config: Path, *, metrics: Metrics | None = None, timeout_s: float = 120.0, device_standin: bool = False
) -> RunningDaemon:
    """The daemon of `config` (with `metrics`, else its own), running (its health endpoint up) on a
    thread of its own; RuntimeError if it ends before. `device_standin`: its lanes on the device path
    without a GPU, the GPU's work left out (`tools.kit.device_standin.BENCH`, the null-model bench)."""
    from daemon.app import Daemon  # noqa: PLC0415
    from daemon.core.seam import Metrics as DaemonMetrics  # noqa: PLC0415
    from tools.kit.device_standin import BENCH, StandInFactory  # noqa: PLC0415

    settings = load_settings(config)
    if device_standin:
        metrics = metrics or DaemonMetrics()
        factory = StandInFactory(settings.engine, metrics)
        daemon = Daemon(settings, metrics=metrics, config_path=config, engine_factory=factory, device=BENCH)
    else:
        daemon = Daemon(settings, metrics=metrics, config_path=config)
    loops: list[asyncio.AbstractEventLoop] = []
    errors: list[BaseException] = []

    def serve() -> None:
        async def run() -> None:
            loops.append(asyncio.get_running_loop())
            await daemon.run()

        try:
            asyncio.run(run())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=serve, name="daemon", daemon=True)
    thread.start()
    wait(
        lambda: not thread.is_alive() or (daemon.state == "running" and daemon.health is not None),
        timeout_s,
        "the daemon",
    )
    if not thread.is_alive():
        raise RuntimeError(f"the daemon ended while starting: {errors[0] if errors else 'no error'!r}")
    return RunningDaemon(daemon, loops[0], thread, errors)


def spawn_daemon(config: Path, log_path: Path, nofile: int = 0) -> subprocess.Popen[bytes]:
    """`python -m daemon run -c config`, its output appended to `log_path`, with RLIMIT_NOFILE `nofile` (0: as is)."""
    with log_path.open("ab") as log:  # the child keeps its own copy
        return subprocess.Popen(
            [*(with_nofile(nofile) if nofile else ()), sys.executable, "-m", "daemon", "run", "-c", str(config)],
            cwd=REPO,
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
        )


def with_nofile(nofile: int) -> list[str]:
    """The prefix that runs a command with RLIMIT_NOFILE `nofile` (util-linux `prlimit`, which sets it and
    execs the command): not a `preexec_fn`, which runs Python in the forked child (`tools.kit.leash`
    says why that can hang)."""
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        raise FileNotFoundError("prlimit (util-linux) is needed to start a process with a descriptor limit")
    return [prlimit, f"--nofile={nofile}:{nofile}", "--"]


def stop_process(proc: subprocess.Popen[Any], timeout_s: float = 30.0) -> None:
    """SIGTERM, then SIGKILL if it has not ended within `timeout_s`."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout_s)
    if proc.poll() is None:
        proc.kill()
        proc.wait()


__all__ = ["RunningDaemon", "spawn_daemon", "start_daemon", "stop_process", "wait"]
