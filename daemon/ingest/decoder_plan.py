"""How many processes decode the cameras (`[engine] processes`): the `auto` rule, and the pool it asks
for (`daemon.ingest.decoders.DecoderPool`), planned once at start."""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence

import structlog

from daemon.config.cameras import CameraConfig
from daemon.core.metrics import Metrics
from daemon.ingest.decoders import DecoderPool

log = structlog.get_logger("beltsight.source")

AUTO_FPS = 15.0
"""Frames per second `auto` assumes per camera (the configuration does not say)."""
AUTO_FRAME_CPU_S = 0.0033
"""CPU one 640x480 frame costs its reader: decode (1.7 ms) and the scale to the model's planes
(1.6 ms), measured by `python -m tools.bench --null-model` and `tools/bench/preprocess.py`."""
AUTO_THREAD_SHARE = 0.7
"""The busiest thread's share of a core that `auto` keeps each process under."""


def plan_processes(setting: int | str, cameras: int, cpus: int | None = None) -> tuple[int, str]:
    """How many processes the daemon runs (itself included) and why.

    A count is taken as it is. `auto`: the readers' load, `cameras x AUTO_FPS x AUTO_FRAME_CPU_S`
    cores, stays in the daemon while it is at most `AUTO_THREAD_SHARE` of a core; beyond that,
    one decoder process per `AUTO_THREAD_SHARE` of a core of it, beside the daemon's own, at most
    one process per CPU core this process may run on (16 cameras: 0.79 cores, two decoder
    processes, three with the daemon where the cores allow). The count is planned once, at start."""
    if setting != "auto":
        return int(setting), "configured"
    load = cameras * AUTO_FPS * AUTO_FRAME_CPU_S
    if load <= AUTO_THREAD_SHARE:
        return 1, f"{cameras} cameras: readers {load:.2f} of a core, within {AUTO_THREAD_SHARE}"
    cores = cpus if cpus is not None else len(os.sched_getaffinity(0))
    wanted = 1 + math.ceil(load / AUTO_THREAD_SHARE)
    count = max(1, min(wanted, cores))
    return count, f"{cameras} cameras: readers {load:.2f} of a core, {cores} cores"


def decoder_pool(
    setting: int | str,
    cameras: Sequence[CameraConfig],
    metrics: Metrics,
    *,
    on_device: bool,
    yuv: bool = False,
    clips: bool = False,
    log_setup: Callable[[], None] | None = None,
) -> DecoderPool | None:
    """The pool `[engine] processes` asks for, None for the single-process path (logged with its
    reason as `engine_processes`). GigE cameras stay in threads; `on_device` (lanes decoding on
    NVDEC, frames kept on the device) keeps every camera in threads, and so does `clips` (each
    camera's packet ring must be beside the clip recorder, in the daemon's process). `yuv` (lanes
    that letterbox on the device, decoding on the CPU: NVDEC unavailable): the processes hand
    each frame's decoded YUV planes on instead of RGB scaled in the decoder."""
    decoded = [c for c in cameras if c.kind != "gige"]
    count, reason = plan_processes(setting, len(decoded))
    if count > 1 and on_device:
        count, reason = 1, "frames are decoded on the device (NVDEC)"
    if count > 1 and clips:
        count, reason = 1, "[clips] keeps each camera's packets beside the clip recorder, in this process"
    if count > 1 and not decoded:
        count, reason = 1, "no RTSP camera or file to decode"
    log.info("engine_processes", processes=count, setting=str(setting), reason=reason, frames="yuv" if yuv else "rgb")
    return DecoderPool(count - 1, metrics, log_setup, yuv=yuv) if count > 1 else None


__all__ = ["AUTO_FPS", "AUTO_FRAME_CPU_S", "AUTO_THREAD_SHARE", "decoder_pool", "plan_processes"]
