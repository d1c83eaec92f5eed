"""The log-event catalogue (daemon/ops/logging/catalogue.py), the documentation's table and the code agree.

The code is read with `ast`, so a call split over lines or formatted any way is still found:
every `<logger>.<level>("event", ...)` under daemon/ must be catalogued at that level with its
keyword fields, every catalogued event must be emitted, and the documentation must list the same set."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from daemon.ops.logging.catalogue import CATALOGUE, EVENTS, LIBRARY_EVENT, TABLE_END, TABLE_START
from tests.support.log_calls import IMPLICIT_FIELDS, Emit, scan

ROOT = Path(__file__).resolve().parents[3]


def code_emits() -> tuple[list[Emit], list[str]]:
    emits: list[Emit] = []
    bad: list[str] = []
    for path in sorted((ROOT / "daemon").rglob("*.py")):
        found, wrong = scan(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
        emits += found
        bad += wrong
    return emits, bad


def readme_rows() -> dict[str, str]:
    text = (ROOT / "docs" / "operations" / "log-events.md").read_text(encoding="utf-8")
    assert TABLE_START in text and TABLE_END in text, "docs/operations/log-events.md lost its log-events markers"
    table = text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0]
    return {m[1]: m[2] for m in re.finditer(r"^\|\s*`([a-z0-9_]+)`\s*\|\s*([a-z]+)\s*\|", table, re.M)}


def test_the_scanner_finds_calls_however_they_are_formatted() -> None:
    source = """
log.info(
    "camera_up" ,
    camera=cid,
)
self._log.exception("thing_failed", error=str(exc))
structlog.get_logger("x").warning("w", **fields)
log.error(name_from_a_variable)
other.info("not a logger")
"""
    emits, bad = scan(source, "snippet")
    assert [(e.name, e.level, sorted(e.fields)) for e in emits] == [
        ("camera_up", "info", ["camera"]),
        ("thing_failed", "error", ["error"]),
        ("w", "warning", []),
    ]
    assert bad == ["snippet:8"]


def test_event_names_are_literals() -> None:
    _, bad = code_emits()
    assert bad == [], f"log calls whose event name is not a string literal: {bad}"


def test_every_emitted_event_is_catalogued_at_its_level_with_its_fields() -> None:
    emits, _ = code_emits()
    assert len(emits) > 40  # the scan really read the package
    missing = sorted({e.name for e in emits} - set(CATALOGUE))
    assert missing == [], f"emitted but in no row of daemon/ops/logging/events/: {missing}"
    wrong_level = [(e.where, e.name, e.level) for e in emits if CATALOGUE[e.name].level != e.level]
    assert wrong_level == [], f"emitted at another level than catalogued: {wrong_level}"
    unlisted = [
        (e.where, e.name, sorted(e.fields - set(CATALOGUE[e.name].fields) - IMPLICIT_FIELDS))
        for e in emits
        if e.fields - set(CATALOGUE[e.name].fields) - IMPLICIT_FIELDS
    ]
    assert unlisted == [], f"fields not listed in the catalogue: {unlisted}"


def test_every_catalogued_event_is_emitted() -> None:
    emits, _ = code_emits()
    never = sorted(set(CATALOGUE) - {e.name for e in emits} - {LIBRARY_EVENT})
    assert never == [], f"catalogued but emitted nowhere under daemon/: {never}"
    logs_tree = ast.parse((ROOT / "daemon" / "ops" / "logging" / "configure.py").read_text(encoding="utf-8"))
    assert any(isinstance(n, ast.Name) and n.id == "LIBRARY_EVENT" for n in ast.walk(logs_tree))


def test_the_catalogue_is_well_formed() -> None:
    names = [e.name for e in EVENTS]
    assert len(names) == len(set(names)), "an event is catalogued twice"
    assert names == sorted(names), "keep EVENTS sorted by name"
    for e in EVENTS:
        assert re.fullmatch(r"[a-z][a-z0-9_]*", e.name), e.name
        assert e.meaning.strip(), e.name
        assert len(set(e.fields)) == len(e.fields), e.name


def test_the_readme_lists_the_same_events_at_the_same_levels() -> None:
    rows = readme_rows()
    catalogued = {e.name: e.level for e in EVENTS}
    assert rows == catalogued, "docs/operations/log-events.md is stale: run `.venv/bin/python -m tools.docs`"
