"""A synthetic load for the real `RedisSink`, and the watch that times it: what the publish benches share.

`feed` accepts one `frame` per camera every 1/fps s and notes the moment each was accepted; `watch`
notes the moment each entry becomes visible to a blocking XREAD; both on `time.perf_counter`, so a
bench's latency per entry is `arrived[k] - accepted[k]`. They print `tools.kit.stats.percentile`.
"""

from __future__ import annotations

import asyncio
import time
from typing import cast

import redis.asyncio as aioredis

from daemon.core.seam import Detection, FrameResult
from daemon.publish.seam import RedisSink

BOLT = Detection(cls=1, label="bolt", score=0.9, box=(1.0, 2.0, 3.0, 4.0))


def frame(camera: str, seq: int) -> FrameResult:
    """One frame result of `camera` with three detections, captured now."""
    return FrameResult(
        camera_id=camera,
        seq=seq,
        captured_ms=time.time_ns() // 1_000_000,
        captured_mono=time.monotonic(),
        width=1280,
        height=720,
        model_size=640,
        model_name="bench",
        detections=(BOLT,) * 3,
    )


async def feed(
    sink: RedisSink,
    cameras: list[str],
    fps: float,
    seconds: float,
    accepted: dict[tuple[str, int], float],
    fault: asyncio.Event | None = None,
) -> tuple[int, float]:
    """Accept one frame per camera every 1/fps s for `seconds` (each moment into `accepted`); after the
    first fifth, set `fault` (if any). (frames per camera, the end of that first fifth on perf_counter)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    seq = 0
    fault_at = float("inf")
    while loop.time() - start < seconds:
        if fault_at == float("inf") and loop.time() - start >= seconds / 5:
            fault_at = time.perf_counter()  # a baseline's window starts here too: the start-up left out
            if fault is not None:
                fault.set()
        for camera in cameras:
            accepted[(camera, seq)] = time.perf_counter()
            sink.accept(frame(camera, seq))
        seq += 1
        await asyncio.sleep(max(0.0, start + seq / fps - loop.time()))
    return seq, fault_at


async def watch(client: aioredis.Redis, streams: list[str], arrived: dict[tuple[str, int], float]) -> None:
    """Note when each entry of `streams` becomes visible (blocking XREAD on `client`, which must decode
    replies and is closed at the end), until cancelled."""
    last = dict.fromkeys(streams, "0-0")
    try:
        while True:
            reply = await client.xread(last, count=1000, block=1000)  # type: ignore[arg-type]
            now = time.perf_counter()
            for stream, entries in cast("list[tuple[str, list[tuple[str, dict[str, str]]]]]", reply or []):
                for entry_id, fields in entries:
                    last[stream] = entry_id
                    arrived[(fields["camera"], int(fields["seq"]))] = now
    finally:
        await client.aclose()
