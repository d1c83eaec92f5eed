"""`python -m tools.plcsim`: a simulated PLC whose photo-eye counter follows a synthetic belt.

    .venv/bin/python -m tools.plcsim [--modbus-port 5021] [--opcua-port 4841] [--rate 2] [--seconds 600]
        [--bits 16] [--start N] [--miss-every K] [--double-every K] [--reset-at S ...] [--down S:E ...]

Serves the counter on Modbus TCP (unit 1, register `--register`, holding and input tables; two
registers high word first with `--bits 32`) and on OPC UA (`opc.tcp://127.0.0.1:<port>/plcsim`,
node printed), both on 127.0.0.1, with the faults asked for, and prints one READY line. Point a
`[[bridge.reconcile]]` entry at it; the belt here is the simulator's own (its parts do not come from
a camera), so it shows the PLC side of the rig: wraps, resets and the PLC gone as the bridge sees them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib

from tools.plcsim.counter import PlcCounter
from tools.plcsim.scene import Belt
from tools.plcsim.servers import ModbusPlc, OpcUaPlc, PlcSim


def _interval(text: str) -> tuple[float, float]:
    start, _, end = text.partition(":")
    return float(start), float(end)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--modbus-port", type=int, default=5021, help="0: any free port; -1: no Modbus")
    p.add_argument("--opcua-port", type=int, default=4841, help="0: any free port; -1: no OPC UA")
    p.add_argument("--register", type=int, default=0)
    p.add_argument("--rate", type=float, default=2.0, help="parts per second")
    p.add_argument("--seconds", type=float, default=600.0, help="serve this long")
    p.add_argument("--bits", type=int, choices=(16, 32), default=16)
    p.add_argument("--start", type=int, default=0, help="the counter at t=0 (near 2**bits to see a wrap)")
    p.add_argument("--miss-every", type=int, default=0, help="the photo-eye misses every K-th part")
    p.add_argument("--double-every", type=int, default=0, help="every K-th part is counted twice")
    p.add_argument("--reset-at", type=float, action="append", default=[], help="reset to 0 at S seconds")
    p.add_argument("--down", type=_interval, action="append", default=[], help="no answers from S to E (S:E)")
    return p.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    parts = Belt(rate_per_s=args.rate).crossings(0, args.seconds)
    n = len(parts)
    counter = PlcCounter(
        parts,
        bits=args.bits,
        start=args.start,
        missed=set(range(args.miss_every - 1, n, args.miss_every)) if args.miss_every > 0 else set(),
        doubles=set(range(args.double_every - 1, n, args.double_every)) if args.double_every > 0 else set(),
        resets=list(args.reset_at),
        down=list(args.down),
    )
    sim = PlcSim(counter, register=args.register, words=args.bits // 16)
    servers: list[ModbusPlc | OpcUaPlc] = []
    where = []
    if args.modbus_port >= 0:
        modbus = ModbusPlc(sim, port=args.modbus_port)
        where.append(f"modbus=127.0.0.1:{await modbus.start()} register={args.register} words={args.bits // 16}")
        servers.append(modbus)
    if args.opcua_port >= 0:
        opcua = OpcUaPlc(sim, port=args.opcua_port)
        await opcua.start()
        where.append(f"opcua={opcua.url} node={opcua.node}")
        servers.append(opcua)
    sim.start()
    print("READY " + " ".join(where), flush=True)
    try:
        await asyncio.sleep(args.seconds)
    finally:
        for server in servers:
            await server.stop()


def main(argv: list[str] | None = None) -> int:
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
