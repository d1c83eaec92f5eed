"""Throughput and latency of the real daemon, against the bare model and the naive pipeline.

    .venv/bin/python tools/bench.py [--cameras 4] [--fps 15] [--size 640x480] [--bitrate 1M] [--seconds 60]
        [--model 640|FILE.onnx] [--max-batch N] [--max-wait-ms M] [--workers W] [--worker-batch B] [--sweep 1,2,4,6]
        [--naive-seconds S] [--out DIR]

1. renders K synthetic clips (cached in runs/bench-cache), starts redis-server and tools/rtsp_server.py;
2. runs the real daemon in-process (CPU provider, `model` forced per camera) for T seconds, sampling
   stream lengths, CPU and RSS every second; reads every entry back (latency = published_ms - captured_ms);
3. baseline 1: bare `session.run` on the clips' own frames (letterboxed as the workers do) at the
   batch sizes the daemon used, measured two ways and the higher taken: one session with ORT's
   default threads, and the daemon's layout (`engine.workers` sessions side by side, each with its
   share of the cores); measured before and after the daemon phase and averaged, the ratio
   after / before printed as the host's speed drift (a shared machine's speed changes over
   minutes; above 10 % the ratios are flagged unreliable).
   Then, as a diagnostic, the same layout beside a separate process that only decodes the same
   streams (tools/bench_decoders.py): what is left of the bare model once every frame is decoded
   on the same cores, and the share of that the daemon reached;
4. baseline 2: the naive one-loop pipeline (tools/bench_naive.py) on one session with ORT's
   default threads, latency vs the expected capture time;
5. prints a table and the acceptance checks; writes report.json and bench.png into --out.
`--sweep` runs the daemon phase once per camera count (T each); the table and checks use --cameras
(or the last count of the sweep when --cameras is not in it). Every process started is stopped on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import av  # noqa: E402
import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402
import redis  # noqa: E402
from prometheus_client import Histogram  # noqa: E402

from daemon.app import Daemon  # noqa: E402
from daemon.batching.batcher import BatchPolicy  # noqa: E402
from daemon.config.engine import EngineConfig  # noqa: E402
from daemon.config.settings import load_settings  # noqa: E402
from daemon.core.memory import tune_malloc  # noqa: E402
from daemon.core.metrics import Metrics  # noqa: E402
from daemon.inference.model_file import ModelError, load_model_info  # noqa: E402
from daemon.inference.providers import intra_op_threads, lane_workers, worker_batch  # noqa: E402
from daemon.ops.logs import configure_logging  # noqa: E402
from daemon.publish.schema import decode_entry  # noqa: E402
from tests.support.daemon_harness import MODELS, write_config  # noqa: E402
from tools.bench_baselines import (  # noqa: E402
    bare_at,
    bare_beside_decoders,
    bare_both,
    bare_cpu_ms,
    bracket,
    make_session,
    naive_phase,
    used_sizes,
)
from tools.bench_procs import (  # noqa: E402
    CLIP_SECONDS,
    Servers,
    cpu_clocks,
    pct,
    proc_rss_mb,
    render_clips,
    split_window,
    thread_times_s,
)

DRIFT_WARN = 0.10  # bare model after / before the daemon phase: beyond this the host's speed changed


# -- the daemon phase ---------------------------------------------------------------------------
class BenchMetrics(Metrics):
    """The daemon's metrics, with one batch-size bucket per size (the stock buckets merge 5 and 6)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.registry.unregister(self.batch_size)
        self.batch_size = Histogram("beltsight_batch_size", "Frames per inference batch", ["model"],
                                    buckets=tuple(range(1, 65)), registry=self.registry)


def snapshot(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for m in metrics.registry.collect() for s in m.samples}


def sample(snap: dict[Any, float], name: str, **labels: str) -> float:
    return sum(v for (n, lab), v in snap.items() if n == name and all(dict(lab).get(k) == x for k, x in labels.items()))


