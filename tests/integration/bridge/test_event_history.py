"""The OPC UA event history (`[bridge] event_history_s`): what a PLC missed, read back with HistoryRead.

Real redis-server, the real bridge (`Bridge`), a real asyncua client connecting after the crossings."""

from __future__ import annotations

import asyncio
import json
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from asyncua import Client, Node, ua

from daemon.config.bridge import BridgeConfig
from tests.support.bridge_harness import Events, crossing, make_config, start_bridge, subscribe, wait_for
from tests.support.fixtures_redis import RedisServer, RedisServerFactory
from tests.support.mv_harness import get_result_list, mv_ns, vision_system

JS = Path(__file__).resolve().parents[2] / "js"
NODE_READY = shutil.which("node") is not None and (JS / "node_modules" / "node-opcua-client").is_dir()
CAM1 = "beltsight:objects:cam1"
CAM2 = "beltsight:objects:cam2"


async def crossing_history(client: Client) -> list[Any]:
    """HistoryRead of `Objects/BeltSight`'s CrossingEventType events over the last hour."""
    ns = await client.get_namespace_index("urn:beltsight")
    etype = await client.nodes.base_event_type.get_child([f"{ns}:CrossingEventType"])
    source = client.get_node(ua.NodeId("BeltSight", ns))
    now = datetime.now(UTC)
    return list(await source.read_event_history(now - timedelta(hours=1), now + timedelta(minutes=1), 0, [etype]))


async def result_history(client: Client, camera: str) -> list[Any]:
    """HistoryRead of the camera's VisionSystemType object's ResultReadyEventType events."""
    etype = await client.nodes.base_event_type.get_child([f"{await mv_ns(client)}:ResultReadyEventType"])
    source: Node = await vision_system(client, camera)
    now = datetime.now(UTC)
    return list(await source.read_event_history(now - timedelta(hours=1), now + timedelta(minutes=1), 0, [etype]))


async def served(config: BridgeConfig, server: RedisServer, writes: list[tuple[str, dict[str, str]]]) -> list[str]:
    """A bridge serves `writes` (no client connected) and stops; their entry ids."""
    r = server.client()
    bridge = await start_bridge(config, server)
    try:
        ids = [r.xadd(stream, fields) for stream, fields in writes]
        await wait_for(lambda: bridge.reader.stats.served == len(writes))
    finally:
        await bridge.stop()
    return ids


