"""The PLC simulator (tools.plcsim): its counter's faults, and the CLI serving it over Modbus TCP and
OPC UA as the bridge's readers read it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from daemon.bridge.reference import open_reference
from daemon.config.reconcile import ReconcileConfig
from tools.plcsim.counter import PlcCounter

REPO = Path(__file__).resolve().parents[2]
ARGS = ("--seconds", "60", "--bits", "32", "--register", "4")


def test_the_counter_follows_the_parts_with_its_faults() -> None:
    parts = [1.0, 2.0, 3.0, 4.0, 5.0]
    assert [PlcCounter(parts).value(t) for t in (0.5, 1.0, 3.5, 9)] == [0, 1, 3, 5]
    assert PlcCounter(parts, missed={1}, doubles={3}).value(9) == 5  # one lost, one counted twice
    assert PlcCounter(parts, bits=16, start=65534).value(3.5) == 1  # 65534 + 3 wraps
    reset = PlcCounter(parts, start=100, resets=[2.5])
    assert (reset.value(2.0), reset.value(2.6), reset.value(9)) == (102, 0, 3)
    assert PlcCounter(parts, down=[(2.0, 3.0)]).is_down(2.5) and not PlcCounter(parts).is_down(2.5)


def test_the_cli_serves_a_counting_plc_on_both_protocols() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.plcsim", "--modbus-port", "0", "--opcua-port", "0", "--rate", "20", *ARGS],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline().split()
        assert ready[0] == "READY", ready
        fields = dict(item.split("=", 1) for item in ready[1:])
        modbus = ReconcileConfig.model_validate(
            {"camera": "c", "line": "l", "modbus": fields["modbus"], "register": 4, "words": 2}
        )
        opcua = ReconcileConfig.model_validate(
            {"camera": "c", "line": "l", "opcua": fields["opcua"], "node": fields["node"]}
        )

        async def read_twice() -> list[int]:
            values = []
            for cfg in (modbus, opcua):
                reader = open_reference(cfg)
                try:
                    first = await reader.read()
                    await asyncio.sleep(1.0)
                    values += [first, await reader.read()]
                finally:
                    await reader.close()
            return values

        m1, m2, o1, o2 = asyncio.run(read_twice())
        assert m2 > m1 and o2 > o1 and o1 >= m2  # one counter, counting, seen alike on both protocols
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
