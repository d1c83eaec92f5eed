"""The room's rules: what daemon.tracking may import, and its size limits (400 lines a module, 60 a function)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOM = Path(__file__).resolve().parents[3] / "daemon" / "tracking"
MODULES = sorted(ROOM.glob("*.py"))
ALLOWED_THIRD_PARTY = {"numpy", "scipy"}


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def test_the_room_has_its_modules() -> None:
    names = {p.stem for p in MODULES}
    assert {"__init__", "kalman", "association", "bytetrack", "lines", "speed", "camera", "stage"} <= names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_imports_stdlib_numpy_scipy_and_itself_only(path: Path) -> None:
    """The tracker itself is pure (its event type from core; its knobs' defaults and checks from the
    `[tracking]` config model); only the stage reads the rest of config, and metrics."""
    allowed = ("daemon.tracking", "daemon.core.objects")
    if path.stem == "state":  # the state file is written with the one durable-write helper
        allowed += ("daemon.core.durable",)
    third_party = ALLOWED_THIRD_PARTY
    if path.stem == "stage":
        allowed += ("daemon.config", "daemon.core")
    if path.stem == "specs":  # the [tracking] section's and the lines' models: the one source of their checks
        allowed += ("daemon.config.tracking",)
    if path.stem == "persist":  # the room's one I/O part: the state file, its log lines, the clock
        allowed += ("daemon.core",)
        third_party = ALLOWED_THIRD_PARTY | {"structlog"}
    for name in _imports(path):
        top = name.split(".")[0]
        if top == "daemon":
            assert name.startswith(allowed), f"{path.name} imports {name}"
        else:
            assert top in sys.stdlib_module_names or top in third_party, f"{path.name} imports {name}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_size_limits(path: Path) -> None:
    text = path.read_text()
    assert text.count("\n") <= 400
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None and node.end_lineno - node.lineno + 1 <= 60, node.name


def test_the_package_reexports_only_its_entry_points() -> None:
    import daemon.tracking as room  # noqa: PLC0415

    assert sorted(room.__all__) == sorted(["CameraTracker", "GateSpec", "LineSpec", "TrackerParams"])
