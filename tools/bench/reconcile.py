"""The reconciliation measured (#57): the smallest drift caught and how fast, and false alarms on a
stop-and-go belt, on the rig's scenes (tools.plcsim) in simulated time.

    .venv/bin/python -m tools.bench.reconcile [--hours 1] [--seed 1]

The bridge's pure `Reconciler` is driven by `tools.plcsim.replay` exactly as the bridge drives it
(readings every `poll_s`, crossings delivered 0.2 s after they happen), with the parts' travel from the
line to the photo-eye jittered (normal, `--travel-jitter-s`) and the PLC counting every part. No clock:
an hour of belt takes seconds, so the numbers are the logic's, not this machine's. What the network
readers and Redis add is measured by tests/integration/bridge/test_reconcile.py (seconds, not more).

1. Drift: for each part rate and missed share, the camera misses that share of parts from 60 s after
   the first full window on (evenly, as a lens slowly covered does on average); printed: seconds from
   the drift's start to `count_mismatch`, or "-" when not caught within 5 minutes. Two settings: the
   contract's (window 15 s, tolerance 2 parts) and a slow one for small drifts (window 300 s, tolerance 2 parts or 1 %).
2. False alarms: `--hours` of a stop-and-go belt (runs of 20-90 s, stops of 5-60 s, random), both settings,
   no drift: verdicts other than none are false alarms; also the largest |drift| of any window.
"""

from __future__ import annotations

import argparse
import random

from daemon.config.seam import ReconcileConfig
from tools.plcsim.counter import PlcCounter
from tools.plcsim.replay import replay
from tools.plcsim.scene import Belt, Miss, seen_by_camera

LAG_S = 2.0
DRIFT_AFTER_FULL_WINDOW_S = 60.0
CATCH_WITHIN_S = 300.0
SETTINGS: dict[str, dict[str, float]] = {
    "contract (window 15 s, tol 2)": {"window_s": 15, "tolerance": 2},
    "slow (window 300 s, tol 2 or 1 %)": {"window_s": 300, "tolerance": 2, "tolerance_share": 0.01},
}


def _cfg(**over: object) -> ReconcileConfig:
    base: dict[str, object] = {"camera": "c", "line": "l", "modbus": "127.0.0.1:502", "poll_s": 0.5, "lag_s": LAG_S}
    return ReconcileConfig.model_validate(base | over)


def _eye(parts: list[float], jitter_s: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return sorted(t + LAG_S + rng.gauss(0, jitter_s) for t in parts)


def stop_and_go(duration_s: float, rate: float, seed: int) -> list[float]:
    """Parts on a belt that runs and stops at random (runs 20-90 s, stops 5-60 s)."""
    rng = random.Random(seed)
    out: list[float] = []
    t = 0.0
    while t < duration_s:
        run, stop = rng.uniform(20, 90), rng.uniform(5, 60)
        out += [t + p for p in Belt(rate_per_s=rate, seed=rng.randrange(1 << 30)).crossings(0, run)]
        t += run + stop
    return [p for p in out if p < duration_s]


def drift_table(jitter_s: float, seed: int) -> None:
    print("1. time to count_mismatch after the drift starts (s; '-' = not caught in 5 min)")
    shares = (0.01, 0.02, 0.05, 0.10, 0.25)
    for name, over in SETTINGS.items():
        for rate in (1.0, 3.0, 8.0):
            cells = []
            drift_at = over["window_s"] + DRIFT_AFTER_FULL_WINDOW_S  # judged windows before it starts
            for share in shares:
                duration = drift_at + CATCH_WITHIN_S + 1
                parts = Belt(rate_per_s=rate, min_gap_s=0.05, seed=seed).crossings(0, duration)
                seen = seen_by_camera(parts, [Miss(drift_at, duration, share)])
                out = replay(_cfg(**over), seen, PlcCounter(_eye(parts, jitter_s, seed)), duration)
                caught = [t - drift_at for t in out.times("count_mismatch") if t > drift_at]
                early = [t for t in out.times("count_mismatch") if t <= drift_at]
                cell = f"{caught[0]:.1f}" if caught and caught[0] <= CATCH_WITHIN_S else "-"
                cells.append(cell + ("!" if early else ""))
            row = "  ".join(f"{share:.0%}={c:>6}" for share, c in zip(shares, cells, strict=True))
            print(f"   {name:36} {rate:>4.1f} parts/s: {row}")


def false_alarms(hours: float, jitter_s: float, seed: int) -> None:
    duration = hours * 3600
    print(f"2. false alarms over {hours:g} h of stop-and-go belt (simulated time), no drift")
    for name, over in SETTINGS.items():
        for rate in (1.0, 3.0, 8.0):
            parts = stop_and_go(duration, rate, seed)
            out = replay(_cfg(**over), parts, PlcCounter(_eye(parts, jitter_s, seed)), duration)
            worst = max((abs(w.drift) for w in out.windows), default=0)
            kinds = [v.kind for v in out.verdicts]
            print(
                f"   {name:36} {rate:>4.1f} parts/s: {len(parts)} parts, {len(out.windows)} windows, "
                f"false alarms {kinds.count('count_mismatch')}, largest |drift| {worst}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hours", type=float, default=1.0, help="stop-and-go belt for the false alarms")
    parser.add_argument("--travel-jitter-s", type=float, default=0.05, help="sd of the line-to-eye travel time")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    drift_table(args.travel_jitter_s, args.seed)
    false_alarms(args.hours, args.travel_jitter_s, args.seed)


if __name__ == "__main__":
    main()
