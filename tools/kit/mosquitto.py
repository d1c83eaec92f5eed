"""A real Mosquitto MQTT broker on a loopback port, from a generated config (tests and benchmarks).

    broker = Mosquitto(workdir).start()            # plain MQTT on 127.0.0.1:<free port>
    broker = Mosquitto(workdir, tls=TlsFiles(ca, cert, key), require_certificate=True).start()
    broker.kill(); broker.restart()                # the same port again

Anonymous clients are allowed unless `password_file` (mosquitto_passwd format) is given.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from tools.kit.leash import spawn
from tools.kit.ports import free_port

START_TIMEOUT_S = 10.0


def find_mosquitto() -> str | None:
    return shutil.which("mosquitto") or next(
        (p for p in ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto") if Path(p).exists()), None
    )


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """The broker's CA (clients' certificates are checked against it too), certificate and key (PEM)."""

    ca: Path
    cert: Path
    key: Path


class Mosquitto:
    def __init__(
        self,
        workdir: Path,
        *,
        binary: str | None = None,
        tls: TlsFiles | None = None,
        require_certificate: bool = False,
        password_file: Path | None = None,
    ) -> None:
        found = binary or find_mosquitto()
        if found is None:
            raise RuntimeError("mosquitto not installed (Debian: apt-get install mosquitto)")
        self.binary = found
        self.workdir = workdir
        self.tls = tls
        self.require_certificate = require_certificate
        self.password_file = password_file
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"{'mqtts' if self.tls else 'mqtt'}://127.0.0.1:{self.port}"

    def _config(self) -> Path:
        lines = [
            "per_listener_settings false",
            f"listener {self.port} 127.0.0.1",
            "persistence false",
            f"log_dest file {self.workdir / 'mosquitto.log'}",
            "log_type error",
            "log_type warning",
            "log_type notice",
        ]
        if os.geteuid() == 0:  # else mosquitto drops to its own user, who cannot read the test's files
            lines.append("user root")
        if self.password_file is not None:
            lines += ["allow_anonymous false", f"password_file {self.password_file}"]
        else:
            lines.append("allow_anonymous true")
        if self.tls is not None:
            lines += [f"cafile {self.tls.ca}", f"certfile {self.tls.cert}", f"keyfile {self.tls.key}"]
            lines.append(f"require_certificate {'true' if self.require_certificate else 'false'}")
        path = self.workdir / "mosquitto.conf"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path

    def start(self) -> Mosquitto:
        """Start on a fresh free port (retrying if another process grabbed it first)."""
        for _ in range(5):
            self.port = free_port()
            if self._spawn():
                return self
        raise RuntimeError(f"mosquitto did not start: {self._log_tail()}")

    def restart(self, timeout_s: float = START_TIMEOUT_S) -> Mosquitto:
        """Start again on the same port."""
        self.kill()
        deadline = time.monotonic() + timeout_s
        while not self._spawn():
            if time.monotonic() > deadline:
                raise RuntimeError(f"mosquitto did not restart: {self._log_tail()}")
            time.sleep(0.1)
        return self

    def _spawn(self) -> bool:
        self.proc = spawn(
            [self.binary, "-c", str(self._config())], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return True
            except OSError:
                time.sleep(0.05)
        self.kill()
        return False

    def _log_tail(self) -> str:
        log = self.workdir / "mosquitto.log"
        return log.read_text(errors="replace")[-500:] if log.exists() else ""

    def kill(self) -> None:
        """SIGKILL (a broker crash) and wait."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()
