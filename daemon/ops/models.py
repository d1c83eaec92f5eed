"""The models that serve: what the models API shows and swaps, and what a reload compares against.

`ModelsControl` holds each input size's `[models.<size>]` entry as it serves now: at start the
config file's or the models drop-in's (`daemon.config.models_dropin`), then whatever a swap put in.
A swap through the API (`swap`) runs the model swap (`daemon.inference.swap`: checked, canaried,
swapped between two batches), then persists it in the drop-in (atomically and durably) before it
answers: a swap that cannot be written is undone (the previous model swapped back) and refused. A
reload (`reload`) compares the re-read configuration against what serves, not against the file at
start: a size whose resolved entry differs is swapped to it, so an edit of the file made after an
API swap (even back to an earlier model) brings the file's model back, and the drop-in's entries
the file has overtaken (stale) are removed. Swaps, through the API or a reload, run one at a time
(a lock), and a swap's precondition (the API's `If-Match`) is checked under that lock.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from daemon.config.models import ModelConfig
from daemon.config.models_dropin import ModelsDropinInvalidError, SwapEntry, read, resolve, write
from daemon.config.settings import Settings
from daemon.inference.model_file import ModelInfo
from daemon.inference.swap import ModelSwap, SwapError, Swapped, sha256_of

log = structlog.get_logger("beltsight.models")

Precondition = Callable[[dict[str, Any]], bool]
"""Whether a swap may replace the model that serves (given its `state`); see `ModelsControl.swap`."""


class StaleError(Exception):
    """A swap whose precondition no longer holds: nothing changed; `current` is the size's state."""

    def __init__(self, current: dict[str, Any]) -> None:
        self.current = current
        super().__init__("the model changed since it was read")


