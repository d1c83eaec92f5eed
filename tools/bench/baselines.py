"""The baselines `python -m tools.bench` measures the daemon against.

Baseline 1, the bare model: `session.run` alone on ready-made batches of the clips' own frames
(letterboxed as the workers do, `clip_images`) at the batch sizes the daemon used, one session
with ORT's default threads and the daemon's layout (`engine.workers` sessions side by side),
measured before and after the daemon phase (`bracket` averages them and reports the host's speed
drift). Baseline 2, the naive one-loop pipeline of tools/bench/naive.py on one session
(`naive_phase`). A diagnostic, not a baseline: the bare model in the daemon's layout beside a
separate process that only decodes the same RTSP streams (`bare_beside_decoders`), which is what
any pipeline that decodes every frame on these cores could at most reach.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import av
import numpy as np
import onnxruntime as ort
import redis

from daemon.config.seam import EngineConfig
from daemon.core.seam import Frame, Letterbox
from daemon.inference.seam import BatchTensor, intra_op_threads, lane_workers, load_model_info, session_options
from daemon.ingest.seam import scale
from tools.bench.naive import NaiveCamera, run_naive
from tools.bench.procs import Servers, machine_busy_s, proc_cpu_s, split_window
from tools.kit.daemon_config import MODELS, REPO
from tools.kit.stats import percentile, percentiles


# -- baselines ----------------------------------------------------------------------------------
def _run_bare(
    sess: ort.InferenceSession, feed: dict[str, np.ndarray], b: int, until: float, counts: list[int], i: int
) -> None:
    while time.perf_counter() < until:
        sess.run(None, feed)
        counts[i] += b


def clip_images(clip: Path, size: int, count: int = 8) -> np.ndarray:
    """The first `count` frames of `clip`, scaled and letterboxed for the `size` model exactly as
    the daemon's workers fill their batch tensor: (count, 3, size, size) float32."""
    tensor = BatchTensor(1, size)
    images = []
    with av.open(str(clip)) as container:
        for vframe in container.decode(video=0):
            lb = Letterbox.fit(vframe.width, vframe.height, size)
            images.append(tensor.fill([Frame("bench", 0, 0, 0.0, lb, scale(vframe, lb))])[0].copy())
            if len(images) == count:
                break
    return np.stack(images)


