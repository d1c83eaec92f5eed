"""What `python -m tools.soak` starts its children with: the clips, the daemon's config, `wait_publishing`
(the daemon itself is `tools.kit.running.spawn_daemon`), `kill_proc`."""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path
from typing import Any

from tools.kit.daemon_config import write_config
from tools.soak.stats import by_label, scrape

CAMERA_SIZES = ((640, 480), (1280, 720))


def kill_proc(proc: subprocess.Popen[Any] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.kill()  # SIGKILL also ends a SIGSTOPped process
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def render_clips(out: Path, cameras: int, seconds: float) -> list[Path]:
    from tools.kit.synth.video import render_cached  # noqa: PLC0415

    sizes = [CAMERA_SIZES[i % len(CAMERA_SIZES)] for i in range(cameras)]
    return [
        render_cached(out / "clips" / f"cam{i}-{w}x{h}.mp4", w, h, 10, seconds, 100 + i)
        for i, (w, h) in enumerate(sizes)
    ]


SOAK_LINE = {
    "id": "mid",
    "start": [0.5, 0.0],
    "end": [0.5, 1.0],
    "direction": [1.0, 0.0],
    "gates": [{"id": "reject", "distance_mm": 300.0}],
}


def write_soak_config(
    path: Path,
    *,
    redis_url: str,
    health_port: int,
    spool: Path,
    cameras: list[tuple[str, str]],
    rebuild_every: int,
    redis: dict[str, Any] | None = None,
    extra: str = "",
) -> None:
    """The daemon's config: a spool, sessions rebuilt every `rebuild_every` frames, short camera timeouts,
    and tracking on: one counting line across the belt's middle with a reject gate (calibrated, so
    every crossing carries a speed and a gate ETA), its events on the objects stream. `redis` adds
    `[redis]` keys (the Sentinel group), `extra` TOML (the `[bridge]` tables)."""
    write_config(
        path,
        redis_url=redis_url,
        redis={"spool_dir": str(spool), **(redis or {})},
        health={"listen": f"127.0.0.1:{health_port}"},
        shutdown_grace_s=15.0,
        extra=f"[engine.rebuild]\nevery_frames = {rebuild_every}\n{extra}",
        tracking={"enabled": True},
        cameras=[
            {"id": cid, "url": url, "read_timeout_s": 2.0, "stall_s": 5.0, "mm_per_px": 0.5, "lines": [SOAK_LINE]}
            for cid, url in cameras
        ],
    )


def wait_publishing(daemon: subprocess.Popen[bytes], health_port: int, timeout_s: float = 180) -> None:
    """Until the daemon's /metrics count a published entry; RuntimeError if it exits or `timeout_s` passes first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            raise RuntimeError(f"daemon exited with {daemon.returncode} during startup; see logs/daemon.log")
        with contextlib.suppress(OSError):
            values = scrape(health_port)
            if sum(by_label(values, "beltsight_entries_published_total", "camera").values()) > 0:
                return
        time.sleep(0.5)
    raise RuntimeError(f"daemon published nothing within {timeout_s:.0f} s")
