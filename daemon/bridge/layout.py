"""What the bridge serves: cameras in config-file order, each with its lines, each line with its gates.

The order is the contract of the Modbus map (blocks follow cameras, then lines, in this order) and
of the OPC UA address space (`Objects/BeltSight/<camera>/<line>/...`). `validate_layout` rejects a
layout whose ids would collide with each other or with the fixed node names, naming the key path
(`cameras[0].lines[1].id`); the CLI exits 78 with that message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CAMERA_NODES = ("State",)
"""Children of `Objects/BeltSight/<camera>` besides its lines."""
LINE_NODES = ("CountIn", "CountOut", "LastTrack", "LastLabel", "LastCrossedMs")
"""Children of `Objects/BeltSight/<camera>/<line>` besides its `<gate>EtaMs` nodes."""
ROOT_NODES = ("Heartbeat",)
"""Children of `Objects/BeltSight` besides the cameras."""
NODE_NAMES = frozenset(CAMERA_NODES + LINE_NODES + ROOT_NODES)
ETA_SUFFIX = "EtaMs"
MAX_REGISTER = 65536

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class LayoutError(ValueError):
    """An invalid layout; the message starts with the key path of the offending id."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


@dataclass(frozen=True, slots=True)
class LineLayout:
    id: str
    gates: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CameraLayout:
    id: str
    lines: tuple[LineLayout, ...] = ()


@dataclass(frozen=True, slots=True)
class BridgeLayout:
    cameras: tuple[CameraLayout, ...] = ()

    def camera(self, camera_id: str) -> CameraLayout | None:
        return next((c for c in self.cameras if c.id == camera_id), None)

    def blocks(self) -> list[tuple[str, str]]:
        """(camera, line) in Modbus block order."""
        return [(c.id, line.id) for c in self.cameras for line in c.lines]


def _ident(raw: Any, path: str) -> str:
    """An id from a plain string or a table with an `id` key."""
    value = raw.get("id") if isinstance(raw, Mapping) else getattr(raw, "id", raw)
    if not isinstance(value, str):
        raise LayoutError(path, f"must be a string (got {type(value).__name__})")
    return value


def _items(raw: Any, key: str) -> Sequence[Any]:
    value = raw.get(key, ()) if isinstance(raw, Mapping) else getattr(raw, key, ())
    return tuple(value or ())


def layout_from_data(cameras: Sequence[Any]) -> BridgeLayout:
    """A layout from the config's cameras: dicts (`[[cameras]]` tables) or objects with `id`,
    `lines` (each with `id` and `gates`; a gate is an id string or a table with `id`).

    Only the shape is read here; call `validate_layout` for the rules."""
    built: list[CameraLayout] = []
    for ci, cam in enumerate(cameras):
        lines: list[LineLayout] = []
        for li, line in enumerate(_items(cam, "lines")):
            gates = tuple(
                _ident(g, f"cameras[{ci}].lines[{li}].gates[{gi}].id") for gi, g in enumerate(_items(line, "gates"))
            )
            lines.append(LineLayout(_ident(line, f"cameras[{ci}].lines[{li}].id"), gates))
        built.append(CameraLayout(_ident(cam, f"cameras[{ci}].id"), tuple(lines)))
    return BridgeLayout(tuple(built))


def _check_id(value: str, path: str) -> None:
    if not _ID.match(value):
        raise LayoutError(path, f"{value!r} must be 1-64 letters, digits, '_', '.', '-' (starting alphanumeric)")


def _check_line(line: LineLayout, path: str) -> None:
    names: dict[str, str] = {n: "a fixed node name" for n in LINE_NODES}
    for gi, gate in enumerate(line.gates):
        gpath = f"{path}.gates[{gi}].id"
        _check_id(gate, gpath)
        node = gate + ETA_SUFFIX
        if node in names:
            raise LayoutError(gpath, f"gate {gate!r} makes node {node!r}, which collides with {names[node]}")
        names[node] = f"the node of {gpath}"


def validate_layout(layout: BridgeLayout, *, base_register: int = 0, block_size: int = 16) -> BridgeLayout:
    """`layout` when valid; else `LayoutError` naming the key path of the first offending id."""
    cameras: dict[str, str] = {n: "the fixed node BeltSight/" + n for n in ROOT_NODES}
    for ci, cam in enumerate(layout.cameras):
        cpath = f"cameras[{ci}].id"
        _check_id(cam.id, cpath)
        if cam.id in cameras:
            raise LayoutError(cpath, f"camera {cam.id!r} collides with {cameras[cam.id]}")
        cameras[cam.id] = cpath
        lines: dict[str, str] = {n: f"the camera's fixed node {n!r}" for n in CAMERA_NODES}
        for li, line in enumerate(cam.lines):
            lpath = f"cameras[{ci}].lines[{li}].id"
            _check_id(line.id, lpath)
            if line.id in lines:
                raise LayoutError(lpath, f"line {line.id!r} collides with {lines[line.id]}")
            lines[line.id] = lpath
            _check_line(line, f"cameras[{ci}].lines[{li}]")
    blocks = len(layout.blocks())
    if base_register + blocks * block_size > MAX_REGISTER:
        raise LayoutError(
            "bridge.modbus.base_register",
            f"{blocks} blocks of {block_size} registers from {base_register} pass register 65535",
        )
    return layout