def bare_rates(
    sessions: list[ort.InferenceSession],
    images: np.ndarray,
    sizes: list[int],
    seconds: float,
    label: str,
    cpu_ms: dict[int, float] | None = None,
) -> dict[int, float]:
    """Images/s of `session.run` alone on ready-made batches of `images` (repeated to fill a batch
    larger than they are), per batch size; with several sessions, each runs in its own thread at
    the same time (the daemon's workers) and images add up. `cpu_ms`, if given, gets the
    process's CPU ms per image at each batch size (what the daemon's
    `beltsight_inference_cpu_seconds_total` counts per image in its workers)."""
    name = sessions[0].get_inputs()[0].name
    rates = {}
    for b in sizes:
        feed = {name: np.ascontiguousarray(np.resize(images, (b, *images.shape[1:])))}
        for sess in sessions:
            for _ in range(2):
                sess.run(None, feed)
        counts = [0] * len(sessions)
        start, own0, all0 = time.perf_counter(), proc_cpu_s(), machine_busy_s()

        threads = [
            threading.Thread(target=_run_bare, args=(sess, feed, b, start + seconds, counts, i))
            for i, sess in enumerate(sessions)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start
        rates[b] = round(sum(counts) / elapsed, 2)
        if cpu_ms is not None:
            cpu_ms[b] = round(1000 * (proc_cpu_s() - own0) / max(sum(counts), 1), 2)
        others = 100 * (machine_busy_s() - all0 - proc_cpu_s() + own0) / elapsed
        print(
            f"bench: bare model ({label}), batch {b}: {rates[b]} img/s (other processes meanwhile: {others:.0f}% CPU)",
            flush=True,
        )
    return rates


def make_session(args: argparse.Namespace, cfg: EngineConfig) -> ort.InferenceSession:
    return ort.InferenceSession(
        str(MODELS[args.model]), sess_options=session_options(cfg), providers=["CPUExecutionProvider"]
    )


Rates = dict[int, float]


def bare_both(
    args: argparse.Namespace, dcfg: EngineConfig, sizes: list[int], when: str
) -> tuple[dict[str, Rates], Rates]:
    """The bare model both ways: one session with ORT's default threads (what the naive loop and
    most code use), and the daemon's layout (`workers` sessions side by side, the cores shared out).
    Returns images/s by layout and batch size, and the daemon's layout's CPU ms per image by batch
    size (empty when that layout is the single session's)."""
    images = clip_images(args.bare_clip, args.model, max(sizes))  # freed on return: not in the daemon's RSS
    rates = {
        "single": bare_rates(
            [make_session(args, EngineConfig(providers=["cpu"], workers=1))],
            images,
            sizes,
            args.bare_seconds,
            f"1 session, ORT threads, {when}",
        )
    }
    workers, threads = lane_workers(dcfg), intra_op_threads(dcfg)
    cpu_ms: Rates = {}
    if workers > 1 or threads:
        label = f"{workers} sessions x {threads or 'default'} threads, {when}"
        sessions = [make_session(args, dcfg) for _ in range(workers)]
        rates["workers"] = bare_rates(sessions, images, sizes, args.bare_seconds, label, cpu_ms)
    return rates, cpu_ms


class DecoderLoad:
    """`python -m tools.bench.decoders` in its own process: decodes `urls` until `close()`. `cmd`: another
    command that prints the same lines (`tools/bench/ultralytics_run.py`), the URLs appended."""

    def __init__(self, urls: list[str], cmd: list[str] | None = None) -> None:
        cmd = [*(cmd or [sys.executable, "-m", "tools.bench.decoders"]), *urls]
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True)
        self.latest = (0.0, 0.0, 0.0)  # frames, CPU s, monotonic s
        assert self.proc.stdout is not None
        self._follower = threading.Thread(target=self._follow, args=(self.proc.stdout,), daemon=True)
        self._follower.start()

    def _follow(self, out: IO[str]) -> None:
        for line in out:
            frames, cpu, at = line.split()
            self.latest = (float(frames), float(cpu), float(at))

    def wait_decoding(self, fps: float, timeout_s: float = 20.0) -> None:
        """Until the streams are up and decoded at about `fps` in all (connects take a second or two)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            f0 = self.latest[0]
            time.sleep(2.0)
            if f0 and self.latest[0] - f0 >= 0.9 * 2.0 * fps:
                return
        raise RuntimeError("bench_decoders did not reach the streams' frame rate (see its stderr)")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self._follower.join(5.0)  # its pipe ends with the process
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def decode_only(
    urls: list[str],
    seconds: float,
    connect_timeout_s: float = 30.0,
    cmd: list[str] | None = None,
    settle_s: float = 2.0,
) -> dict[str, Any]:
    """`tools.bench.decoders` (or `cmd`, which prints the same lines) alone on `urls` for `seconds`, from
    `settle_s` after every stream gave frames: frames/s, its CPU (% of one core), ms per frame."""
    load = DecoderLoad(urls, cmd)
    try:
        deadline = time.monotonic() + connect_timeout_s
        while load.latest[0] < 2 * len(urls):  # every stream connected and decoding, roughly
            if time.monotonic() > deadline or load.proc.poll() is not None:
                raise RuntimeError(f"{' '.join((cmd or ['tools.bench.decoders'])[:2])} did not start (see its stderr)")
            time.sleep(0.2)
        time.sleep(settle_s)  # the rest of the connects
        f0, c0, t0 = load.latest
        time.sleep(seconds)
        f1, c1, t1 = load.latest
    finally:
        load.close()
    frames, cpu, wall = f1 - f0, c1 - c0, t1 - t0
    return {
        "fps": round(frames / wall, 1) if wall else float("nan"),
        "core_pct": round(100 * cpu / wall, 1) if wall else float("nan"),
        "ms_per_frame": round(1000 * cpu / frames, 2) if frames else float("nan"),
    }


def ultralytics_phase(args: argparse.Namespace, urls: list[str], model: Path) -> dict[str, Any] | None:
    """With `--ultralytics PYTHON`: Ultralytics' streaming predictor (`tools/bench/ultralytics_run.py` in that
    interpreter) alone on `urls` with `model` for `--seconds`, as `decode_only` measures decoding."""
    if not args.ultralytics:
        return None
    print(f"bench: Ultralytics' predictor, {model.name}, {len(urls)} streams, {args.seconds} s", flush=True)
    script = Path(__file__).with_name("ultralytics_run.py")
    cmd = [str(args.ultralytics), str(script), "--model", str(model), "--imgsz", str(args.model)]
    try:
        result = decode_only(urls, args.seconds, connect_timeout_s=60.0 + 5.0 * len(urls), cmd=cmd, settle_s=5.0)
    except RuntimeError as exc:  # a baseline: its failure must not cost the run its report
        print(f"bench:   Ultralytics not measured: {exc}", flush=True)
        return {"fps": float("nan"), "core_pct": float("nan"), "ms_per_frame": float("nan"), "error": str(exc)}
    print(f"bench:   Ultralytics {result['fps']} fps", flush=True)
    return result


BESIDE_WINDOW_S = 6.0
BESIDE_CYCLES = 3


def _decoding_window(
    sessions: list[ort.InferenceSession], images: np.ndarray, urls: list[str], offered_fps: float, batch: int
) -> tuple[float, float, float, float]:
    """One bare window beside a fresh decoder process: img/s, and the decoder's frames, CPU s
    and seconds over the window."""
    load = DecoderLoad(urls)
    try:
        load.wait_decoding(offered_fps)
        f0, c0, t0 = load.latest
        rate = bare_rates(sessions, images, [batch], BESIDE_WINDOW_S, "beside the decoders")[batch]
        time.sleep(1.1)  # the decoder's next per-second line covers the whole window
        f1, c1, t1 = load.latest
    finally:
        load.close()
    return rate, f1 - f0, c1 - c0, t1 - t0


def bare_beside_decoders(
    args: argparse.Namespace, dcfg: EngineConfig, urls: list[str], offered_fps: float, batch: int
) -> dict[str, Any]:
    """The daemon's bare layout at `batch`, alternately alone and beside another process that
    decodes `urls` (`BESIDE_CYCLES` windows of each, plus a last one alone). Each window beside
    is compared with the mean of the windows alone on either side of it, which takes out most of
    the host's drift; the median of those ratios is what decoding leaves of the bare model."""
    sessions = [make_session(args, dcfg) for _ in range(lane_workers(dcfg))]
    images = clip_images(args.bare_clip, args.model, batch)
    alone: list[float] = []
    beside: list[float] = []

    def window_alone() -> float:
        return bare_rates(sessions, images, [batch], BESIDE_WINDOW_S, "between decoding windows")[batch]

    frames = cpu = seconds = 0.0
    for _ in range(BESIDE_CYCLES):
        alone.append(window_alone())
        rate, f, c, t = _decoding_window(sessions, images, urls, offered_fps, batch)
        beside.append(rate)
        frames, cpu, seconds = frames + f, cpu + c, seconds + t
    alone.append(window_alone())
    ratios = [round(b / ((a0 + a1) / 2), 3) for b, a0, a1 in zip(beside, alone, alone[1:], strict=False)]
    return {
        "batch": batch,
        "img_per_s_beside": beside,
        "img_per_s_alone": alone,
        "ratios": ratios,
        "ratio": float(np.median(ratios)),
        "decoded_fps": round(frames / seconds, 1),
        "decoder_cpu_pct": round(100 * cpu / seconds, 1),
        "decode_ms_per_frame": round(1000 * cpu / frames, 2) if frames else float("nan"),
    }


