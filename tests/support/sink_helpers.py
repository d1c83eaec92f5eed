"""Building and running a `RedisSink` in tests: frame results, configs, a running sink, what it stored,
and the README's ACL lines."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from daemon.config.redis import RedisConfig
from daemon.core.frames import Detection, FrameResult
from daemon.core.metrics import Metrics
from daemon.publish.schema import decode_entry
from daemon.publish.sink import RedisSink

BASE_MS = 1_700_000_000_000
BOLT = Detection(cls=1, label="bolt", score=0.9, box=(1.0, 2.0, 3.0, 4.0))
README = Path(__file__).resolve().parents[2] / "docs" / "deployment" / "scale-out.md"  # the ACL lines


def result(seq: int, camera: str = "cam1", *, captured_ms: int | None = None, n_dets: int = 1) -> FrameResult:
    """Frame `seq` of `camera`, captured at BASE_MS + 10 ms per frame unless given, with `n_dets` bolts."""
    return FrameResult(
        camera_id=camera,
        seq=seq,
        captured_ms=BASE_MS + seq * 10 if captured_ms is None else captured_ms,
        captured_mono=time.monotonic(),
        width=1280,
        height=720,
        model_size=640,
        model_name="conveyor-640@1.0.0",
        detections=(BOLT,) * n_dets,
    )


def config(url: str, **kw: Any) -> RedisConfig:
    """Short timeouts, so an outage shows within a test."""
    return RedisConfig(url=url, connect_timeout_s=0.5, socket_timeout_s=1.0, **kw)


def make_sink(cfg: RedisConfig, metrics: Metrics | None = None, **kw: Any) -> RedisSink:
    """A sink whose reconnect backoff is fast (20 ms to 100 ms)."""
    return RedisSink(cfg, metrics or Metrics(), backoff_min_s=0.02, backoff_max_s=0.1, **kw)


@contextlib.asynccontextmanager
async def running(sink: RedisSink) -> AsyncIterator[RedisSink]:
    """`sink.run()` as a task for the block (the sink opened first, unless it is already);
    cancelled and the sink closed after it."""
    if not sink.opened:
        await sink.open()
    task = asyncio.create_task(sink.run())
    try:
        yield sink
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await sink.close()


def stored(client: Any, stream: str) -> list[dict[str, Any]]:
    """Every entry of `stream`, decoded by the schema."""
    return [decode_entry(fields) for _, fields in client.xrange(stream)]


def readme_acl(user: str, password: str) -> list[str]:
    """The README's `ACL SETUSER <user> ...` line, with its password placeholder filled in."""
    line = next(x for x in README.read_text().splitlines() if x.startswith(f"ACL SETUSER {user} "))
    return line.replace(">CHANGE-ME", f">{password}").split()
