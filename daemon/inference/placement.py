"""Where a lane runs: the one place that decides CPU or CUDA.

`choose` turns `[engine] device` and the providers the first session really got into the array
module pre- and post-processing run on (`daemon.core.xp.choose_device`), once at startup;
`device_path` gives a lane worker the device path when that choice is CUDA; `breaker_applies`
and `memory_device` read the first session's providers for the serving engine (whether a CPU
fallback makes sense, whose memory to watch).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from daemon.config.engine import EngineConfig
from daemon.core.xp import DeviceChoice, choose_device
from daemon.inference.device_stage import DeviceInference
from daemon.inference.letterbox_kernel import LetterboxKernel
from daemon.inference.model_file import ModelInfo
from daemon.inference.providers import ORT_PROVIDERS, on_cuda


def breaker_applies(cfg: EngineConfig, providers: Sequence[str]) -> bool:
    """A breaker with a CPU fallback, unless disabled or the primary is the CPU already
    (configured so, or ORT gave the session the CPU anyway)."""
    return cfg.breaker.enabled and cfg.providers[0] != "cpu" and tuple(providers[:1]) != (ORT_PROVIDERS["cpu"],)


def memory_device(cfg: EngineConfig, providers: Sequence[str]) -> int | None:
    """The GPU whose memory the rebuild policy watches (None: RSS only)."""
    return cfg.cuda.device_id if on_cuda(providers) else None


def choose(cfg: EngineConfig, providers: Sequence[str]) -> DeviceChoice:
    """Where pre- and post-processing run, from `[engine] device` and a built session's providers."""
    return choose_device(cfg.device, providers, cfg.cuda.device_id)


def device_path(choice: DeviceChoice | None, info: ModelInfo, max_batch: int) -> DeviceInference | None:
    """A lane worker's device path when the choice is CUDA (the CUDA letterbox kernel where `xp`
    is CuPy; the xp letterbox with NumPy, the test seam), else None (the CPU path)."""
    if choice is None or choice.device != "cuda":
        return None
    kernel = choice.kernel(choice.xp) if choice.kernel is not None else None
    if kernel is None and choice.xp is not np:
        kernel = LetterboxKernel(choice.xp)
    return DeviceInference(choice.xp, info, max_batch, kernel=kernel)
