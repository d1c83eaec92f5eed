"""The one `redis-server` launcher: tools (demo, bench, soak) and the test fixtures start Redis here.

    server = RedisServer(find_redis_server() or "redis-server", data_dir, appendonly=True).start()
    server.kill(); server.restart()          # SIGKILL, then the same port and data dir (AOF back)
    server.freeze(); server.thaw()           # SIGSTOP / SIGCONT
    server.client().xlen("k"); server.close()

`port=0` (the default) picks a free loopback port at `start()` (retrying if another process took
it first); a fixed `port` is used as is. `data_dir=None` writes no files (no --dir, no logfile).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import redis

from tools.kit.leash import spawn
from tools.kit.ports import free_port

START_TIMEOUT_S = 5.0


def find_redis_server() -> str | None:
    return shutil.which("redis-server") or ("/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None)


class RedisServer:
    """One redis-server process bound to 127.0.0.1; the port and data dir survive restarts.

    `acl_users` are ACL rules for extra users, e.g. `"writer on >pw ~beltsight:* +xadd"`;
    `new_session` starts it in its own session (a terminal's Ctrl-C does not reach it).
    """

    def __init__(
        self,
        binary: str,
        data_dir: Path | None,
        *,
        port: int = 0,
        appendonly: bool = False,
        password: str | None = None,
        acl_users: Sequence[str] = (),
        extra_args: Sequence[str] = (),
        new_session: bool = False,
        start_timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        self.binary = binary
        self.data_dir = data_dir
        self.fixed_port = port
        self.appendonly = appendonly
        self.password = password
        self.acl_users = tuple(acl_users)
        self.extra_args = tuple(extra_args)
        self.new_session = new_session
        self.start_timeout_s = start_timeout_s
        self.port = port
        self.proc: subprocess.Popen[bytes] | None = None
        self._clients: list[redis.Redis] = []

    @property
    def url(self) -> str:
        """URL without credentials (see `auth_url`)."""
        return f"redis://127.0.0.1:{self.port}/0"

    def auth_url(self, password: str | None = None, user: str | None = None) -> str:
        pw = self.password if password is None else password
        return f"redis://{user or ''}:{pw}@127.0.0.1:{self.port}/0"

    def _argv(self) -> list[str]:
        argv = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
        if self.data_dir is not None:
            argv += ["--dir", str(self.data_dir), "--logfile", str(self.data_dir / "redis.log")]
        if self.appendonly:
            argv += ["--appendonly", "yes", "--appendfsync", "always"]
        else:
            argv += ["--appendonly", "no"]
        if self.password is not None:
            argv += ["--requirepass", self.password]
        for rule in self.acl_users:
            argv += ["--user", *rule.split()]
        return argv + list(self.extra_args)

    def _pick_port(self) -> int:
        return free_port()

    def _probe(self) -> redis.Redis:
        return redis.Redis(
            host="127.0.0.1",
            port=self.port,
            password=self.password,
            socket_timeout=0.5,
            socket_connect_timeout=0.5,
        )

    def start(self) -> RedisServer:
        """Start on the fixed port, or on a fresh free one (retrying if another process grabbed it first)."""
        if self.fixed_port:
            self._spawn()
            return self
        last_error = ""
        for _ in range(5):
            self.port = self._pick_port()
            try:
                self._spawn()
                return self
            except RuntimeError as exc:
                last_error = str(exc)
        raise RuntimeError(f"redis-server did not start: {last_error}")

    def restart(self, timeout_s: float = START_TIMEOUT_S) -> RedisServer:
        """Start again on the same port with the same data dir (AOF data comes back)."""
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._spawn()
                return self
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _spawn(self) -> None:
        self.proc = spawn(
            self._argv(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=self.new_session
        )
        deadline = time.monotonic() + self.start_timeout_s
        probe = self._probe()
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                with contextlib.suppress(redis.BusyLoadingError, redis.ConnectionError):
                    if probe.ping():
                        return
                time.sleep(0.01)
        finally:
            probe.close()
        code = self.proc.poll()
        err = self._reap()
        raise RuntimeError(f"port {self.port} (exit code {code}): {err or 'no PING reply'}; log: {self._log_tail()}")

    def _reap(self) -> str:
        proc, self.proc = self.proc, None
        if proc is None:
            return ""
        if proc.poll() is None:
            proc.kill()
        _, stderr = proc.communicate(timeout=5)
        return stderr.decode(errors="replace").strip()

    def _log_tail(self) -> str:
        path = self.data_dir / "redis.log" if self.data_dir is not None else None
        return path.read_text(errors="replace")[-500:] if path is not None and path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no shutdown save, connections reset (what a crash or OOM kill looks like)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self._reap()

    def freeze(self) -> None:
        """SIGSTOP: the process stays, answers nothing (a hung or partitioned node)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    def stop(self, timeout_s: float = 5.0) -> None:
        """SIGTERM and wait (falls back to SIGKILL)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.send_signal(signal.SIGCONT)  # a frozen server handles the SIGTERM too
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=timeout_s)
        self._reap()

    def client(self, *, password: str | None = None, user: str | None = None, timeout_s: float = 5) -> redis.Redis:
        """A sync client (decode_responses=True) for assertions; closed by `close()`."""
        c = redis.Redis(
            host="127.0.0.1",
            port=self.port,
            username=user,
            password=self.password if password is None else password,
            decode_responses=True,
            socket_timeout=timeout_s,
        )
        self._clients.append(c)
        return c

    def close(self) -> None:
        for c in self._clients:
            c.close()
        self._clients.clear()
        self.stop()


@contextlib.contextmanager
def temporary_redis() -> Iterator[tuple[int, Path]]:
    """A redis-server on a free loopback port with a scratch directory, for a benchmark's run:
    (port, directory); SystemExit naming the cause when it does not start; killed on exit."""
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(find_redis_server() or "redis-server", Path(tmp))
        try:
            server.start()
        except RuntimeError as exc:
            raise SystemExit(f"redis-server did not start: {exc}") from None
        try:
            yield server.port, Path(tmp)
        finally:
            server.kill()
