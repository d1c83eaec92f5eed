"""The bridge's log calls and its rows of the catalogue (daemon/ops/logging/events/bridge.py) agree."""

from __future__ import annotations

from pathlib import Path

from daemon.ops.logging.events.bridge import BRIDGE_EVENTS as EVENTS
from tests.support.log_calls import IMPLICIT_FIELDS, scan

ROOT = Path(__file__).resolve().parents[3]
CATALOGUE = {e.name: e for e in EVENTS}


def test_every_bridge_event_is_catalogued_and_emitted() -> None:
    emits = []
    for path in sorted((ROOT / "daemon" / "bridge").rglob("*.py")):
        found, bad = scan(path.read_text(encoding="utf-8"), str(path))
        assert bad == []
        emits += found
    bridge = [e for e in emits if e.name.startswith("bridge_")]
    assert sorted({e.name for e in bridge}) == sorted(CATALOGUE)
    for e in bridge:
        assert CATALOGUE[e.name].level == e.level, e.where
        assert e.fields - set(CATALOGUE[e.name].fields) - IMPLICIT_FIELDS == set(), e.where
    names = [e.name for e in EVENTS]
    assert names == sorted(names)
