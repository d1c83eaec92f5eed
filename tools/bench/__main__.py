"""`python -m tools.bench ...`: see tools/bench/__init__.py."""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sys
import time
from pathlib import Path
from typing import Any

import av
import onnxruntime as ort
import redis

import tools.bench
from daemon.batching.batcher import BatchPolicy
from daemon.config.engine import EngineConfig
from daemon.core.memory import tune_malloc
from daemon.inference.model_file import ModelError, load_model_info
from daemon.inference.providers import intra_op_threads, lane_workers, worker_batch
from daemon.ops.logging import configure_logging
from tools.bench import null_bench
from tools.bench.baselines import (
    bare_at,
    bare_beside_decoders,
    bare_both,
    bare_cpu_ms,
    bracket,
    make_session,
    naive_phase,
    used_sizes,
)
from tools.bench.budget import budget_lines, knee, plot_scaling, scaling_points
from tools.bench.experiments import EXPERIMENTS
from tools.bench.phase import daemon_phase
from tools.bench.procs import (
    CLIP_SECONDS,
    Servers,
    render_clips,
)
from tools.bench.report import DRIFT_WARN, acceptance, beside_line, plot, print_table, workers_line
from tools.kit.daemon_config import MODELS, REPO


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(tools.bench.__doc__ or "").split("\n\n")[0])
    p.add_argument(
        "--cameras",
        help="camera count (default 4); with --null-model a comma list (default 8,16,24,32)",
    )
    p.add_argument(
        "--null-model",
        action="store_true",
        help="the null-model bench (tools/bench/null_bench.py): the model replaced by one that returns fixed "
        "boxes, the daemon at each --cameras count beside a decode-only run of the same streams",
    )
    p.add_argument("--boxes", type=int, default=7, help="--null-model: the fixed boxes per image")
    p.add_argument(
        "--gil",
        action="store_true",
        help="--null-model: py-spy over the middle third of each daemon phase, where each thread role waits for "
        "the interpreter lock (tools/bench/gil.py; its CPU perturbs that phase's figures)",
    )
    p.add_argument(
        "--preprocess",
        choices=["host", "graph", "both"],
        default="host",
        help="engine.preprocess for the daemon phases; 'both' (--null-model only): a phase with each per "
        "camera count, one after the other",
    )
    p.add_argument(
        "--processes",
        default="1",
        help="engine.processes for the daemon phases (1, a count or auto); with --null-model a comma list "
        "(e.g. 1,auto): a phase with each per camera count, one after the other",
    )
    p.add_argument("--fps", type=int, default=15)
    p.add_argument("--size", default="640x480")
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument(
        "--model",
        default="640",
        help="model size (416/640/800: the committed demo model) or an ONNX file "
        "(e.g. models/conveyor-416-int8.onnx): the daemon and the bare runs use it at its input size",
    )
    p.add_argument(
        "--bitrate",
        default="1M",
        help="bit-rate cap of the rendered H.264 clips, as an IP camera's encoder sets it "
        "('' = uncapped crf 20: about 3.8 Mbit/s at 640x480 and 15 fps)",
    )
    p.add_argument("--max-batch", type=int)
    p.add_argument("--max-wait-ms", type=float)
    p.add_argument("--intra-op-threads", type=int, default=0, help="engine.intra_op_threads (0: auto)")
    p.add_argument("--workers", type=int, default=0, help="engine.workers (0: auto, one per core on the CPU)")
    p.add_argument("--worker-batch", type=int, default=0, help="engine.worker_batch (0: auto, 1 on the CPU)")
    p.add_argument("--sweep", help="camera counts, e.g. 1,2,4,6 (daemon phase once per count)")
    p.add_argument(
        "--scaling",
        help="camera counts, e.g. 1,2,4,8,16: a sweep, plus the ratio to the bare model and RSS per count "
        "plotted (scaling.png) with the knee named",
    )
    p.add_argument(
        "--stage-ab-seconds",
        type=float,
        default=10,
        help="alternate the stage CPU counters on and off every N seconds of a daemon phase (the budget "
        "comes from the 'on' segments, their cost from on/off pairs); 0: on throughout",
    )
    p.add_argument(
        "--ab",
        choices=sorted(EXPERIMENTS),
        help="switch this experiment (tools/bench/experiments.py) on and off every --stage-ab-seconds of the "
        "daemon phase, the counters on throughout: its effect as ratios in the same run",
    )
    p.add_argument(
        "--lines",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="a counting line across each camera's belt, so the tracker counts crossings (tracking is on either way)",
    )
    p.add_argument(
        "--snapshots",
        action="store_true",
        help="[snapshots] on (a JPEG of each crossing's frame, under --out): their cost in the budget",
    )
    p.add_argument("--flame", type=Path, help="record the main daemon phase with py-spy (up to 60 s) into this SVG")
    p.add_argument("--naive-seconds", type=float, help="default: seconds / 2")
    p.add_argument("--bare-seconds", type=float, default=10)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    args.model = model_size(p, args.model)
    if not args.null_model:
        if args.cameras is not None and not args.cameras.isdigit():
            p.error("--cameras: one count (lists only with --null-model; see --sweep)")
        args.cameras = int(args.cameras or 4)
    args.width, args.height = (int(v) for v in args.size.lower().split("x"))
    args.out = (args.out or REPO / "runs" / time.strftime("bench-%Y%m%d-%H%M%S")).resolve()  # redis-server chdirs
    return args