class ModelsControl:
    """The serving entry of each size (event loop only; see the module docstring)."""

    def __init__(self, settings: Settings, swapper: ModelSwap, serving: Callable[[int], ModelInfo | None]) -> None:
        resolved = settings.models_resolved
        self.dropin = settings.engine.models_dropin
        self._running = dict(settings.models)
        self._file = dict(resolved.file_models)
        self._entries = dict(resolved.entries)
        self._stale = sorted(resolved.stale)
        self._swapper = swapper
        self._serving = serving
        self._sha: dict[int, str] = {}
        self._lock = asyncio.Lock()

    @property
    def sizes(self) -> list[int]:
        return sorted(self._running)

    def add(self, size: int, model: ModelConfig) -> None:
        """A size added by a reload (its model checked and served by then): listed and swappable from now on."""
        self._running[size] = model
        self._file[size] = model

    def running(self) -> dict[int, ModelConfig]:
        """Size -> the entry that serves now."""
        return dict(self._running)

    def prune(self) -> None:
        """At start: remove the drop-in's stale entries (the file changed those sizes since). Blocking."""
        if not self._stale:
            return
        try:
            write(self.dropin, self._entries)
        except OSError as exc:
            log.error("models_dropin_failed", path=str(self.dropin), reason=f"cannot write: {exc.strerror}")
            return
        log.info("models_dropin_pruned", path=str(self.dropin), sizes=self._stale)
        self._stale = []

    async def state(self, size: int) -> dict[str, Any]:
        """What serves `size`, as the API shows it (KeyError for a size not configured)."""
        model, info = self._running[size], self._serving(size)
        if size not in self._sha:
            with contextlib.suppress(OSError):  # the file gone since it was loaded: no digest to show
                self._sha[size] = await asyncio.get_running_loop().run_in_executor(None, sha256_of, model.path)
        return {
            "size": size,
            "path": str(model.path),
            "name": None if info is None else info.name,
            "version": None if info is None else info.version,
            "classes": None if info is None else list(info.names),
            "sha256": self._sha.get(size),
            "source": "drop-in" if size in self._entries else "config",
        }

    async def swap(
        self,
        size: int,
        path: Path,
        *,
        allow_new_classes: bool = False,
        by: str = "api",
        precondition: Precondition | None = None,
    ) -> tuple[Swapped, dict[str, Any]]:
        """Swap the model of `size` for the file at `path` (read as the serving entry's layout and
        labels) and persist it in the drop-in: the swap, and the size's `state` right after it (no
        other swap between); `SwapError` (nothing changed), `StaleError` when
        `precondition` does not hold for what serves. Shielded: a request that goes away (its
        client, the endpoint's deadline) does not cut a swap between serving and persisting."""
        return await asyncio.shield(self._swap(size, path, allow_new_classes, by, precondition))

    async def _swap(
        self, size: int, path: Path, allow_new_classes: bool, by: str, precondition: Precondition | None
    ) -> tuple[Swapped, dict[str, Any]]:
        async with self._lock:
            if size not in self._running:
                raise SwapError(422, f"no model of size {size} is configured ([models] has {self.sizes})")
            if precondition is not None and not precondition(current := await self.state(size)):
                raise StaleError(current)
            before = self._running[size]
            model = before.model_copy(update={"path": path})
            done = await self._swapper.swap(
                size, path, allow_new_classes=allow_new_classes, overrides=model.overrides(), by=by
            )
            entries = self._entries_with(size, model)
            try:
                await asyncio.get_running_loop().run_in_executor(None, write, self.dropin, entries)
            except OSError as exc:
                reason = f"cannot write {self.dropin}: {exc.strerror}"
                log.error("models_dropin_failed", path=str(self.dropin), reason=reason)
                if await self._undo(size, before, by, reason):
                    raise SwapError(500, f"{reason}; the swap was undone, {before.path} serves") from None
                self._serves(size, model, done)
                raise SwapError(500, f"{reason}; {path} serves but a restart brings back the previous model") from None
            self._entries = entries
            self._serves(size, model, done)
            return done, await self.state(size)

    async def reload(self, new: Settings) -> list[str]:
        """Swap each size whose entry in `new` (the file with the drop-in as it is on disk now) is not
        the one that serves; remove the drop-in's stale entries. `models.<size>` for each swapped;
        a refused swap leaves the size as it serves (the swap logs and audits it)."""
        swapped = []
        async with self._lock:
            resolved = new.models_resolved
            try:  # the drop-in as it is now: an API swap may have written it since `new` was read
                entries = await asyncio.get_running_loop().run_in_executor(None, read, self.dropin)
                resolved = resolve(resolved.file_models, entries)
            except ModelsDropinInvalidError as exc:
                log.error("models_dropin_failed", path=str(self.dropin), reason="; ".join(exc.problems))
            self._file = dict(resolved.file_models)
            for size in sorted(self._running.keys() & resolved.models.keys()):
                model = resolved.models[size]
                if model == self._running[size]:
                    continue
                try:
                    done = await self._swapper.swap(size, model.path, overrides=model.overrides(), by="reload")
                except SwapError:
                    continue  # logged and audited by the swap; named in config_restart_needed
                self._serves(size, model, done)
                swapped.append(f"models.{size}")
            self._entries = dict(resolved.entries)
            self._stale = sorted(resolved.stale)
            await asyncio.get_running_loop().run_in_executor(None, self.prune)
        return swapped

    def _entries_with(self, size: int, model: ModelConfig) -> dict[int, SwapEntry]:
        """The drop-in's entries with `size` serving `model`: none for the file's own entry."""
        entries = dict(self._entries)
        replaces = self._file.get(size, self._running[size])
        if model == replaces:
            entries.pop(size, None)
        else:
            entries[size] = SwapEntry(model=model, replaces=replaces)
        return entries

    def _serves(self, size: int, model: ModelConfig, done: Swapped) -> None:
        self._running[size] = model
        self._sha[size] = done.sha256

    async def _undo(self, size: int, before: ModelConfig, by: str, why: str) -> bool:
        """Swap `before` back after the drop-in could not be written; False when even that is refused."""
        try:
            await self._swapper.swap(
                size, before.path, allow_new_classes=True, overrides=before.overrides(), by=f"{by} (undo: {why})"
            )
        except SwapError:
            return False
        return True


__all__ = ["ModelsControl", "Precondition", "StaleError"]
