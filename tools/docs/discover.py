"""Find the code the reference pages are generated from, by what it is rather than where it lives."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "daemon"


def module_name(path: Path) -> str:
    """`daemon/ops/logs.py` -> `daemon.ops.logs`; a package's `__init__.py` -> the package."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files(under: Path = PACKAGE) -> Iterator[Path]:
    """Every .py file under `under`, sorted, without caches."""
    for path in sorted(under.rglob("*.py")):
        if "__pycache__" not in path.parts:
            yield path


def _defines(tree: ast.Module, name: str) -> bool:
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef) and node.name == name:
            return True
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def module_defining(name: str, under: Path = PACKAGE) -> ModuleType:
    """Import the one module under `under` whose top level defines `name` (a class or an assignment)."""
    found = [p for p in source_files(under) if _defines(ast.parse(p.read_text(encoding="utf-8")), name)]
    if len(found) != 1:
        where = ", ".join(str(p.relative_to(ROOT)) for p in found) or "nowhere"
        raise LookupError(f"expected one module under {under.relative_to(ROOT)} defining {name!r}, found {where}")
    return importlib.import_module(module_name(found[0]))
