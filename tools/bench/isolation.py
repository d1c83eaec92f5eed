"""Per-stream isolation, measured: the healthy cameras' publish latency while one camera's key is refused.

    .venv/bin/python -m tools.bench.isolation [--cameras 4] [--fps 10] [--seconds 60] [--pairs 1] [--batch 256]

Starts a redis-server (tools/kit/redis_server.py) and runs the real `RedisSink` in-process, fed
synthetic frame results for K cameras at F fps each, twice with the same script: once without a
refusal (the baseline), once with cam0's stream key recreated as a list (WRONGTYPE) for the whole
run (`--seconds`), then deleted so cam0's held entries drain. Latency per entry is read back from
the moment a consumer in the same process (a blocking XREAD on the healthy cameras' streams) sees
it, minus the moment the sink accepted it, both on `time.perf_counter` (microseconds; the entries'
own `published_ms - captured_ms` is whole milliseconds, too coarse for an idle machine's 1-2 ms).
`--pairs N` runs baseline and refusal N times, alternating, and pools each kind. Prints, for the
other cameras, p50/p99 of both kinds and the ratio refused / baseline (goal: within 1.10), and that
cam0 arrived complete and in order after each fix. A shared machine makes the numbers noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path

import redis.asyncio as aioredis

from daemon.config.seam import RedisConfig
from daemon.core.seam import Metrics, stop_task
from daemon.publish.seam import RedisSink
from tools.kit.redis_server import RedisServer, find_redis_server
from tools.kit.sink_load import feed, watch
from tools.kit.stats import percentile
from tools.kit.streams import read_stream

REFUSED = "cam0"


async def one_run(server: RedisServer, args: argparse.Namespace, *, refuse: bool) -> tuple[list[float], list[int]]:
    """(latencies of the healthy cameras in ms, seqs of cam0 as stored)."""
    admin = server.client()
    admin.flushall()
    key = f"beltsight:detections:{REFUSED}"
    if refuse:
        admin.rpush(key, "an operator's list")
    cfg = RedisConfig(url=server.url, publish_batch=args.batch)
    sink = RedisSink(cfg, Metrics(), backoff_min_s=0.05, backoff_max_s=1.0)
    cameras = [f"cam{i}" for i in range(args.cameras)]
    accepted: dict[tuple[str, int], float] = {}
    arrived: dict[tuple[str, int], float] = {}
    healthy = [f"beltsight:detections:{c}" for c in cameras[1:]]
    watcher = asyncio.create_task(watch(aioredis.Redis.from_url(server.url, decode_responses=True), healthy, arrived))
    await sink.open()
    task = asyncio.create_task(sink.run())
    try:
        frames, _ = await feed(sink, cameras, args.fps, args.seconds, accepted)
        if refuse:
            admin.delete(key)
        for _ in range(1200):  # up to 60 s for what is left (cam0's held entries)
            if not sink.buffered:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.5)  # the watcher's last blocking read
    finally:
        for running in (task, watcher):
            await stop_task(running)
        await sink.close()
    latencies: list[float] = []
    for camera in cameras[1:]:
        entries = read_stream(admin, f"beltsight:detections:{camera}")
        assert len(entries) == frames, f"{camera}: {len(entries)} of {frames} entries"
        keys = [(camera, seq) for seq in range(frames)]
        assert all(k in arrived for k in keys), f"{camera}: the watcher missed entries"
        latencies += [(arrived[k] - accepted[k]) * 1000.0 for k in keys]
    held = [int(f["seq"]) for _, f in read_stream(admin, key)]
    assert held == list(range(frames)), f"{REFUSED}: {len(held)} of {frames}, in order: {held == sorted(held)}"
    return latencies, held


async def main(args: argparse.Namespace) -> None:
    binary = find_redis_server()
    if binary is None:
        raise SystemExit("redis-server not installed")
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(binary, Path(tmp)).start()
        base: list[float] = []
        refused: list[float] = []
        try:
            for _ in range(args.pairs):
                base += (await one_run(server, args, refuse=False))[0]
                lat, held = await one_run(server, args, refuse=True)
                refused += lat
        finally:
            server.close()
    print(
        f"{args.cameras} cameras at {args.fps} fps for {args.seconds} s, {args.pairs} pair(s) of runs;"
        f" {REFUSED}'s key refused (WRONGTYPE) throughout each refused run"
    )
    for name, lat in (("baseline", base), ("cam0 refused", refused)):
        print(
            f"  {name:>13}: other cameras' accept-to-visible latency p50 {percentile(lat, 50):.2f} ms,"
            f" p99 {percentile(lat, 99):.2f} ms ({len(lat)} entries)"
        )
    ratio = percentile(refused, 99) / percentile(base, 99)
    print(f"  p99 ratio refused / baseline: {ratio:.2f} (goal <= 1.10)")
    print(f"  {REFUSED}: {len(held)} entries after the fix, exactly once, in order")


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cameras", type=int, default=4)
    p.add_argument("--fps", type=float, default=10.0)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--pairs", type=int, default=1, help="baseline and refused runs, alternating")
    p.add_argument("--batch", type=int, default=256, help="publish_batch")
    return p.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse()))
