"""A camera added live is born on Sparkplug without a new MQTT session: its DBIRTH alone (the node and the
other cameras are not reborn), then its DDATA; a served camera that gains a line is reborn with the node
(NBIRTH and every DBIRTH) on the same session. Real Mosquitto and Redis, the host decoding with Tahu."""

from __future__ import annotations

import asyncio
from pathlib import Path

from daemon.bridge.layout import BridgeLayout, layout_from_data
from daemon.bridge.service import Bridge
from daemon.config.redis import RedisConfig
from tests.support.bridge_harness import LAYOUT, crossing, factory, sparkplug_edge, wait_for
from tests.support.fixtures_redis import RedisServerFactory
from tests.support.mosquitto import MosquittoFactory, SparkplugHost
from tests.support.sparkplug_edge import config

CAM3 = {"id": "cam3", "lines": [{"id": "X"}]}


def test_a_camera_added_live_gets_its_dbirth_on_the_same_session(
    mosquitto: MosquittoFactory, redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    broker, server = mosquitto(), redis_server()
    r = server.client()
    served: list[BridgeLayout] = [LAYOUT]
    cam1 = {"id": "cam1", "lines": [{"id": "L1", "gates": ["g1", "g2"]}, {"id": "L2"}]}
    cam2 = {"id": "cam2", "lines": [{"id": "L1"}]}

    async def scenario() -> None:
        with SparkplugHost(broker.url) as host:
            bridge = Bridge(
                config(tmp_path, broker.url), LAYOUT, factory(server), redis=RedisConfig(), layouts=lambda: served[0]
            )
            await bridge.start()
            try:
                assert bridge.live is not None
                sparkplug, live = sparkplug_edge(bridge), bridge.live
                await host.wait(lambda ms: len([m for m in ms if m.kind == "DBIRTH"]) == 2)
                served[0] = layout_from_data([cam1, cam2, CAM3])
                r.xadd("beltsight:events", {"kind": "camera_added", "camera": "cam3", "detail": "", "at_ms": "1"})
                await wait_for(lambda: live.applied == 1)
                r.xadd("beltsight:objects:cam3", crossing("cam3", "X", 4, track=9))
                await host.wait(lambda ms: any(m.device == "cam3" and m.kind == "DDATA" for m in ms))
                assert host.of("DBIRTH", "cam3")[0].metrics()["X/CountIn"] == 0
                assert [m.metrics()["X/CountIn"] for m in host.of("DDATA", "cam3")] == [4]
                assert (len(host.of("NBIRTH")), len(host.of("DBIRTH"))) == (1, 3)  # nothing else reborn

                cam2["lines"] = [{"id": "L1"}, {"id": "L7"}]
                served[0] = layout_from_data([cam1, cam2, CAM3])
                r.xadd("beltsight:events", {"kind": "camera_changed", "camera": "cam2", "detail": "", "at_ms": "2"})
                await host.wait(lambda ms: any("L7/CountIn" in m.metrics() for m in ms if m.kind == "DBIRTH"))
                assert len(host.of("NBIRTH")) == 2 and len(host.of("DBIRTH", "cam3")) == 2
                assert sparkplug.stats.sessions == 1  # one MQTT session throughout
            finally:
                await bridge.stop()

    asyncio.run(scenario())