def batch_counts(s0: dict[Any, float], s1: dict[Any, float]) -> dict[int, int]:
    cum = {int(float(dict(lab)["le"])): v - s0.get((n, lab), 0.0) for (n, lab), v in s1.items()
           if n == "beltsight_batch_size_bucket" and dict(lab)["le"] != "+Inf"}
    sizes = sorted(cum)
    return {b: int(cum[b] - (cum[sizes[i - 1]] if i else 0)) for i, b in enumerate(sizes)
            if cum[b] - (cum[sizes[i - 1]] if i else 0) > 0}


def run_daemon(config: Path, metrics: Metrics) -> tuple[Daemon, threading.Thread, list[Any]]:
    daemon = Daemon(load_settings(config), metrics=metrics)
    box: list[Any] = [None, None]  # loop, error

    def main() -> None:
        async def go() -> None:
            box[0] = asyncio.get_running_loop()
            await daemon.run()

        try:
            asyncio.run(go())
        except BaseException as exc:
            box[1] = exc

    thread = threading.Thread(target=main, name="bench-daemon", daemon=True)
    thread.start()
    return daemon, thread, box


def stop_daemon(daemon: Daemon, thread: threading.Thread, box: list[Any]) -> None:
    if box[0] is not None and thread.is_alive():
        box[0].call_soon_threadsafe(daemon.request_stop)
    thread.join(30)


def daemon_phase(k: int, args: argparse.Namespace, srv: Servers, out: Path) -> dict[str, Any]:
    cams = [{"id": f"cam{i}", "url": srv.urls[i], "model": args.model} for i in range(k)]
    engine = {k2: v for k2, v in (("max_batch", args.max_batch), ("max_wait_ms", args.max_wait_ms)) if v is not None}
    engine.setdefault("max_batch", EngineConfig().max_batch)
    engine.setdefault("max_wait_ms", EngineConfig().max_wait_ms)
    engine["intra_op_threads"] = args.intra_op_threads  # the bare sessions use the same
    engine["workers"] = args.workers
    engine["worker_batch"] = args.worker_batch
    config = write_config(out / f"daemon-k{k}.toml", redis_url=f"redis://127.0.0.1:{srv.redis_port}/{k}",
                          cameras=cams, **engine)
    metrics = BenchMetrics()
    daemon, thread, box = run_daemon(config, metrics)
    client = redis.Redis(port=srv.redis_port, db=k, decode_responses=True)
    streams = {c["id"]: daemon.settings.redis.stream_for(c["id"]) for c in cams}
    samples: list[dict[str, Any]] = []
    try:
        deadline = time.time() + 90
        while not all(client.xlen(s) for s in streams.values()):
            if time.time() > deadline or box[1] is not None or not thread.is_alive():
                raise RuntimeError(f"daemon produced no entries for every camera: {box[1]!r}")
            time.sleep(0.2)
        t0, s0, threads0 = time.time(), snapshot(metrics), thread_times_s()
        prev = cpu_clocks(srv)
        while (now := time.time()) < t0 + args.seconds:
            time.sleep(min(1.0, t0 + args.seconds - now))
            cur = cpu_clocks(srv)
            wall, own, servers, machine = (c - p for c, p in zip(cur, prev, strict=True))
            samples.append({"t": round(cur[0] - t0, 2), "xlen": {c: client.xlen(s) for c, s in streams.items()},
                            "cpu_pct": round(100 * own / wall, 1), "servers_cpu_pct": round(100 * servers / wall, 1),
                            "others_cpu_pct": round(100 * (machine - own - servers) / wall, 1),
                            "rss_mb": round(proc_rss_mb(), 1)})
            prev = cur
        t1, s1, threads1 = time.time(), snapshot(metrics), thread_times_s()
    finally:
        stop_daemon(daemon, thread, box)
    if box[1] is not None:
        raise RuntimeError("daemon failed") from box[1]
    s2 = snapshot(metrics)
    phase = summarize_phase(k, args, client, streams, samples, (t0, t1), (s0, s1, s2), engine)
    busy = {g: (cpu - threads0.get(g, (0.0, 0.0))[0], wait - threads0.get(g, (0.0, 0.0))[1])
            for g, (cpu, wait) in sorted(threads1.items())}
    busy = {g: v for g, v in busy.items() if v[0] > 0.005 * (t1 - t0)}
    phase["thread_cpu_pct"] = {g: round(100 * cpu / (t1 - t0), 1) for g, (cpu, _) in busy.items()}
    phase["thread_wait_pct"] = {g: round(100 * wait / (t1 - t0), 1)
                                for g, (_, wait) in busy.items() if not math.isnan(wait)}
    workers_cpu = sum(cpu for g, (cpu, _) in busy.items() if g.startswith("beltsight-infer"))
    phase["workers_cpu_pct"] = round(100 * workers_cpu / (t1 - t0), 1)
    share = phase["inference_cpu_s"] / workers_cpu if workers_cpu else None
    phase["session_run_share_of_workers_cpu"] = None if share is None else round(share, 3)
    return phase