def model_size(parser: argparse.ArgumentParser, model: str) -> int:
    """`--model`: a size of the demo models, or a file, which then serves that size for this run
    (its entry in the harness's model table, which the daemon config and the bare runs read)."""
    if model.isdigit():
        if int(model) not in MODELS:
            parser.error(f"--model {model}: not one of {sorted(MODELS)} (or give an ONNX file)")
        return int(model)
    path = Path(model).resolve()
    try:
        size = load_model_info(path).size
    except ModelError as exc:
        parser.error(f"--model: {exc}")
    if size not in MODELS:
        parser.error(f"--model {path}: input {size}x{size} is not one of the daemon's sizes {sorted(MODELS)}")
    MODELS[size] = path
    return size


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


def crossings_line(phase: dict[str, Any]) -> str:
    c = phase.get("crossings")
    if c is None:
        return "crossings: no counting lines (--no-lines)"
    snaps = f", {c['snapshots']} snapshots written" if c.get("snapshots") is not None else ""
    return f"crossings: {c['count']} in the window, {c['per_s']} per second over all cameras{snaps}"


def experiment_line(e: dict[str, Any]) -> str:
    return (
        f"experiment {e['name']} ({e['summary']}), on / off in alternating segments ({e['pairs']} pairs, "
        f"medians): fps {e['fps_on_over_off']} (pairs {e['fps_ratios']}), process CPU per frame "
        f"{e['cpu_per_frame_on_over_off']} (pairs {e['cpu_per_frame_ratios']})"
    )


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
        clips = render_clips(max(ks), args.width, args.height, args.fps, args.bitrate or None)
        args.clip_mbit_s = round(sum(c.stat().st_size for c in clips) * 8 / CLIP_SECONDS / len(clips) / 1e6, 2)
        srv.start(clips, args.out)
        args.bare_clip = clips[0]  # the bare model runs on its frames
        dcfg = EngineConfig(
            providers=["cpu"],
            workers=args.workers,
            intra_op_threads=args.intra_op_threads,
            worker_batch=args.worker_batch,
            max_batch=args.max_batch or EngineConfig().max_batch,
        )
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
        main_phase = phases[main_k]
        bare_main = bare_at(bare, main_phase["batch_sizes"])
        naive_s = args.naive_seconds or args.seconds / 2
        print(f"bench: naive loop, {main_k} cameras, {naive_s} s", flush=True)
        naive = naive_phase(main_k, naive_s, args, srv, session)
    finally:
        srv.close()
    checks = acceptance(main_phase, bare_main, naive)
    detail = f"; 1 session, ORT threads: {bare_single}"
    if bare_workers:
        detail += f"; {workers} sessions x {threads} thread(s) side by side: {bare_workers}"
    detail += f"\nbare model, after / before the daemon phase (the host's speed drift): {drift}"
    if any(abs(d - 1) > DRIFT_WARN for d in drift.values()):
        detail += f"  WARNING: drift above {DRIFT_WARN:.0%}: the host's speed changed, the ratios are unreliable"
    detail += "\n" + beside_line(beside, main_phase["fps_total"] / bare_main)
    bare_cpu = bare_cpu_ms(before_cpu, after_cpu, main_batch)
    detail += "\n" + workers_line(main_phase, bare_cpu, bare_main)
    print(
        f"\nclips: {args.size} at {args.fps} fps, H.264 capped at {args.bitrate or 'none (crf 20)'}: "
        f"{args.clip_mbit_s} Mbit/s per camera on average"
    )
    print_table(main_phase, naive, bare, bare_main, checks, detail)
    print("\n" + "\n".join(budget_lines(main_phase["stage_budget"], bare_cpu, main_phase["stage_counters_cost"])))
    print(crossings_line(main_phase))
    if "experiment" in main_phase:
        print(experiment_line(main_phase["experiment"]))
    scaling = scaling_report(args, phases, bare)
    report = {
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "machine": {
            "cpu_count": os.cpu_count(),
            "cpu_affinity": len(os.sched_getaffinity(0)),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "onnxruntime": ort.__version__,
            "av": av.__version__,
            "model": str(MODELS[args.model]),
            "model_name": load_model_info(MODELS[args.model], args.model).name,
            "providers": session.get_providers(),
        },
        "bare_img_per_s": bare,
        "bare_img_per_s_at_used_batches": bare_main,
        "bare_img_per_s_single_session": bare_single,
        "bare_img_per_s_worker_layout": bare_workers,
        "bare_before": before,
        "bare_after": after,
        "bare_drift_after_over_before": drift,
        "bare_beside_decoders": beside,
        "bare_cpu_ms_per_image_worker_layout": bare_cpu,
        "daemon_workers": workers,
        "daemon_intra_op_threads": threads,
        "phases": {str(k): v for k, v in phases.items()},
        "main_cameras": main_k,
        "naive": naive,
        "checks": {key: {"pass": ok, "detail": text} for key, ok, text in checks},
        "stage_budget": main_phase["stage_budget"],
        "stage_counters_cost": main_phase["stage_counters_cost"],
        "experiment": main_phase.get("experiment"),
        "scaling": scaling,
    }
    (args.out / "report.json").write_text(json.dumps(report, indent=1))
    plot(args.out / "bench.png", phases, main_phase, naive, bare)
    print(f"\nreport: {args.out / 'report.json'}\nplot:   {args.out / 'bench.png'}")
    return 0 if all(ok for _k, ok, _t in checks) else 1


sys.exit(main())
