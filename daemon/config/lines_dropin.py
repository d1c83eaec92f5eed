"""Lines drop-ins: a camera's `mm_per_px` and counting lines applied live, kept apart from the config file.

`PUT /api/cameras/{id}/lines` (and nothing else) writes `<[tracking] lines_dir>/<camera>.toml`:
`mm_per_px` and `[[lines]]` with their `[[lines.gates]]`, the TOML shape of a `[[cameras]]` entry's
lines. At start and on reload such a file replaces that camera's `mm_per_px` and lines from the config
file (`with_dropins`, called by `load_settings`), so the operator's file and its comments are never
rewritten. A drop-in is validated by the same models as the config (`LineConfig`, `lines_problem`);
a problem in one makes the whole configuration invalid, with the file's path before each key path.
Files are replaced atomically (temporary file, fsync, rename, directory fsync): a power cut leaves
the old file or the new one. Files of cameras the config does not have are ignored.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

from pydantic import Field, ValidationError, model_validator

from daemon.config.base import Section, problem_text
from daemon.config.cameras import CameraConfig
from daemon.config.tracking import LineConfig, lines_problem
from daemon.core.durable import replace_durably

SUFFIX = ".toml"


class CameraLines(Section):
    """What a drop-in (and the lines API's JSON body) holds for one camera."""

    mm_per_px: float | None = Field(None, gt=0, le=1000)
    """Millimetres per pixel on the belt plane (None: uncalibrated, speeds in px/s, no gates)."""
    lines: list[LineConfig] = Field(default_factory=list)
    """The camera's counting lines, each with its gates."""

    @model_validator(mode="after")
    def _check_lines(self) -> Self:
        problem = lines_problem(self.lines, self.mm_per_px)
        if problem is not None:
            raise ValueError(problem)
        return self

    @classmethod
    def of(cls, camera: CameraConfig) -> CameraLines:
        return cls(mm_per_px=camera.mm_per_px, lines=list(camera.lines))

    def to_json(self) -> dict[str, Any]:
        """The API's JSON shape (the TOML's, with points as two-element lists)."""
        return self.model_dump(mode="json")


class LinesInvalidError(ValueError):
    """`problems`: every problem, each `key.path: what is wrong`."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


def parse(data: object) -> CameraLines:
    """`data` (decoded JSON or TOML) as a camera's lines; LinesInvalidError with every problem."""
    try:
        return CameraLines.model_validate(data)
    except ValidationError as exc:
        raise LinesInvalidError([problem_text(e) for e in exc.errors()]) from None


def path_for(lines_dir: Path, camera_id: str) -> Path:
    return lines_dir / f"{camera_id}{SUFFIX}"


def read(lines_dir: Path, camera_id: str) -> CameraLines | None:
    """The camera's drop-in, None when it has none; LinesInvalidError (problems prefixed by the path)."""
    path = path_for(lines_dir, camera_id)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise LinesInvalidError([f"{path}: cannot read: {exc.strerror}"]) from None
    try:
        return parse(tomllib.loads(text))
    except tomllib.TOMLDecodeError as exc:
        raise LinesInvalidError([f"{path}: cannot parse: {exc}"]) from None
    except LinesInvalidError as exc:
        raise LinesInvalidError([f"{path}: {p}" for p in exc.problems]) from None


def with_dropins(cameras: Sequence[CameraConfig], lines_dir: Path) -> list[CameraConfig]:
    """`cameras` with each drop-in's `mm_per_px` and lines in place of the config's; LinesInvalidError
    with every problem of every file."""
    out, problems = [], []
    for camera in cameras:
        try:
            dropin = read(lines_dir, camera.id)
        except LinesInvalidError as exc:
            problems += exc.problems
            continue
        out.append(camera if dropin is None else camera.model_copy(update=dict(dropin)))
    if problems:
        raise LinesInvalidError(problems)
    return out


def source_of(lines_dir: Path, camera_id: str) -> str:
    """Where a camera's lines come from, for `check-config`."""
    path = path_for(lines_dir, camera_id)
    return f"drop-in {path}" if path.is_file() else "the config file"


def to_toml(lines: CameraLines) -> str:
    """The drop-in file's text (strings as JSON strings, which TOML reads alike)."""

    def point(p: tuple[float, float]) -> str:
        return f"[{float(p[0])!r}, {float(p[1])!r}]"

    out = ["# Written by beltsight (PUT /api/cameras/{id}/lines): it overrides this camera's mm_per_px and lines."]
    if lines.mm_per_px is not None:
        out.append(f"mm_per_px = {float(lines.mm_per_px)!r}")
    for line in lines.lines:
        out += ["", "[[lines]]", f"id = {json.dumps(line.id)}", f"start = {point(line.start)}"]
        out += [f"end = {point(line.end)}", f"direction = {point(line.direction)}"]
        for gate in line.gates:
            out += ["", "[[lines.gates]]", f"id = {json.dumps(gate.id)}", f"distance_mm = {float(gate.distance_mm)!r}"]
    return "\n".join(out) + "\n"


def write(lines_dir: Path, camera_id: str, lines: CameraLines) -> Path:
    """Replace the camera's drop-in atomically and durably; OSError when it cannot be written."""
    path = path_for(lines_dir, camera_id)
    replace_durably(path, to_toml(lines).encode())
    return path


__all__ = [
    "CameraLines",
    "LinesInvalidError",
    "parse",
    "path_for",
    "read",
    "source_of",
    "to_toml",
    "with_dropins",
    "write",
]