def bracket(before: dict[str, Rates], after: dict[str, Rates]) -> tuple[Rates, Rates, dict[str, float]]:
    """Bare rates measured before and after the daemon phase, averaged where both exist (a host
    whose speed drifts shows up in `drift`, after / before per layout and batch size)."""
    merged: dict[str, Rates] = {}
    drift: dict[str, float] = {}
    for layout, rates in after.items():
        merged[layout] = {}
        for b, rate in rates.items():
            first = before.get(layout, {}).get(b)
            merged[layout][b] = round((rate + first) / 2, 2) if first else rate
            if first:
                drift[f"{layout} b{b}"] = round(rate / first, 3)
    return merged["single"], merged.get("workers", {}), drift


def used_sizes(counts: dict[int, int], share: float = 0.05) -> list[int]:
    images = sum(b * n for b, n in counts.items()) or 1
    return sorted(b for b, n in counts.items() if b * n / images >= share)[-3:]


def bare_at(rates: dict[int, float], counts: dict[int, int]) -> float:
    """Images/s had the daemon's batches (this size mix) run bare: total images / total bare time."""
    if not counts:
        return float("nan")
    nearest = {b: rates[min(rates, key=lambda r: abs(r - b))] for b in counts}
    return round(sum(b * n for b, n in counts.items()) / sum(b * n / nearest[b] for b, n in counts.items()), 2)


