"""What a PLC sees of the running demo: each camera's counts over OPC UA and over Modbus TCP.

    .venv/bin/python -m tools.demo.plc [--camera ID] [--config demo-data/demo.toml]

Reads the config the demo wrote (its ports), then, for each camera's counting lines (or one
camera's), reads `BeltSight/<camera>/<line>/CountIn`, `CountOut`, `LastLabel` and the first
gate's `<gate>EtaMs` from the bridge's OPC UA server (asyncua; security none, as the demo serves
it) and the line's block of holding registers from its Modbus TCP server (pymodbus; the map in
daemon/bridge/registers.py: CountIn in registers 0-1, CountOut in 2-3, high word first), and
prints both. Exit 0 when both protocols answered, 1 otherwise (the demo not running, say).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

from asyncua.client.client import Client
from asyncua.ua.uaerrors import UaError
from pymodbus.client import AsyncModbusTcpClient

from daemon.bridge.seam import DEFINED_REGISTERS, ETA_SUFFIX, BridgeLayout, layout_from_data
from daemon.config.seam import ConfigError, Settings, load_settings
from daemon.core.seam import parse_host_port
from tools.kit.plc_clients import beltsight_ns, block_counts, node, opcua_url, read_block

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class Reading:
    """One line's counts as one protocol served them."""

    count_in: int
    count_out: int
    detail: str = ""

    def text(self) -> str:
        return f"in {self.count_in} out {self.count_out}" + (f"  {self.detail}" if self.detail else "")


async def read_opcua(endpoint: str, blocks: list[tuple[str, str, str | None]]) -> list[Reading]:
    async with Client(endpoint, timeout=TIMEOUT_S) as client:
        ns = await beltsight_ns(client)

        async def value(path: str) -> object:
            return await node(client, ns, path).read_value()

        out = []
        for camera, line, gate in blocks:
            base = f"BeltSight/{camera}/{line}"
            label = await value(f"{base}/LastLabel")
            detail = f"last {label}" if label else "no crossing yet"
            if gate is not None and label:
                eta, crossed = await value(f"{base}/{gate}{ETA_SUFFIX}"), await value(f"{base}/LastCrossedMs")
                if isinstance(eta, int) and isinstance(crossed, int) and eta:
                    detail += f" -> {gate} in {(eta - crossed) / 1000:.1f} s"
            count_in, count_out = await value(f"{base}/CountIn"), await value(f"{base}/CountOut")
            out.append(Reading(int(str(count_in)), int(str(count_out)), detail))
        return out


async def read_modbus(host: str, port: int, unit: int, offsets: list[int]) -> list[Reading]:
    client = AsyncModbusTcpClient(host, port=port, timeout=TIMEOUT_S)
    if not await client.connect():
        raise ConnectionError(f"Modbus TCP {host}:{port} refused or did not answer")
    try:
        out = []
        for offset in offsets:
            regs = await read_block(client, offset, unit, DEFINED_REGISTERS)
            out.append(Reading(*block_counts(regs), f"registers {offset}-{offset + 3}, heartbeat {regs[13]}"))
        return out
    finally:
        client.close()


def blocks_of(layout: BridgeLayout, camera: str | None) -> list[tuple[str, str, str | None]]:
    """(camera, line, first gate) in Modbus block order, only `camera`'s when given."""
    return [
        (cam.id, line.id, line.gates[0] if line.gates else None)
        for cam in layout.cameras
        for line in cam.lines
        if camera is None or cam.id == camera
    ]


async def report(settings: Settings, camera: str | None) -> int:
    layout = layout_from_data(settings.cameras)
    blocks = blocks_of(layout, camera)
    if not blocks:
        known = ", ".join(c.id for c in layout.cameras)
        print(f"plc: no counting line on camera {camera!r} (cameras: {known})", file=sys.stderr)
        return 1
    bridge = settings.bridge
    opcua_host, opcua_port = parse_host_port(bridge.opcua.listen or "")
    endpoint = opcua_url(f"{opcua_host}:{opcua_port}")
    mb_host, mb_port = parse_host_port(bridge.modbus.listen or "")
    all_blocks = layout.blocks()
    offsets = [
        bridge.modbus.base_register + all_blocks.index((c, li)) * bridge.modbus.block_size for c, li, _ in blocks
    ]
    failed = 0
    results: dict[str, list[Reading] | str] = {}
    for name, read in (
        (f"OPC UA {endpoint}", read_opcua(endpoint, blocks)),
        (
            f"Modbus TCP {mb_host}:{mb_port} unit {bridge.modbus.unit_id}",
            read_modbus(mb_host, mb_port, bridge.modbus.unit_id, offsets),
        ),
    ):
        try:
            results[name] = await asyncio.wait_for(read, TIMEOUT_S * 3)
        except (OSError, TimeoutError, UaError, ConnectionError) as exc:
            results[name] = f"{type(exc).__name__}: {exc}"
            failed += 1
    for name, readings in results.items():
        print(name)
        if isinstance(readings, str):
            print(f"  unreachable ({readings}); is the demo running? (.venv/bin/python tools/demo.py)")
            continue
        for (cam, line, _gate), reading in zip(blocks, readings, strict=True):
            print(f"  {cam:<14} {line} {reading.text()}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.demo.plc", description=__doc__.splitlines()[0])
    parser.add_argument("--camera", help="one camera's lines (default: every camera's)")
    parser.add_argument(
        "--config",
        default=str(REPO / "demo-data" / "demo.toml"),
        help="the config the demo wrote, with its ports (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    logging.getLogger("asyncua").setLevel(logging.ERROR)  # its session-timeout notice is no news to a PLC
    path = Path(args.config)
    if not path.is_file():
        print(f"plc: {path} does not exist: start the demo first (.venv/bin/python tools/demo.py)", file=sys.stderr)
        return 1
    try:
        settings = load_settings(path)
    except ConfigError as exc:
        print(f"plc: {exc}", file=sys.stderr)
        return 1
    return asyncio.run(report(settings, args.camera))


if __name__ == "__main__":
    sys.exit(main())
