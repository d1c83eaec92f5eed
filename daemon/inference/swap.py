"""A model swapped without stopping the line: `ModelSwapper.swap(size, path)`.

The new file goes through every check before it serves: read and recognised as the daemon reads
any model (`daemon.inference.model_file.load_model_info`, the layouts registry), its input size
`size`, its class names those of the serving model (a different list only with
`allow_new_classes`), every camera's `classes` filter naming labels it knows (`check_model`). Then
one session per lane worker is built beside the serving ones (the factory warms each up, as for a
periodic rebuild), a canary batch runs on each (`canary`: outputs of the expected shape, finite),
and each worker's engine and stage are replaced between two batches (`Lanes.replace`): the batch
in flight finishes on the old model, the next runs on the new one, so no frame is lost or run
twice, and tracking (after inference) goes on untouched. A lane that does not run yet takes the
new model when it starts.

On any failure nothing changes (the old model keeps serving): `SwapError` (an HTTP status and
the reason), a `model_swap_failed` log line and events-stream entry (`size`, `path`, `reason`).
On success `model_swapped` (`size`, `old`, `new`, `version`, `sha256`) is logged and written to
the events stream. Swaps run one at a time. `ModelSwap` is what ops (the API, a reload) need.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import structlog

from daemon.core.clock import SYSTEM_CLOCK, time_ms
from daemon.core.frames import StatusEvent
from daemon.core.model_spec import ModelOverrides
from daemon.core.status_kinds import StatusKind
from daemon.inference.build import LaneWorkers
from daemon.inference.lanes import Lanes
from daemon.inference.model_file import ModelError, ModelInfo, load_model_info
from daemon.inference.protocols import InferenceEngine
from daemon.inference.serving import ServingEngine
from daemon.inference.stage import InferenceStage

log = structlog.get_logger("beltsight.swap")


class SwapError(Exception):
    """A swap that did not happen (the old model still serves): `status` 400 (the request) or 422
    (the file), and the reason."""

    def __init__(self, status: int, reason: str) -> None:
        self.status = status
        self.reason = reason
        super().__init__(reason)


@dataclass(frozen=True, slots=True)
class Swapped:
    """A model that serves now, and the one it replaced."""

    size: int
    old: str
    new: str
    version: str
    sha256: str
    path: str
    took_s: float

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class ModelSwap(Protocol):
    """What ops needs: swap the model of `size` for the file at `path` (raises `SwapError`)."""

    async def swap(
        self,
        size: int,
        path: Path,
        *,
        allow_new_classes: bool = False,
        overrides: ModelOverrides | None = None,
        by: str = "api",
    ) -> Swapped: ...


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_model(
    path: Path,
    size: int,
    serving: ModelInfo,
    filters: Sequence[tuple[str, Sequence[str]]],
    *,
    allow_new_classes: bool = False,
    overrides: ModelOverrides | None = None,
) -> ModelInfo:
    """The new file read and checked against what serves `size` and the cameras' class filters
    (`filters`: camera id, labels); raises `SwapError`. Blocking (reads the file, one probe run)."""
    if not path.is_absolute():
        raise SwapError(400, f"path {str(path)!r} is not absolute")
    if not path.is_file():
        raise SwapError(422, f"{path}: no such file")
    try:
        info = load_model_info(path, overrides=overrides)
    except ModelError as exc:
        raise SwapError(422, str(exc)) from None
    if info.size != size:
        raise SwapError(422, f"{path}: input size {info.size}, not {size}")
    if info.names != serving.names and not allow_new_classes:
        raise SwapError(
            422,
            f"{path}: classes {list(info.names)} differ from the serving model's {list(serving.names)}"
            ' (send "allow_new_classes": true to accept them)',
        )
    for camera, labels in filters:
        unknown = sorted(set(labels) - set(info.names))
        if unknown:
            raise SwapError(422, f"{path}: camera {camera!r} filters on {unknown}, which the model lacks")
    return info


def canary(engine: InferenceEngine, info: ModelInfo) -> None:
    """One batch of letterbox padding through `engine`: outputs of the expected shape, all finite
    (raises `SwapError`)."""
    n = info.batch or engine.max_batch
    value = info.convention.pad_value * info.convention.scale
    batch = np.full((n, 3, info.size, info.size), value, dtype=info.input_dtype)
    try:
        out = np.asarray(engine.run(batch))
    except Exception as exc:
        raise SwapError(422, f"{info.path}: the canary batch failed: {str(exc)[:300]}") from None
    if out.ndim < 2 or out.shape[0] != n or out.size == 0:
        raise SwapError(422, f"{info.path}: the canary batch gave outputs of shape {list(out.shape)}")
    if not np.isfinite(out).all():
        raise SwapError(422, f"{info.path}: the canary batch gave outputs that are not finite")


Built = tuple[InferenceEngine, InferenceStage | None]
"""A worker's new engine and stage, or a bare session (stage None) for a lane not started yet."""