def naive_phase(
    k: int, seconds: float, args: argparse.Namespace, srv: Servers, session: ort.InferenceSession
) -> dict[str, Any]:
    info = load_model_info(MODELS[args.model], args.model)
    cams = [NaiveCamera(f"cam{i}", srv.urls[i], args.fps) for i in range(k)]
    cpu0, all0 = proc_cpu_s(), machine_busy_s()
    start, elapsed = run_naive(cams, session, info, redis.Redis(port=srv.redis_port), seconds)
    cpu_pct = round(100 * (proc_cpu_s() - cpu0) / elapsed, 1)
    machine_pct = round(100 * (machine_busy_s() - all0) / elapsed, 1)
    per_cam, series, all_t, all_exp, all_dec = {}, {}, [], [], []
    for cam in cams:
        t, exp, dec = cam.latencies()
        per_cam[cam.camera_id] = {"fps": round(len(t) / elapsed, 2), "frames": len(t)}
        series[cam.camera_id] = {"t": (t - start).round(3).tolist(), "latency_ms": exp.round(1).tolist()}
        all_t.append(t)
        all_exp.append(exp)
        all_dec.append(dec)
    t, exp, dec = np.concatenate(all_t), np.concatenate(all_exp), np.concatenate(all_dec)
    first, last = split_window(t, exp, start, start + elapsed)
    return {
        "cameras": k,
        "seconds": round(elapsed, 2),
        "fps_total": round(len(t) / elapsed, 2),
        "per_camera": per_cam,
        "latency_vs_expected_capture_ms": {
            **percentiles(exp, (50, 95, 99), 1),
            "first_p50": percentile(first, 50, 1),
            "last_p50": percentile(last, 50, 1),
        },
        "latency_vs_decode_ms": percentiles(dec, (50, 99), 1),
        "cpu_pct_mean": cpu_pct,
        "machine_cpu_pct_mean": machine_pct,
        "series": series,
    }


def bare_cpu_ms(before: Rates, after: Rates, batch: int) -> float | None:
    """CPU ms per image of the bare model in the daemon's layout at `batch`, before and after averaged."""
    got = [cpu[batch] for cpu in (before, after) if batch in cpu]
    return round(sum(got) / len(got), 2) if got else None
