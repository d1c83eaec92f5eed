"""The daemon restarted under a running bridge: the PLC sees every crossing once and counts that continue.

The whole chain is real: a tracked camera (a rendered conveyor clip) in the daemon, the objects
stream in a real Redis, the bridge reading it with its consumer group, and an OPC UA client
subscribed to the crossing events and reading `CountIn` as a PLC would.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from asyncua import Client

from daemon.bridge.layout import layout_from_data
from daemon.bridge.service import Bridge
from daemon.config.redis import RedisConfig
from tests.support.bridge_harness import Events, crossing, factory, make_config, read, subscribe, wait_for
from tests.support.daemon_harness import InProcessDaemon, write_config
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip
from tests.support.metrics import total
from tests.support.objects import assert_objects_exactly_once, objects

LINE = {"id": "mid", "start": [0.5, 0.0], "end": [0.5, 1.0], "gates": [{"id": "reject1", "distance_mm": 300}]}
# the bridge also knows a line the daemon does not draw: the test's fence crosses it, last
LAYOUT = layout_from_data([{"id": "belt", "lines": [{"id": "mid", "gates": ["reject1"]}, {"id": "fence"}]}])
FENCE = 1_000_000
"""The track of the fence: once its event arrived, every event the bridge fired before it has."""


def crossings(d: InProcessDaemon) -> float:
    return total(d, "beltsight_crossings_total", camera="belt")


def test_a_daemon_restart_shows_the_plc_every_crossing_once_with_counts_continuing(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    clip = clip_factory(640, 480, fps=10, seconds=6.0, seed=7, synthetic=True)
    server = redis_server(appendonly=True)
    config = write_config(
        tmp_path / "b.toml",
        redis_url=server.url,
        redis={"spool_dir": str(tmp_path / "spool")},
        cameras=[
            {"id": "belt", "url": str(clip.path), "realtime": True, "loop": True, "mm_per_px": 0.5, "lines": [LINE]}
        ],
    )
    bridge_config = make_config(tmp_path / "bridge")

    async def scenario() -> tuple[list[tuple[int, str, str]], int]:
        bridge = Bridge(bridge_config, LAYOUT, factory(server), redis=RedisConfig())
        await bridge.start()
        handler = Events()
        try:
            async with Client(f"opc.tcp://{bridge_config.opcua.listen}/beltsight") as client:
                await subscribe(client, handler)
                for run in ("a", "b"):  # the same daemon, stopped and started again
                    with InProcessDaemon(config) as d:
                        seen = len(handler.events)
                        await wait_for(lambda d=d: crossings(d) >= 3, 120)
                        await wait_for(lambda seen=seen: len(handler.events) >= seen + 3, 120)
                    assert d.error is None, f"daemon {run}: {d.error!r}"
                # the stream is read in order: a crossing fired twice would reach the PLC before this
                server.client().xadd("beltsight:objects:belt", crossing("belt", "fence", 1, track=FENCE))
                await wait_for(lambda: any(e.Track == FENCE for e in handler.events), 60)
                assert handler.events[-1].Track == FENCE
                count_in = await read(client, "BeltSight/belt/mid/CountIn")
        finally:
            await bridge.stop()
        return [(int(e.Track), str(e.Line), str(e.Direction)) for e in handler.events[:-1]], int(count_in)

    events, count_in = asyncio.run(scenario())
    stored = [(i, e) for i, e in objects(server, "belt") if e.track != FENCE]
    assert_objects_exactly_once(stored)  # counts 1..N per direction across the two runs
    crossed = [(e.track, str(e.line), str(e.direction)) for _i, e in stored if e.event == "crossed"]
    assert sorted(events) == sorted(crossed), "the PLC saw a crossing twice, or missed one"
    assert len(set(events)) == len(events)
    last_in = max((e.count or 0 for _i, e in stored if e.event == "crossed" and e.direction == "in"), default=0)
    assert count_in == last_in > 0
