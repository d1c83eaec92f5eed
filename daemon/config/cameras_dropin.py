"""Cameras drop-ins: cameras added, replaced and removed live, kept apart from the config file.

`PUT /api/cameras/{id}` writes `<cameras_dir>/<id>.toml`: the keys of one `[[cameras]]` table (the
same TOML shape, validated by the same model, `CameraConfig`). `DELETE /api/cameras/{id}` writes
`<cameras_dir>/<id>.removed` (and deletes the camera's `.toml`), so that a restart or a reload does
not bring the camera back from the config file; a later `PUT` of that id deletes the mark again.
At start and on reload (`with_dropins`, called by `load_settings` before the lines drop-ins) a
camera's drop-in replaces the config file's camera of that id, or adds it (after the file's, by id),
and a removal mark takes the camera out, so the operator's file and its comments are never rewritten.
A problem in a drop-in makes the whole configuration invalid, with the file's path before each key
path. Files are replaced atomically and durably (`daemon.core.durable`), readable by their owner only
(a drop-in holds the camera's URL as given, password included, as the config file may).
"""

from __future__ import annotations

import contextlib
import os
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from daemon.config.base import problem_text
from daemon.config.cameras import CameraConfig
from daemon.core.durable import replace_durably

SUFFIX = ".toml"
REMOVED = ".removed"
FILE = "the config file"


class CamerasInvalidError(ValueError):
    """`problems`: every problem, each `key.path: what is wrong`."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("; ".join(problems))


def parse(data: object) -> CameraConfig:
    """`data` (decoded JSON or TOML) as one camera; CamerasInvalidError with every problem by key path,
    a string that no file can hold (a lone surrogate, which JSON's `\\ud800` escapes can carry) included."""
    try:
        camera = CameraConfig.model_validate(data)
    except ValidationError as exc:
        raise CamerasInvalidError([problem_text(e) for e in exc.errors()]) from None
    dumped = camera.model_dump(mode="json") | {"url": camera.url.get_secret_value()}
    if problems := _unwritable(dumped, ""):
        raise CamerasInvalidError(problems)
    return camera


def _unwritable(value: Any, at: str) -> list[str]:
    """The key paths of the strings in `value` that UTF-8 cannot encode (lone surrogates)."""
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return [f"{at or '(top level)'}: a lone surrogate (\\ud800-\\udfff) no file can hold"]
        return []
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _unwritable(k, at) + _unwritable(v, f"{at}.{k}".lstrip("."))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _unwritable(v, f"{at}.{i}")]
    return []


