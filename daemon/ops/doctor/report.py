"""What `beltsight doctor` finds about inference: every configured model's session built as the
daemon would build it, the providers it really got, warm-up time and device memory around it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import onnxruntime as ort

from daemon.config.engine import EngineConfig
from daemon.core.model_spec import ModelOverrides
from daemon.core.nvml import gpu_memory_used_mb
from daemon.core.xp import cupy_status
from daemon.inference.engine import Engine
from daemon.inference.model_file import ModelError, load_model_info
from daemon.inference.providers import ORT_PROVIDERS, EngineError


@dataclass(frozen=True, slots=True)
class ModelCheck:
    """One configured model as `doctor` found it."""

    size: int
    path: str
    ok: bool
    problem: str | None = None
    name: str | None = None
    providers: tuple[str, ...] = ()
    warmup_ms: float | None = None
    device_mem_before_mb: float | None = None
    device_mem_after_mb: float | None = None
    details: tuple[str, ...] = ()
    """Layout and why, classes, input convention (`ModelInfo.lines`)."""


@dataclass(frozen=True, slots=True)
class DoctorReport:
    """`ok` is False when a model fails to load or the first configured provider would not be used."""

    ok: bool
    ort_version: str
    ort_build_device: str
    available_providers: tuple[str, ...]
    configured_providers: tuple[str, ...]
    cupy_ok: bool
    cupy_detail: str
    nvml_detail: str
    models: tuple[ModelCheck, ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        out = [
            f"onnxruntime {self.ort_version} (build: {self.ort_build_device})",
            f"available providers: {', '.join(self.available_providers)} (listed is not usable: see below)",
            f"configured providers: {', '.join(self.configured_providers)}",
            f"cupy: {'ok' if self.cupy_ok else 'unavailable'}: {self.cupy_detail}",
            f"nvml: {self.nvml_detail}",
        ]
        for m in self.models:
            head = f"model {m.size} ({m.path}): {'ok' if m.ok else 'NOT OK'}"
            if m.name:
                mem = f", device memory {m.device_mem_before_mb} -> {m.device_mem_after_mb} MiB"
                head += f" {m.name}, session got {list(m.providers)}, warm-up {m.warmup_ms} ms"
                head += mem if m.device_mem_after_mb is not None else ""
            out.append(head + (f": {m.problem}" if m.problem else ""))
            out += [f"  {line}" for line in m.details]
        out.append("result: " + ("ok" if self.ok else "NOT OK: inference would not run where configured"))
        return out


def _doctor_model(cfg: EngineConfig, size: int, path: Path, overrides: ModelOverrides | None) -> ModelCheck:
    try:
        info = load_model_info(path, size, overrides)
    except ModelError as exc:
        return ModelCheck(size, str(path), ok=False, problem=exc.what)
    before, _ = gpu_memory_used_mb(cfg.cuda.device_id)
    try:
        engine = Engine.create(info, cfg, verify=False)
    except EngineError as exc:
        return ModelCheck(size, str(path), ok=False, problem=str(exc), name=info.name, details=tuple(info.lines()))
    after, _ = gpu_memory_used_mb(cfg.cuda.device_id)
    first = ORT_PROVIDERS[cfg.providers[0]]
    used = first in engine.providers
    engine.close()
    return ModelCheck(
        size,
        str(path),
        ok=used,
        problem=None if used else f"configured {first} but the session got {list(engine.providers)}",
        name=info.name,
        providers=engine.providers,
        warmup_ms=round((engine.warmup_s or 0.0) * 1000, 1),
        device_mem_before_mb=before,
        device_mem_after_mb=after,
        details=tuple(info.lines()),
    )


def doctor_report(
    cfg: EngineConfig, models: Mapping[int, Path], overrides: Mapping[int, ModelOverrides] | None = None
) -> DoctorReport:
    """Build every configured model's session as the daemon would and report what it got
    (`overrides`: each size's `[models.<size>]` layout and input convention settings)."""
    cupy_ok, cupy_detail = cupy_status(cfg.cuda.device_id)
    _, nvml_detail = gpu_memory_used_mb(cfg.cuda.device_id)
    given = overrides or {}
    checks = tuple(_doctor_model(cfg, size, Path(path), given.get(size)) for size, path in sorted(models.items()))
    return DoctorReport(
        ok=bool(checks) and all(c.ok for c in checks),
        ort_version=ort.__version__,
        ort_build_device=ort.get_device(),
        available_providers=tuple(ort.get_available_providers()),
        configured_providers=tuple(ORT_PROVIDERS[p] for p in cfg.providers),
        cupy_ok=cupy_ok,
        cupy_detail=cupy_detail,
        nvml_detail=nvml_detail,
        models=checks,
    )
