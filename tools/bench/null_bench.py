"""`python -m tools.bench --null-model`: what the daemon costs around a model that costs nothing.

    .venv/bin/python -m tools.bench --null-model [--cameras 8,16,24,32] [--seconds 20] [--model 640|FILE.onnx]
        [--boxes 7] [--fps 15] [--size 640x480] [--processes 1,auto] [--lanes cpu,gpu] [--out DIR]

The model (`--model`, a 416/640/800 demo model or a file of one of those sizes) is replaced by its null
model (`tools.bench.null_model`: same input, output and metadata, a few fixed boxes, cached in
runs/bench-cache), standing in for a fast GPU; its lanes are shaped as the daemon shapes a CUDA lane
(one session, batches of the cameras' share up to max_batch; `--lanes cpu` as it shapes CPU lanes: a
session per core, one frame per batch; `--lanes device` the GPU shape on the device path, as a GPU box
with CPU decoding runs it, the GPU's own work left out: `tools.kit.device_standin.BENCH`) and
`engine.processes` is auto (the daemon's default) unless `--processes` says otherwise. For each camera
count, in one run: the real daemon over RTSP into redis-server (`tools.bench.phase.daemon_phase`, the
stage counters on throughout, tracking and a counting line per camera as in the main bench), then
`tools.bench.decoders` alone on the same streams for the same seconds (what decoding costs on these
cores, the limit for CPU decoding). Prints one table: published frames/s, the process's CPU per
published frame and what of it lies outside demuxing, decoding and the (null) model's run, the busiest thread's
share of a core, freshness (published - captured) p50/p99, the least and most served camera's fps, RSS,
and the decode-only run; then the stage budget per frame for each count. Writes null-report.json into
--out. With `engine.preprocess = "graph"` the pixel prefix runs inside `session.run`, so "outside"
leaves it out: compare the process CPU per frame between the two paths. `--processes 1,auto` and
`--lanes cpu,gpu` run each count with each value in turn; the daemon's CPU, threads and RSS then include
its decoder processes (`tools.bench.procs.daemon_cpu_s`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

import redis

from daemon.config.seam import EngineConfig
from daemon.core.seam import STAGES
from tools.bench import gil
from tools.bench.baselines import decode_only, ultralytics_phase
from tools.bench.null_model import make_null_model
from tools.bench.phase import daemon_phase
from tools.bench.procs import CACHE, Servers, render_clips
from tools.kit.daemon_config import MODELS

DEFAULT_COUNTS = "8,16,24,32"
DISTINCT_CLIPS = 16
"""Cameras past this many serve the same clips again (each its own RTSP session and decoder): rendering
a clip takes seconds to minutes on a loaded machine, and a decoder's cost does not depend on which clip."""
SHOWN_STAGES = ("demux", "decode", "letterbox", "session_run", "postprocess", "tracking", "encode", "redis")


class GilProfile:
    """`tools.bench.gil` on this process (the daemon runs in it) over the middle third of a phase's window."""

    def __init__(self, seconds: float) -> None:
        self.seconds = max(5.0, seconds / 3)
        self._delay = seconds / 3
        self._result: dict[str, Any] | str = "not recorded"
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="bench-gil", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        time.sleep(self._delay)
        try:
            self._result = gil.record(os.getpid(), self.seconds)
        except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
            self._result = f"not recorded: {exc}"

    def result(self) -> dict[str, Any]:
        if self._thread is not None:
            self._thread.join(self.seconds + 90)
        return self._result if isinstance(self._result, dict) else {"error": {"note": self._result}}


