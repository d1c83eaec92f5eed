"""`python -m tools.bench ...`: see tools/bench/__init__.py."""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import onnxruntime as ort
import redis

from daemon.batching.seam import BatchPolicy
from daemon.config.seam import EngineConfig
from daemon.core.seam import tune_malloc
from daemon.inference.seam import intra_op_threads, lane_workers, load_model_info, worker_batch
from daemon.ops.seam import configure_logging
from tools.bench import null_bench
from tools.bench.baselines import (
    Rates,
    bare_at,
    bare_beside_decoders,
    bare_both,
    bare_cpu_ms,
    bracket,
    make_session,
    naive_phase,
    ultralytics_phase,
    used_sizes,
)
from tools.bench.budget import budget_lines, knee, plot_scaling, scaling_points
from tools.bench.cli import parse_args
from tools.bench.phase import daemon_phase
from tools.bench.procs import (
    CLIP_SECONDS,
    Servers,
    render_clips,
)
from tools.bench.report import (
    DRIFT_WARN,
    acceptance,
    beside_line,
    crossings_line,
    experiment_line,
    plot,
    print_table,
    workers_line,
)
from tools.kit.daemon_config import MODELS


def scaling_report(
    args: argparse.Namespace, phases: dict[int, dict[str, Any]], bare: dict[int, float]
) -> dict[str, Any] | None:
    """`--scaling`: the points, the knee, and the plot (scaling.png in --out)."""
    if not args.scaling:
        return None
    points = scaling_points(phases, {k: bare_at(bare, ph["batch_sizes"]) for k, ph in phases.items()})
    k = knee(points)
    print("\nscaling (cameras: published fps / offered, ratio to the bare model at its batch sizes, RSS MB):")
    for p in points:
        print(
            f"  {p['cameras']:>3}: {p['fps_total']} / {p['fps_offered']}, {p['ratio_to_bare']} x bare, {p['rss_mb']} MB"
        )
    print(f"knee: {f'{k} cameras' if k is not None else 'below the first count'} (last count served >= 0.95 x offered)")
    title = f"scaling: {args.size} at {args.fps} fps per camera, model {args.model}, {os.cpu_count()} cores"
    plot_scaling(args.out / "scaling.png", points, title)
    return {"points": points, "knee_cameras": k}


@dataclass
class Run:
    """What one bench run measured: the daemon phases and the bare-model and naive-loop baselines."""

    main_k: int
    workers: int
    threads: int
    before: dict[str, Rates]
    before_cpu: Rates
    after: dict[str, Rates]
    after_cpu: Rates
    phases: dict[int, dict[str, Any]]
    main_batch: int
    beside: dict[str, Any] | str
    bare_single: Rates
    bare_workers: Rates
    drift: dict[str, float]
    bare: Rates
    session: ort.InferenceSession
    naive: dict[str, Any]
    ultralytics: dict[str, Any] | None = None
    """`--ultralytics`: its streaming predictor on the main count's streams with the same model."""

    @property
    def main_phase(self) -> dict[str, Any]:
        return self.phases[self.main_k]

    @property
    def bare_main(self) -> float:
        return bare_at(self.bare, self.main_phase["batch_sizes"])


