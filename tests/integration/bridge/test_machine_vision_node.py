"""Machine Vision seen from another OPC UA stack: node-opcua (tests/js/mv_client.js) browses the
VisionSystemType objects and receives ResultReadyEvents for crossings written to a real redis-server."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from tests.support.bridge_harness import crossing, make_config, start_bridge, wait_for
from tests.support.fixtures_redis import RedisServerFactory

JS = Path(__file__).resolve().parents[2] / "js"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(
    NODE is None or not (JS / "node_modules" / "node-opcua-client").is_dir(),
    reason="node and tests/js/node_modules (tools/bootstrap.sh --dev) are needed",
)


async def _line(proc: asyncio.subprocess.Process, within_s: float = 120.0) -> dict[str, object]:
    """The script's next JSON line (node-opcua writes its own notices to stdout too)."""
    assert proc.stdout is not None
    raw = b""
    while not raw.startswith(b'{"'):
        raw = await asyncio.wait_for(proc.stdout.readline(), within_s)
        assert raw, "mv_client.js ended without a result"
    out = json.loads(raw)
    assert "error" not in out, out["error"]
    return dict(out)


def test_node_opcua_browses_vision_systems_and_receives_result_ready_events(
    redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    server = redis_server()
    config = make_config(tmp_path, machine_vision=True)
    r = server.client()

    async def scenario() -> None:
        bridge = await start_bridge(config, server)
        try:
            r.xadd("beltsight:events", {"kind": "camera_up", "camera": "cam1", "detail": "", "at_ms": "1"})
            await wait_for(lambda: bridge.state.cameras["cam1"].status == "up")
            proc = await asyncio.create_subprocess_exec(
                str(NODE),
                str(JS / "mv_client.js"),
                f"opc.tcp://{config.opcua.listen}/beltsight",
                "cam1",
                "5",
                "60000",
                cwd=JS,
                stdout=asyncio.subprocess.PIPE,
            )
            try:
                ready = await _line(proc)
                assert ready["typeNames"] == {"cam1": "mv:VisionSystemType", "cam2": "mv:VisionSystemType"}
                assert ready["state"] == "Operational"
                ids = [r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", n, track=200 + n)) for n in range(1, 6)]
                r.xadd("beltsight:objects:cam2", crossing("cam2", "L1", 1, track=9))  # another camera's object
                events = (await _line(proc))["events"]
            finally:
                if proc.returncode is None:  # it has printed all it had to; do not wait for its goodbyes
                    proc.kill()
                    await proc.wait()
            assert isinstance(events, list) and len(events) == 5
            assert [e["ResultId"]["id"] for e in events] == ids
            assert [e["PartId"]["id"] for e in events] == [str(200 + n) for n in range(1, 6)]
            assert {e["PartId"]["type"] for e in events} == {"PartIdDataType"}
            assert {(e["ResultState"], e["IsPartial"], e["SourceNode"]) for e in events} == {
                (1, False, ready["source"])
            }
            assert json.loads(events[0]["ResultContent"][0])["line"] == "L1"
        finally:
            await bridge.stop()

    asyncio.run(scenario())
