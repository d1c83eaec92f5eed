"""The daemon phase of `python -m tools.bench`: the real daemon in-process, sampled every second."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from prometheus_client import Histogram

from daemon.config.seam import EngineConfig
from daemon.core.seam import Metrics
from tools.bench.budget import budget, diff, overhead, role_seconds, stage_seconds
from tools.bench.experiments import EXPERIMENTS, Experiment
from tools.bench.phase_figures import crossings, sample, startup_figures, summarize_phase, thread_figures
from tools.bench.procs import (
    Servers,
    busiest_thread,
    cpu_clocks,
    daemon_cpu_s,
    daemon_rss_mb,
    thread_cpu_s,
    thread_times_s,
)
from tools.kit.daemon_config import write_config
from tools.kit.running import RunningDaemon, start_daemon


# -- the daemon phase ---------------------------------------------------------------------------
class BenchMetrics(Metrics):
    """The daemon's metrics, with one batch-size bucket per size (the stock buckets merge 5 and 6)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.registry.unregister(self.batch_size)
        self.batch_size = Histogram(
            "beltsight_batch_size",
            "Frames per inference batch",
            ["model"],
            buckets=tuple(range(1, 65)),
            registry=self.registry,
        )


def snapshot(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for m in metrics.registry.collect() for s in m.samples}


class Segments:
    """Alternates something on and off every `seconds` (0: never) and keeps, per segment, its
    published entries, the process's CPU, each stage's and each thread role's CPU.

    What alternates is the stage counters (`on` in each segment), or, with `experiment`
    (`tools.bench.experiments`), that experiment (`ab` in each segment; the counters stay on, and the
    first segment runs without it)."""

    def __init__(self, metrics: Metrics, seconds: float, experiment: Experiment | None = None) -> None:
        self._metrics, self._seconds, self._experiment = metrics, seconds, experiment
        self._ab = False
        self.done: list[dict[str, Any]] = []
        self._start = self._state()
        metrics.stage_cpu.switch.on = True
        if experiment is not None:
            experiment.apply(False)

    def _state(self) -> tuple[float, float, dict[Any, float], dict[str, float]]:
        return time.time(), daemon_cpu_s(), snapshot(self._metrics), role_seconds(thread_times_s())

    def tick(self) -> None:
        if self._seconds and time.time() - self._start[0] >= self._seconds:
            self.close()
            if self._experiment is not None:
                self._ab = not self._ab
                self._experiment.apply(self._ab)
            else:
                self._metrics.stage_cpu.switch.on = not self._metrics.stage_cpu.switch.on

    def finish(self) -> None:
        """Close the last segment and leave the experiment off."""
        self.close()
        if self._experiment is not None:
            self._experiment.apply(False)

    def close(self) -> None:
        end = self._state()
        (t0, cpu0, s0, r0), (t1, cpu1, s1, r1) = self._start, end
        self.done.append(
            {
                "on": self._metrics.stage_cpu.switch.on,
                "ab": self._ab if self._experiment is not None else None,
                "seconds": round(t1 - t0, 3),
                "published": int(sample(s1, "beltsight_entries_published_total"))
                - int(sample(s0, "beltsight_entries_published_total")),
                "decoded": int(sample(s1, "beltsight_frames_decoded_total"))
                - int(sample(s0, "beltsight_frames_decoded_total")),
                "cpu_s": round(cpu1 - cpu0, 3),
                "stage_cpu_s": {k: round(v, 4) for k, v in diff(stage_seconds(s0), stage_seconds(s1)).items()},
                "role_cpu_s": {k: round(v, 3) for k, v in diff(r0, r1).items()},
            }
        )
        self._start = end