def test_a_client_connecting_after_the_crossings_reads_each_once_from_the_history(
    redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    server = redis_server()
    config = make_config(tmp_path, machine_vision=True)
    r = server.client()

    async def scenario() -> None:
        bridge = await start_bridge(config, server)
        try:
            ids = [r.xadd(CAM1, crossing("cam1", "L1", n, track=100 + n)) for n in range(1, 5)]
            r.xadd(CAM2, crossing("cam2", "L1", 1, "out", track=7))
            r.xadd(CAM1, crossing("cam1", "L9", 1, track=999))  # a line the bridge does not serve: no event
            await wait_for(lambda: bridge.reader.stats.entries == 6)
            async with Client(f"opc.tcp://{config.opcua.listen}/beltsight") as client:
                await client.load_data_type_definitions()
                history = await crossing_history(client)
                assert [(e.Camera, e.Track) for e in history] == [("cam1", 101 + n) for n in range(4)] + [("cam2", 7)]
                assert [e.Message.Text for e in history][:2] == ["cam1/L1 in #1", "cam1/L1 in #2"]
                cam1 = await result_history(client, "cam1")
                assert [e.ResultId.Id for e in cam1] == ids
                assert [e.PartId.Id for e in cam1] == ["101", "102", "103", "104"]
                assert [e.PartId.Id for e in await result_history(client, "cam2")] == ["7"]
                # the result list answers from the same history: newest first
                complete, count, results, error = await get_result_list(client, "cam1")
                assert (complete, count, error) == (True, 4, 0)
                assert [res.ResultId.Id for res in results] == ids[::-1]
                _, _, only, _ = await get_result_list(client, "cam1", part="102")
                assert [res.ResultId.Id for res in only] == [ids[1]]
        finally:
            await bridge.stop()

    asyncio.run(scenario())


def test_the_history_survives_a_restart_and_keeps_each_crossing_once(
    redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    """Crossings 1-3 served by a first bridge, 4-5 written while it is down (the second bridge fires them
    to no one), 6 while a client is subscribed: HistoryRead has each of the six exactly once."""
    server = redis_server()
    config = make_config(tmp_path, machine_vision=True)
    r = server.client()

    async def scenario() -> None:
        ids = await served(config, server, [(CAM1, crossing("cam1", "L1", n, track=n)) for n in range(1, 4)])
        ids += [r.xadd(CAM1, crossing("cam1", "L1", n, track=n)) for n in range(4, 6)]
        bridge = await start_bridge(config, server)
        try:
            await wait_for(lambda: bridge.reader.stats.served == 2)
            async with Client(f"opc.tcp://{config.opcua.listen}/beltsight") as client:
                await client.load_data_type_definitions()
                handler = Events()
                await subscribe(client, handler)
                ids.append(r.xadd(CAM1, crossing("cam1", "L1", 6, track=6)))
                await wait_for(lambda: [e.Track for e in handler.events] == [6])
                assert [e.Track for e in await crossing_history(client)] == [1, 2, 3, 4, 5, 6]
                assert [e.ResultId.Id for e in await result_history(client, "cam1")] == ids
                _, count, results, _ = await get_result_list(client, "cam1")
                assert count == 6 and [res.ResultId.Id for res in results] == ids[::-1]
        finally:
            await bridge.stop()

    asyncio.run(scenario())


def test_the_window_bounds_what_is_recalled_and_zero_turns_the_history_off(
    redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    """A first bridge serves a crossing whose entry is 5 minutes old and a new one; a second bridge with a
    60 s window recalls only the new one; one with the history off answers none."""
    server = redis_server()
    r = server.client()
    config = make_config(tmp_path).model_copy(update={"event_history_s": 60.0})
    old_ms = int((datetime.now(UTC) - timedelta(minutes=5)).timestamp() * 1000)
    r.xadd(CAM1, crossing("cam1", "L1", 1, track=1), id=f"{old_ms}-0")
    r.xadd(CAM1, crossing("cam1", "L1", 2, track=2))

    async def history_after_start(cfg: BridgeConfig) -> list[int]:
        bridge = await start_bridge(cfg, server)
        try:
            await wait_for(lambda: r.xpending(CAM1, cfg.group)["pending"] == 0 and bridge.reader.stats.connected)
            async with Client(f"opc.tcp://{cfg.opcua.listen}/beltsight") as client:
                return [e.Track for e in await crossing_history(client)]
        finally:
            await bridge.stop()

    # the first run fires both (the old entry was never served) and keeps each once
    assert sorted(asyncio.run(history_after_start(config))) == [1, 2]
    assert asyncio.run(history_after_start(config)) == [2]  # the next one recalls the last 60 s only
    assert asyncio.run(history_after_start(config.model_copy(update={"event_history_s": 0.0}))) == []


@pytest.mark.skipif(not NODE_READY, reason="node and tests/js/node_modules (tools/bootstrap.sh --dev) are needed")
def test_node_opcua_reads_the_missed_crossings_from_the_history(
    redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    """Another stack's PLC (node-opcua, tests/js/history_client.js), connecting after a restart."""
    server = redis_server()
    config = make_config(tmp_path, machine_vision=True)

    async def scenario() -> tuple[list[str], dict[str, Any]]:
        ids = await served(config, server, [(CAM1, crossing("cam1", "L1", n, track=50 + n)) for n in range(1, 4)])
        bridge = await start_bridge(config, server)
        try:
            proc = await asyncio.create_subprocess_exec(
                str(shutil.which("node")),
                str(JS / "history_client.js"),
                f"opc.tcp://{config.opcua.listen}/beltsight",
                "cam1",
                cwd=JS,
                stdout=asyncio.subprocess.PIPE,
            )
            out, _ = await asyncio.wait_for(proc.communicate(), 120)
        finally:
            await bridge.stop()
        line = next(raw for raw in out.splitlines() if raw.startswith(b'{"'))
        return ids, json.loads(line)

    ids, got = asyncio.run(scenario())
    assert "error" not in got, got.get("error")
    assert got["crossings"] == [{"track": 50 + n, "message": f"cam1/L1 in #{n}"} for n in range(1, 4)]
    assert got["results"] == [{"resultId": i, "partId": str(50 + n)} for n, i in enumerate(ids, 1)]
