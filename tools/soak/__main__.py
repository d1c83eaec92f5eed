"""`python -m tools.soak --minutes N ...`: see tools/soak/__init__.py."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

import tools.soak
from tools.kit.run_output import WHERE, run_dir
from tools.soak.faults import FAULT_KINDS
from tools.soak.runner import Soak


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(tools.soak.__doc__ or "").split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--cameras", type=int, default=2)
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"the run's folder (default: soak-<time> under {WHERE})",
    )
    p.add_argument("--rebuild-every", type=int, default=500, help="engine.rebuild.every_frames")
    p.add_argument("--sample-s", type=float, default=10.0)
    p.add_argument("--fault-every-s", type=float, default=60.0)
    p.add_argument("--first-fault-s", type=float, default=45.0)
    p.add_argument("--clip-s", type=float, default=10.0, help="seconds per looped clip")
    p.add_argument("--flood-connections", type=int, default=1500, help="clients of each http_flood")
    p.add_argument("--nofile", type=int, default=1024, help="the daemon's RLIMIT_NOFILE (0: inherit)")
    p.add_argument(
        "--faults",
        default=",".join(FAULT_KINDS),
        help="fault kinds to cycle through, comma-separated ('' = none), to isolate one path",
    )
    p.add_argument(
        "--plc",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the bridge and a PLC (OPC UA subscriber, Modbus poller) on it, and check what it saw",
    )
    p.add_argument("--poll-ms", type=float, default=100.0, help="the PLC's Modbus poll period")
    p.add_argument("--sentinel", action="store_true", help="Redis under Sentinel (master, replica, 3 sentinels)")
    p.add_argument("--baseline-s", type=float, default=600.0, help="start of the measured window (after the warm-up)")
    args = p.parse_args(argv)
    args.faults = [k for k in args.faults.split(",") if k]
    unknown = set(args.faults) - set(FAULT_KINDS)
    if unknown:
        p.error(f"unknown fault kinds {sorted(unknown)}; known: {', '.join(FAULT_KINDS)}")
    left_out = {
        "bridge_kill": "" if args.plc else "--no-plc",
        "redis_failover": "" if args.sentinel else "no --sentinel",
        "redis_kill": "under --sentinel a kill of the master is redis_failover" if args.sentinel else "",
    }
    for kind in args.faults:
        if left_out.get(kind):
            print(f"{kind} left out: {left_out[kind]}", flush=True)
    args.faults = [k for k in args.faults if not left_out.get(k)]
    if args.out is None:
        args.out = run_dir("soak")
    args.out = args.out.resolve()
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    soak = Soak(args)

    def on_term(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        soak.run()
    except KeyboardInterrupt:
        print("interrupted: cleaning up", flush=True)
        return 130
    finally:
        soak.cleanup()
        print(f"run output: {args.out}", flush=True)
    return 0 if getattr(soak, "passed", False) else 1


sys.exit(main())