def summarize_phase(k: int, args: argparse.Namespace, client: redis.Redis, streams: dict[str, str],
                    samples: list[dict[str, Any]], window: tuple[float, float], snaps: tuple[dict[Any, float], ...],
                    engine: dict[str, Any]) -> dict[str, Any]:
    t0, t1 = window
    s0, s1, s2 = snaps
    per_cam: dict[str, Any] = {}
    series: dict[str, Any] = {}
    all_t, all_lat, all_exp = [], [], []
    for cam, stream in streams.items():
        entries = [decode_entry(f) for _id, f in client.xrange(stream)]  # also checks the schema
        rows = np.array([(e["published_ms"], e["captured_ms"], e["seq"]) for e in entries], dtype=np.float64)
        anchor = (rows[:, 1] - rows[:, 2] * 1000 / args.fps).min()  # stream start, as in the naive loop
        rows = rows[(rows[:, 0] >= t0 * 1000) & (rows[:, 0] <= t1 * 1000)]
        t, lat = rows[:, 0] / 1000, rows[:, 0] - rows[:, 1]
        exp = rows[:, 0] - (anchor + rows[:, 2] * 1000 / args.fps)
        all_t.append(t)
        all_lat.append(lat)
        all_exp.append(exp)
        series[cam] = {"t": (t - t0).round(3).tolist(), "latency_ms": lat.tolist()}
        per_cam[cam] = {
            "fps": round(len(rows) / (t1 - t0), 2), "entries": len(rows),
            "latency_ms": {"p50": pct(lat, 50), "p95": pct(lat, 95), "p99": pct(lat, 99)},
            "dropped_window": {r: sample(s1, "beltsight_frames_dropped_total", camera=cam, reason=r)
                               - sample(s0, "beltsight_frames_dropped_total", camera=cam, reason=r)
                               for r in ("superseded", "stale", "no_model", "engine_error", "buffer_full")},
            "decoded_total": sample(s2, "beltsight_frames_decoded_total", camera=cam),
            "published_total": sample(s2, "beltsight_entries_published_total", camera=cam),
            "xlen_total": client.xlen(stream),
            "dropped_total": {dict(lab)["reason"]: v for (n, lab), v in s2.items()
                              if n == "beltsight_frames_dropped_total" and dict(lab)["camera"] == cam},
        }
    t, lat, exp = np.concatenate(all_t), np.concatenate(all_lat), np.concatenate(all_exp)
    first, last = split_window(t, lat, t0, t1)
    model = str(args.model)
    n_inf = sample(s1, "beltsight_inference_seconds_count", model=model) - sample(
        s0, "beltsight_inference_seconds_count", model=model)
    sum_inf = sample(s1, "beltsight_inference_seconds_sum", model=model) - sample(
        s0, "beltsight_inference_seconds_sum", model=model)
    cpu_inf = sample(s1, "beltsight_inference_cpu_seconds_total", model=model) - sample(
        s0, "beltsight_inference_cpu_seconds_total", model=model)
    images = sum(b * n for b, n in batch_counts(s0, s1).items())
    rss = [s["rss_mb"] for s in samples]
    rss_start = next((s["rss_mb"] for s in samples if s["t"] >= 10), rss[0] if rss else float("nan"))
    return {
        "cameras": k, "seconds": round(t1 - t0, 2), "engine": engine,
        "fps_total": round(len(t) / (t1 - t0), 2), "per_camera": per_cam,
        "latency_ms": {"p50": pct(lat, 50), "p95": pct(lat, 95), "p99": pct(lat, 99), "max": pct(lat, 100),
                       "first_p50": pct(first, 50), "first_p99": pct(first, 99),
                       "last_p50": pct(last, 50), "last_p99": pct(last, 99)},
        "latency_vs_expected_capture_ms": {"p50": pct(exp, 50), "p95": pct(exp, 95), "p99": pct(exp, 99)},
        "batch_sizes": batch_counts(s0, s1),
        "inference_ms_mean": round(1000 * sum_inf / n_inf, 2) if n_inf else float("nan"),
        "session_run_busy_pct": round(100 * sum_inf / (t1 - t0), 1), "fps_offered": k * args.fps,
        "inference_cpu_s": round(cpu_inf, 3),
        "inference_cpu_ms_per_image": round(1000 * cpu_inf / images, 2) if images else float("nan"),
        "cpu_pct_mean": round(float(np.mean([s["cpu_pct"] for s in samples])), 1),
        "servers_cpu_pct_mean": round(float(np.mean([s["servers_cpu_pct"] for s in samples])), 1),
        "others_cpu_pct_mean": round(float(np.mean([s["others_cpu_pct"] for s in samples])), 1),
        "rss_mb_start": rss_start, "rss_mb_end": rss[-1] if rss else float("nan"),
        "samples": samples, "series": series,
    }


