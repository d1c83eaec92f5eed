"""Sweep the real thermal governor across the plant family and count failures per criterion.

    python -m tools.thermal.sweep [--quick] [--json out.json] [--worst 5]

Each case runs `daemon.thermal.governor.ThermalGovernor` on its defaults (only `limit_c` set, or not even
that where the plant's reported threshold gives it) against tools/thermal/plant.py: the plant
starts cold at full speed, settles, takes an ambient step of +15 C, settles, and gets the ambient
back (each phase max(10 tau, 600 s)). The grid spans tau 20..300 s, sensor lags 0..6 s, the share
the plant can sustain at the limit in the hot phase from 0.12 to above 1, several idle/full-load
rises, hardware-reported thresholds (or none, or a slowdown only 3.5 C above the limit),
quantisation 1 C and finer, and sample intervals 0.5/1/2 s. A second grid heats the cabinet
until even the minimum share overheats (pause and resume).

Criteria (those of issue 16), each counted over the cases it applies to:
- temp: after settling (second half of each phase) the true temperature <= limit + 1.5 C;
- share: the mean share there >= 0.95 x the largest share the plant sustains at the limit;
- swing: the share's peak-to-peak there <= 0.1;
- slowdown: the hardware slowdown is never reached;
- pause: no pause where the plant can sustain the minimum share;
- recovery: within 2 tau of the ambient falling, the share is >= 0.95 x the sustainable share;
- flap: where even the minimum share overheats (the cabinet heated in stairs of about +15 C), one
  pause from the last stair on (up to three, each no shorter than the one before, where idle alone
  cools the device), the last ending after the cabinet cooled, then none.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from daemon.config.seam import ThermalConfig
from daemon.thermal.seam import ThermalGovernor
from tools.thermal.plant import PlantParams, simulate, steps

LIMIT = 80.0
RISES = ((10.0, 50.0), (15.0, 70.0), (5.0, 30.0))
MODES = {
    # name: (limit_c in the config, the plant's slowdown threshold, whether the sensor reports it)
    "config": (LIMIT, LIMIT + 8, True),
    "hw": (None, LIMIT + 5, True),  # limit derived: slowdown - margin_c (5)
    "tight": (LIMIT, LIMIT + 3.5, True),
    "none": (LIMIT, LIMIT + 8, False),
}


@dataclass(frozen=True, slots=True)
class Case:
    tau_s: float
    lag_s: float
    share_hot: float  # the share the plant sustains at the limit in the hot phase (unclipped)
    idle_rise_c: float = 10.0
    full_rise_c: float = 50.0
    mode: str = "config"
    quantum_c: float = 1.0
    interval_s: float = 1.0

    def params(self) -> PlantParams:
        _, slowdown, reports = MODES[self.mode]
        return PlantParams(
            tau_s=self.tau_s,
            idle_rise_c=self.idle_rise_c,
            full_rise_c=self.full_rise_c,
            slowdown_c=slowdown,
            lag_s=self.lag_s,
            quantum_c=self.quantum_c,
            reports_threshold=reports,
        )

    def config(self) -> ThermalConfig:
        limit = MODES[self.mode][0]
        return ThermalConfig() if limit is None else ThermalConfig(limit_c=limit)

    @property
    def hot_c(self) -> float:
        return LIMIT - self.idle_rise_c - self.share_hot * (self.full_rise_c - self.idle_rise_c)

    def label(self) -> str:
        return (
            f"tau{self.tau_s:g} lag{self.lag_s:g} s*{self.share_hot:g} rise{self.idle_rise_c:g}/{self.full_rise_c:g}"
            f" {self.mode} q{self.quantum_c:g} dt{self.interval_s:g}"
        )


def grid(quick: bool) -> Iterator[Case]:
    taus = (20.0, 40.0, 300.0) if quick else (20.0, 25.0, 40.0, 80.0, 150.0, 300.0)
    lags = (0.0, 4.0, 6.0) if quick else (0.0, 2.0, 4.0, 6.0)
    shares = (0.12, 0.15, 0.3, 0.6, 1.3) if quick else (0.12, 0.15, 0.2, 0.3, 0.6, 0.9, 1.3)
    for tau, lag, share, (idle, full) in itertools.product(taus, lags, shares, RISES):
        yield Case(tau, lag, share, idle, full)
    few_taus = (20.0, 60.0, 300.0)
    for tau, lag, share, mode in itertools.product(few_taus, (2.0, 4.0, 6.0), (0.15, 0.5), ("hw", "tight", "none")):
        yield Case(tau, lag, share, mode=mode)
    for tau, lag, share, q in itertools.product(few_taus, (0.0, 3.0, 6.0), (0.15, 0.5), (0.1, 0.5)):
        yield Case(tau, lag, share, quantum_c=q)
    for tau, lag, share, dt in itertools.product(few_taus, (1.0, 3.0, 6.0), (0.15, 0.5), (0.5, 2.0)):
        yield Case(tau, lag, share, interval_s=dt)


def evaluate(case: Case) -> dict[str, float]:
    """Each criterion's margin: <= 0 passes (positive: by how much it fails)."""
    params, config = case.params(), case.config()
    phase = max(10 * case.tau_s, 600.0)
    hot, cool = case.hot_c, case.hot_c - 15.0
    trace = simulate(
        ThermalGovernor(config).update,
        params,
        steps(cool, (phase, hot), (2 * phase, cool)),
        3 * phase,
        interval_s=case.interval_s,
    )
    out = {"temp": -1e9, "share": -1e9, "swing": -1e9}
    for start, ambient in ((0.0, cool), (phase, hot), (2 * phase, cool)):
        idx = trace.window(start + phase / 2, start + phase)
        shares = [trace.share[i] for i in idx]
        best = params.sustainable_share(ambient, LIMIT)
        out["temp"] = max(out["temp"], max(trace.temp_c[i] for i in idx) - LIMIT - 1.5)
        out["share"] = max(out["share"], 0.95 - statistics.mean(shares) / best)
        out["swing"] = max(out["swing"], max(shares) - min(shares) - 0.1)
    out["slowdown"] = trace.slowdown_s if trace.slowdown_s > 0 else -1.0
    out["pause"] = 1.0 if "paused" in trace.level else -1.0
    best = params.sustainable_share(cool, LIMIT)
    fall = 2 * phase
    back = next((trace.t_s[i] - fall for i in trace.window(fall, 3 * phase) if trace.share[i] >= 0.95 * best), phase)
    out["recovery"] = back / case.tau_s - 2.0
    out["overshoot_c"] = max(trace.temp_c) - LIMIT  # information, no criterion
    return out