def row(phase: dict[str, Any], decode: dict[str, Any]) -> dict[str, Any]:
    """One camera count's line of the table, from its daemon phase and its decode-only run."""
    segs = phase["stage_segments"]
    published = sum(s["published"] for s in segs)
    cpu = sum(s["cpu_s"] for s in segs)
    stage = {k: sum(s["stage_cpu_s"].get(k, 0.0) for s in segs) for k in STAGES}
    per = (lambda v: round(1000 * v / published, 2)) if published else (lambda v: float("nan"))
    fps = [c["fps"] for c in phase["per_camera"].values()]
    behind = [c["behind_stream_at_end_ms"] for c in phase["per_camera"].values()]
    return {
        "cameras": phase["cameras"],
        "offered_fps": phase["fps_offered"],
        "fps": phase["fps_total"],
        "cpu_ms_per_frame": per(cpu),
        "cpu_ms_outside_decode_and_run": per(cpu - stage["demux"] - stage["decode"] - stage["session_run"]),
        "process_cores": round(cpu / sum(s["seconds"] for s in segs), 2),
        "stages_ms_per_frame": {k: per(stage[k]) for k in SHOWN_STAGES},
        "untimed_ms_per_frame": per(cpu - sum(stage.values())),
        "busiest_thread": phase["busiest_thread"],
        "freshness_ms": {"p50": phase["latency_ms"]["p50"], "p99": phase["latency_ms"]["p99"]},
        "startup": phase.get("startup"),
        "camera_fps": {"min": min(fps), "max": max(fps), "min_over_max": round(min(fps) / max(fps), 3)},
        "rss_mb": phase["rss_mb_end"],
        "behind_stream_at_end_ms": {
            "p50": round(statistics.median(behind), 1),
            "max": round(max(behind), 1),
            "skipped": sum(c["dropped_total"].get("behind", 0) for c in phase["per_camera"].values()),
        },
        "others_cpu_pct": phase["others_cpu_pct_mean"],
        "decode_only": decode,
    }


def table(rows: list[dict[str, Any]]) -> list[str]:
    head = (
        f"{'cams':>4} {'lanes':>5} {'pre':>5} {'procs':>5} {'offered':>7} {'fps':>7} {'cores':>5}"
        f" {'ms/frame':>8} {'outside':>7}"
        f" {'busiest thread':>29} {'p50':>6} {'p99':>6} {'cam fps min-max':>15} {'RSS MB':>7}"
        f" | {'decode-only fps':>15} {'cores':>5} {'ms/fr':>5}"
    )
    lines = [head]
    for r in rows:
        b, d = r["busiest_thread"], r["decode_only"]
        lines.append(
            f"{r['cameras']:>4} {r['lanes']:>5} {r['preprocess']:>5} {r['processes']:>5} {r['offered_fps']:>7}"
            f" {r['fps']:>7.1f} {r['process_cores']:>5.2f}"
            f" {r['cpu_ms_per_frame']:>8.2f} {r['cpu_ms_outside_decode_and_run']:>7.2f}"
            f" {str(b['name'])[:22]:>22} {b['core_pct']:>5.1f}%"
            f" {r['freshness_ms']['p50']:>6.0f} {r['freshness_ms']['p99']:>6.0f}"
            f" {r['camera_fps']['min']:>7.2f}-{r['camera_fps']['max']:<7.2f} {r['rss_mb']:>7.0f}"
            f" | {d['fps']:>15.1f} {d['core_pct'] / 100:>5.2f} {d['ms_per_frame']:>5.2f}"
        )
    lines += [
        "",
        "how far behind its stream each camera's last published frame was at the window's end, ms (seq plus the "
        "frames skipped as 'behind', against the stream's start):",
        *(
            f"{r['cameras']:>4} {r['lanes']:>5} {r['preprocess']:>5} {r['processes']:>5}  p50 "
            f"{r['behind_stream_at_end_ms']['p50']:>8.0f}  max {r['behind_stream_at_end_ms']['max']:>8.0f}  "
            f"frames skipped {r['behind_stream_at_end_ms']['skipped']:.0f}"
            for r in rows
        ),
        "",
        "freshness in the start-up before the window (the --settle seconds after every camera had first "
        "published), ms:",
        *(
            f"{r['cameras']:>4} {r['lanes']:>5} {r['preprocess']:>5} {r['processes']:>5}  "
            + startup_line(r.get("startup"))
            for r in rows
        ),
        "",
        "CPU per published frame by stage, ms (thread CPU where each stage runs; untimed = the rest of the process):",
        f"{'cams':>4} {'lanes':>5} {'pre':>5} {'procs':>5} "
        + " ".join(f"{k:>11}" for k in SHOWN_STAGES)
        + f" {'untimed':>8}",
    ]
    for r in rows:
        st = r["stages_ms_per_frame"]
        lines.append(
            f"{r['cameras']:>4} {r['lanes']:>5} {r['preprocess']:>5} {r['processes']:>5} "
            + " ".join(f"{st[k]:>11.2f}" for k in SHOWN_STAGES)
            + f" {r['untimed_ms_per_frame']:>8.2f}"
        )
    return lines


