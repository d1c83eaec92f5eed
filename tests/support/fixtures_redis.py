"""Real `redis-server` processes for tests, on free loopback ports, killed and restarted at will.

    def test_x(redis_server):
        server = redis_server(appendonly=True, password="s3cret")
        server.kill(); server.restart()
        assert server.client().xlen("k") == 0

Every server started by the factory is stopped, and every `client()` closed, at test end.
A Redis Cluster (`redis_cluster`) and TLS servers (`redis_tls_server`, `tls_material`) are in
tests/support/fixtures_redis_cluster.py and tests/support/fixtures_redis_tls.py, registered from here.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
import redis

START_TIMEOUT_S = 5.0


def find_redis_server() -> str | None:
    return shutil.which("redis-server") or ("/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists() else None)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RedisServer:
    """One redis-server process bound to 127.0.0.1; the port and data dir survive restarts.

    `acl_users` are ACL rules for extra users, e.g. `"writer on >pw ~beltsight:* +xadd"`.
    """

    def __init__(
        self,
        binary: str,
        data_dir: Path,
        *,
        appendonly: bool = False,
        password: str | None = None,
        acl_users: Sequence[str] = (),
        extra_args: Sequence[str] = (),
    ) -> None:
        self.binary = binary
        self.data_dir = data_dir
        self.appendonly = appendonly
        self.password = password
        self.acl_users = tuple(acl_users)
        self.extra_args = tuple(extra_args)
        self.port = 0
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
        """Start on a fresh free port (retrying if another process grabbed it first)."""
        last_error = ""
        for _ in range(5):
            self.port = self._pick_port()
            try:
                self._spawn()
                return self
            except RuntimeError as exc:
                last_error = str(exc)
        raise RuntimeError(f"redis-server did not start: {last_error}")

    def restart(self) -> RedisServer:
        """Start again on the same port with the same data dir (AOF data comes back)."""
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                self._spawn()
                return self
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _spawn(self) -> None:
        self.proc = subprocess.Popen(self._argv(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + START_TIMEOUT_S
        probe = self._probe()
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    if probe.ping():
                        return
                except redis.BusyLoadingError:
                    pass
                except redis.ConnectionError:
                    pass
                time.sleep(0.01)
        finally:
            probe.close()
        err = self._reap()
        raise RuntimeError(f"port {self.port}: {err or 'no PING reply'}; log: {self._log_tail()}")

    def _reap(self) -> str:
        proc, self.proc = self.proc, None
        if proc is None:
            return ""
        if proc.poll() is None:
            proc.kill()
        _, stderr = proc.communicate(timeout=5)
        return stderr.decode(errors="replace").strip()

    def _log_tail(self) -> str:
        path = self.data_dir / "redis.log"
        return path.read_text(errors="replace")[-500:] if path.exists() else ""

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

    def stop(self) -> None:
        """SIGTERM and wait (falls back to SIGKILL)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.send_signal(signal.SIGCONT)  # a frozen server handles the SIGTERM too
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
        self._reap()

    def client(self, *, password: str | None = None, user: str | None = None) -> redis.Redis:
        """A sync client (decode_responses=True) for assertions; closed at test end."""
        c = redis.Redis(
            host="127.0.0.1",
            port=self.port,
            username=user,
            password=self.password if password is None else password,
            decode_responses=True,
            socket_timeout=5,
        )
        self._clients.append(c)
        return c

    def close(self) -> None:
        for c in self._clients:
            c.close()
        self._clients.clear()
        self.stop()


RedisServerFactory = Callable[..., RedisServer]


@pytest.fixture
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServerFactory]:
    """Factory: `redis_server(appendonly=False, password=None, acl_users=(), replica_of=None)` -> started
    RedisServer; with `replica_of` (a started RedisServer) it replicates that one (`--replicaof`)."""
    binary = find_redis_server()
    if binary is None:
        pytest.skip("redis-server not installed (Debian: apt-get install redis-server)")
    servers: list[RedisServer] = []

    def start(
        *,
        appendonly: bool = False,
        password: str | None = None,
        acl_users: Sequence[str] = (),
        replica_of: RedisServer | None = None,
    ) -> RedisServer:
        data_dir = tmp_path_factory.mktemp("redis")
        extra = ["--replicaof", "127.0.0.1", str(replica_of.port)] if replica_of is not None else []
        server = RedisServer(
            binary, data_dir, appendonly=appendonly, password=password, acl_users=acl_users, extra_args=extra
        )
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.close()


# Clusters and TLS servers live in their own modules; importing the fixtures here registers them.
from tests.support.fixtures_redis_cluster import redis_cluster  # noqa: E402
from tests.support.fixtures_redis_tls import redis_tls_server, tls_material  # noqa: E402

__all__ = ["redis_cluster", "redis_server", "redis_tls_server", "tls_material"]
