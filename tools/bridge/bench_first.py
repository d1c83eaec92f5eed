"""The first crossing after a start or an idle spell, against the ones right behind it: XADD -> every protocol.

    python -m tools.bridge.bench_first [--rounds 3] [--idle 0.2,1.2,3,6] [--follow 4] [--node lazy|typed|off]

Each round starts the bridge afresh (in-process: OPC UA with `machine_vision`, security none, Modbus;
its own redis-server from tools/kit), connects the clients, then for each idle spell: waits that long,
XADDs one crossing (the *first*), then `--follow` more 50 ms apart (the *following*), and waits for each
to arrive everywhere. The paths timed, XADD to arrival:

- `crossing event`: an asyncua client's CrossingEventType event (10 ms publishing interval);
- `result event`: its ResultReadyEventType event of the camera's VisionSystemType object;
- `CountIn change`: its data change of `BeltSight/cam1/L1/CountIn`;
- `modbus register`: the line's CountIn in the holding registers, polled every 2 ms (pymodbus);
- `node-opcua result`/`node-opcua crossing`: the same events in node-opcua (tests/js/event_times.js),
  `typed` (data types loaded when the session opens) or `lazy` (node-opcua's default: the types are
  fetched when the first Machine Vision structure arrives).

Prints, per path, p50/p99/max of the first crossings (the very first of each round included) and of
the following ones. `first_crossing_latencies` is the measuring part, used by the tests too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from asyncua.client.client import Client

from daemon.bridge.seam import Bridge, ModbusProtocol, OpcUaProtocol
from tools.kit.plc_clients import Arrivals as Handler
from tools.kit.plc_clients import (
    beltsight_ns,
    bench_bridge,
    crossing_fields,
    event_type,
    mv_ns,
    node,
    opcua_url,
    poll_count_in,
    vision_system,
)
from tools.kit.redis_server import temporary_redis
from tools.kit.stats import Summary

JS = Path(__file__).resolve().parents[2] / "tests" / "js"
STREAM = "beltsight:objects:cam1"
GAP_S = 0.05
ARRIVAL_DEADLINE_S = 15.0


@dataclass
class Arrivals:
    """Wall-clock arrival time (time.time()) of each crossing, by track, per path."""

    at: dict[str, dict[int, float]] = field(default_factory=dict)

    def seen(self, path: str, track: int) -> None:
        self.at.setdefault(path, {}).setdefault(track, time.time())

    def handler(self, path: str, key_of: Callable[[Any], Any]) -> Handler:
        """A subscription handler noting `path`'s arrivals here (a CountIn change's value is its track)."""
        handler = Handler(key_of, time.time)
        handler.at = self.at.setdefault(path, handler.at)
        return handler


@dataclass
class Latencies:
    """Seconds from XADD to arrival, per path: `first` (after a start or an idle spell), `following`."""

    first: dict[str, list[float]] = field(default_factory=dict)
    following: dict[str, list[float]] = field(default_factory=dict)

    def add(self, other: Latencies) -> None:
        for mine, theirs in ((self.first, other.first), (self.following, other.following)):
            for path, values in theirs.items():
                mine.setdefault(path, []).extend(values)


async def _subscribe(client: Client, arrivals: Arrivals) -> None:
    ns = await beltsight_ns(client)
    root = node(client, ns, "BeltSight")
    crossing = await client.create_subscription(10, arrivals.handler("crossing event", lambda e: e.Track))
    await crossing.subscribe_events(root, await event_type(client, ns, "CrossingEventType"), queuesize=10_000)
    result = await client.create_subscription(10, arrivals.handler("result event", lambda e: e.PartId.Id))
    etype = await event_type(client, await mv_ns(client), "ResultReadyEventType")
    await result.subscribe_events(await vision_system(client, "cam1"), etype, queuesize=10_000)
    change = await client.create_subscription(10, arrivals.handler("CountIn change", lambda v: v))
    await change.subscribe_data_change(node(client, ns, "BeltSight/cam1/L1/CountIn"), queuesize=1000)


async def _node_client(
    endpoint: str, mode: str, arrivals: Arrivals
) -> tuple[asyncio.subprocess.Process, asyncio.Task[None]]:
    """tests/js/event_times.js, once it has subscribed; its lines feed `arrivals` in the background."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("node is not installed")
    args = [str(JS / "event_times.js"), endpoint, "cam1", *(["lazy"] if mode == "lazy" else [])]
    proc = await asyncio.create_subprocess_exec(node, *args, cwd=JS, stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    stdout = proc.stdout

    async def next_json() -> dict[str, Any]:
        while True:
            raw = await stdout.readline()
            if not raw:
                raise RuntimeError("event_times.js ended")
            if raw.startswith(b'{"'):
                out: dict[str, Any] = json.loads(raw)
                if "error" in out:
                    raise RuntimeError(str(out["error"])[:500])
                return out

    await asyncio.wait_for(next_json(), 120)

    async def feed() -> None:
        while True:
            line = await next_json()
            arrivals.at.setdefault(f"node-opcua {line['kind']}", {}).setdefault(int(line["part"]), line["t"] / 1000)

    return proc, asyncio.create_task(feed())


async def first_crossing_latencies(
    bridge: Bridge, writer: aioredis.Redis, spells: list[float], *, follow: int, node: str = "off", start: int = 1
) -> Latencies:
    """Connect the clients to a started `bridge` (OPC UA with machine_vision, Modbus; cam1/L1 with no
    crossing yet in this run beyond `start - 1`), then the idle spells; the latencies per path."""
    opcua, modbus = bridge.protocol(OpcUaProtocol), bridge.protocol(ModbusProtocol)
    assert opcua is not None and modbus is not None
    arrivals = Arrivals()
    endpoint = opcua_url(f"127.0.0.1:{opcua.server.port}")
    stop_polling = asyncio.Event()
    poller = asyncio.create_task(
        poll_count_in(modbus.server.port, lambda n: arrivals.seen("modbus register", n), stop_polling, 0.002)
    )
    proc, feed = await _node_client(endpoint, node, arrivals) if node != "off" else (None, None)
    sent: dict[int, tuple[float, bool]] = {}
    try:
        async with Client(endpoint) as client:
            await client.load_data_type_definitions()  # what a configured PLC knows: not timed here
            await _subscribe(client, arrivals)
            n = start - 1
            for idle in spells:
                await asyncio.sleep(idle)
                for k in range(1 + follow):
                    n += 1
                    sent[n] = (time.time(), k == 0)
                    await writer.xadd(STREAM, crossing_fields(n, snapshot=True))  # type: ignore[arg-type]
                    await asyncio.sleep(GAP_S)
                deadline = time.monotonic() + ARRIVAL_DEADLINE_S
                while any(m not in seen for seen in _paths(arrivals, proc) for m in sent):
                    if time.monotonic() > deadline or (feed is not None and feed.done()):
                        break  # counted as missed
                    await asyncio.sleep(0.01)
    finally:
        stop_polling.set()
        await asyncio.gather(poller, return_exceptions=True)
        if proc is not None and feed is not None:
            proc.kill()
            await proc.wait()
            feed.cancel()
            await asyncio.gather(feed, return_exceptions=True)
    out = Latencies()
    for path, seen in arrivals.at.items():
        for m, (at, first) in sent.items():
            lat = seen.get(m, float("inf")) - at
            (out.first if first else out.following).setdefault(path, []).append(lat)
    return out


def _paths(arrivals: Arrivals, proc: asyncio.subprocess.Process | None) -> list[dict[int, float]]:
    names = ["crossing event", "result event", "CountIn change", "modbus register"]
    if proc is not None:
        names += ["node-opcua result", "node-opcua crossing"]
    return [arrivals.at.get(name, {}) for name in names]


async def bench(args: argparse.Namespace, redis_port: int, state_dir: Path) -> Latencies:
    writer = aioredis.Redis(port=redis_port, decode_responses=True)
    total = Latencies()
    start = 1
    spells = [float(x) for x in args.idle.split(",")]
    try:
        for _ in range(args.rounds):
            bridge = bench_bridge(redis_port, state_dir, machine_vision=True)
            await bridge.start()
            try:
                total.add(
                    await first_crossing_latencies(
                        bridge, writer, spells, follow=args.follow, node=args.node, start=start
                    )
                )
            finally:
                await bridge.stop()
            start += len(spells) * (1 + args.follow)
    finally:
        await writer.aclose()
    return total


def report(lat: Latencies) -> None:
    for path in sorted(lat.first):
        first, following = lat.first[path], lat.following.get(path, [])
        missed = sum(1 for v in first + following if v == math.inf)  # counted here, not in the percentiles
        a, b = (Summary.of([v * 1000 for v in vs if v != math.inf]) for vs in (first, following))
        print(
            f"{path:20s} first n={a.n} p50={a.p50:7.1f} p99={a.p99:7.1f} max={a.max:7.1f} ms | "
            f"following n={b.n} p50={b.p50:6.1f} p99={b.p99:6.1f} ms | missed={missed}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="bridge starts")
    parser.add_argument("--idle", default="0.2,1.2,3,6", help="idle spells before each first crossing, seconds")
    parser.add_argument("--follow", type=int, default=4, help="crossings right behind each first one")
    parser.add_argument("--node", choices=("typed", "lazy", "off"), default="typed")
    args = parser.parse_args()
    with temporary_redis() as (port, tmp):
        report(asyncio.run(bench(args, port, tmp)))


if __name__ == "__main__":
    main()
