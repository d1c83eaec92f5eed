"""Helpers for the bridge's Sparkplug tests (tests/integration/bridge/test_sparkplug*.py): the edge node's
config on a broker, what a host received (counts, seq), and a bridge in a process of its own (to kill)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from daemon.bridge.service import Bridge
from daemon.config.bridge import BridgeConfig
from daemon.config.redis import RedisConfig
from tests.support.bridge_harness import LAYOUT, factory, sparkplug_edge, wait_for
from tests.support.mosquitto import Message
from tools.kit import leash

GROUP, EDGE = "plant", "bridge-1"
STREAM = "beltsight:objects:cam1"
NCMD = f"spBv1.0/{GROUP}/NCMD/{EDGE}"


def config(tmp_path: Path, url: str, **sparkplug: Any) -> BridgeConfig:
    return BridgeConfig.model_validate(
        {
            "health_listen": "",
            "state_dir": str(tmp_path),
            "reconnect_max_s": 0.5,
            "opcua": {"listen": ""},
            "modbus": {"listen": ""},
            "sparkplug": {"url": url, "group_id": GROUP, "edge_node_id": EDGE, "reconnect_max_s": 0.5, **sparkplug},
        }
    )


async def start(cfg: BridgeConfig, server: Any) -> Bridge:
    bridge = Bridge(cfg, LAYOUT, factory(server), redis=RedisConfig())
    await bridge.start()
    await wait_for(lambda: sparkplug_edge(bridge).stats.connected)
    return bridge


def counts(messages: list[Message], metric: str = "L1/CountIn", *, historical: bool | None = None) -> list[int]:
    """The values of `metric` in cam1's DDATA, in arrival order."""
    out = []
    for m in messages:
        if m.kind == "DDATA" and m.device == "cam1":
            for metric_ in m.payload["metrics"]:
                if metric_["name"] == metric and (
                    historical is None or bool(metric_.get("isHistorical")) == historical
                ):
                    out.append(metric_["value"])
    return out


def seqs_continue(messages: list[Message]) -> bool:
    """seq goes up by one (mod 256) from each NBIRTH through its DBIRTHs and DDATAs."""
    seq = None
    for m in messages:
        if m.kind == "NBIRTH":
            seq = m.payload["seq"]
            if seq != 0:
                return False
        elif m.kind in ("DBIRTH", "DDATA") and seq is not None:
            if m.payload["seq"] != (seq + 1) % 256:
                return False
            seq = m.payload["seq"]
    return True


KILLED_BRIDGE = """
import asyncio, json, sys
import redis.asyncio as aioredis
from daemon.bridge.service import Bridge
from daemon.config.bridge import BridgeConfig
from daemon.config.redis import RedisConfig
from tests.support.bridge_harness import LAYOUT
cfg = BridgeConfig.model_validate(json.loads(sys.argv[1]))
port = int(sys.argv[2])
asyncio.run(Bridge(cfg, LAYOUT, lambda: aioredis.Redis(port=port, decode_responses=True),
                   redis=RedisConfig()).run())
"""


def spawn_bridge(cfg: BridgeConfig, redis_port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    return leash.spawn([sys.executable, "-c", KILLED_BRIDGE, cfg.model_dump_json(), str(redis_port)], env=env)