def startup_line(startup: dict[str, Any] | None) -> str:
    if not startup or not startup["latency_ms"]:
        return "none (--settle 0)"
    lat = startup["latency_ms"]
    return f"{startup['seconds']:.0f} s  p50 {lat['p50']:>6.0f}  p99 {lat['p99']:>6.0f}  max {lat['max']:>6.0f}"


def ultralytics_lines(rows: list[dict[str, Any]], version: str) -> list[str]:
    """The table's part beside Ultralytics: its frames/s, cores and CPU per frame, and the daemon's frames/s over it."""
    shown = [r for r in rows if r.get("ultralytics")]
    if not shown:
        return []
    lines = [
        "",
        f"Ultralytics {version}: its streaming predictor on the same streams and null model, in its own window after "
        "the daemon's (ms/fr: its process's CPU per frame, decoding included):",
        f"{'cams':>4} {'lanes':>5} {'pre':>5} {'procs':>5} {'fps':>7} {'cores':>5} {'ms/fr':>6}"
        f" {'daemon fps / its':>17}",
    ]
    for r in shown:
        u = r["ultralytics"]
        ratio = r["fps"] / u["fps"] if u["fps"] else float("nan")
        lines.append(
            f"{r['cameras']:>4} {r['lanes']:>5} {r['preprocess']:>5} {r['processes']:>5} {u['fps']:>7.1f}"
            f" {u['core_pct'] / 100:>5.2f} {u['ms_per_frame']:>6.2f} {ratio:>17.2f}"
        )
    return lines


class Mode(NamedTuple):
    """One phase's settings beside its camera count: `engine.preprocess`, `engine.processes`, the lanes' shape."""

    preprocess: str
    processes: str
    lanes: str

    @property
    def key(self) -> str:
        return f"{self.preprocess}-{self.processes}-{self.lanes}"


def modes(args: argparse.Namespace) -> list[Mode]:
    """Every combination of --preprocess (both: host and graph), --processes and --lanes (comma lists)."""
    return [
        Mode(pre, procs, lanes)
        for lanes in args.lanes.split(",")
        for pre in (["host", "graph"] if args.preprocess == "both" else [args.preprocess])
        for procs in str(args.processes or "auto").split(",")
    ]


def lane_shape(args: argparse.Namespace, lanes: str) -> tuple[int, int]:
    """`engine.workers` and `engine.worker_batch` for lanes shaped as on a `lanes` ("gpu" or "cpu") box, where
    --workers / --worker-batch left them to auto (0). As on a GPU: as the daemon shapes a CUDA lane
    (`daemon.inference.providers.lane_workers` / `worker_batch`: one session, batches of the cameras' share, so up
    to max_batch), which the null model stands in for; as on a CPU: auto, what the CPU provider it runs on would
    otherwise get (a session per core, one frame per batch)."""
    if lanes in ("gpu", "device"):
        return args.workers or 1, args.worker_batch or args.max_batch or EngineConfig().max_batch
    if lanes == "cpu":
        return args.workers, args.worker_batch
    raise ValueError(f"--lanes: {lanes!r} is neither gpu, device nor cpu")


