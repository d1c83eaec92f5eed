"""The soak's output: one table row per sample (`row`, printed as the run goes), and at the end the judged
run (`write_report`: the verdict of `tools.soak.verdict`, the table, faults, streams, PLC and verdict
printed, `soak.json` and `soak.png` written to the run's folder)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from tools.soak.faults import Fault
from tools.soak.plot import plot_soak
from tools.soak.stats import Sample
from tools.soak.verdict import checks, memory, summarize


def row(s: Sample, faults: list[Fault], sample_s: float) -> str:
    """One sample as a table row, with the faults active during it."""
    fps = " ".join(f"{c}={s.fps.get(c, 0.0):5.1f}" for c in sorted(s.inferred))
    drops = ",".join(f"{r}={int(v)}" for r, v in sorted(s.dropped.items()) if v) or "-"
    extra = s.extra
    events = ",".join(
        f"{f.kind}:{f.target}"
        for f in faults
        if f.start_s <= s.t_s and (f.end_s is None or f.end_s >= s.t_s - sample_s)
    )
    return (
        f"{s.t_s:7.0f} {s.rss_mib:8.1f} {s.fds:4d} {s.threads:4d}  {fps}  "
        f"proc={int(sum(s.inferred.values())):7d} pub={int(sum(s.published.values())):7d} "
        f"anon={extra.get('rss_anon_mib', 0):.0f} file={extra.get('rss_file_mib', 0):.0f} "
        f"rebuilds={int(extra.get('rebuilds', 0))} healthz={extra.get('healthz_ms', 0):.0f}ms "
        f"drop[{drops}] {events or ''}"
    )


def write_report(
    args: argparse.Namespace,
    *,
    samples: list[Sample],
    faults: list[Fault],
    streams: dict[str, Any],
    objects: dict[str, Any],
    plc_result: dict[str, Any],
    daemon_rc: int | None,
    flood_counts: list[dict[str, int]],
) -> bool:
    """Judge the run, print and write it (`args.out`); whether every check passed."""
    judged = [s for s in samples if s.t_s > 0]
    mem = memory(judged, duration_s=args.minutes * 60, baseline_s=args.baseline_s, sample_s=args.sample_s)
    checked = checks(judged, mem, daemon_rc=daemon_rc, streams=streams, objects=objects, plc_result=plc_result)
    verdict = summarize(judged, mem, checked, daemon_rc=daemon_rc, flood_counts=flood_counts)
    _print_tables(args, samples, faults, streams, objects)
    if plc_result:
        print("\n=== plc ===")
        print(json.dumps(plc_result, indent=2))
    print("\n=== verdict ===")
    print(json.dumps(verdict, indent=2))
    print("VERDICT:", "PASS" if verdict["pass"] else "FAIL")
    data = {
        "args": {k: str(v) for k, v in vars(args).items()},
        "samples": [asdict(s) for s in samples],
        "faults": [asdict(f) for f in faults],
        "streams": streams,
        "objects": objects,
        "plc": plc_result,
        "verdict": verdict,
    }
    (args.out / "soak.json").write_text(json.dumps(data, indent=1))
    plot_soak(args.out / "soak.png", samples, faults, args.minutes)
    return bool(verdict["pass"])


def _print_tables(
    args: argparse.Namespace,
    samples: list[Sample],
    faults: list[Fault],
    streams: dict[str, Any],
    objects: dict[str, Any],
) -> None:
    header = f"{'t_s':>7} {'rss_MiB':>8} {'fds':>4} {'thr':>4}  fps/camera  processed published rebuilds"
    header += " drops faults"
    print("\n=== soak table ===")
    print(header)
    for s in samples:
        print(row(s, faults, args.sample_s))
    print("\n=== faults ===")
    for f in faults:
        print(f"  {f.start_s:7.1f}s .. {f.end_s}s  {f.kind:13s} {f.target}")
    print("\n=== streams ===")
    for cam, v in streams.items():
        print(f"  {cam}: {v}")
    print("\n=== objects ===")
    for cam, v in objects.items():
        print(f"  {cam}: {v}")
