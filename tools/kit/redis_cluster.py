"""A real Redis Cluster on loopback: six cluster-enabled `redis-server` processes made into three
masters with one replica each by `redis-cli --cluster create ... --cluster-replicas 1 --cluster-yes`,
with a short `cluster-node-timeout` so that a failover takes seconds. Used by the tests' fixture
(tests/support/fixtures_redis_cluster.py) and the benches (tools/bench/cluster_hold.py).

    cluster = start_cluster(find_redis_server(), [tmp / f"node{i}" for i in range(6)])
    victim = cluster.master_of("beltsight:detections:cam1")
    victim.kill(); cluster.wait_promoted(victim, key); victim.restart(); cluster.wait_replicated()
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import redis
import redis.cluster
from redis.crc import key_slot

from tools.kit.ports import free_port, port_in_use
from tools.kit.redis_server import RedisServer

CLUSTER_NODE_TIMEOUT_MS = 1000


class ClusterNodeServer(RedisServer):
    """A cluster-enabled redis-server; its bus port (port + 10000) must be free too."""

    def _pick_port(self) -> int:
        for _ in range(50):
            port = free_port()
            if port + 10000 < 65536 and not port_in_use(port + 10000):
                return port
        raise RuntimeError("no free port pair for a cluster node")

    def ask(self, *command: str) -> Any:
        """One command on a short-lived connection (decode_responses=True)."""
        c = redis.Redis(
            host="127.0.0.1", port=self.port, decode_responses=True, socket_timeout=2, socket_connect_timeout=1
        )
        try:
            return c.execute_command(*command)  # type: ignore[no-untyped-call]
        finally:
            c.close()

    def cluster_info(self) -> dict[str, str]:
        reply = self.ask("CLUSTER", "INFO")
        if isinstance(reply, dict):
            return {str(k): str(v) for k, v in reply.items()}
        return dict(line.split(":", 1) for line in str(reply).splitlines() if ":" in line)

    def role(self) -> str:
        """'master' or 'slave', as this node sees itself."""
        return str(self.ask("ROLE")[0])


class RedisClusterProcs:
    """Six cluster nodes on loopback, made into 3 masters + 3 replicas by `redis-cli --cluster create`.

    cluster = redis_cluster()
    victim = cluster.master_of("beltsight:detections:cam1")
    victim.kill(); new = cluster.wait_promoted(victim); victim.restart(); cluster.wait_replicated()
    """

    def __init__(self, nodes: list[ClusterNodeServer]) -> None:
        self.nodes = nodes
        self._clients: list[redis.RedisCluster] = []

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def cli_options(self) -> list[str]:
        """redis-cli's options before its command (a subclass adds TLS); none here."""
        return []

    def create(self) -> RedisClusterProcs:
        cli = shutil.which("redis-cli") or "/usr/bin/redis-cli"
        addrs = [f"127.0.0.1:{n.port}" for n in self.nodes]
        proc = subprocess.run(
            [cli, *self.cli_options(), "--cluster", "create", *addrs, "--cluster-replicas", "1", "--cluster-yes"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {proc.stdout[-800:]} {proc.stderr[-400:]}")
        self.wait_replicated()
        return self

    def alive(self) -> list[ClusterNodeServer]:
        return [n for n in self.nodes if n.proc is not None and n.proc.poll() is None]

    def wait_replicated(self, timeout_s: float = 30.0) -> None:
        """Every live node sees the cluster ok, and every master has a replica linked."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if self._healthy():
                    return
            except (redis.RedisError, RuntimeError, OSError):
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the cluster did not become healthy with one linked replica per master")
            time.sleep(0.1)

    def _healthy(self) -> bool:
        nodes = self.alive()
        if any(n.cluster_info().get("cluster_state") != "ok" for n in nodes):
            return False
        masters = 0
        for node in nodes:
            if node.role() == "master":
                masters += 1
                info = node.ask("INFO", "replication")
                if int(info.get("connected_slaves", 0)) < 1 or "slave0" not in info:
                    return False
                if info["slave0"].get("state") != "online":
                    return False
        return masters == 3

    def master_of(self, key: str) -> ClusterNodeServer:
        slot = key_slot(key.encode())
        for node in self.alive():
            if node.role() != "master":
                continue
            slots = node.ask("CLUSTER", "SLOTS")
            for start, end, primary, *_replicas in slots:
                if int(start) <= slot <= int(end) and int(primary[1]) == node.port:
                    return node
        raise RuntimeError(f"no live master serves slot {slot}")

    def replica_of(self, master: ClusterNodeServer) -> ClusterNodeServer:
        info = master.ask("INFO", "replication")
        port = int(info["slave0"]["port"])
        return next(n for n in self.nodes if n.port == port)

    def wait_promoted(self, killed: ClusterNodeServer, key: str, timeout_s: float = 30.0) -> ClusterNodeServer:
        """After `killed` (the master of `key`) died: wait until a replica took its slots over."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                node = self.master_of(key)
                if node is not killed and node.cluster_info().get("cluster_state") == "ok":
                    return node
            except (redis.RedisError, RuntimeError, OSError):
                pass
            time.sleep(0.05)
        raise RuntimeError(f"no replica was promoted for {key!r} within {timeout_s} s")

    def client(self) -> redis.RedisCluster:
        """A sync cluster client (decode_responses=True) for assertions; closed at test end."""
        seeds = [redis.cluster.ClusterNode("127.0.0.1", n.port) for n in self.nodes]  # type: ignore[no-untyped-call]
        c = redis.RedisCluster(
            startup_nodes=seeds,
            decode_responses=True,
            require_full_coverage=False,  # keys of served slots stay readable while one is not
            socket_timeout=5,
        )
        self._clients.append(c)
        return c

    def close(self) -> None:
        for c in self._clients:
            c.close()
        self._clients.clear()
        for node in self.nodes:
            node.close()


def start_cluster(
    binary: str, data_dirs: list[Path], *, full_coverage: bool = True, appendonly: bool = False
) -> RedisClusterProcs:
    """Six nodes in `data_dirs`, started and made into a healthy cluster. `full_coverage=False`:
    `cluster-require-full-coverage no`, so the slots of a shard without a master fail alone;
    `appendonly`: every write in the AOF (fsync'd every second), so a node killed (SIGKILL: the
    OS keeps its writes) restarts with everything it acknowledged.
    On failure the nodes started are closed."""
    nodes = []
    for data_dir in data_dirs:
        data_dir.mkdir(parents=True, exist_ok=True)
        args = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
        args += ["--cluster-node-timeout", str(CLUSTER_NODE_TIMEOUT_MS), "--repl-diskless-sync-delay", "0"]
        args += ["--cluster-require-full-coverage", "yes" if full_coverage else "no"]
        args += ["--appendfsync", "everysec"]  # a killed process loses nothing the OS has: no fsync per write
        nodes.append(ClusterNodeServer(binary, data_dir, extra_args=args, appendonly=appendonly))
    cluster = RedisClusterProcs(nodes)
    try:
        for node in nodes:
            node.start()
        return cluster.create()
    except BaseException:
        cluster.close()
        raise


__all__ = ["CLUSTER_NODE_TIMEOUT_MS", "ClusterNodeServer", "RedisClusterProcs", "start_cluster"]