# -- report -------------------------------------------------------------------------------------
def acceptance(main: dict[str, Any], bare: float, naive: dict[str, Any]) -> list[tuple[str, bool, str]]:
    lat, wait_ms = main["latency_ms"], main["engine"]["max_wait_ms"]
    budget = 2 * (main["inference_ms_mean"] + wait_ms)
    fps = [c["fps"] for c in main["per_camera"].values()]
    books = {cam: (c["decoded_total"], c["published_total"] + sum(c["dropped_total"].values()), c["xlen_total"])
             for cam, c in main["per_camera"].items()}
    served_all = main["fps_total"] >= 0.95 * main["fps_offered"]  # not saturated: fps is the offered load
    note = f" (or >= 0.95 x offered {main['fps_offered']} fps: {served_all})"
    return [
        ("a", main["fps_total"] >= 0.8 * bare or served_all,
         f"daemon {main['fps_total']} fps >= 0.8 x bare {bare} img/s at its batch sizes = {0.8 * bare:.1f}" + note),
        ("b", main["fps_total"] >= 1.3 * naive["fps_total"] or served_all,
         f"daemon {main['fps_total']} fps >= 1.3 x naive {naive['fps_total']} fps = {1.3 * naive['fps_total']:.1f}"
         + note),
        ("c", lat["p99"] <= budget,
         f"latency p99 {lat['p99']} ms <= 2 x (inference {main['inference_ms_mean']} + max_wait {wait_ms}) "
         f"= {budget:.1f} ms"),
        ("d", lat["last_p99"] <= 1.2 * lat["first_p99"],
         f"p99 last {lat['last_p99']} ms <= 1.2 x first {lat['first_p99']} ms = {1.2 * lat['first_p99']:.1f}"),
        ("e", main["rss_mb_end"] <= 1.05 * main["rss_mb_start"],
         f"RSS end {main['rss_mb_end']} MB <= 1.05 x RSS at 10 s {main['rss_mb_start']} MB"),
        ("f", min(fps) >= 0.8 * max(fps), f"per-camera fps {fps}: min >= 0.8 x max"),
        ("g", all(d == acc and x >= p for (d, acc, x), p in
                  zip(books.values(), [c["published_total"] for c in main["per_camera"].values()], strict=True)),
         "decoded == published + dropped per camera: "
         + ", ".join(f"{cam} {d:.0f}=={acc:.0f}" for cam, (d, acc, _x) in books.items())),
    ]


