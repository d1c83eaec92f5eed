"""The bridge's Sparkplug edge node with a Sparkplug 3.0 primary host (`primary_host_id`), against a real
Mosquitto: the host is scripted (tests/support/primary_host.py, paho publishing retained STATE with
chosen timestamps), and what the node sends is read by a host from another stack (Eclipse Tahu's
sparkplug-payload, tests/js/sparkplug_host.js). Births wait for the host's online STATE, a host going
offline ends the session with NDEATH, stale STATEs are ignored, the crossings of an outage reach the
host after it returns, and bdSeq goes on across sessions and bridge processes."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

from daemon.bridge import sparkplug_bdseq as bdseq
from daemon.bridge.service import Bridge
from daemon.config.redis import RedisConfig
from tests.support.bridge_harness import LAYOUT, crossing, factory, sparkplug_edge, wait_for
from tests.support.fixtures_redis import RedisServerFactory
from tests.support.mosquitto import Message, MosquittoFactory, SparkplugHost
from tests.support.primary_host import ScriptedPrimaryHost
from tests.support.sparkplug_edge import EDGE, GROUP, STREAM, config, counts, seqs_continue, spawn_bridge

HOST_ID = "scada"
NODE_KINDS = ("NBIRTH", "DBIRTH", "DDATA", "NDEATH")


def node_messages(messages: list[Message]) -> list[Message]:
    return [m for m in messages if m.kind in NODE_KINDS and m.topic.split("/")[3] == EDGE]


def index_of_state(messages: list[Message], online: bool, timestamp: int) -> int:
    """Where the observer saw that STATE (it subscribes to spBv1.0/#, STATE included)."""
    want = {"online": online, "timestamp": timestamp}
    return next(i for i, m in enumerate(messages) if m.kind == "STATE" and m.payload == want)


def between(messages: list[Message], start: int, end: int) -> list[str]:
    """The node's message kinds strictly between two positions of the observer's stream."""
    return [m.kind for m in node_messages(messages[start + 1 : end])]


def test_births_wait_for_the_host_an_offline_host_ends_the_session_and_stale_states_are_ignored(
    mosquitto: MosquittoFactory, redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    broker, server = mosquitto(), redis_server()
    r = server.client()
    cfg = config(tmp_path, broker.url, primary_host_id=HOST_ID)
    t0 = int(time.time() * 1000)

    async def scenario() -> None:
        with SparkplugHost(broker.url) as seen, ScriptedPrimaryHost(broker.url, HOST_ID) as scada:
            scada.publish(False, t0)  # the host is down (its retained STATE)
            bridge = Bridge(cfg, LAYOUT, factory(server), redis=RedisConfig())
            await bridge.start()
            edge = sparkplug_edge(bridge)
            assert edge is not None
            try:
                # connected and subscribed: it has read the offline STATE; crossings meanwhile are kept
                await wait_for(lambda: edge.stats.host_online is False)
                for n in (1, 2, 3):
                    r.xadd(STREAM, crossing("cam1", "L1", n, track=n))
                await wait_for(lambda: bridge.state.line("cam1", "L1").count_in == 3)
                assert not edge.stats.connected and edge.stats.births == 0
                # the host comes online: births (the counts of the outage), then each crossing as history
                scada.online(t0 + 2000)
                msgs = await seen.wait(lambda ms: counts(ms, historical=True) == [1, 2, 3])
                online_at = index_of_state(msgs, True, t0 + 2000)
                assert node_messages(msgs[:online_at]) == []  # nothing from the node before the host was online
                assert [m.kind for m in node_messages(msgs)][:3] == ["NBIRTH", "DBIRTH", "DBIRTH"]
                assert seen.of("NBIRTH")[0].metrics()["bdSeq"] == 0
                assert seen.of("DBIRTH", "cam1")[0].metrics()["L1/CountIn"] == 3
                r.xadd(STREAM, crossing("cam1", "L1", 4, track=4))
                await seen.wait(lambda ms: 4 in counts(ms, historical=False))
                # a stale offline (older than the online seen) is ignored: the session goes on
                scada.publish(False, t0 + 1500)
                await wait_for(lambda: edge.stats.host_ignored == 1)
                r.xadd(STREAM, crossing("cam1", "L1", 5, track=5))
                msgs = await seen.wait(lambda ms: 5 in counts(ms, historical=False))
                assert [m.kind for m in node_messages(msgs)].count("NDEATH") == 0
                assert edge.stats.host_offline == 0 and edge.stats.host_online is True
                # the host's connection drops: its will (offline, the same timestamp) ends the node's session
                scada.crash()
                msgs = await seen.wait(lambda ms: any(m.kind == "NDEATH" for m in ms))
                assert seen.of("NDEATH")[0].metrics()["bdSeq"] == 0
                await wait_for(lambda: edge.stats.host_offline == 1)
                for n in (6, 7):  # while the host is offline
                    r.xadd(STREAM, crossing("cam1", "L1", n, track=n))
                await wait_for(lambda: bridge.state.line("cam1", "L1").count_in == 7)
                scada.publish(True, t0 + 1999)  # a stale online: no birth
                await wait_for(lambda: edge.stats.host_ignored >= 2)
                assert not edge.stats.connected
                # back online (a new host session): a new session, bdSeq advanced, the outage as history
                scada.online(t0 + 3000)
                msgs = await seen.wait(lambda ms: counts(ms, historical=True) == [1, 2, 3, 6, 7])
                death_at = next(i for i, m in enumerate(msgs) if m.kind == "NDEATH")
                back_at = index_of_state(msgs, True, t0 + 3000)
                assert between(msgs, death_at, back_at) == []  # no birth, no data while the host was away
                assert [m.metrics()["bdSeq"] for m in seen.of("NBIRTH")] == [0, 1]
                assert seen.of("DBIRTH", "cam1")[-1].metrics()["L1/CountIn"] == 7
                assert counts(msgs, historical=False) == [4, 5]  # each crossing once, live or as history
                assert seqs_continue(node_messages(msgs))
            finally:
                await bridge.stop()
            msgs = await seen.wait(lambda ms: len([m for m in ms if m.kind == "NDEATH"]) == 2)
            assert seen.of("NDEATH")[1].metrics()["bdSeq"] == 1
            # a restarted bridge continues bdSeq from its state file, and births at once (the host is online)
            bridge = Bridge(cfg, LAYOUT, factory(server), redis=RedisConfig())
            await bridge.start()
            try:
                await seen.wait(lambda ms: len([m for m in ms if m.kind == "NBIRTH"]) == 3)
                assert seen.of("NBIRTH")[2].metrics()["bdSeq"] == 2
                assert seen.of("DBIRTH", "cam1")[-1].metrics()["L1/CountIn"] == 7
            finally:
                await bridge.stop()

    asyncio.run(scenario())


def test_bdseq_goes_on_across_killed_bridge_processes_and_wraps(
    mosquitto: MosquittoFactory, redis_server: RedisServerFactory, tmp_path: Path
) -> None:
    broker, server = mosquitto(), redis_server()
    cfg = config(tmp_path, broker.url, keepalive_s=5, primary_host_id=HOST_ID)
    path = bdseq.path_in(tmp_path)
    bdseq.save(path, GROUP, EDGE, 254)  # as a long-running node leaves it

    async def scenario() -> None:
        with SparkplugHost(broker.url) as seen, ScriptedPrimaryHost(broker.url, HOST_ID) as scada:
            scada.online(int(time.time() * 1000))
            for generation in (1, 2, 3):
                proc = spawn_bridge(cfg, server.port)
                try:
                    await seen.wait(lambda ms, g=generation: len([m for m in ms if m.kind == "NBIRTH"]) == g)
                    proc.send_signal(signal.SIGKILL)
                    await asyncio.to_thread(proc.wait, 10)
                    await seen.wait(lambda ms, g=generation: len([m for m in ms if m.kind == "NDEATH"]) == g)
                finally:
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait(10)
        births = [m.metrics()["bdSeq"] for m in seen.of("NBIRTH")]
        wills = [m.metrics()["bdSeq"] for m in seen.of("NDEATH")]
        assert births == [255, 0, 1]  # 254 + 1, then wrapping to 0, each after a SIGKILL
        assert wills == births  # each killed session's will matches its birth
        assert json.loads(path.read_bytes())["bd_seq"] == 1

    asyncio.run(scenario())
