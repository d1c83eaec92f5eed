"""What the bridge serves: cameras in config-file order, each with its lines, each line with its gates.

The order is the contract of the Modbus map (blocks follow cameras, then lines, in this order) and
of the OPC UA address space (`Objects/BeltSight/<camera>/<line>/...`). `layout_problems` lists every
id that would collide with another or with the fixed node names, each naming its key path in the
config file (`cameras.0.lines.1.id`, as check-config does); `validate_layout` raises the first.
`beltsight bridge` exits 78 listing them all.
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
    index: int = 0
    """Its position in the config's `cameras` (disabled cameras included): the key path's index."""


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


def _enabled(cam: Any) -> bool:
    return bool(cam.get("enabled", True) if isinstance(cam, Mapping) else getattr(cam, "enabled", True))


def layout_from_data(cameras: Sequence[Any]) -> BridgeLayout:
    """A layout from the config's cameras (`Settings.cameras`, or dicts shaped like `[[cameras]]`
    tables): the enabled ones in order, each with its `lines` (`id`, `gates`; a gate is an id
    string or a table with `id`) in order.

    Only the shape is read here; `layout_problems` and `validate_layout` apply the rules."""
    built: list[CameraLayout] = []
    for ci, cam in enumerate(cameras):
        if not _enabled(cam):
            continue
        lines: list[LineLayout] = []
        for li, line in enumerate(_items(cam, "lines")):
            gates = tuple(
                _ident(g, f"cameras.{ci}.lines.{li}.gates.{gi}.id") for gi, g in enumerate(_items(line, "gates"))
            )
            lines.append(LineLayout(_ident(line, f"cameras.{ci}.lines.{li}.id"), gates))
        built.append(CameraLayout(_ident(cam, f"cameras.{ci}.id"), tuple(lines), ci))
    return BridgeLayout(tuple(built))


def _id_problem(value: str, path: str) -> LayoutError | None:
    if not _ID.match(value):
        return LayoutError(path, f"{value!r} must be 1-64 letters, digits, '_', '.', '-' (starting alphanumeric)")
    if value in NODE_NAMES:
        return LayoutError(path, f"{value!r} is a fixed node name ({', '.join(sorted(NODE_NAMES))})")
    return None


def _line_problems(line: LineLayout, path: str) -> list[LayoutError]:
    problems: list[LayoutError] = []
    names: dict[str, str] = {}
    for gi, gate in enumerate(line.gates):
        gpath = f"{path}.gates.{gi}.id"
        bad = _id_problem(gate, gpath)
        node = gate + ETA_SUFFIX
        if bad is not None:
            problems.append(bad)
        elif node in names:
            problems.append(LayoutError(gpath, f"gate {gate!r} makes node {node!r}, which collides with {names[node]}"))
        else:
            names[node] = f"the node of {gpath}"
    return problems


def _camera_problems(cam: CameraLayout) -> list[LayoutError]:
    problems: list[LayoutError] = []
    lines: dict[str, str] = {}
    for li, line in enumerate(cam.lines):
        lpath = f"cameras.{cam.index}.lines.{li}"
        bad = _id_problem(line.id, f"{lpath}.id")
        if bad is not None:
            problems.append(bad)
        elif line.id in lines:
            problems.append(LayoutError(f"{lpath}.id", f"line {line.id!r} collides with {lines[line.id]}"))
        else:
            lines[line.id] = f"{lpath}.id"
        problems += _line_problems(line, lpath)
    return problems


def layout_problems(layout: BridgeLayout, *, base_register: int = 0, block_size: int = 16) -> list[LayoutError]:
    """Every offending id of `layout` (each naming its key path), then whether it fits the registers."""
    problems: list[LayoutError] = []
    cameras: dict[str, str] = {}
    for cam in layout.cameras:
        cpath = f"cameras.{cam.index}.id"
        bad = _id_problem(cam.id, cpath)
        if bad is not None:
            problems.append(bad)
        elif cam.id in cameras:
            problems.append(LayoutError(cpath, f"camera {cam.id!r} collides with {cameras[cam.id]}"))
        else:
            cameras[cam.id] = cpath
        problems += _camera_problems(cam)
    blocks = len(layout.blocks())
    if base_register + blocks * block_size > MAX_REGISTER:
        problems.append(
            LayoutError(
                "bridge.modbus.base_register",
                f"{blocks} blocks of {block_size} registers from {base_register} pass register 65535",
            )
        )
    return problems


def validate_layout(layout: BridgeLayout, *, base_register: int = 0, block_size: int = 16) -> BridgeLayout:
    """`layout` when valid; else the first of `layout_problems` (a `LayoutError`) is raised."""
    problems = layout_problems(layout, base_register=base_register, block_size=block_size)
    if problems:
        raise problems[0]
    return layout