def print_table(main: dict[str, Any], naive: dict[str, Any], bare: dict[int, float], bare_main: float,
                checks: list[tuple[str, bool, str]], bare_detail: str = "") -> None:
    lat, span = main["latency_ms"], "minute" if main["seconds"] >= 120 else "third"
    print(f"\n== daemon: {main['cameras']} cameras, {main['seconds']} s, engine {main['engine']} ==")
    print(f"{'camera':8} {'fps':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}  dropped in window")
    for cam, c in main["per_camera"].items():
        drops = ", ".join(f"{r}={v:.0f}" for r, v in c["dropped_window"].items() if v) or "none"
        lc = c["latency_ms"]
        print(f"{cam:8} {c['fps']:7.2f} {lc['p50']:8.1f} {lc['p95']:8.1f} {lc['p99']:8.1f}  {drops}")
    print(f"{'total':8} {main['fps_total']:7.2f} {lat['p50']:8.1f} {lat['p95']:8.1f} {lat['p99']:8.1f}  "
          f"(max {lat['max']} ms)")
    print(f"latency p50/p99 first {span}: {lat['first_p50']}/{lat['first_p99']} ms, last {span}: "
          f"{lat['last_p50']}/{lat['last_p99']} ms; vs expected capture time: {main['latency_vs_expected_capture_ms']}")
    print(f"batch sizes (batches): {main['batch_sizes']}; mean inference {main['inference_ms_mean']} ms/batch; "
          f"session.run busy {main['session_run_busy_pct']}% of the window; offered {main['fps_offered']} fps")
    print(f"CPU {main['cpu_pct_mean']}% of one core (servers: {main['servers_cpu_pct_mean']}%, other processes: "
          f"{main['others_cpu_pct_mean']}%; by thread: "
          f"{main['thread_cpu_pct']}), "
          f"RSS {main['rss_mb_start']} MB at 10 s -> {main['rss_mb_end']} MB at end")
    if main.get("thread_wait_pct"):
        print(f"runnable but waiting for a core, % of the window by thread: {main['thread_wait_pct']}")
    nl = naive["latency_vs_expected_capture_ms"]
    print(f"naive loop: {naive['fps_total']} fps over {naive['seconds']} s, latency vs expected capture p50 "
          f"{nl['p50']} p99 {nl['p99']} ms (first {span} p50 {nl['first_p50']}, last {nl['last_p50']}); "
          f"vs its own decode time p50 {naive['latency_vs_decode_ms']['p50']} ms")
    print(f"bare model img/s by batch size (the higher of two layouts): {bare}{bare_detail}")
    print(f"ratios: daemon / bare at used batch sizes = {main['fps_total'] / bare_main:.2f}; daemon / naive = "
          f"{main['fps_total'] / naive['fps_total']:.2f}; naive latency growth (last/first p50) = "
          f"{nl['last_p50'] / nl['first_p50']:.1f}x")
    for key, ok, text in checks:
        print(f"{'PASS' if ok else 'FAIL'} ({key}) {text}")


