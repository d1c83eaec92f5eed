"""`python -m tools.demo.plc` against a real bridge on the demo's own config: a camera's counts read
over OPC UA and over Modbus TCP are the counts its objects stream carries."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from daemon.bridge.layout import layout_from_data
from daemon.bridge.service import Bridge
from daemon.config.settings import load_settings
from tests.support.bridge_harness import factory, wait_for
from tests.support.fixtures_redis import RedisServerFactory, free_port
from tools.demo.plc import report
from tools.demo.run import CONFIG_PORTS, write_config


def crossed(camera: str, count: int, direction: str = "in") -> dict[str, str]:
    at_ms = int(time.time() * 1000)
    fields = {
        "v": "1", "camera": camera, "track": str(100 + count), "label": "washer", "cls": "2", "score": "0.9",
        "event": "crossed", "at_ms": str(at_ms), "line": "count", "direction": direction, "count": str(count),
        "speed_px_s": "200.0", "speed_mm_s": "150.0",
    }  # fmt: skip
    if direction == "in":
        fields["eta"] = json.dumps({"reject1": at_ms + 2800}, separators=(",", ":"))
    return fields


def test_plc_reads_a_cameras_counts_over_opcua_and_modbus(
    redis_server: RedisServerFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = redis_server()
    ports = {name: free_port() for name in CONFIG_PORTS} | {"redis": server.port}
    settings = load_settings(write_config(tmp_path, ports))  # configs/demo.toml as the demo writes it
    # serve at once: no PLC subscribes to events here, so the resume grace would only delay the counts
    config = settings.bridge.model_copy(update={"resume_grace_s": 0.0})
    bridge = Bridge(config, layout_from_data(settings.cameras), factory(server), redis=settings.redis)
    r = server.client()
    for n in range(1, 6):
        r.xadd("beltsight:objects:line1-sorter", crossed("line1-sorter", n))
    r.xadd("beltsight:objects:line1-sorter", crossed("line1-sorter", 1, "out"))
    r.xadd("beltsight:objects:line2-reject", crossed("line2-reject", 1))

    async def scenario() -> tuple[int, int]:
        await bridge.start()
        try:
            state = bridge.state
            await wait_for(
                lambda: (
                    (state.line("line1-sorter", "count").count_in, state.line("line1-sorter", "count").count_out)
                    == (5, 1)
                    and state.line("line2-reject", "count").count_in == 1
                )
            )
            one = await report(settings, "line1-sorter")
            every = await report(settings, None)
            return one, every
        finally:
            await bridge.stop()

    assert asyncio.run(scenario()) == (0, 0)
    out = [row for row in capsys.readouterr().out.splitlines() if row.startswith(("OPC UA", "Modbus TCP", "  "))]
    cams = ["line1-infeed", "line1-sorter", "line2-reject"]
    expected = ["OPC", "line1-sorter", "Modbus", "line1-sorter", "OPC", *cams, "Modbus", *cams]
    assert [row.split()[0] for row in out] == expected, out  # the bridge's own log lines are left out
    opcua, modbus = 0, 2
    assert out[opcua + 1].split()[:6] == ["line1-sorter", "count", "in", "5", "out", "1"]
    assert "last washer" in out[opcua + 1]  # the last crossing was "out": no gate arrival
    assert out[modbus + 1].split()[:6] == ["line1-sorter", "count", "in", "5", "out", "1"]
    assert "registers 16-19" in out[modbus + 1]  # the second camera's block
    every = out[4:]
    rows = [row.split()[:6] for row in every if row.startswith("  ")]
    assert (
        rows
        == [
            ["line1-infeed", "count", "in", "0", "out", "0"],
            ["line1-sorter", "count", "in", "5", "out", "1"],
            ["line2-reject", "count", "in", "1", "out", "0"],
        ]
        * 2
    )
    assert "-> reject1 in 2.8 s" in every[3]  # line2-reject's last crossing, "in", with its gate arrival


def test_plc_says_to_start_the_demo_when_nothing_answers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ports = {name: free_port() for name in CONFIG_PORTS}
    settings = load_settings(write_config(tmp_path, ports))
    assert asyncio.run(report(settings, "line1-sorter")) == 1
    out = capsys.readouterr().out
    assert out.count("unreachable") == 2 and "is the demo running?" in out