def _toml_string(text: str) -> str:
    """`text` as a TOML basic string: its own characters (UTF-8), `"`, `\\` and control characters
    escaped (not JSON's `\\uXXXX` surrogate pairs for characters beyond U+FFFF, which TOML refuses)."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def path_for(cameras_dir: Path, camera_id: str) -> Path:
    return cameras_dir / f"{camera_id}{SUFFIX}"


def removed_mark(cameras_dir: Path, camera_id: str) -> Path:
    return cameras_dir / f"{camera_id}{REMOVED}"


def _read_one(path: Path) -> CameraConfig:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CamerasInvalidError([f"{path}: cannot read: {exc.strerror}"]) from None
    except tomllib.TOMLDecodeError as exc:
        raise CamerasInvalidError([f"{path}: cannot parse: {exc}"]) from None
    try:
        camera = parse(data)
    except CamerasInvalidError as exc:
        raise CamerasInvalidError([f"{path}: {p}" for p in exc.problems]) from None
    if f"{camera.id}{SUFFIX}" != path.name:
        raise CamerasInvalidError([f"{path}: id: {camera.id!r} is not the file's name"])
    return camera


def _listing(cameras_dir: Path) -> tuple[list[Path], set[str]]:
    """The drop-in files and the removed ids of `cameras_dir` (none when it does not exist)."""
    try:
        entries = sorted(cameras_dir.iterdir())
    except FileNotFoundError:
        return [], set()
    except OSError as exc:
        raise CamerasInvalidError([f"{cameras_dir}: cannot list: {exc.strerror}"]) from None
    files = [p for p in entries if p.name.endswith(SUFFIX) and not p.name.startswith(".")]
    removed = {p.name.removesuffix(REMOVED) for p in entries if p.name.endswith(REMOVED)}
    return files, removed


def with_dropins(cameras: Sequence[CameraConfig], cameras_dir: Path) -> tuple[list[CameraConfig], dict[str, str]]:
    """`cameras` with the drop-ins applied (see the module docstring), and where each camera comes
    from (`the config file` or `drop-in <path>`); CamerasInvalidError with every problem of every file."""
    files, removed = _listing(cameras_dir)
    dropins: dict[str, CameraConfig] = {}
    problems: list[str] = []
    for path in files:
        try:
            camera = _read_one(path)
        except CamerasInvalidError as exc:
            problems += exc.problems
            continue
        dropins[camera.id] = camera
    if problems:
        raise CamerasInvalidError(problems)
    out: list[CameraConfig] = []
    sources: dict[str, str] = {}
    for camera in cameras:
        if camera.id in removed:
            continue
        replaced = dropins.pop(camera.id, None)
        out.append(camera if replaced is None else replaced)
        sources[camera.id] = FILE if replaced is None else f"drop-in {path_for(cameras_dir, camera.id)}"
    for camera_id, camera in sorted(dropins.items()):
        if camera_id not in removed:
            out.append(camera)
            sources[camera_id] = f"drop-in {path_for(cameras_dir, camera_id)}"
    return out, sources


def _toml_value(value: Any) -> str:
    """`value` (plain JSON data) as an inline TOML value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return (
            "{ " + ", ".join(f"{_toml_string(k)} = {_toml_value(v)}" for k, v in value.items() if v is not None) + " }"
        )
    raise TypeError(f"no TOML form for {type(value).__name__}")


def to_toml(data: Mapping[str, Any]) -> str:
    """The drop-in file's text for one camera's keys (`None` values left out: they are the defaults)."""
    out = ["# Written by beltsight (PUT /api/cameras/{id}): it replaces or adds this camera."]
    out += [f"{key} = {_toml_value(value)}" for key, value in data.items() if value is not None]
    return "\n".join(out) + "\n"


def write(cameras_dir: Path, camera: CameraConfig) -> Path:
    """Write the camera's drop-in atomically and durably (owner-readable only), then delete a removal
    mark of its id; OSError when it cannot be written (nothing changed then)."""
    data = camera.model_dump(mode="json", exclude_defaults=True)
    data["id"] = camera.id
    data["url"] = camera.url.get_secret_value()
    path = path_for(cameras_dir, camera.id)
    replace_durably(path, to_toml(data).encode(), mode=0o600)
    with contextlib.suppress(FileNotFoundError):
        removed_mark(cameras_dir, camera.id).unlink()
    return path


def remove(cameras_dir: Path, camera_id: str) -> Path:
    """Record the camera's removal durably, then delete its drop-in; OSError when the mark cannot be written."""
    mark = removed_mark(cameras_dir, camera_id)
    replace_durably(mark, b"# Removed by beltsight (DELETE /api/cameras/{id}); a PUT of this id deletes this mark.\n")
    with contextlib.suppress(FileNotFoundError):
        path_for(cameras_dir, camera_id).unlink()
        fd = os.open(cameras_dir, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return mark


def source_of(cameras_dir: Path, camera_id: str) -> str:
    """Where a camera comes from, for `check-config` and the API."""
    path = path_for(cameras_dir, camera_id)
    return f"drop-in {path}" if path.is_file() else FILE


__all__ = [
    "FILE",
    "CamerasInvalidError",
    "parse",
    "path_for",
    "remove",
    "removed_mark",
    "source_of",
    "to_toml",
    "with_dropins",
    "write",
]
