"""The faults `python -m tools.soak` injects beyond camera kills, stalls, Redis kills and floods.

- `redis_oom`: `CONFIG SET maxmemory 1` with `noeviction`, so every write is refused with
  `OOM command not allowed` while reads still work; restored (`maxmemory 0`) after the fault.
  The daemon must hold or spool what it accepted and deliver it exactly once afterwards.
- `spool_disk_full`: the spool lives on its own small tmpfs (`SpoolDisk`); the fault fills it
  with a ballast file and kills Redis, so the outage's entries meet ENOSPC: the daemon keeps
  running, counts what it could not keep as `spool_full` drops, and spools again once the
  ballast is gone and Redis is back. Mounting a tmpfs needs root; without it this kind is left
  out of the schedule, and the run says so.
- `bridge_kill` (with the PLC, the default): SIGKILL the bridge, start it again 5 s later on the
  same ports (`tools.soak.bridge.PlcSide`).
- `redis_failover` (with `--sentinel` only): the Sentinel group's master is SIGKILLed (the 2nd,
  4th, ... time: `SENTINEL FAILOVER` instead, a graceful switch); after 15 s the soak waits for the
  sentinels to agree on the promoted replica and restarts a killed old master, which they re-point
  as the new replica. With `--sentinel`, `redis_kill` is left out (killing the master is this fault)
  and `spool_disk_full`'s Redis kill is a failover too.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tools.kit.redis_server import RedisServer

FAULT_KINDS = (
    "camera_kill",
    "camera_stall",
    "redis_kill",
    "http_flood",
    "redis_oom",
    "spool_disk_full",
    "bridge_kill",
    "redis_failover",
)
FAULT_DOWN_S = {
    "camera_kill": 5.0,
    "camera_stall": 8.0,
    "redis_kill": 10.0,
    "http_flood": 20.0,
    "redis_oom": 15.0,
    "spool_disk_full": 20.0,
    "bridge_kill": 5.0,
    "redis_failover": 15.0,
}
FAULT_COLORS = {
    "camera_kill": "red",
    "camera_stall": "orange",
    "redis_kill": "purple",
    "http_flood": "green",
    "redis_oom": "brown",
    "spool_disk_full": "black",
    "bridge_kill": "blue",
    "redis_failover": "magenta",
}
SPOOL_DISK_SIZE = "64m"


QUIET_TAIL_S = 60.0  # no fault ends this close to the end, so the final samples are settled


@dataclass
class Fault:
    kind: str
    target: str
    start_s: float
    end_s: float | None = None


def schedule(
    kinds: list[str], cameras: list[str], *, duration_s: float, first_fault_s: float, fault_every_s: float
) -> list[tuple[float, str, str]]:
    """(start s, kind, target) of every fault of the run: `kinds` in turn from `first_fault_s`, one at a time
    every `fault_every_s` (or longer, for a fault that lasts longer), none ending in the quiet tail; the
    camera faults go round `cameras`."""
    plan = []
    t, i = first_fault_s, 0
    quiet_s = min(QUIET_TAIL_S, 0.25 * duration_s)
    while kinds and t + FAULT_DOWN_S[kinds[i % len(kinds)]] < duration_s - quiet_s:
        kind = kinds[i % len(kinds)]
        target = {"http_flood": "health", "spool_disk_full": "spool", "bridge_kill": "bridge"}.get(kind)
        target = target or ("redis" if kind.startswith("redis") else None) or cameras[(i // len(kinds)) % len(cameras)]
        plan.append((t, kind, target))
        t += max(fault_every_s, FAULT_DOWN_S[kind] + 5.0)  # one fault at a time
        i += 1
    return plan


def redis_oom_start(redis: RedisServer) -> None:
    client = redis.client(timeout_s=10)
    try:
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", "1")
    finally:
        client.close()


def redis_oom_end(redis: RedisServer) -> None:
    client = redis.client(timeout_s=10)
    try:
        client.config_set("maxmemory", "0")
    finally:
        client.close()


class SpoolDisk:
    """A tmpfs of `SPOOL_DISK_SIZE` at `root`; the daemon's spool is `root/spool`, the ballast `root/ballast`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.spool = root / "spool"
        self.ballast = root / "ballast"
        self.mounted = False
        self.why_not = ""

    def mount(self) -> bool:
        self.root.mkdir(parents=True, exist_ok=True)
        if os.geteuid() != 0:
            self.why_not = "not root: cannot mount a tmpfs for the spool"
        else:
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={SPOOL_DISK_SIZE}", "tmpfs", str(self.root)],
                check=False,
                capture_output=True,
                text=True,
            )
            self.mounted = done.returncode == 0
            self.why_not = done.stderr.strip()
        self.spool.mkdir(exist_ok=True)
        return self.mounted

    def fill(self) -> int:
        """Take every free byte with the ballast; returns the bytes taken."""
        taken, chunk = 0, 1 << 20
        fd = os.open(self.ballast, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            while chunk >= 512:
                try:
                    taken += os.write(fd, b"\0" * chunk)
                except OSError as exc:
                    if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                        raise
                    chunk //= 8
        finally:
            os.close(fd)
        return taken

    def free(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.ballast.unlink()

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.root)], check=False, capture_output=True)
            self.mounted = False