class ModelSwapper:
    """Swaps the model of one size in every lane worker (see the module docstring; on the loop)."""

    def __init__(self, workers: LaneWorkers, lanes: Lanes, on_event: Callable[[StatusEvent], None]) -> None:
        self._workers = workers
        self._lanes = lanes
        self._on_event = on_event
        cameras = workers.settings.cameras
        self._filters = [(c.id, tuple(c.classes)) for c in cameras if c.classes is not None]
        self._lock = asyncio.Lock()

    async def swap(
        self,
        size: int,
        path: Path,
        *,
        allow_new_classes: bool = False,
        overrides: ModelOverrides | None = None,
        by: str = "api",
    ) -> Swapped:
        """Swap the model of `size` for the file at `path` (`by`: who asked, for the log)."""
        async with self._lock:
            try:
                done = await self._swap(size, path, allow_new_classes, overrides)
            except Exception as exc:  # any failure is a refusal: the old model still serves
                refused = exc if isinstance(exc, SwapError) else SwapError(422, f"{path}: {str(exc)[:300]}")
                log.error("model_swap_failed", size=size, path=str(path), reason=refused.reason, user=by)
                self._event("model_swap_failed", {"size": size, "path": str(path), "reason": refused.reason})
                raise refused from None
            log.info(
                "model_swapped",
                size=size,
                old=done.old,
                new=done.new,
                version=done.version,
                sha256=done.sha256,
                path=done.path,
                took_ms=round(done.took_s * 1000, 1),
                user=by,
            )
            self._event("model_swapped", {k: v for k, v in done.to_json().items() if k != "took_s"})
            return done

    async def _swap(self, size: int, path: Path, allow_new: bool, overrides: ModelOverrides | None) -> Swapped:
        started = time.perf_counter()
        serving = self._workers.models.infos.get(size)
        if serving is None:
            raise SwapError(422, f"no model of size {size} is configured ([models] has {self._sizes()})")
        loop = asyncio.get_running_loop()
        if overrides is None:  # the API: the file read as the configured model's was (layout, labels ...)
            overrides = self._workers.settings.models[size].overrides()
        info, sha = await loop.run_in_executor(None, self._checked, path, size, serving, allow_new, overrides)
        count = await self._lanes.running(size)
        built = await loop.run_in_executor(None, self._build, info, count)
        if count is None and not self._lanes.started(size):  # no lane yet: it starts on the new model
            self._workers.serve(info, built[0][0])
        elif count is None or not self._lanes.replace(size, _pairs(built)):
            await loop.run_in_executor(None, _close, built)
            raise SwapError(422, f"the lane of {size} started or changed during the swap; nothing swapped, try again")
        self._workers.models.infos[size] = info
        return Swapped(size, serving.name, info.name, info.version, sha, str(path), time.perf_counter() - started)

    def _checked(
        self, path: Path, size: int, serving: ModelInfo, allow_new: bool, overrides: ModelOverrides | None
    ) -> tuple[ModelInfo, str]:
        info = check_model(path, size, serving, self._filters, allow_new_classes=allow_new, overrides=overrides)
        return info, sha256_of(path)

    def _build(self, info: ModelInfo, workers: int | None) -> list[Built]:
        """A canaried session per lane worker, each as a worker's engine and stage (`workers`: the
        lane's count), or one bare session for a lane not started yet (None). Blocking."""
        built: list[Built] = []
        try:
            for _ in range(workers or 1):
                primary = self._workers.factory.build(info, reason="swap")
                try:
                    canary(primary, info)
                except BaseException:
                    primary.close()
                    raise
                built.append((primary, None) if workers is None else self._workers.worker(info, primary))
        except SwapError:
            _close(built)
            raise
        except Exception as exc:
            _close(built)
            raise SwapError(422, f"{info.path}: no session could be built: {str(exc)[:300]}") from None
        return built

    def _sizes(self) -> list[int]:
        return sorted(self._workers.models.infos)

    def _event(self, kind: StatusKind, detail: dict[str, Any]) -> None:
        text = json.dumps(detail, separators=(",", ":"), sort_keys=True)
        self._on_event(StatusEvent(kind, text, None, time_ms(SYSTEM_CLOCK)))


def _pairs(built: Sequence[Built]) -> list[tuple[ServingEngine, InferenceStage]]:
    pairs = [(engine, stage) for engine, stage in built if isinstance(engine, ServingEngine) and stage is not None]
    assert len(pairs) == len(built)
    return pairs


def _close(built: Sequence[Built]) -> None:
    for engine, _stage in built:
        engine.close()


__all__ = ["ModelSwap", "ModelSwapper", "SwapError", "Swapped", "canary", "check_model", "sha256_of"]
