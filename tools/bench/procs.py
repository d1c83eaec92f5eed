"""Processes and /proc for `python -m tools.bench`, shared by the daemon phase and the baselines.

`Servers` starts redis-server and tools/kit/rtsp_server.py (run by Debian's python3) with
tools/kit's launchers and stops them;
`render_clips` renders the synthetic clips they serve (cached in runs/bench-cache); the /proc
readers give CPU seconds (this process, its threads, another process, the whole machine) and RSS,
the daemon's counting its decoder processes (`[engine] processes`, this process's children);
`split_window` is the latency window both phases report.
"""

from __future__ import annotations

import multiprocessing
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from tools.kit.redis_server import RedisServer, find_redis_server
from tools.kit.rtsp import RtspServer

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / "runs" / "bench-cache"
CLIP_SECONDS = 10
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


# -- processes and /proc ------------------------------------------------------------------------
def proc_cpu_s(pid: int | str = "self") -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def decoder_pids() -> list[int]:
    """This process's `multiprocessing` children: the daemon's decoder processes (`[engine] processes`)."""
    return [p.pid for p in multiprocessing.active_children() if p.pid is not None]


def daemon_cpu_s() -> float:
    """CPU seconds of this process (the daemon runs in it) and of its decoder processes."""
    total = proc_cpu_s()
    for pid in decoder_pids():
        try:
            total += proc_cpu_s(pid)
        except (OSError, IndexError):
            continue  # ended meanwhile
    return total


def thread_times_s() -> dict[str, tuple[float, float]]:
    """Per thread group of this process: (CPU seconds, seconds runnable but waiting for a core).

    Threads Python did not start are ORT's or FFmpeg's. The wait is schedstat's run-queue time,
    what the other threads and processes took from the group (NaN without schedstats)."""
    names = {t.native_id: re.sub(r"(_\d+|cam\d+)$", "*", t.name) for t in threading.enumerate() if t.native_id}
    out: dict[str, tuple[float, float]] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            cpu = proc_cpu_s(f"self/task/{tid}")
        except (OSError, IndexError):
            continue  # the thread ended meanwhile
        try:
            wait = int(Path(f"/proc/self/task/{tid}/schedstat").read_text().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            wait = float("nan")
        group = names.get(int(tid), "native (ORT pool, FFmpeg)")
        cpu0, wait0 = out.get(group, (0.0, 0.0))
        out[group] = (cpu0 + cpu, wait0 + wait)
    return out


def thread_cpu_s() -> dict[int, tuple[str, float]]:
    """Per thread of this process (by native id): (its name, CPU seconds); ORT's and FFmpeg's
    threads, which Python did not start, are named "native"."""
    names = {t.native_id: t.name for t in threading.enumerate() if t.native_id}
    out: dict[int, tuple[str, float]] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            out[int(tid)] = (names.get(int(tid), "native"), proc_cpu_s(f"self/task/{tid}"))
        except (OSError, IndexError):
            continue  # the thread ended meanwhile
    for pid in decoder_pids():  # a decoder process's threads (their ids are unique machine-wide)
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                out[int(tid)] = ("decoder process", proc_cpu_s(f"{pid}/task/{tid}"))
            except (OSError, IndexError):
                continue
    return out


def busiest_thread(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], seconds: float
) -> dict[str, Any]:
    """The thread that used the most CPU between two `thread_cpu_s()` readings: its name and its
    share of one core, in %."""
    used = {tid: (name, cpu - before.get(tid, (name, 0.0))[1]) for tid, (name, cpu) in after.items()}
    if not used or seconds <= 0:
        return {"name": None, "core_pct": float("nan")}
    name, cpu = max(used.values(), key=lambda v: v[1])
    return {"name": name, "core_pct": round(100 * cpu / seconds, 1)}


def machine_busy_s() -> float:
    """CPU seconds all processes used (all cores), from /proc/stat: to see who else ran meanwhile."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(values[:8]) - values[3] - values[4]) / TICK  # minus idle and iowait


def cpu_clocks(srv: Servers) -> tuple[float, float, float, float]:
    """(wall s, this process, the servers, the whole machine) CPU seconds."""
    return time.time(), daemon_cpu_s(), sum(proc_cpu_s(pid) for pid in srv.pids), machine_busy_s()


def proc_rss_mb(pid: int | str = "self") -> float:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / 2**20


def daemon_rss_mb() -> float:
    """RSS of this process and its decoder processes (shared memory counted where each maps it)."""
    total = proc_rss_mb()
    for pid in decoder_pids():
        try:
            total += proc_rss_mb(pid)
        except (OSError, IndexError):
            continue
    return total


class Servers:
    """redis-server and the RTSP server (tools/kit's launchers); `close()` stops both (also after a
    failed start)."""

    def __init__(self) -> None:
        self.redis: RedisServer | None = None
        self.rtsp: RtspServer | None = None
        self.redis_port = 0
        self.urls: list[str] = []

    @property
    def pids(self) -> list[int]:
        return [s.proc.pid for s in (self.redis, self.rtsp) if s is not None and s.proc is not None]

    def start(self, clips: list[Path], out: Path, rtsp_nice: int = 0) -> None:
        """Both servers; the RTSP server's threads at `rtsp_nice` (see `nice_process`)."""
        self.redis = RedisServer(find_redis_server() or "redis-server", out)
        self.redis_port = self.redis.start().port
        self.rtsp = RtspServer({f"cam{i}": clip for i, clip in enumerate(clips)}, log_path=out / "rtsp.log")
        self.urls = self.rtsp.start().urls
        if rtsp_nice and self.rtsp.proc is not None:
            nice_process(self.rtsp.proc.pid, rtsp_nice)

    def close(self) -> None:
        if self.rtsp is not None:
            self.rtsp.terminate()
        if self.redis is not None:
            self.redis.stop()


def nice_process(pid: int, value: int) -> None:
    """Every thread of `pid` at nice `value` (threads it starts later inherit it). The RTSP server stands in
    for cameras, which do not share the daemon's cores: where it does, a frame it sends late reads as
    the daemon's lateness. A negative value needs CAP_SYS_NICE; without it the server keeps its nice
    and the bench says so."""
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            os.setpriority(os.PRIO_PROCESS, int(task), value)
    except PermissionError:
        print(
            f"bench: the RTSP server stays at nice {os.getpriority(os.PRIO_PROCESS, pid)}: "
            f"nice {value} needs CAP_SYS_NICE",
            flush=True,
        )
    else:
        print(f"bench: the RTSP server (the cameras' stand-in) runs at nice {value}", flush=True)


def render_clips(k: int, width: int, height: int, fps: int, bitrate: str | None) -> list[Path]:
    from tools.kit.synth.video import render_cached  # noqa: PLC0415

    rate = f"-{bitrate}bps" if bitrate else "-crf20"
    return [
        render_cached(
            CACHE / f"cam{i}-{width}x{height}-{fps}fps{rate}-seed{1000 + i}.mp4",
            *(width, height, fps, CLIP_SECONDS, 1000 + i, bitrate),
            say=lambda text: print(f"bench: {text}", flush=True),
        )
        for i in range(k)
    ]


def split_window(t: np.ndarray, lat: np.ndarray, t0: float, t1: float) -> tuple[np.ndarray, np.ndarray]:
    span = 60.0 if t1 - t0 >= 120 else (t1 - t0) / 3
    return lat[t < t0 + span], lat[t >= t1 - span]