def main() -> int:
    malloc = tune_malloc()  # as `beltsight run` does, before any thread starts
    args = parse_args()
    args.malloc = malloc
    args.out.mkdir(parents=True, exist_ok=True)
    configure_logging("json", "info", stream=(args.out / "daemon.log").open("w"))
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM cleans up like Ctrl-C
    if args.null_model:
        return null_bench.run(args)
    counts = args.scaling or args.sweep
    ks = [int(v) for v in counts.split(",")] if counts else [args.cameras]
    main_k = args.cameras if args.cameras in ks else ks[-1]
    srv = Servers()
    try:
        run = measure(args, srv, ks, main_k)
    finally:
        srv.close()
    checks = acceptance(run.main_phase, run.bare_main, run.naive)
    bare_cpu = print_summary(args, run, checks)
    scaling = scaling_report(args, run.phases, run.bare)
    report = {
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "machine": machine(args, run.session),
        **report_fields(run, bare_cpu),
        "checks": {key: {"pass": ok, "detail": text} for key, ok, text in checks},
        "stage_budget": run.main_phase["stage_budget"],
        "stage_counters_cost": run.main_phase["stage_counters_cost"],
        "experiment": run.main_phase.get("experiment"),
        "scaling": scaling,
    }
    (args.out / "report.json").write_text(json.dumps(report, indent=1))
    plot(args.out / "bench.png", run.phases, run.main_phase, run.naive, run.bare)
    print(f"\nreport: {args.out / 'report.json'}\nplot:   {args.out / 'bench.png'}")
    return 0 if all(ok for _k, ok, _t in checks) else 1


def engine_config(args: argparse.Namespace) -> EngineConfig:
    """The daemon's engine section as the flags set it (on the CPU): the bare runs take its layout."""
    return EngineConfig(
        providers=["cpu"],
        workers=args.workers,
        intra_op_threads=args.intra_op_threads,
        worker_batch=args.worker_batch,
        max_batch=args.max_batch or EngineConfig().max_batch,
    )


def measure(args: argparse.Namespace, srv: Servers, ks: list[int], main_k: int) -> Run:
    """The run's phases in order: the bare model before, a daemon phase per camera count, the bare model
    after (and beside the decoders), the naive loop."""
    clips = render_clips(max(ks), args.width, args.height, args.fps, args.bitrate or None)
    args.clip_mbit_s = round(sum(c.stat().st_size for c in clips) * 8 / CLIP_SECONDS / len(clips) / 1e6, 2)
    srv.start(clips, args.out, args.rtsp_nice)
    args.bare_clip = clips[0]  # the bare model runs on its frames
    dcfg = engine_config(args)
    workers, threads = lane_workers(dcfg), intra_op_threads(dcfg)
    policy = BatchPolicy(dcfg.max_batch, 0.0, 0.0, workers=workers, per_worker=worker_batch(dcfg))
    expected = policy.share(main_k)  # the batch size the daemon will run, by its own rule
    before, before_cpu = bare_both(args, dcfg, sorted({1, expected}), "before")
    phases: dict[int, dict[str, Any]] = {}
    for k in ks:
        redis.Redis(port=srv.redis_port).flushall()
        print(f"bench: daemon phase, {k} cameras, {args.seconds} s", flush=True)
        phases[k] = daemon_phase(k, args, srv, args.out, args.flame if k == main_k else None)
        print(
            f"bench:   {phases[k]['fps_total']} fps, p99 {phases[k]['latency_ms']['p99']} ms, "
            f"batches {phases[k]['batch_sizes']}",
            flush=True,
        )
    sizes = sorted({1} | {b for ph in phases.values() for b in used_sizes(ph["batch_sizes"])})
    after, after_cpu = bare_both(args, dcfg, sizes, "after")
    main_batch = max(phases[main_k]["batch_sizes"].items(), key=lambda kv: kv[0] * kv[1], default=(1, 0))[0]
    try:
        beside: dict[str, Any] | str = bare_beside_decoders(
            args, dcfg, srv.urls[:main_k], main_k * args.fps, main_batch
        )
    except RuntimeError as exc:  # a diagnostic: its failure must not cost the run its report
        beside = f"not measured: {exc}"
    bare_single, bare_workers, drift = bracket(before, after)
    bare = {b: max(bare_single[b], bare_workers.get(b, 0.0)) for b in sizes}  # the stronger baseline
    session = make_session(args, EngineConfig(providers=["cpu"], workers=1))
    naive_s = args.naive_seconds or args.seconds / 2
    print(f"bench: naive loop, {main_k} cameras, {naive_s} s", flush=True)
    naive = naive_phase(main_k, naive_s, args, srv, session)
    ultralytics = ultralytics_phase(args, srv.urls[:main_k], MODELS[args.model])
    return Run(
        main_k=main_k,
        workers=workers,
        threads=threads,
        before=before,
        before_cpu=before_cpu,
        after=after,
        after_cpu=after_cpu,
        phases=phases,
        main_batch=main_batch,
        beside=beside,
        bare_single=bare_single,
        bare_workers=bare_workers,
        drift=drift,
        bare=bare,
        session=session,
        naive=naive,
        ultralytics=ultralytics,
    )


