"""Run the real thermal governor against a simulated plant, beside the seeds' `sleep(0.1)` switch.

    python -m tools.thermal.sim [--tau 60] [--lag 3] [--out FILE.png]

The plant (tools/thermal/plant.py) heats from idle to full load, the cabinet warms by 15 C at
one third of the run and cools again at two thirds; its hardware slows itself down (half the
clocks) at `--slowdown` C and reports that threshold, as NVML does. Both policies see the same
sensor (lagged, whole degrees). The governor runs on its defaults: its limit is the reported
threshold less `margin_c`. The seeds' switch is `if temp > 85: time.sleep(0.1)` after every
batch (`--seed-threshold`), and the same switch at the governor's limit. The PNG shows
temperature, admitted share and delivered throughput (halved while the hardware slows itself
down); the summary (printed, and as JSON beside the PNG) compares them over each phase. Default
`--out`: thermal-sim.png in the run-output folder (tools/kit/run_output.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from daemon.config.seam import ThermalConfig
from daemon.thermal.seam import ThermalGovernor
from tools.kit.run_output import WHERE, reports_dir
from tools.thermal.plant import PlantParams, SleepSwitch, Trace, simulate, steps


def summarise(
    trace: Trace, params: PlantParams, limit_c: float, phases: list[tuple[float, float, float]]
) -> dict[str, object]:
    out: dict[str, object] = {"hw_slowdown_s": round(trace.slowdown_s, 1)}
    for name, (start, end, ambient) in zip(("cool", "hot", "cool_again"), phases, strict=True):
        idx = trace.window(start + (end - start) / 2, end)  # second half: after settling
        shares = [trace.share[i] for i in idx]
        out[name] = {
            "sustainable_share": round(params.sustainable_share(ambient, limit_c), 3),
            "mean_share": round(statistics.mean(shares), 3),
            "share_swing": round(max(shares) - min(shares), 3),
            "mean_throughput": round(statistics.mean(trace.throughput[i] for i in idx), 3),
            "throughput_swing": round(max(trace.throughput[i] for i in idx) - min(trace.throughput[i] for i in idx), 3),
            "max_temp_c": round(max(trace.temp_c[i] for i in idx), 2),
        }
    return out


def plot(traces: dict[str, Trace], limit_c: float, slowdown_c: float, path: Path, title: str) -> None:
    import matplotlib  # noqa: PLC0415 - a dev dependency

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(3, 1, figsize=(11, 8), sharex=True)
    colours = ["tab:blue", "tab:red", "tab:orange"]
    drawn = list(zip(colours, traces.items(), strict=False))
    for colour, (name, tr) in reversed(drawn):  # the governor (first) on top
        lw = 1.8 if colour == colours[0] else 0.7
        axes[0].plot(tr.t_s, tr.temp_c, color=colour, lw=lw, label=name)
        axes[1].plot(tr.t_s, tr.share, color=colour, lw=lw, label=name)
        axes[2].plot(tr.t_s, tr.throughput, color=colour, lw=lw, label=name)
    first = next(iter(traces.values()))
    axes[0].plot(first.t_s, first.ambient_c, color="grey", lw=1, ls=":", label="ambient")
    axes[0].axhline(limit_c, color="black", lw=0.8, ls="--", label=f"limit {limit_c:g} C")
    axes[0].axhline(slowdown_c, color="darkorange", lw=0.8, ls="--", label=f"hardware slowdown {slowdown_c:g} C")
    axes[0].set_ylabel("temperature (C)")
    axes[1].set_ylabel("admitted share")
    axes[2].set_ylabel("throughput (x full)")
    axes[2].set_xlabel("time (s)")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tau", type=float, default=60.0, help="plant time constant, s")
    ap.add_argument("--lag", type=float, default=3.0, help="sensor lag, s")
    ap.add_argument("--ambient", type=float, default=25.0)
    ap.add_argument("--slowdown", type=float, default=83.0, help="the hardware's slowdown threshold, C")
    ap.add_argument("--seed-threshold", type=float, default=85.0, help="the seeds' `if temp > N`")
    ap.add_argument("--out", type=Path, help=f"the PNG (default: thermal-sim.png under {WHERE}); the JSON beside it")
    args = ap.parse_args(argv)
    args.out = args.out or reports_dir() / "thermal-sim.png"
    params = PlantParams(tau_s=args.tau, idle_rise_c=12, full_rise_c=60, lag_s=args.lag, slowdown_c=args.slowdown)
    phase = max(10 * args.tau, 600.0)
    hot = args.ambient + 15
    ambient = steps(args.ambient, (phase, hot), (2 * phase, args.ambient))
    phases = [(0.0, phase, args.ambient), (phase, 2 * phase, hot), (2 * phase, 3 * phase, args.ambient)]
    config = ThermalConfig()
    limit = args.slowdown - config.margin_c
    traces = {
        "governor": simulate(ThermalGovernor(config).update, params, ambient, 3 * phase),
        f"seeds: sleep(0.1) above {args.seed_threshold:g} C": simulate(
            SleepSwitch(args.seed_threshold), params, ambient, 3 * phase
        ),
        f"sleep(0.1) above the governor's {limit:g} C": simulate(SleepSwitch(limit), params, ambient, 3 * phase),
    }
    summary = {name: summarise(tr, params, limit, phases) for name, tr in traces.items()}
    title = (
        f"plant tau {args.tau:g} s, sensor lag {args.lag:g} s, 1 C steps; ambient "
        f"{args.ambient:g} -> {hot:g} -> {args.ambient:g} C; hardware slowdown at {args.slowdown:g} C"
    )
    plot(traces, limit, params.slowdown_c, args.out, title)
    args.out.with_suffix(".json").write_text(json.dumps({"title": title, **summary}, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    print(f"wrote {args.out} and {args.out.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
