"""tools/ is packages run as `python -m tools.<name>`: no tool edits sys.path to find the repository,
and no tool imports the test suite (tests may import tools.kit; never the other way round)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools"
SOURCES = sorted(TOOLS.rglob("*.py"))
KIT = sorted((TOOLS / "kit").rglob("*.py"))


def _calls_sys_path_insert(node: ast.AST) -> bool:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "insert"):
        return False
    target = node.func.value
    return isinstance(target, ast.Attribute) and target.attr == "path" and ast.unparse(target.value) == "sys"


def _imported_modules(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) in {"importlib.import_module", "__import__"}
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.append(node.args[0].value)
    return names


def test_there_are_tool_sources() -> None:
    assert len(SOURCES) > 20
    assert (TOOLS / "demo.py").is_file() and (TOOLS / "bootstrap.sh").is_file()  # the README's paths


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(TOOLS)))
def test_no_tool_calls_sys_path_insert(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    calls = [node.lineno for node in ast.walk(tree) if _calls_sys_path_insert(node)]
    assert not calls, f"{path} calls sys.path.insert at lines {calls}: run it as `python -m tools.<name>`"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(TOOLS)))
def test_no_tool_imports_tests(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    bad = [name for name in _imported_modules(tree) if name == "tests" or name.startswith("tests.")]
    assert not bad, f"{path} imports {bad}: tools never import the test suite (put shared code in tools/kit)"


def test_the_kit_holds_the_servers_the_config_writer_and_the_scenes() -> None:
    names = {p.relative_to(TOOLS / "kit").as_posix() for p in KIT}
    assert {"ports.py", "redis_server.py", "rtsp.py", "rtsp_server.py", "daemon_config.py"} <= names
    assert {"synth/scene.py", "synth/video.py"} <= names


@pytest.mark.parametrize("path", KIT, ids=lambda p: str(p.relative_to(TOOLS)))
def test_the_kit_imports_no_other_tools_package(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    names = _imported_modules(tree)
    bad = [name for name in names if name.startswith("tools.") and not name.startswith("tools.kit")]
    bad += [name for name in names if name == "tools"]
    assert not bad, f"{path} imports {bad}: the kit is what tests and tools build on, it imports neither"


def test_the_checks_catch_what_they_look_for() -> None:
    bad = ast.parse("import sys\nsys.path.insert(0, 'x')\nfrom tests.support import faults\nimport tests\n")
    assert any(_calls_sys_path_insert(node) for node in ast.walk(bad))
    assert set(_imported_modules(bad)) == {"sys", "tests.support", "tests"}
