"""The served state: counts from the entries, idempotent replays, malformed entries, snapshots."""

from __future__ import annotations

import pytest

from daemon.bridge.layout import layout_from_data
from daemon.bridge.state import BridgeState, Crossing, MalformedEntryError, StatusChange

LAYOUT = layout_from_data([{"id": "cam1", "lines": [{"id": "L1", "gates": ["g1", "g2"]}, {"id": "L2"}]}])


def crossing(count: int, direction: str = "in", track: int = 7, line: str = "L1", **extra: str) -> dict[str, str]:
    fields = {
        "v": "1",
        "camera": "cam1",
        "track": str(track),
        "label": "box",
        "cls": "3",
        "score": "0.9",
        "event": "crossed",
        "at_ms": "1700000000123",
        "line": line,
        "direction": direction,
        "count": str(count),
        "speed_px_s": "12.5",
    }
    return fields | extra


def test_a_crossing_serves_the_entrys_own_count_and_last_fields() -> None:
    state = BridgeState(LAYOUT)
    change = state.apply_object("cam1", "1-0", crossing(41, eta='{"g1":1700000001000}'))
    assert isinstance(change, Crossing) and change.count == 41
    line = state.line("cam1", "L1")
    assert (line.count_in, line.count_out, line.last_track, line.last_label, line.last_cls) == (41, 0, 7, "box", 3)
    assert line.last_crossed_ms == 1700000000123 and line.eta == {"g1": 1700000001000}
    state.apply_object("cam1", "2-0", crossing(5, "out", track=8))
    assert (line.count_in, line.count_out, line.last_track, line.eta) == (41, 5, 8, {})


def test_replays_change_nothing() -> None:
    state = BridgeState(LAYOUT)
    assert state.apply_object("cam1", "5-0", crossing(10)) is not None
    assert state.apply_object("cam1", "5-0", crossing(10)) is None  # same id
    assert state.apply_object("cam1", "4-0", crossing(11)) is None  # older id
    assert state.apply_object("cam1", "6-0", crossing(10)) is None  # newer id, count not newer
    assert state.line("cam1", "L1").count_in == 10
    assert state.apply_object("cam1", "7-0", crossing(11)) is not None


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"count": ""}, "missing field 'count'"),
        ({"count": "x"}, "not an integer"),
        ({"direction": "up"}, "not in/out"),
        ({"v": "2"}, "unsupported version"),
        ({"camera": "cam9"}, "on the stream of"),
        ({"eta": "{nope"}, "not JSON"),
        ({"eta": '{"g1":"soon"}'}, "gate id -> integer"),
        ({"event": "blink"}, "field 'event'"),
        ({"at_ms": "-5"}, "below 0"),
    ],
)
def test_malformed_entries_raise_and_change_nothing(change: dict[str, str], reason: str) -> None:
    state = BridgeState(LAYOUT)
    before = state.to_snapshot()
    with pytest.raises(MalformedEntryError, match=reason):
        state.apply_object("cam1", "1-0", crossing(3) | change)
    assert state.to_snapshot() == before


def test_unknown_lines_and_other_events_are_ignored() -> None:
    state = BridgeState(LAYOUT)
    assert state.apply_object("cam1", "1-0", crossing(3, line="nope")) is None
    end = crossing(3) | {"event": "end", "first_ms": "1", "last_ms": "2", "frames": "3"}
    assert state.apply_object("cam1", "2-0", end) is None
    assert state.ignored == 1


def test_camera_status_from_events() -> None:
    state = BridgeState(LAYOUT)
    assert state.cameras["cam1"].status == "unknown"
    assert state.apply_event("1-0", {"kind": "camera_up", "camera": "cam1", "at_ms": "1"}) == StatusChange("cam1", "up")
    assert state.apply_event("1-0", {"kind": "camera_down", "camera": "cam1"}) is None  # replay
    assert state.apply_event("2-0", {"kind": "camera_stalled", "camera": "cam1"}) == StatusChange("cam1", "stalled")
    assert state.apply_event("3-0", {"kind": "model_loaded"}) is None
    with pytest.raises(MalformedEntryError):
        state.apply_event("4-0", {"camera": "cam1"})


def test_snapshot_round_trip_and_replays_after_it() -> None:
    state = BridgeState(LAYOUT)
    state.apply_object("cam1", "9-0", crossing(12, eta='{"g2":5}'))
    state.apply_event("3-0", {"kind": "camera_up", "camera": "cam1"})
    again = BridgeState(LAYOUT)
    again.load_snapshot(state.to_snapshot())
    assert again.to_snapshot() == state.to_snapshot()
    assert again.apply_object("cam1", "9-0", crossing(12)) is None
    with pytest.raises(MalformedEntryError):
        again.load_snapshot("{not json")
    assert again.line("cam1", "L1").count_in == 12