def plot(path: Path, phases: dict[int, dict[str, Any]], main: dict[str, Any], naive: dict[str, Any],
         bare: dict[int, float]) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 9))
    for i, (cam, s) in enumerate(main["series"].items()):
        top.plot(s["t"], s["latency_ms"], lw=0.6, color=f"C{i}", label=f"daemon {cam}")
    for i, (cam, s) in enumerate(naive["series"].items()):
        top.plot(s["t"], s["latency_ms"], lw=1.2, ls="--", color=f"C{i}", label=f"naive {cam} (vs expected capture)")
    top.set(yscale="log", xlabel="seconds since phase start", ylabel="latency (ms)",
            title=f"latency per camera, {main['cameras']} cameras")
    top.legend(fontsize=7, ncol=2)
    ks = sorted(phases)
    bottom.plot(ks, [phases[k]["fps_total"] for k in ks], "o-", label="daemon processed fps")
    bottom.plot(ks, [bare_at(bare, phases[k]["batch_sizes"]) for k in ks], "s--",
                label="bare model img/s at used batch")
    bottom.plot(ks, [phases[k]["fps_offered"] for k in ks], "^:", color="grey", label="offered fps")
    bottom.plot([naive["cameras"]], [naive["fps_total"]], "x", ms=10, label="naive loop fps")
    bottom.set(xlabel="cameras", ylabel="frames/s", title="throughput vs number of cameras", xticks=ks)
    bottom.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cameras", type=int, default=4)
    p.add_argument("--fps", type=int, default=15)
    p.add_argument("--size", default="640x480")
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--model", default="640",
                   help="model size (416/640/800: the committed demo model) or an ONNX file "
                        "(e.g. models/conveyor-416-int8.onnx): the daemon and the bare runs use it at its input size")
    p.add_argument("--bitrate", default="1M",
                   help="bit-rate cap of the rendered H.264 clips, as an IP camera's encoder sets it "
                        "('' = uncapped crf 20: about 3.8 Mbit/s at 640x480 and 15 fps)")
    p.add_argument("--max-batch", type=int)
    p.add_argument("--max-wait-ms", type=float)
    p.add_argument("--intra-op-threads", type=int, default=0, help="engine.intra_op_threads (0: auto)")
    p.add_argument("--workers", type=int, default=0, help="engine.workers (0: auto, one per core on the CPU)")
    p.add_argument("--worker-batch", type=int, default=0, help="engine.worker_batch (0: auto, 1 on the CPU)")
    p.add_argument("--sweep", help="camera counts, e.g. 1,2,4,6 (daemon phase once per count)")
    p.add_argument("--naive-seconds", type=float, help="default: seconds / 2")
    p.add_argument("--bare-seconds", type=float, default=10)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    args.model = model_size(p, args.model)
    args.width, args.height = (int(v) for v in args.size.lower().split("x"))
    args.out = args.out or REPO / "runs" / time.strftime("bench-%Y%m%d-%H%M%S")
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


def beside_line(beside: dict[str, Any] | str, daemon_ratio: float) -> str:
    """The diagnostic: how much of the bare model is left beside decoding alone, and how much of
    that the daemon gets (the rest of its gap to the bare model is its own overhead)."""
    if isinstance(beside, str):
        return f"bare model beside a process decoding the same streams: {beside}"
    ratios = beside["ratios"]
    return (f"bare model beside a process decoding the same streams (batch {beside['batch']}, "
            f"{len(ratios)} windows, each against the windows alone around it): {beside['ratio']:.2f} x bare "
            f"(windows {min(ratios):.2f}-{max(ratios):.2f}); decoding: {beside['decoded_fps']} fps, "
            f"{beside['decoder_cpu_pct']}% of one core, {beside['decode_ms_per_frame']} ms/frame; "
            f"the daemon's {daemon_ratio:.2f} x bare is {daemon_ratio / beside['ratio']:.2f} x that")


def workers_line(main: dict[str, Any], bare_cpu: float | None, bare_rate: float) -> str:
    """Where the workers' CPU went: how much of the cores they got, how much of it session.run
    took, and session.run's CPU per image against the bare model's in the same layout. The
    daemon / bare ratio is (session.run CPU per second in the daemon / in the bare run) x (bare
    CPU per image / daemon CPU per image); the first factor is the daemon's share of the cores,
    the second the session's speed in each phase: the host's speed as it drifts between phases
    (minutes apart), and any slow-down inference itself suffers in the daemon."""
    share = main.get("session_run_share_of_workers_cpu")
    daemon_cpu = main["inference_cpu_ms_per_image"]
    line = (f"workers: {main['workers_cpu_pct']}% of one core in all, "
            f"{'?' if share is None else f'{100 * share:.1f}'}% of it in session.run, "
            f"{daemon_cpu} ms of session.run CPU per image")
    if bare_cpu and not math.isnan(daemon_cpu):
        session_pct, bare_pct = main["fps_total"] * daemon_cpu / 10, bare_rate * bare_cpu / 10
        line += (f" against {bare_cpu} ms bare in the same layout ({daemon_cpu / bare_cpu:.2f} x)\n"
                 f"share of the cores: session.run {session_pct:.1f}% of one core in the daemon against "
                 f"{bare_pct:.1f}% bare: {session_pct / bare_pct:.2f} x bare at equal session.run speed")
    return line


