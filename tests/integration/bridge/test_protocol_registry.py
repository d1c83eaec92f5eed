"""The PLC protocols' extension point: a protocol registered in the one table (`PROTOCOLS`) is built from
the config, started, served the snapshot, every crossing and camera state, the heartbeat and the
cameras added live, reported on `/healthz` and closed, by a real bridge on a real Redis, with no other
module edited (OPC UA and Modbus off: the fake alone serves)."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path
from typing import Self

import pytest

from daemon.bridge.layout import BridgeLayout, layout_from_data
from daemon.bridge.protocol import Added, Health, PlcProtocol, ProtocolContext
from daemon.bridge.protocols import PROTOCOLS
from daemon.bridge.service import Bridge
from daemon.bridge.state import BridgeState, Change, Crossing
from daemon.config.bridge import BridgeConfig
from daemon.config.redis import RedisConfig
from tests.support.bridge_harness import LAYOUT, crossing, factory, wait_for
from tests.support.fixtures_redis import RedisServerFactory, free_port


class Ledger(PlcProtocol):
    """A test-only protocol: writes down what the bridge serves it, as a PLC reading it would see it."""

    name = "ledger"

    def __init__(self, ctx: ProtocolContext) -> None:
        self.state = ctx.state
        self.calls: list[str] = []
        self.counts: dict[tuple[str, str], int] = {}
        self.statuses: dict[str, str] = {}
        self.beats = 0
        self.lines = {(c.id, line.id) for c in ctx.layout.cameras for line in c.lines}

    @classmethod
    def build(cls, ctx: ProtocolContext) -> Self | None:
        return cls(ctx)

    async def start(self) -> None:
        self.calls.append("start")

    async def serve_all(self, state: BridgeState) -> None:
        self.calls.append("serve_all")
        self.counts |= {(c, lid): line.count_in for c, cam in state.cameras.items() for lid, line in cam.lines.items()}

    async def serve(self, changes: list[Change]) -> None:
        for change in changes:
            if isinstance(change, Crossing):
                self.counts[(change.camera, change.line)] = self.state.line(change.camera, change.line).count_in
            else:
                self.statuses[change.camera] = change.status

    async def heartbeat(self, beat: int, unix_ms: int) -> None:
        self.beats = beat

    async def grow(self, layout: BridgeLayout, added: Added) -> None:
        self.lines |= {(c, line.id) for c, lines in added.items() for line in lines}

    async def show_status(self, camera: str, status: str) -> None:
        self.statuses[camera] = status

    def health(self) -> Health:
        return Health(clients=1, refused={"nobody": 0}, stats={"served": len(self.counts)})

    async def close(self) -> None:
        self.calls.append("close")


@pytest.fixture
def ledger(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PROTOCOLS, Ledger.name, Ledger)  # the one place a protocol is registered


@pytest.mark.usefixtures("ledger")
def test_a_protocol_added_to_the_table_is_served_by_the_bridge(
    redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    server = redis_server()
    r = server.client()
    r.xadd("beltsight:objects:cam2", crossing("cam2", "L1", 7))  # before the bridge: from the stream's start
    config = BridgeConfig.model_validate(
        {
            "health_listen": f"127.0.0.1:{free_port()}",
            "state_dir": str(tmp_path),
            "reconnect_max_s": 0.5,
            "opcua": {"listen": ""},
            "modbus": {"listen": ""},
        }
    )
    cam3 = {"id": "cam3", "lines": [{"id": "X"}]}
    served: list[BridgeLayout] = [LAYOUT]

    async def scenario() -> None:
        bridge = Bridge(config, LAYOUT, factory(server), redis=RedisConfig(), layouts=lambda: served[0])
        assert [p.name for p in bridge.protocols] == ["ledger"]  # OPC UA and Modbus are off
        ledger = bridge.protocol(Ledger)
        assert ledger is not None
        await bridge.start()
        try:
            await wait_for(lambda: ledger.counts.get(("cam2", "L1")) == 7)
            assert ledger.calls == ["start", "serve_all"]
            r.xadd("beltsight:events", {"kind": "camera_up", "camera": "cam1", "detail": "", "at_ms": "1"})
            for n in (1, 2, 3):
                r.xadd("beltsight:objects:cam1", crossing("cam1", "L1", n, track=n))
            await wait_for(lambda: ledger.counts.get(("cam1", "L1")) == 3 and ledger.statuses.get("cam1") == "up")
            await wait_for(lambda: ledger.beats >= 1)

            served[0] = layout_from_data(
                [
                    {"id": "cam1", "lines": [{"id": "L1", "gates": ["g1", "g2"]}, {"id": "L2"}]},
                    {"id": "cam2", "lines": [{"id": "L1"}]},
                    cam3,
                ]
            )
            r.xadd("beltsight:events", {"kind": "camera_added", "camera": "cam3", "detail": "", "at_ms": "2"})
            await wait_for(lambda: ("cam3", "X") in ledger.lines)
            r.xadd("beltsight:objects:cam3", crossing("cam3", "X", 4, track=9))
            await wait_for(lambda: ledger.counts.get(("cam3", "X")) == 4)

            report = json.loads(await asyncio.to_thread(_get, f"http://{config.health_listen}/healthz"))
            # the built-in protocols, off, keep their keys with their off-defaults (monitoring reads them)
            assert report["clients"] == {"opcua": 0, "modbus": 0, "ledger": 1}
            assert report["refused"] == {"opcua": {}, "modbus": {}, "ledger": {"nobody": 0}}
            assert report["sparkplug"] is None
            assert report["ledger"] == {"served": len(ledger.counts)}
        finally:
            await bridge.stop()
        assert ledger.calls == ["start", "serve_all", "close"]

    asyncio.run(scenario())


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return str(resp.read().decode())
