"""The one launcher of the GStreamer RTSP server script (`tools/kit/rtsp_server.py`).

    server = RtspServer({"cam0": clip}, log_path=out / "rtsp.log").start()
    server.url("cam0"); server.urls            # rtsp://127.0.0.1:PORT/cam0
    server.kill(); server.restart()            # SIGKILL, then the same port and streams
    server.stop(); server.cont()               # SIGSTOP (clients hit their read timeout) / SIGCONT
    server.close()

The script runs under Debian's `/usr/bin/python3` (a venv cannot import gi), with the venv's
PYTHON* and VIRTUAL_ENV variables removed from its environment. `start()` waits for its READY line
(`port=0` lets it pick a free port, kept for restarts); its stderr goes to `log_path` (appended)
or a temporary file, and the last of it is in the error when it does not become ready.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import IO

from tools.kit.leash import spawn

SYSTEM_PYTHON = "/usr/bin/python3"
SERVER_SCRIPT = Path(__file__).resolve().with_name("rtsp_server.py")
READY_TIMEOUT_S = 20.0


def system_python_env() -> dict[str, str]:
    """This environment without the venv's PYTHON* / VIRTUAL_ENV (for Debian's python3)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}


class RtspServer:
    """One `rtsp_server.py` process serving `streams` (mount -> MP4 clip) on 127.0.0.1."""

    def __init__(
        self,
        streams: dict[str, Path],
        port: int = 0,
        user: str | None = None,
        password: str | None = None,
        *,
        log_path: Path | None = None,
        system_python: str = SYSTEM_PYTHON,
        new_session: bool = False,
        ready_timeout_s: float = READY_TIMEOUT_S,
    ) -> None:
        self.streams = dict(streams)
        self.port = port
        self.user = user
        self.password = password
        self.log_path = log_path
        self.system_python = system_python
        self.new_session = new_session
        self.ready_timeout_s = ready_timeout_s
        self.ready_line = ""  # "READY rtsp://127.0.0.1:PORT" once started
        self.urls: list[str] = []  # one per stream, in order, from the STREAM lines
        self.proc: subprocess.Popen[str] | None = None
        self._pump: threading.Thread | None = None
        self._stderr: IO[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def url(self, mount: str, *, credentials: bool = True) -> str:
        auth = f"{self.user}:{self.password}@" if credentials and self.user is not None else ""
        return f"rtsp://{auth}127.0.0.1:{self.port}/{mount}"

    def start(self) -> RtspServer:
        cmd = [self.system_python, str(SERVER_SCRIPT), "--port", str(self.port)]
        for mount, path in self.streams.items():
            cmd += ["--stream", f"{mount}={path}"]
        if self.user is not None and self.password is not None:
            cmd += ["--user", self.user, "--password", self.password]
        if self.log_path is not None:
            self._stderr = self.log_path.open("ab+")
        else:
            self._stderr = tempfile.NamedTemporaryFile(prefix="rtsp_server_", suffix=".err")  # noqa: SIM115
        self.proc = spawn(
            cmd,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            stdin=subprocess.DEVNULL,
            text=True,
            env=system_python_env(),
            start_new_session=self.new_session,
        )
        self.ready_line = self._wait_ready()
        self.port = int(self.ready_line.rsplit(":", 1)[1])
        return self

    def _wait_ready(self) -> str:
        assert self.proc is not None and self.proc.stdout is not None
        lines: queue.Queue[str] = queue.Queue()
        stdout = self.proc.stdout

        def pump() -> None:  # keeps the pipe drained until the process ends
            for text in stdout:
                lines.put(text.strip())
            lines.put("")  # EOF

        self._pump = threading.Thread(target=pump, daemon=True, name="rtsp-server-stdout")
        self._pump.start()
        self.urls = []
        deadline = time.monotonic() + self.ready_timeout_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                text = lines.get(timeout=left)
            except queue.Empty:
                break
            if text.startswith("STREAM "):
                self.urls.append(text.split()[2])
            if text.startswith("READY "):
                return text
            if text == "" and self.proc.poll() is not None:
                break
        code = self.proc.poll()
        err = self._stderr_text()
        self._terminate()
        raise RuntimeError(f"rtsp_server did not become ready (exit code {code}): {err}")

    def _stderr_text(self) -> str:
        if self._stderr is None:
            return ""
        self._stderr.flush()
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-4000:]

    def signal(self, signum: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL: clients see their stream end (no error)."""
        self._terminate()

    def stop(self) -> None:
        """SIGSTOP: the server freezes with connections open (clients hit their read timeout)."""
        self.signal(signal.SIGSTOP)

    def cont(self) -> None:
        self.signal(signal.SIGCONT)

    def terminate(self, timeout_s: float = 5.0) -> None:
        """SIGTERM (a clean exit), SIGKILL after `timeout_s`."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.send_signal(signal.SIGCONT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout_s)
        self._terminate()

    def restart(self, timeout_s: float = 10.0) -> RtspServer:
        """Kill if running, then start again with the same port and streams."""
        self._terminate()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return self.start()
            except RuntimeError:
                if time.monotonic() > deadline:  # e.g. the port is still held
                    raise
                time.sleep(0.2)

    def _terminate(self) -> None:
        proc, self.proc = self.proc, None
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
