"""Finding the structlog calls in source with `ast`: every `<logger>.<level>("event", ...)`, with its
level and keyword fields, however the call is formatted."""

from __future__ import annotations

import ast
from dataclasses import dataclass

LEVEL_METHODS = {"debug": "debug", "info": "info", "warning": "warning", "error": "error", "critical": "critical"}
LEVEL_METHODS["exception"] = "error"
IMPLICIT_FIELDS = {"exc_info", "stack_info"}
"""Keywords structlog takes for itself: never an event's own field."""


@dataclass(frozen=True, slots=True)
class Emit:
    where: str
    name: str
    level: str
    fields: frozenset[str]


def _is_logger(node: ast.expr) -> bool:
    """`log`, `logger`, `self._log`, `structlog.get_logger(...)`: a receiver whose name says log."""
    if isinstance(node, ast.Name):
        return "log" in node.id.lower()
    if isinstance(node, ast.Attribute):
        return "log" in node.attr.lower()
    if isinstance(node, ast.Call):
        return _is_logger(node.func)
    return False


def scan(source: str, where: str) -> tuple[list[Emit], list[str]]:
    """The log calls in `source`, and the ones whose event name is not a literal (errors)."""
    emits: list[Emit] = []
    bad: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        level = LEVEL_METHODS.get(node.func.attr)
        if level is None or not _is_logger(node.func.value):
            continue
        first = node.args[0] if node.args else None
        if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
            bad.append(f"{where}:{node.lineno}")
            continue
        fields = frozenset(k.arg for k in node.keywords if k.arg is not None)
        emits.append(Emit(f"{where}:{node.lineno}", first.value, level, fields))
    return emits, bad