def start_flame(path: Path | None, seconds: float) -> subprocess.Popen[bytes] | None:
    """py-spy recording this process (the daemon runs in it; not its decoder processes: with py-spy's
    `--subprocesses` over them, a 32-camera phase published 190 frames/s against 450-470 without)
    for up to 60 s of the phase: a flame graph (SVG), or collapsed stacks where `path` ends in `.txt`."""
    if path is None:
        return None
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    cmd = [spy, "record", "-o", str(path), "--pid", str(os.getpid()), "--duration", str(int(min(60, seconds)))]
    cmd += ["--threads", "--nonblocking"]
    if path.suffix == ".txt":  # collapsed stacks, one line each, for reading as text
        cmd += ["--format", "raw"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def finish_flame(spy: subprocess.Popen[bytes], path: Path | None) -> None:
    try:
        _out, err = spy.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        spy.kill()
        _out, err = spy.communicate()
    print(f"bench: flame graph {path} (py-spy exit {spy.returncode}: {err.decode()[-300:].strip()})", flush=True)


def daemon_phase(
    k: int,
    args: argparse.Namespace,
    srv: Servers,
    out: Path,
    flame: Path | None = None,
    on_window: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """The daemon with `k` cameras for `args.seconds` once every camera has published; `on_window`
    is called when that window starts (a profiler to start, say)."""
    config, cams, engine = phase_config(k, args, srv, out)
    metrics = BenchMetrics()
    running = start_daemon(config, metrics=metrics, device_standin=getattr(args, "device_standin", False))
    daemon = running.daemon
    client = redis.Redis(port=srv.redis_port, db=k % 16, decode_responses=True)  # 16 databases by default
    streams = {c["id"]: daemon.settings.redis.stream_for(c["id"]) for c in cams}
    samples: list[dict[str, Any]] = []
    spy: subprocess.Popen[bytes] | None = None
    try:
        wait_entries(client, streams, running)
        up = time.time()  # every camera has published: the start-up runs on for --settle seconds
        time.sleep(getattr(args, "settle", 0))
        t0, s0, threads0, tids0 = time.time(), snapshot(metrics), thread_times_s(), thread_cpu_s()
        prev = cpu_clocks(srv)
        experiment = EXPERIMENTS[args.ab] if getattr(args, "ab", None) else None
        segments = Segments(metrics, args.stage_ab_seconds, experiment)
        spy = start_flame(flame, args.seconds)
        if on_window is not None:
            on_window()
        while (now := time.time()) < t0 + args.seconds:
            time.sleep(min(1.0, t0 + args.seconds - now))
            segments.tick()
            cur = cpu_clocks(srv)
            samples.append(one_sample(client, streams, cur, prev, t0))
            prev = cur
        t1, s1, threads1, tids1 = time.time(), snapshot(metrics), thread_times_s(), thread_cpu_s()
        segments.finish()
    finally:
        metrics.stage_cpu.switch.on = True
        running.stop(30)
        if spy is not None:
            finish_flame(spy, flame)
    if running.error is not None:
        raise RuntimeError("daemon failed") from running.error
    s2 = snapshot(metrics)
    phase = summarize_phase(k, args, client, streams, samples, (t0, t1), (s0, s1, s2), engine)
    phase["startup"] = startup_figures(client, streams, (up, t0))
    if (counted := crossings(args, s0, s1, t1 - t0)) is not None:  # with --lines
        phase["crossings"] = counted
    phase["busiest_thread"] = busiest_thread(tids0, tids1, t1 - t0)
    phase["stage_segments"] = segments.done
    phase["stage_budget"] = budget(segments.done, os.cpu_count() or 1)
    phase["stage_counters_cost"] = overhead(segments.done)
    if experiment is not None:
        phase["experiment"] = {"name": experiment.name, "summary": experiment.summary, **overhead(segments.done, "ab")}
    phase |= thread_figures(threads0, threads1, t1 - t0, phase["inference_cpu_s"])
    return phase


def phase_config(
    k: int, args: argparse.Namespace, srv: Servers, out: Path
) -> tuple[Path, list[dict[str, Any]], dict[str, Any]]:
    """The daemon's config for `k` cameras as the flags set it (lines, snapshots, the engine): its path,
    the cameras and the engine section."""
    cams: list[dict[str, Any]] = [{"id": f"cam{i}", "url": srv.urls[i], "model": args.model} for i in range(k)]
    if getattr(args, "lines", False):
        for cam in cams:  # the demo's counting line: across the belt, parts run to the right
            cam["lines"] = [{"id": "count", "start": [0.5, 0.0], "end": [0.5, 1.0], "direction": [1.0, 0.0]}]
    extra = ""
    if getattr(args, "snapshots", False):
        extra = f"[snapshots]\nenabled = true\ndir = {json.dumps(str(out / f'snapshots-k{k}'))}\n"
    engine = {k2: v for k2, v in (("max_batch", args.max_batch), ("max_wait_ms", args.max_wait_ms)) if v is not None}
    engine.setdefault("max_batch", EngineConfig().max_batch)
    engine.setdefault("max_wait_ms", EngineConfig().max_wait_ms)
    engine["intra_op_threads"] = args.intra_op_threads  # the bare sessions use the same
    engine["workers"] = args.workers
    engine["worker_batch"] = args.worker_batch
    engine["preprocess"] = getattr(args, "preprocess", None) or "host"
    engine["processes"] = _processes(getattr(args, "processes", None) or "1")
    config = write_config(
        out / f"daemon-k{k}.toml",
        redis_url=f"redis://127.0.0.1:{srv.redis_port}/{k % 16}",
        cameras=cams,
        extra=extra,
        **engine,
    )
    return config, cams, engine


def wait_entries(client: redis.Redis, streams: dict[str, str], running: RunningDaemon) -> None:
    """Until every camera's stream has an entry (90 s at most; RuntimeError if the daemon fails first)."""
    deadline = time.time() + 90
    while not all(client.xlen(s) for s in streams.values()):
        if time.time() > deadline or not running.thread.is_alive():
            raise RuntimeError(f"daemon produced no entries for every camera: {running.error!r}")
        time.sleep(0.2)


def one_sample(
    client: redis.Redis,
    streams: dict[str, str],
    cur: tuple[float, float, float, float],
    prev: tuple[float, float, float, float],
    t0: float,
) -> dict[str, Any]:
    """One second's sample: the streams' lengths, the CPU of the daemon, the servers and the rest of the
    machine since the last (`cpu_clocks` now and then), the daemon's RSS."""
    wall, own, servers, machine = (c - p for c, p in zip(cur, prev, strict=True))
    return {
        "t": round(cur[0] - t0, 2),
        "xlen": {c: client.xlen(s) for c, s in streams.items()},
        "cpu_pct": round(100 * own / wall, 1),
        "servers_cpu_pct": round(100 * servers / wall, 1),
        "others_cpu_pct": round(100 * (machine - own - servers) / wall, 1),
        "rss_mb": round(daemon_rss_mb(), 1),
    }


def _processes(value: str) -> int | str:
    """`--processes`' value as `[engine] processes` takes it."""
    first = value.split(",", maxsplit=1)[0]
    return first if first == "auto" else int(first)