def main() -> int:
    malloc = tune_malloc()  # as `beltsight run` does, before any thread starts
    args = parse_args()
    args.malloc = malloc
    args.out.mkdir(parents=True, exist_ok=True)
    configure_logging("json", "info", stream=(args.out / "daemon.log").open("w"))
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM cleans up like Ctrl-C
    ks = [int(v) for v in args.sweep.split(",")] if args.sweep else [args.cameras]
    main_k = args.cameras if args.cameras in ks else ks[-1]
    srv = Servers()
    try:
        clips = render_clips(max(ks), args.width, args.height, args.fps, args.bitrate or None)
        args.clip_mbit_s = round(sum(c.stat().st_size for c in clips) * 8 / CLIP_SECONDS / len(clips) / 1e6, 2)
        srv.start(clips, args.out)
        args.bare_clip = clips[0]  # the bare model runs on its frames
        dcfg = EngineConfig(providers=["cpu"], workers=args.workers, intra_op_threads=args.intra_op_threads,
                            worker_batch=args.worker_batch, max_batch=args.max_batch or EngineConfig().max_batch)
        workers, threads = lane_workers(dcfg), intra_op_threads(dcfg)
        policy = BatchPolicy(dcfg.max_batch, 0.0, 0.0, workers=workers, per_worker=worker_batch(dcfg))
        expected = policy.share(main_k)  # the batch size the daemon will run, by its own rule
        before, before_cpu = bare_both(args, dcfg, sorted({1, expected}), "before")
        phases: dict[int, dict[str, Any]] = {}
        for k in ks:
            redis.Redis(port=srv.redis_port).flushall()
            print(f"bench: daemon phase, {k} cameras, {args.seconds} s", flush=True)
            phases[k] = daemon_phase(k, args, srv, args.out)
            print(f"bench:   {phases[k]['fps_total']} fps, p99 {phases[k]['latency_ms']['p99']} ms, "
                  f"batches {phases[k]['batch_sizes']}", flush=True)
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
    print(f"\nclips: {args.size} at {args.fps} fps, H.264 capped at {args.bitrate or 'none (crf 20)'}: "
          f"{args.clip_mbit_s} Mbit/s per camera on average")
    print_table(main_phase, naive, bare, bare_main, checks, detail)
    report = {
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "machine": {"cpu_count": os.cpu_count(), "cpu_affinity": len(os.sched_getaffinity(0)),
                    "platform": platform.platform(), "python": platform.python_version(),
                    "onnxruntime": ort.__version__, "av": av.__version__, "model": str(MODELS[args.model]),
                    "model_name": load_model_info(MODELS[args.model], args.model).name,
                    "providers": session.get_providers()},
        "bare_img_per_s": bare, "bare_img_per_s_at_used_batches": bare_main,
        "bare_img_per_s_single_session": bare_single, "bare_img_per_s_worker_layout": bare_workers,
        "bare_before": before, "bare_after": after, "bare_drift_after_over_before": drift,
        "bare_beside_decoders": beside, "bare_cpu_ms_per_image_worker_layout": bare_cpu,
        "daemon_workers": workers, "daemon_intra_op_threads": threads,
        "phases": {str(k): v for k, v in phases.items()}, "main_cameras": main_k, "naive": naive,
        "checks": {key: {"pass": ok, "detail": text} for key, ok, text in checks},
    }
    (args.out / "report.json").write_text(json.dumps(report, indent=1))
    plot(args.out / "bench.png", phases, main_phase, naive, bare)
    print(f"\nreport: {args.out / 'report.json'}\nplot:   {args.out / 'bench.png'}")
    return 0 if all(ok for _k, ok, _t in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