def null_phase(k: int, mode: Mode, args: argparse.Namespace, srv: Servers) -> dict[str, Any]:
    """One daemon phase of `k` cameras in `mode` (with --gil, py-spy over its window; with --flame, py-spy's
    record into FLAME-k), its figures printed."""
    redis.Redis(port=srv.redis_port).flushall()
    phase_args = argparse.Namespace(**vars(args))
    phase_args.preprocess, phase_args.processes = mode.preprocess, mode.processes
    phase_args.workers, phase_args.worker_batch = lane_shape(args, mode.lanes)
    phase_args.device_standin = mode.lanes == "device"
    print(
        f"bench: null model, daemon phase, {k} cameras, lanes as on a {mode.lanes} (engine.workers "
        f"{phase_args.workers}, worker_batch {phase_args.worker_batch}), preprocess {mode.preprocess}, "
        f"processes {mode.processes}, {args.seconds} s",
        flush=True,
    )
    spy = GilProfile(args.seconds) if args.gil else None
    flame = args.flame.with_stem(f"{args.flame.stem}-{k}") if args.flame else None  # one per camera count
    phase = daemon_phase(k, phase_args, srv, args.out, flame, on_window=spy.start if spy is not None else None)
    if spy is not None:
        phase["gil"] = spy.result()
        print("\n".join(gil.lines(phase["gil"])), flush=True)
    print(f"bench:   {phase['fps_total']} fps", flush=True)
    if "experiment" in phase:
        e = phase["experiment"]
        print(
            f"bench:   experiment {e['name']} on / off: fps {e['fps_on_over_off']}"
            f" (pairs {e['fps_ratios']}), CPU per frame {e['cpu_per_frame_on_over_off']}",
            flush=True,
        )
    return phase


def run(args: argparse.Namespace) -> int:
    """The null-model bench (`args` from `tools.bench.cli.parse_args`)."""
    counts = [int(v) for v in (args.cameras or DEFAULT_COUNTS).split(",")]
    phase_modes = modes(args)
    source = MODELS[args.model]
    null = make_null_model(source, CACHE / f"null-{source.stem}.onnx", args.boxes)
    MODELS[args.model] = null  # the daemon's config and every phase read the harness's model table
    if not args.ab:
        args.stage_ab_seconds = 0  # the counters on throughout: the budget covers the whole window
    srv = Servers()
    rows: list[dict[str, Any]] = []
    phases: dict[str, dict[str, Any]] = {}
    try:
        clips = render_clips(min(max(counts), DISTINCT_CLIPS), args.width, args.height, args.fps, args.bitrate or None)
        srv.start([clips[i % len(clips)] for i in range(max(counts))], args.out, args.rtsp_nice)
        for k in counts:
            done = []
            for mode in phase_modes:
                phases[f"{k}-{mode.key}"] = phase = null_phase(k, mode, args, srv)
                done.append((mode, phase))
            print(f"bench: null model, decode only, {k} streams, {args.seconds} s", flush=True)
            decode = decode_only(srv.urls[:k], args.seconds)
            print(f"bench:   decode only {decode['fps']} fps", flush=True)
            ultra = ultralytics_phase(args, srv.urls[:k], null)
            rows += [{**mode._asdict(), **row(phase, decode), "ultralytics": ultra} for mode, phase in done]
    finally:
        srv.close()
    print(
        f"\nnull model ({null.name}, from {source.name}, {args.boxes} fixed boxes); lanes: 'gpu' one session, "
        "batches up to max_batch, as the daemon runs a CUDA lane, 'device' the same on the device path (the GPU's "
        "work left out), 'cpu' as it runs CPU lanes; "
        f"{args.size} cameras at {args.fps} fps "
        f"over RTSP (H.264 capped at {args.bitrate or 'none'}); {args.seconds} s per phase; freshness = published - "
        "captured; 'outside' = CPU per frame outside demuxing, decoding and the null model's run; 'cores' = the daemon "
        "process's CPU in cores\n"
    )
    print("\n".join(table(rows) + ultralytics_lines(rows, getattr(args, "ultralytics_version", ""))))
    report = {
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "model": str(null),
        "rows": rows,
        "phases": {k: {n: v for n, v in ph.items() if n not in ("series", "samples")} for k, ph in phases.items()},
    }
    (args.out / "null-report.json").write_text(json.dumps(report, indent=1))
    print(f"\nreport: {args.out / 'null-report.json'}")
    return 0
