"""The bridge as a Sparkplug B edge node, checked against a real Mosquitto and a host decoding with
Eclipse Tahu's sparkplug-payload (not pysparkplug): births and bdSeq, a DDATA per crossing written
to a real Redis (exactly once, counts that match), rebirth on NCMD, NDEATH on a clean stop and as the
will of a killed bridge, broker and bridge restarts, Redis down, bad entries, TLS with a client
certificate."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from daemon.bridge.service import Bridge
from daemon.config.redis import RedisConfig
from tests.support.bridge_harness import LAYOUT, crossing, eta_json, factory, sparkplug_edge, wait_for
from tests.support.fixtures_redis import RedisServerFactory
from tests.support.fixtures_redis_tls import TlsMaterial
from tests.support.mosquitto import MosquittoFactory, SparkplugHost
from tests.support.sparkplug_edge import EDGE, GROUP, NCMD, STREAM, config, counts, seqs_continue, spawn_bridge, start
from tools.kit.mosquitto import TlsFiles


def test_births_ddata_per_crossing_rebirth_and_clean_death(
    mosquitto: MosquittoFactory, redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    broker, server = mosquitto(), redis_server()
    r = server.client()
    r.xadd(STREAM, crossing("cam1", "L1", 3, track=7, eta=eta_json(g1=111, g2=222)))  # before the bridge starts

    async def scenario() -> None:
        with SparkplugHost(broker.url) as host:
            bridge = await start(config(tmp_path, broker.url), server)
            try:
                msgs = await host.wait(lambda ms: len([m for m in ms if m.kind == "DBIRTH"]) == 2)
                nbirth = host.of("NBIRTH")[0]
                assert nbirth.topic == f"spBv1.0/{GROUP}/NBIRTH/{EDGE}"
                assert nbirth.metrics() == {"bdSeq": 0, "Node Control/Rebirth": False}
                birth = host.of("DBIRTH", "cam1")[0].metrics()
                # the entry written before the start is new to the group: in the birth or in a DDATA after it
                assert birth["L1/CountIn"] in (0, 3) and birth["L1/CountOut"] == 0
                assert {"L1/LastTrack", "L1/LastLabel", "L1/g1EtaMs", "L1/g2EtaMs", "L2/CountIn", "State"} <= set(birth)
                assert birth["State"] == "unknown"
                assert set(host.of("DBIRTH", "cam2")[0].metrics()) >= {"State", "L1/CountIn", "L1/CountOut"}
                msgs = await host.wait(lambda ms: 3 in counts(ms))
                first = next(m.metrics() for m in msgs if m.kind == "DDATA")
                assert (first["L1/LastTrack"], first["L1/LastLabel"]) == (7, "box")
                assert (first["L1/g1EtaMs"], first["L1/g2EtaMs"]) == (111, 222)
                # 40 crossings in one burst (read in one batch), a bad entry, a replay, a state change
                for n in range(4, 24):
                    r.xadd(STREAM, crossing("cam1", "L1", n, track=100 + n))
                    r.xadd(STREAM, crossing("cam1", "L1", n - 3, direction="out", track=200 + n))
                r.xadd(STREAM, {"v": "1", "camera": "cam1", "event": "crossed"})  # malformed
                r.xadd(STREAM, crossing("cam1", "L1", 10, track=999))  # a replayed count: nothing
                r.xadd("beltsight:events", {"kind": "camera_up", "camera": "cam1"})
                r.xadd(STREAM, crossing("cam1", "L2", 1, track=5000))  # the fence, last
                await host.wait(lambda ms: 1 in counts(ms, "L2/CountIn"))
                await host.wait(lambda ms: any(m.metrics().get("State") == "up" for m in ms if m.kind == "DDATA"))
                msgs = host.snapshot()
                assert counts(msgs) == list(range(3, 24))  # every count value, once, in order
                assert counts(msgs, "L1/CountOut") == list(range(1, 21))
                assert 999 not in counts(msgs, "L1/LastTrack")
                assert bridge.reader.stats.malformed == 1
                assert seqs_continue(msgs)
                # rebirth on NCMD: the same bdSeq, the current values
                host.rebirth(NCMD)
                msgs = await host.wait(lambda ms: len([m for m in ms if m.kind == "NBIRTH"]) == 2)
                msgs = await host.wait(lambda ms: len([m for m in ms if m.kind == "DBIRTH"]) == 4)
                assert host.of("NBIRTH")[1].metrics()["bdSeq"] == 0
                reborn = host.of("DBIRTH", "cam1")[1].metrics()
                assert (reborn["L1/CountIn"], reborn["L1/CountOut"], reborn["State"]) == (23, 20, "up")
                assert sparkplug_edge(bridge).stats.rebirths == 1
            finally:
                await bridge.stop()
            msgs = await host.wait(lambda ms: any(m.kind == "NDEATH" for m in ms))
            assert host.of("NDEATH")[0].metrics()["bdSeq"] == 0
            assert seqs_continue(msgs)

    asyncio.run(scenario())


def test_broker_restart_redis_down_and_bridge_restart_lose_nothing_and_repeat_nothing(
    mosquitto: MosquittoFactory, redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    broker, server = mosquitto(), redis_server(appendonly=True)
    r = server.client()
    cfg = config(tmp_path, broker.url, primary_host_id="scada")  # births wait for the host's STATE

    async def scenario() -> None:
        with SparkplugHost(broker.url, primary_host_id="scada") as host:
            bridge = await start(cfg, server)
            try:
                for n in range(1, 6):
                    r.xadd(STREAM, crossing("cam1", "L1", n, track=n))
                await host.wait(lambda ms: 5 in counts(ms))
                await asyncio.to_thread(broker.kill)
                await wait_for(lambda: not sparkplug_edge(bridge).stats.connected)
                for n in range(6, 11):  # while the broker is down
                    r.xadd(STREAM, crossing("cam1", "L1", n, track=n))
                await wait_for(lambda: bridge.state.line("cam1", "L1").count_in == 10)
                await asyncio.to_thread(broker.restart)
                msgs = await host.wait(lambda ms: len([m for m in ms if m.kind == "NBIRTH"]) == 2)
                msgs = await host.wait(lambda ms: 10 in counts(ms, historical=True))
                assert host.of("NBIRTH")[1].metrics()["bdSeq"] > host.of("NBIRTH")[0].metrics()["bdSeq"]
                assert host.of("DBIRTH", "cam1")[-1].metrics()["L1/CountIn"] == 10  # the count, not lost
                assert counts(msgs, historical=True) == list(range(6, 11))  # each value, as history
                assert counts(msgs, historical=False) == list(range(1, 6))
                # Redis down: the node stays online with what it serves; after Redis returns, data goes on
                await asyncio.to_thread(server.kill)
                await wait_for(lambda: not bridge.reader.stats.connected)
                await asyncio.to_thread(server.restart)
                await wait_for(lambda: bridge.reader.stats.connected)
                r.xadd(STREAM, crossing("cam1", "L1", 11, track=11))
                await host.wait(lambda ms: 11 in counts(ms))
            finally:
                await bridge.stop()
            for n in range(12, 15):  # while the bridge is down
                r.xadd(STREAM, crossing("cam1", "L1", n, track=n))
            before = len(host.snapshot())
            bridge = await start(cfg, server)
            try:
                r.xadd(STREAM, crossing("cam1", "L1", 15, track=15))
                await host.wait(lambda ms: 15 in counts(ms))
                after = host.snapshot()[before:]
                assert host.of("DBIRTH", "cam1")[-1].metrics()["L1/CountIn"] >= 14  # 12-14 in the birth
                assert counts(after) in ([15], [12, 13, 14, 15])  # live, or (read before the birth) in order
                assert sorted(counts(host.snapshot(), historical=False)) == sorted(
                    set(counts(host.snapshot(), historical=False))
                )
            finally:
                await bridge.stop()

    asyncio.run(scenario())


def test_killed_bridge_leaves_its_ndeath_as_the_will(
    mosquitto: MosquittoFactory, redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    broker, server = mosquitto(), redis_server()
    cfg = config(tmp_path, broker.url, keepalive_s=5)

    async def scenario() -> None:
        with SparkplugHost(broker.url) as host:
            proc = spawn_bridge(cfg, server.port)
            try:
                await host.wait(lambda ms: any(m.kind == "DBIRTH" for m in ms))
                proc.send_signal(signal.SIGKILL)
                await asyncio.to_thread(proc.wait, 10)
                await host.wait(lambda ms: any(m.kind == "NDEATH" for m in ms))
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(10)
            nbirth, ndeath = host.of("NBIRTH")[-1], host.of("NDEATH")[0]
            assert ndeath.topic == f"spBv1.0/{GROUP}/NDEATH/{EDGE}"
            assert ndeath.metrics()["bdSeq"] == nbirth.metrics()["bdSeq"]

    asyncio.run(scenario())


def test_tls_with_client_certificate_and_json_topics(
    mosquitto: MosquittoFactory, redis_server: RedisServerFactory, tls_material: TlsMaterial, tmp_path: Path
) -> None:
    m = tls_material
    broker = mosquitto(tls=TlsFiles(m.ca, m.server_cert, m.server_key), require_certificate=True)
    server = redis_server()
    r = server.client()
    tls = {"ca_file": str(m.ca), "cert_file": str(m.client_cert), "key_file": str(m.client_key)}
    cfg = config(tmp_path, broker.url, json_topics=True, **tls)

    async def scenario() -> None:
        with SparkplugHost(broker.url, ca=m.ca, cert=m.client_cert, key=m.client_key) as host:
            bridge = await start(cfg, server)
            try:
                r.xadd(STREAM, crossing("cam1", "L1", 1, track=42, eta=eta_json(g1=5)))
                msgs = await host.wait(lambda ms: any(m.kind == "crossed" for m in ms) and 1 in counts(ms))
                body = next(m.payload for m in msgs if m.kind == "crossed")
                assert body["camera"] == "cam1" and body["track"] == 42 and body["count"] == 1
                assert body["eta"] == {"g1": 5}
                assert next(m.topic for m in msgs if m.kind == "crossed") == "beltsight/cam1/crossed"
            finally:
                await bridge.stop()
        # without a client certificate the broker refuses the bridge: it keeps retrying, never online
        bare = config(tmp_path, broker.url, ca_file=str(m.ca))
        bridge = Bridge(bare, LAYOUT, factory(server), redis=RedisConfig())
        await bridge.start()
        try:
            await wait_for(lambda: sparkplug_edge(bridge).stats.sessions >= 2)
            assert not sparkplug_edge(bridge).stats.connected
        finally:
            await bridge.stop()

    asyncio.run(scenario())