def print_summary(args: argparse.Namespace, run: Run, checks: list[tuple[str, bool, str]]) -> float | None:
    """The table, the stage budget, the crossings and the experiment; returns the bare CPU ms per image."""
    detail = f"; 1 session, ORT threads: {run.bare_single}"
    if run.bare_workers:
        detail += f"; {run.workers} sessions x {run.threads} thread(s) side by side: {run.bare_workers}"
    detail += f"\nbare model, after / before the daemon phase (the host's speed drift): {run.drift}"
    if any(abs(d - 1) > DRIFT_WARN for d in run.drift.values()):
        detail += f"  WARNING: drift above {DRIFT_WARN:.0%}: the host's speed changed, the ratios are unreliable"
    detail += "\n" + beside_line(run.beside, run.main_phase["fps_total"] / run.bare_main)
    bare_cpu = bare_cpu_ms(run.before_cpu, run.after_cpu, run.main_batch)
    detail += "\n" + workers_line(run.main_phase, bare_cpu, run.bare_main)
    print(
        f"\nclips: {args.size} at {args.fps} fps, H.264 capped at {args.bitrate or 'none (crf 20)'}: "
        f"{args.clip_mbit_s} Mbit/s per camera on average"
    )
    print_table(run.main_phase, run.naive, run.bare, run.bare_main, checks, detail)
    budget = budget_lines(run.main_phase["stage_budget"], bare_cpu, run.main_phase["stage_counters_cost"])
    print("\n" + "\n".join(budget))
    print(crossings_line(run.main_phase))
    if run.ultralytics is not None:
        u = run.ultralytics
        ratio = run.main_phase["fps_total"] / u["fps"] if u["fps"] else float("nan")
        print(
            f"Ultralytics {args.ultralytics_version}, its streaming predictor on the same {run.main_k} streams and "
            f"model (its own window after the naive loop's): {u['fps']} fps, {u['core_pct']}% of one core, "
            f"{u['ms_per_frame']} ms CPU per frame; daemon / Ultralytics = {ratio:.2f}"
        )
    if "experiment" in run.main_phase:
        print(experiment_line(run.main_phase["experiment"]))
    return bare_cpu


def machine(args: argparse.Namespace, session: ort.InferenceSession) -> dict[str, Any]:
    return {
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "onnxruntime": ort.__version__,
        "av": av.__version__,
        "model": str(MODELS[args.model]),
        "model_name": load_model_info(MODELS[args.model], args.model).name,
        "providers": session.get_providers(),
    }


def report_fields(run: Run, bare_cpu: float | None) -> dict[str, Any]:
    """The report's baselines and phases (its keys in the order report.json has always had them)."""
    return {
        "bare_img_per_s": run.bare,
        "bare_img_per_s_at_used_batches": run.bare_main,
        "bare_img_per_s_single_session": run.bare_single,
        "bare_img_per_s_worker_layout": run.bare_workers,
        "bare_before": run.before,
        "bare_after": run.after,
        "bare_drift_after_over_before": run.drift,
        "bare_beside_decoders": run.beside,
        "bare_cpu_ms_per_image_worker_layout": bare_cpu,
        "daemon_workers": run.workers,
        "daemon_intra_op_threads": run.threads,
        "phases": {str(k): v for k, v in run.phases.items()},
        "main_cameras": run.main_k,
        "naive": run.naive,
        "ultralytics": run.ultralytics,
    }


sys.exit(main())
