"""OPC UA for Machine Vision (OPC 40100-1) on the bridge: a real redis-server and a real asyncua client."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from asyncua import Client, ua

from tests.support.bridge_harness import Events, crossing, eta_json, make_config, start_bridge, wait_for
from tests.support.fixtures_redis import RedisServerFactory
from tests.support.mv_harness import (
    get_result_by_id,
    get_result_list,
    mv_ns,
    subscribe_results,
    vision_system,
)


def test_result_ready_event_per_crossing_with_result_and_part_ids(
    redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    server = redis_server()
    config = make_config(tmp_path, machine_vision=True)
    r = server.client()

    async def scenario() -> None:
        bridge = await start_bridge(config, server)
        try:
            handler = Events()
            async with Client(f"opc.tcp://{config.opcua.listen}/beltsight") as client:
                await client.load_data_type_definitions()
                await subscribe_results(client, handler, "cam1", "cam2")
                eta = eta_json(g1=1_700_000_001_250)
                ids = [
                    r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", n, track=100 + n, eta=eta))
                    for n in range(1, 6)
                ]
                ids.append(
                    r.xadd("beltsight:objects:cam2", crossing("cam2", "L1", 1, "out", track=7, snapshot="a.jpg"))
                )
                await wait_for(lambda: len(handler.events) == 6)
                # nothing more arrives: a later crossing is the next event of its camera, and the last
                last_cam1 = r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", 6, track=106))
                await wait_for(lambda: len(handler.events) >= 7)
                assert len(handler.events) == 7
                cam1, cam2 = await vision_system(client, "cam1"), await vision_system(client, "cam2")
                # an entry id is unique within its camera's stream (each camera is its own vision system)
                assert [e.ResultId.Id for e in handler.events if e.SourceNode == cam1.nodeid] == [*ids[:5], last_cam1]
                assert [e.ResultId.Id for e in handler.events if e.SourceNode == cam2.nodeid] == ids[5:]
                first = handler.events[0]
                assert first.PartId.Id == "101" and isinstance(first.PartId, ua.PartIdDataType)
                assert first.ResultState == 1 and first.IsPartial is False
                assert json.loads(first.ResultContent[0].Value) == {
                    "label": "box",
                    "cls": 2,
                    "line": "L1",
                    "direction": "in",
                    "count": 1,
                    "eta": {"g1": 1_700_000_001_250},
                }
                last = next(e for e in handler.events if e.SourceNode == cam2.nodeid)
                assert last.PartId.Id == "7"
                assert json.loads(last.ResultContent[0].Value)["snapshot"] == "a.jpg"
                fields = r.xrange("beltsight:objects:cam2")[0][1]
                assert last.CreationTime == datetime.fromtimestamp(int(fields["at_ms"]) / 1000, UTC)
        finally:
            await bridge.stop()

    asyncio.run(scenario())


def test_state_machine_system_state_and_result_methods(redis_server: RedisServerFactory, tmp_path: Path) -> None:
    server = redis_server()
    config = make_config(tmp_path, machine_vision=True)
    r = server.client()

    async def scenario() -> None:
        bridge = await start_bridge(config, server)
        try:
            async with Client(f"opc.tcp://{config.opcua.listen}/beltsight") as client:
                await client.load_data_type_definitions()
                ns = await mv_ns(client)
                cam1 = await vision_system(client, "cam1")
                vtype = await cam1.read_type_definition()
                assert (await client.get_node(vtype).read_browse_name()) == ua.QualifiedName("VisionSystemType", ns)
                state = await cam1.get_child([f"{ns}:VisionStateMachine", "0:CurrentState"])
                system = await cam1.get_child([f"{ns}:SystemState"])
                assert (await state.read_value()).Text == "Preoperational"
                assert (await system.read_value()).State == ua.SystemStateDataType.SBY_2

                async def status(kind: str, vision: str, e10: ua.SystemStateDataType) -> None:
                    r.xadd("beltsight:events", {"kind": kind, "camera": "cam1", "detail": "", "at_ms": "1"})
                    await wait_for(lambda: bridge.state.cameras["cam1"].status == kind.removeprefix("camera_"))
                    assert (await state.read_value()).Text == vision
                    assert (await system.read_value()).State == e10

                await status("camera_up", "Operational", ua.SystemStateDataType.PRD_1)
                await status("camera_stalled", "Error", ua.SystemStateDataType.UDT_5)
                await status("camera_up", "Operational", ua.SystemStateDataType.PRD_1)
                await status("camera_down", "Error", ua.SystemStateDataType.UDT_5)
                machine = await cam1.get_child([f"{ns}:VisionStateMachine"])
                with pytest.raises(ua.UaStatusCodeError) as refused:  # the bridge takes no commands
                    await machine.call_method(f"{ns}:Halt")
                assert refused.value.code == ua.StatusCodes.BadNothingToDo
                state_id = await state.get_child(["0:Id"])
                assert await state_id.read_value() == ua.NodeId(5030, ns)  # VisionStateMachineType's Error

                ids = [r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", n, track=n % 3)) for n in range(1, 151)]
                r.xadd("beltsight:objects:cam1", {"v": "1", "camera": "cam1", "event": "crossed"})  # malformed
                await wait_for(lambda: bridge.state.line("cam1", "L1").count_in == 150)

                _, result, error = await get_result_by_id(client, "cam1", ids[41])
                assert error == 0 and result.ResultId.Id == ids[41] and result.PartId.Id == "0"
                assert result.ResultState == 1 and result.IsPartial is False
                assert json.loads(result.ResultContent[0].Value)["count"] == 42
                assert (await get_result_by_id(client, "cam1", "1-1"))[2] == -1  # no such entry
                assert (await get_result_by_id(client, "cam2", ids[41]))[2] == -1  # another camera's stream
                assert (await get_result_by_id(client, "cam1", "nonsense"))[2] == -1

                complete, count, results, error = await get_result_list(client, "cam1")
                assert (complete, count, error) == (False, 100, 0)  # bounded: MAX_RESULTS
                assert [x.ResultId.Id for x in results] == ids[::-1][:100]  # newest first
                complete, count, results, _ = await get_result_list(client, "cam1", part="2", max_results=10, start=5)
                assert count == 10 and not complete
                assert [x.ResultId.Id for x in results] == [i for n, i in enumerate(ids, 1) if n % 3 == 2][::-1][5:15]
                complete, count, results, _ = await get_result_list(client, "cam1", part="2", start=45)
                assert complete and count == 5
        finally:
            await bridge.stop()

    asyncio.run(scenario())


def test_restarts_redis_down_and_bad_entries_fire_each_result_once(
    redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    server = redis_server(appendonly=True)
    config = make_config(tmp_path, machine_vision=True)
    r = server.client()

    def add(n: int, track: int | None = None) -> str:
        return str(r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", n, track=n if track is None else track)))

    async def scenario() -> None:
        seen: list[str] = []
        bridge = await start_bridge(config, server)
        handler = Events()
        async with Client(f"opc.tcp://{config.opcua.listen}/beltsight") as client:
            await subscribe_results(client, handler, "cam1")
            sent = [add(n) for n in range(1, 11)]
            r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", 11) | {"count": "many"})  # bad: no result
            r.xadd("beltsight:objects:cam1", {"v": "1", "camera": "cam1"})  # bad
            sent.append(add(5, track=99))  # a replayed count: no result
            await wait_for(lambda: bridge.reader.stats.malformed == 2 and len(handler.events) == 10)
            seen += [e.ResultId.Id for e in handler.events]
        await bridge.stop()
        down = [add(n) for n in range(11, 21)]  # written while the bridge is down
        bridge = await start_bridge(config, server)
        handler = Events()
        async with Client(f"opc.tcp://{config.opcua.listen}/beltsight") as client:
            await wait_for(lambda: bridge.state.line("cam1", "L1").count_in == 20)
            await subscribe_results(client, handler, "cam1")
            await asyncio.to_thread(server.kill)
            await wait_for(lambda: not bridge.reader.stats.connected)
            await asyncio.to_thread(server.restart)
            await wait_for(lambda: bridge.reader.stats.connected)
            after = [add(n) for n in range(21, 31)]
            # a fence on another line, sent last: a result fired twice would reach the client before it
            fence = str(r.xadd("beltsight:objects:cam1", crossing("cam1", "L2", 1, track=5000)))
            await wait_for(lambda: any(e.ResultId.Id == fence for e in handler.events))
            seen += [e.ResultId.Id for e in handler.events]
        await bridge.stop()
        # the ones written while no client listened were served (variables) and are not fired again
        assert seen == [*sent[:10], *after, fence]
        assert len(down) == 10 and r.xpending("beltsight:objects:cam1", config.group)["pending"] == 0

    asyncio.run(scenario())
