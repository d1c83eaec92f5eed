"""Redis under Sentinel: a master, its replica and three sentinels (`redis-server --sentinel` with a
sentinel.conf written here: quorum 2, a master down after 500 ms, failover timeout 2 s), all real
processes on free loopback ports. The test fixture (tests/support/fixtures_redis_sentinel.py) and the
soak (tools/soak) start theirs with `start_group`.

    group = start_group(find_redis_server(), lambda name: tmp / name)
    old = group.master; old.kill(); new = group.wait_promoted(old); old.restart(); group.wait_replicated()

Debian's `redis-sentinel` package is not needed: the redis-server binary runs as a sentinel.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from tools.kit.redis_server import RedisServer

MASTER_NAME = "beltsight"
DOWN_AFTER_MS = 500
FAILOVER_TIMEOUT_MS = 2000


def ask(port: int, *command: str, password: str | None = None) -> Any:
    """One command on a short-lived connection to 127.0.0.1:`port` (decode_responses=True)."""
    c = redis.Redis(port=port, password=password, decode_responses=True, socket_timeout=2, socket_connect_timeout=1)
    try:
        return c.execute_command(*command)  # type: ignore[no-untyped-call]
    finally:
        c.close()


class SentinelServer(RedisServer):
    """`redis-server <data_dir>/sentinel.conf --sentinel`, monitoring 127.0.0.1:`master_port` as `name`."""

    def __init__(self, binary: str, data_dir: Path, *, name: str, master_port: int, password: str | None) -> None:
        super().__init__(binary, data_dir, password=password)
        self.name = name
        self.master_port = master_port

    def _argv(self) -> list[str]:
        assert self.data_dir is not None
        conf = self.data_dir / "sentinel.conf"  # sentinel rewrites it: written afresh for each port tried
        lines = [
            f"port {self.port}",
            "bind 127.0.0.1",
            f"dir {self.data_dir}",
            f"logfile {self.data_dir / 'sentinel.log'}",
            f"sentinel monitor {self.name} 127.0.0.1 {self.master_port} 2",
            f"sentinel down-after-milliseconds {self.name} {DOWN_AFTER_MS}",
            f"sentinel failover-timeout {self.name} {FAILOVER_TIMEOUT_MS}",
            f"sentinel parallel-syncs {self.name} 1",
        ]
        if self.password is not None:  # the sentinels talk to each other with it too
            lines += [f"requirepass {self.password}", f"sentinel sentinel-pass {self.password}"]
        conf.write_text("\n".join(lines) + "\n")
        return [self.binary, str(conf), "--sentinel"]

    def ask(self, *command: str) -> Any:
        return ask(self.port, *command, password=self.password)

    def master_addr(self) -> tuple[str, int] | None:
        reply = self.ask("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.name)
        return (str(reply[0]), int(reply[1])) if reply else None

    def master_state(self) -> dict[str, str]:
        reply = self.ask("SENTINEL", "MASTER", self.name)
        if isinstance(reply, dict):
            return {str(k): str(v) for k, v in reply.items()}
        return {str(k): str(v) for k, v in zip(reply[::2], reply[1::2], strict=True)}


class SentinelGroup:
    """A master, its replica (both RedisServer) and three sentinels watching them as `name`."""

    def __init__(self, master: RedisServer, replica: RedisServer, sentinels: list[SentinelServer]) -> None:
        self.name = MASTER_NAME
        self.servers = [master, replica]
        self.master = master
        self.replica = replica
        self.sentinels = sentinels

    @property
    def addresses(self) -> list[str]:
        """The sentinels as `[redis] sentinels` lists them."""
        return [f"127.0.0.1:{s.port}" for s in self.sentinels]

    def wait_ready(self, timeout_s: float = 30.0) -> None:
        """Every sentinel sees the master up, its replica and the two other sentinels."""
        self._wait(self._ready, timeout_s, "the sentinels to see the master, its replica and each other")

    def _ready(self) -> bool:
        for sentinel in self.sentinels:
            state = sentinel.master_state()
            if "s_down" in state.get("flags", "") or int(state.get("num-slaves", 0)) < 1:
                return False
            if int(state.get("num-other-sentinels", 0)) < len(self.sentinels) - 1:
                return False
        return self.replicated()

    def current_master(self) -> RedisServer:
        """The server the sentinels name master now (a majority of them agreeing), which says so itself."""
        addrs = [s.master_addr() for s in self.sentinels]
        for server in self.servers:
            if addrs.count(("127.0.0.1", server.port)) >= 2 and self._role(server) == "master":
                return server
        raise RuntimeError(f"no agreed master: sentinels say {addrs}")

    def wait_promoted(self, old: RedisServer, timeout_s: float = 60.0) -> RedisServer:
        """After `old` died: the sentinels agree on the replica, promoted. Returns it."""
        promoted: list[RedisServer] = []

        def done() -> bool:
            server = self.current_master()
            if server is old:
                return False
            promoted.append(server)
            return True

        self._wait(done, timeout_s, "a sentinel failover to the replica")
        self.master, self.replica = promoted[-1], old
        return promoted[-1]

    def replicated(self) -> bool:
        info = ask(self.master.port, "INFO", "replication", password=self.master.password)
        slave = info.get("slave0")
        return isinstance(slave, dict) and slave.get("state") == "online"

    def wait_replicated(self, timeout_s: float = 60.0) -> None:
        """The current master has its replica linked and in sync (the restarted old master, re-pointed
        by the sentinels)."""
        self._wait(self.replicated, timeout_s, "the master to have an online replica")

    @staticmethod
    def _role(server: RedisServer) -> str:
        return str(ask(server.port, "ROLE", password=server.password)[0])

    @staticmethod
    def _wait(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if predicate():
                    return
            except (redis.RedisError, RuntimeError, OSError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {timeout_s} s waiting for {what}")
            time.sleep(0.05)

    def close(self) -> None:
        for node in [*self.sentinels, *self.servers]:
            node.close()


def start_group(
    binary: str,
    make_dir: Callable[[str], Path],
    *,
    sentinel_password: str | None = None,
    appendonly: bool = False,
) -> SentinelGroup:
    """A ready group: the master, its replica and three sentinels, each in its own `make_dir(name)`
    (names `sentinel-master`, `sentinel-replica`, `sentinel0`..`sentinel2`). `appendonly`: AOF on both
    servers (`appendfsync always`), so a killed master restarted as replica loses nothing it acked."""
    sync = ["--repl-diskless-sync-delay", "0"]
    master = RedisServer(binary, make_dir("sentinel-master"), appendonly=appendonly, extra_args=sync).start()
    replica_args = [*sync, "--replicaof", "127.0.0.1", str(master.port)]
    replica = RedisServer(binary, make_dir("sentinel-replica"), appendonly=appendonly, extra_args=replica_args)
    sentinels = [
        SentinelServer(
            binary, make_dir(f"sentinel{i}"), name=MASTER_NAME, master_port=master.port, password=sentinel_password
        )
        for i in range(3)
    ]
    group = SentinelGroup(master, replica, sentinels)
    try:
        replica.start()
        for sentinel in sentinels:
            sentinel.start()
        group.wait_ready()
    except BaseException:
        group.close()
        raise
    return group
