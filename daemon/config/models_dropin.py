"""The models drop-in: models swapped through the API, kept apart from the config file.

`POST /api/models/{size}` (and nothing else) writes `[engine] models_dropin` (by default
`/var/lib/beltsight/models.toml`, beside the lines drop-ins): per swapped size, the model that
serves (`[<size>.model]`: the size's `[models.<size>]` entry with the new `path`) and the entry of
the config file it replaced (`[<size>.replaces]`). At start and on reload (`resolve`, called by
`load_settings`) an entry overrides the file's `[models.<size>]` while the file's entry is still
the one it replaced. Precedence, in one rule: **the last one changed wins**. A swap through the API
overrides the file as it was then; an edit of the file's `[models.<size>]` made after the swap (to
any entry but the one the swap replaced, an earlier model included) wins over the swap: that entry
is stale, ignored, and the daemon removes it when it starts or reloads. An entry for a size the
file no longer has is stale too. A swap back to the file's model removes the size's entry; so does
deleting the size's tables (or the file) and reloading, which then swaps to the file's model.

The file is replaced atomically and durably (temporary file, fsync, rename, directory fsync): a
power cut leaves the old file or the new one. A drop-in that does not load makes the whole
configuration invalid, with the file's path before each problem.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from daemon.config.base import Section, problem_text
from daemon.config.models import ModelConfig
from daemon.core.durable import replace_durably

HEADER = (
    "# Written by beltsight (POST /api/models/{size}): it overrides [models.<size>] while that is what it replaced."
)


class SwapEntry(Section):
    """One size's swap: the model that serves, and the config file's entry it replaced."""

    model: ModelConfig
    """The `[models.<size>]` entry that serves (an absolute path)."""
    replaces: ModelConfig
    """The config file's `[models.<size>]` entry when the swap was made (its path made absolute)."""


class ModelsDropinInvalidError(ValueError):
    """`problems`: every problem, each `path: key.path: what is wrong`."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


@dataclass(frozen=True, slots=True)
class Resolved:
    """The models that serve, from the file's `[models]` and the drop-in's entries."""

    models: dict[int, ModelConfig]
    """Size -> the entry that serves (the drop-in's model where its entry holds, else the file's)."""
    file_models: dict[int, ModelConfig]
    """Size -> the config file's entry."""
    entries: dict[int, SwapEntry] = field(default_factory=dict)
    """The drop-in's entries that hold (stale ones left out)."""
    stale: dict[int, SwapEntry] = field(default_factory=dict)
    """The drop-in's entries the file changed since (or whose size it no longer has)."""

    def source(self, size: int) -> str:
        """`drop-in` or `config`: where the model of `size` comes from."""
        return "drop-in" if size in self.entries else "config"


def read(path: Path) -> dict[int, SwapEntry]:
    """The drop-in's entries (none when there is no file); ModelsDropinInvalidError with every problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ModelsDropinInvalidError([f"{path}: cannot read: {exc.strerror}"]) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ModelsDropinInvalidError([f"{path}: cannot parse: {exc}"]) from None
    entries, problems = {}, []
    for key, value in data.items():
        if not key.isdigit():
            problems.append(f"{path}: {key}: not a model size")
            continue
        try:
            entries[int(key)] = SwapEntry.model_validate(value)
        except ValidationError as exc:
            problems += [f"{path}: {key}.{problem_text(e)}" for e in exc.errors()]
    if problems:
        raise ModelsDropinInvalidError(problems)
    return entries


def resolve(file_models: Mapping[int, ModelConfig], entries: Mapping[int, SwapEntry]) -> Resolved:
    """Which entry serves each size (see the module docstring: an entry holds while the file's
    entry is the one it replaced)."""
    holding = {size: e for size, e in entries.items() if file_models.get(size) == e.replaces}
    stale = {size: e for size, e in entries.items() if size not in holding}
    models = {size: holding[size].model if size in holding else m for size, m in file_models.items()}
    return Resolved(models, dict(file_models), holding, stale)


def to_toml(entries: Mapping[int, SwapEntry]) -> str:
    """The drop-in's text (strings as JSON strings, which TOML reads alike)."""
    out = [HEADER]
    for size, entry in sorted(entries.items()):
        for name, model in (("model", entry.model), ("replaces", entry.replaces)):
            out += ["", f"[{size}.{name}]"]
            for key, value in model.model_dump(mode="json", exclude_none=True).items():
                out.append(f"{key} = {json.dumps(value)}")
    return "\n".join(out) + "\n"


def write(path: Path, entries: Mapping[int, SwapEntry]) -> None:
    """Replace the drop-in with `entries` atomically and durably; OSError when it cannot be written."""
    replace_durably(path, to_toml(entries).encode())


def describe(resolved: Resolved, path: Path) -> list[str]:
    """For `check-config`: where each model comes from, and each stale entry."""
    lines = []
    for size in sorted(resolved.models):
        entry = resolved.entries.get(size)
        if entry is None:
            lines.append(f"model {size}: from the config file")
        else:
            lines.append(f"model {size}: from drop-in {path} (swapped through the API; replaces {entry.replaces.path})")
    for size, entry in sorted(resolved.stale.items()):
        lines.append(
            f"model {size}: drop-in {path} swapped it to {entry.model.path}, but the config file's [models.{size}]"
            " changed since: the file wins; the daemon removes that entry when it starts or reloads"
        )
    return lines


__all__ = ["ModelsDropinInvalidError", "Resolved", "SwapEntry", "describe", "read", "resolve", "to_toml", "write"]
