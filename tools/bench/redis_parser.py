"""CPU per published frame of the sink's Redis round trip with redis-py's Python reply parser and
with hiredis' C parser, alternating in one run against one redis-server.

    .venv/bin/python -m tools.bench.redis_parser [--batches 400] [--batch 8] [--dets 7] [--rounds 5]

Each batch is what the sink sends for one lane batch: one pipeline (`transaction=False`) of
`--batch` XADDs, each entry encoded by `daemon.publish.schema.encode_entry` from a frame with
`--dets` detections, on an asyncio client as `daemon.publish.redis_conn.make_client` makes it
(`decode_responses`). The two parsers alternate over `--rounds`; it prints the process's CPU ms
per entry for each and the ratio hiredis / Python (median over rounds, each round's in the same run).
redis-py uses hiredis by itself once the `hiredis` package is installed (a daemon dependency).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from redis import asyncio as aioredis
from redis._parsers import _AsyncHiredisParser, _AsyncRESP2Parser

from daemon.core.seam import Detection, FrameResult
from daemon.publish.seam import encode_entry
from tools.kit.redis_server import RedisServer, find_redis_server


def _entry(seq: int, dets: int) -> dict[str, str]:
    detections = tuple(Detection(i % 4, "bolt", 0.5 + i / 100, (10.0 + i, 20.0, 110.0 + i, 220.0)) for i in range(dets))
    result = FrameResult("cam0", seq, 1_700_000_000_000 + seq, 0.0, 640, 480, 640, "demo", detections)
    return encode_entry(result, 1_700_000_000_050 + seq)


async def _run(url: str, parser: Any, batches: int, batch: int, dets: int) -> float:
    """CPU ms per entry for `batches` pipelines of `batch` XADDs."""
    client = aioredis.Redis.from_url(url, decode_responses=True, parser_class=parser)
    entries = [_entry(i, dets) for i in range(batch)]
    try:
        await client.delete("bench:parser")
        started = time.process_time()
        for _ in range(batches):
            pipe = client.pipeline(transaction=False)
            for fields in entries:
                pipe.xadd("bench:parser", fields, maxlen=1000, approximate=True)  # type: ignore[arg-type]
            await pipe.execute()
        return 1000 * (time.process_time() - started) / (batches * batch)
    finally:
        await client.aclose()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batches", type=int, default=400)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--dets", type=int, default=7)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    binary = find_redis_server()
    if binary is None:
        raise SystemExit("no redis-server on PATH")
    server = RedisServer(binary, None).start()
    try:
        python_ms: list[float] = []
        hiredis_ms: list[float] = []
        for _ in range(args.rounds):
            python_ms.append(asyncio.run(_run(server.url, _AsyncRESP2Parser, args.batches, args.batch, args.dets)))
            hiredis_ms.append(asyncio.run(_run(server.url, _AsyncHiredisParser, args.batches, args.batch, args.dets)))
    finally:
        server.close()
    ratios = [h / p for h, p in zip(hiredis_ms, python_ms, strict=True)]
    print(f"CPU ms per entry ({args.batch} XADDs per pipeline, {args.dets} detections each, {args.rounds} rounds)")
    print(f"  python parser: median {statistics.median(python_ms):.3f}  rounds {[round(v, 3) for v in python_ms]}")
    print(f"  hiredis:       median {statistics.median(hiredis_ms):.3f}  rounds {[round(v, 3) for v in hiredis_ms]}")
    print(f"  hiredis / python: median {statistics.median(ratios):.3f}  rounds {[round(r, 3) for r in ratios]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
