"""Counts checked against the plant's counter (#57), end to end: a real redis-server, the real bridge,
the PLC simulator (tools.plcsim) on Modbus TCP and OPC UA, crossings XADDed as the daemon writes them.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import math
import time
import urllib.request
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from asyncua import Client, ua

from daemon.bridge.reconcile_mv import VISION_WARNING_CONDITION_TYPE
from daemon.bridge.service import Bridge
from daemon.config.bridge import BridgeConfig, OpcUaConfig
from daemon.config.redis import RedisConfig
from tests.support.bridge_harness import LAYOUT, Events, factory, read, wait_for
from tests.support.chromium import CHROMIUM, Chromium
from tests.support.fixtures_redis import RedisServer, RedisServerFactory, free_port
from tests.support.mosquitto import MosquittoFactory, SparkplugHost
from tests.support.mv_harness import mv_ns, vision_system
from tests.support.sparkplug_edge import config as sparkplug_config
from tests.support.sparkplug_edge import start as sparkplug_start
from tools.plcsim.counter import PlcCounter
from tools.plcsim.rig import CameraFeed
from tools.plcsim.scene import Belt
from tools.plcsim.servers import ModbusPlc, OpcUaPlc, PlcSim

EVENTS = "beltsight:events"
LAG_S = 1.0
# Each PLC simulator is made with t0=math.inf: its counter holds its start value until the feed starts
# and the test sets the scene clock (sim.t0 = feed.t0_mono); a clock running from construction would
# count parts while the bridge starts, then step back: a reference_reset no plant ever made.


def _config(tmp_path: Path, reference: dict[str, Any]) -> BridgeConfig:
    return BridgeConfig.model_validate(
        {
            "health_listen": f"127.0.0.1:{free_port()}",
            "state_dir": str(tmp_path),
            "reconnect_max_s": 0.5,
            "resume_grace_s": 0,
            "opcua": {"listen": ""},
            "modbus": {"listen": ""},
            "shifts": ["06:00", "14:00", "22:00"],
            "reconcile": [
                {"camera": "cam1", "line": "L1", "poll_s": 0.5, "window_s": 15, "tolerance": 2, "lag_s": LAG_S}
                | reference
            ],
        }
    )


async def _events(client: aioredis.Redis, kind: str) -> list[dict[str, Any]]:
    rows = await client.xrange(EVENTS)
    return [f | {"detail": json.loads(f["detail"])} for _, f in rows if f.get("kind") == kind]


def _get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as reply:
        return str(reply.read().decode())


async def _bridge(config: BridgeConfig, server: RedisServer) -> Bridge:
    bridge = Bridge(config, LAYOUT, factory(server), redis=RedisConfig())
    await bridge.start()
    return bridge


def test_a_25_percent_drift_is_caught_and_cleared_and_a_wrap_and_a_reset_are_not_mismatches(
    redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    """The contract's case: poll 0.5 s, window 15 s, tolerance 2, the hysteresis defaults. The 16-bit
    counter wraps at about 5 s, the PLC resets it at 9 s, the camera then misses every 4th part from
    26 s until the alarm is raised: count_mismatch within 25 s of the drift's start, count_agrees
    within 35 s of its end (the contract's bounds, about 10 s above what the rig gives)."""
    server = redis_server()
    parts = Belt(rate_per_s=3.0, seed=21).crossings(0, 200)
    sim = PlcSim(
        PlcCounter([t + LAG_S for t in parts], bits=16, start=65536 - 14, resets=[9.0]), register=7, t0=math.inf
    )

    async def scenario() -> None:
        plc = ModbusPlc(sim)
        port = await plc.start()
        client = factory(server)()
        feed = CameraFeed(client, "beltsight:objects:cam1", "cam1", "L1")
        config = _config(tmp_path, {"modbus": f"127.0.0.1:{port}", "register": 7})
        bridge = await _bridge(config, server)
        feed.start()
        sim.t0 = feed.t0_mono
        feeder = asyncio.create_task(feed.run(parts))
        try:
            await asyncio.sleep(26.0)
            assert await _events(client, "count_mismatch") == []
            drift_ms = time.time() * 1000
            feed.missing = 0.25
            await wait_for_events(client, "count_mismatch", 60)
            feed.missing = 0.0
            healed_ms = time.time() * 1000
            await wait_for_events(client, "count_agrees", 80)
            feeder.cancel()
            await asyncio.sleep(6)  # one flush of the counts (every 5 s) after the last crossing
            assert config.health_listen is not None
            health = int(config.health_listen.rsplit(":", 1)[1])
            metrics = await asyncio.to_thread(_get, health, "/metrics")
            counts = json.loads(await asyncio.to_thread(_get, health, "/api/counts"))
            report = await asyncio.to_thread(_get, health, "/api/counts/report.csv?start_ms=0")
            judged = await client.xrange(EVENTS)  # before the page's checks: the feed has stopped, the PLC not
            page = await asyncio.to_thread(_get, health, "/report?start_ms=0")
            clicked = await asyncio.to_thread(_click_through_the_report, tmp_path, health)
        finally:
            feeder.cancel()
            await bridge.stop()
            await plc.stop()
            events = await client.xrange(EVENTS)
            await client.aclose()

        assert events[: len(judged)] == judged
        events = judged
        kinds = [f["kind"] for _, f in events]
        assert kinds.index("reference_wrapped") < kinds.index("reference_reset") < kinds.index("count_mismatch")
        assert kinds.count("count_mismatch") == 1 and kinds.count("count_agrees") == 1
        mismatch = next(f for _, f in events if f["kind"] == "count_mismatch")
        agrees = next(f for _, f in events if f["kind"] == "count_agrees")
        detail = json.loads(mismatch["detail"])
        assert mismatch["camera"] == "cam1" and detail["line"] == "L1"
        assert detail["vision"] < detail["reference"] - 2
        assert int(mismatch["at_ms"]) - drift_ms <= 25_000
        assert int(agrees["at_ms"]) - healed_ms <= 35_000
        assert abs(json.loads(agrees["detail"])["vision"] - json.loads(agrees["detail"])["reference"]) <= 1
        assert 'beltsight_count_drift{camera="cam1",line="L1"}' in metrics
        assert counts["lines"]["cam1/L1/in"]["state"] == "agrees"
        assert sum(r["vision"] for r in counts["counts"]) == feed.seen
        # the reset loses the parts counted between the last reading and it (a poll's worth at most)
        assert sum(r["reference"] for r in counts["counts"]) >= feed.seen + feed.missed - 3
        rows = list(csv.DictReader(io.StringIO(report)))
        assert rows and all(int(r["vision"]) < int(r["reference"]) for r in rows)
        assert all(r["crossings"] for r in rows)
        # the page lists the same windows with the same crossings (each one's stream id)
        assert page.count("<tr>") == len(rows) + 1
        ids = [c.split(" ")[0] for r in rows for c in r["crossings"].split(";")]
        assert all(f"<code>{i}</code>" in page for i in ids)
        assert clicked == report  # the page's CSV link is the same report

    asyncio.run(scenario())


def _click_through_the_report(tmp_path: Path, port: int) -> str:
    """Headless Chromium on the report page: the text its CSV link fetches, then a real click on
    "previous" (a period before any window: none listed). The CSV's text."""
    assert CHROMIUM is not None, "chromium is not installed (tools/bootstrap.sh --dev installs it)"
    browser = Chromium(tmp_path)
    try:
        browser.open(f"http://127.0.0.1:{port}/report?start_ms=0")
        browser.wait_for("document.querySelectorAll('#windows tr').length > 1", what="the report's windows")
        browser.evaluate(
            "fetch(document.querySelector('nav a:nth-child(3)').href).then(r => r.text()).then(t => window.csv = t)"
        )
        csv_text = str(browser.wait_for("window.csv", what="the CSV link's report"))
        browser.click(*browser.at("nav a:nth-child(1)", 0.5, 0.5))  # previous
        browser.wait_for("location.search.includes('end_ms=0')", what="the previous period")
        browser.wait_for("document.body.innerText.includes('every window agreed')", what="no windows there")
        return csv_text
    finally:
        browser.close()


async def wait_until_read(client: Client, path: str, value: Any, within_s: float = 30) -> None:
    deadline = time.monotonic() + within_s
    while await read(client, path) != value:
        assert time.monotonic() < deadline, f"{path} never read {value!r}"
        await asyncio.sleep(0.2)


async def wait_for_events(client: aioredis.Redis, kind: str, within_s: float) -> None:
    deadline = time.monotonic() + within_s  # a deadline: the bounds are asserted on the entries' own times
    while not await _events(client, kind):
        assert time.monotonic() < deadline, f"no {kind} within {within_s} s"
        await asyncio.sleep(0.1)


def test_an_opc_ua_plc_gone_is_reference_down_never_a_mismatch(
    redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    """The OPC UA PLC stops answering for 20 s while the camera keeps counting: reference_down (and the
    metric), no count_mismatch; it comes back: reference_up, and the windows agree again."""
    server = redis_server()
    parts = Belt(rate_per_s=3.0, seed=22).crossings(0, 200)
    sim = PlcSim(PlcCounter([t + LAG_S for t in parts], bits=32), t0=math.inf)

    async def scenario() -> None:
        plc = OpcUaPlc(sim)
        await plc.start()
        client = factory(server)()
        feed = CameraFeed(client, "beltsight:objects:cam1", "cam1", "L1")
        config = _config(tmp_path, {"opcua": plc.url, "node": plc.node, "timeout_s": 1.0})
        served = f"127.0.0.1:{free_port()}"
        config = config.model_copy(update={"opcua": OpcUaConfig(listen=served, security="none")})
        bridge = await _bridge(config, server)
        assert bridge.reconcile is not None
        rec = bridge.reconcile.reconcilers["cam1/L1/in"]
        feed.start()
        sim.t0 = feed.t0_mono
        feeder = asyncio.create_task(feed.run(parts))
        try:
            await wait_for(lambda: rec.state == "agrees", 60)
            await plc.stop()
            await wait_for_events(client, "reference_down", 30)
            async with Client(f"opc.tcp://{served}/beltsight") as ua_client:
                await wait_until_read(ua_client, "BeltSight/cam1/L1/CountInState", "reference_down")
            await asyncio.sleep(15)
            plc = OpcUaPlc(sim, port=plc.port)
            await plc.start()
            await wait_for_events(client, "reference_up", 30)
            await wait_for(lambda: rec.state == "agrees" and rec.last is not None and rec.last.end_ms > 0, 60)
            async with Client(f"opc.tcp://{served}/beltsight") as ua_client:
                await wait_until_read(ua_client, "BeltSight/cam1/L1/CountInState", "agrees")
                assert abs(await read(ua_client, "BeltSight/cam1/L1/CountInDrift")) <= 2
        finally:
            feeder.cancel()
            await bridge.stop()
            await plc.stop()
            kinds = [f["kind"] for _, f in await client.xrange(EVENTS)]
            await client.aclose()
        assert kinds == ["reference_down", "reference_up"]

    asyncio.run(scenario())


def test_the_line_state_on_sparkplug_birth_and_data(
    mosquitto: MosquittoFactory, redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    """The reconciled line's `L1/CountInState` and `L1/CountInDrift` are in cam1's DBIRTH, and a DDATA
    carries the new state when the PLC stops answering (a host decoding with Tahu's sparkplug-payload)."""
    broker, server = mosquitto(), redis_server()
    sim = PlcSim(PlcCounter([], bits=16))

    async def scenario() -> None:
        plc = ModbusPlc(sim)
        port = await plc.start()
        spb = sparkplug_config(tmp_path, broker.url)
        reconcile = _config(tmp_path, {"modbus": f"127.0.0.1:{port}", "timeout_s": 0.5}).reconcile
        with SparkplugHost(broker.url) as host:
            bridge = await sparkplug_start(spb.model_copy(update={"reconcile": reconcile}), server)
            try:
                await host.wait(lambda ms: any(m.kind == "DBIRTH" and m.device == "cam1" for m in ms))
                birth = host.of("DBIRTH", "cam1")[0].metrics()
                assert birth["L1/CountInState"] in ("unknown", "agrees") and birth["L1/CountInDrift"] == 0
                sim.hung = True
                await host.wait(
                    lambda ms: any(
                        m.kind == "DDATA" and m.metrics().get("L1/CountInState") == "reference_down" for m in ms
                    )
                )
            finally:
                sim.hung = False
                await bridge.stop()
                await plc.stop()

    asyncio.run(scenario())


def test_a_mismatch_is_a_machine_vision_condition_that_comes_and_goes(
    redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    """With `machine_vision = true`: count_mismatch fires a VisionWarningConditionType event (Retain true)
    from the camera's VisionSystemType object, count_agrees the same condition cleared (Retain false)."""
    server = redis_server()
    parts = Belt(rate_per_s=3.0, seed=23).crossings(0, 300)
    sim = PlcSim(PlcCounter([t + LAG_S for t in parts], bits=32), t0=math.inf)

    async def scenario() -> None:
        plc = ModbusPlc(sim)
        port = await plc.start()
        client = factory(server)()
        feed = CameraFeed(client, "beltsight:objects:cam1", "cam1", "L1", missing=0.5)
        served = f"127.0.0.1:{free_port()}"
        config = _config(tmp_path, {"modbus": f"127.0.0.1:{port}"}).model_copy(
            update={"opcua": OpcUaConfig(listen=served, security="none", machine_vision=True)}
        )
        bridge = await _bridge(config, server)
        handler = Events()
        feed.start()
        sim.t0 = feed.t0_mono
        feeder = asyncio.create_task(feed.run(parts))
        try:
            async with Client(f"opc.tcp://{served}/beltsight") as ua_client:
                ns = await mv_ns(ua_client)
                etype = ua_client.get_node(ua.NodeId(VISION_WARNING_CONDITION_TYPE, ns))
                sub = await ua_client.create_subscription(10, handler)
                await sub.subscribe_events(await vision_system(ua_client, "cam1"), etype, queuesize=100)
                await wait_for(lambda: any(e.ErrorString == "count_mismatch" for e in handler.events), 90)
                feed.missing = 0.0
                await wait_for(lambda: any(e.ErrorString == "count_agrees" for e in handler.events), 90)
        finally:
            feeder.cancel()
            await bridge.stop()
            await plc.stop()
            await client.aclose()
        raised, cleared = handler.events[0], handler.events[-1]
        assert (raised.Retain, raised.Severity, raised.ConditionName) == (True, 700, "CountMismatch L1/in")
        assert (cleared.Retain, cleared.Severity) == (False, 100)
        assert [e.ErrorString for e in handler.events] == ["count_mismatch", "count_agrees"]

    asyncio.run(scenario())