def evaluate_pause(tau_s: float, lag_s: float, quick_idle: bool) -> dict[str, float]:
    """Heat the cabinet until even the minimum share overheats: one pause, resumed once cool."""
    params = PlantParams(tau_s=tau_s, idle_rise_c=10, full_rise_c=50, lag_s=lag_s, slowdown_c=LIMIT + 8)
    hot_from, hot_until = 10 * tau_s, 25 * tau_s
    # in steps of about +15 C, to 72 C: idle alone stays above the resume temperature; or to 64 C:
    # idle cools, the minimum share overheats
    top = 72.0 if quick_idle else 64.0
    stairs = ((hot_from, 40.0), (hot_from + 3 * tau_s, 56.0), (hot_from + 6 * tau_s, top))
    ambient = steps(25.0, *stairs, (hot_until, 25.0))
    config = ThermalConfig(limit_c=LIMIT, critical_c=LIMIT + 4, resume_c=LIMIT - 5, min_share=0.3)
    trace = simulate(ThermalGovernor(config).update, params, ambient, 40 * tau_s)
    # a pause on an earlier stair's transient (a fast plant, a long lag) is no flapping: count
    # those from the last stair on
    stretches = [p for p in trace.pauses() if p[1] > stairs[-1][0]]
    ok = 1 <= len(stretches) <= (1 if quick_idle else 3) and stretches[-1][1] > hot_until
    ok = ok and all(b[1] - b[0] >= a[1] - a[0] for a, b in itertools.pairwise(stretches))
    ok = ok and trace.share[-1] >= 0.95 * params.sustainable_share(25.0, LIMIT) and trace.slowdown_s == 0
    return {"flap": -1.0 if ok else float(len(stretches))}


CRITERIA = ("temp", "share", "swing", "slowdown", "pause", "recovery", "flap")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a smaller grid")
    ap.add_argument("--worst", type=int, default=4, help="worst cases shown per criterion")
    ap.add_argument("--json", type=Path, help="write every case's margins here")
    args = ap.parse_args(argv)
    rows: list[tuple[str, dict[str, float]]] = [(c.label(), evaluate(c)) for c in grid(args.quick)]
    for tau, lag, idles_warm in itertools.product((20.0, 60.0, 150.0, 300.0), (0.0, 3.0, 6.0), (True, False)):
        label = f"pause tau{tau:g} lag{lag:g} {'idle-warm' if idles_warm else 'idle-cool'}"
        rows.append((label, evaluate_pause(tau, lag, idles_warm)))
    print(f"{'criterion':<10} {'fail':>5} {'of':>5}  worst (margin > 0 fails)")
    for name in CRITERIA:
        scored = sorted(((m[name], label) for label, m in rows if name in m), reverse=True)
        failing = [s for s in scored if s[0] > 0]
        worst = "; ".join(f"{label} {value:+.3g}" for value, label in failing[: args.worst])
        print(f"{name:<10} {len(failing):>5} {len(scored):>5}  {worst}")
    over = sorted(((m["overshoot_c"], label) for label, m in rows if "overshoot_c" in m), reverse=True)
    print("largest overshoot over the limit (C): " + "; ".join(f"{label} {v:.2f}" for v, label in over[:3]))
    if args.json:
        args.json.write_text(json.dumps([{"case": label, **m} for label, m in rows], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
