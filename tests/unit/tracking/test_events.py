"""The Redis field contract of ObjectEvent: exact names, strings only, round trip, validation by field."""

from __future__ import annotations

import pytest

from daemon.core.objects import ObjectEvent, parse_fields

NEW = ObjectEvent("cam-3", 17, "hex_nut", 1, 0.8731, "new", 1_700_000_000_123)
CROSSED = ObjectEvent(
    "cam-3",
    17,
    "hex_nut",
    1,
    0.8731,
    "crossed",
    1_700_000_000_456,
    line="L1",
    direction="in",
    count=42,
    speed_px_s=251.3,
    speed_mm_s=125.7,
    eta=(("flap-a", 1_700_000_004_456), ("flap-b", 1_700_000_008_000)),
)
END = ObjectEvent(
    "cam-3",
    17,
    "hex_nut",
    1,
    0.8731,
    "end",
    1_700_000_002_000,
    first_ms=1_700_000_000_123,
    last_ms=1_700_000_002_000,
    frames=57,
)


def test_exact_fields_per_kind() -> None:
    common = {"v": "1", "camera": "cam-3", "track": "17", "label": "hex_nut", "cls": "1", "score": "0.8731"}
    assert NEW.to_fields() == common | {"event": "new", "at_ms": "1700000000123"}
    assert CROSSED.to_fields() == common | {
        "event": "crossed",
        "at_ms": "1700000000456",
        "line": "L1",
        "direction": "in",
        "count": "42",
        "speed_px_s": "251.3",
        "speed_mm_s": "125.7",
        "eta": '{"flap-a":1700000004456,"flap-b":1700000008000}',
    }
    assert END.to_fields() == common | {
        "event": "end",
        "at_ms": "1700000002000",
        "first_ms": "1700000000123",
        "last_ms": "1700000002000",
        "frames": "57",
    }


def test_uncalibrated_crossing_has_no_mm_and_no_eta() -> None:
    e = ObjectEvent("c", 1, "bolt", 0, 0.5, "crossed", 10, line="L", direction="out", count=1, speed_px_s=-80.0)
    fields = e.to_fields()
    assert "speed_mm_s" not in fields and "eta" not in fields
    assert fields["direction"] == "out" and fields["speed_px_s"] == "-80.0"
    assert parse_fields(fields) == e


@pytest.mark.parametrize("event", [NEW, CROSSED, END])
def test_round_trip_and_all_strings(event: ObjectEvent) -> None:
    fields = event.to_fields()
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in fields.items())
    assert parse_fields(fields) == event


@pytest.mark.parametrize(
    ("base", "change", "field"),
    [
        (NEW, {"v": "2"}, "v"),
        (NEW, {"track": "1.5"}, "track"),
        (NEW, {"track": " 7"}, "track"),
        (NEW, {"cls": "-1"}, "cls"),
        (NEW, {"score": "1.5"}, "score"),
        (NEW, {"score": "nan"}, "score"),
        (NEW, {"at_ms": "abc"}, "at_ms"),
        (NEW, {"event": "moved"}, "event"),
        (NEW, {"line": "L1"}, "line"),
        (NEW, {"camera": None}, "camera"),
        (CROSSED, {"direction": "up"}, "direction"),
        (CROSSED, {"count": "0"}, "count"),
        (CROSSED, {"count": None}, "count"),
        (CROSSED, {"speed_px_s": "inf"}, "speed_px_s"),
        (CROSSED, {"eta": "[1, 2]"}, "eta"),
        (CROSSED, {"eta": '{"a": 1.5}'}, "eta"),
        (CROSSED, {"eta": "{"}, "eta"),
        (CROSSED, {"first_ms": "1"}, "first_ms"),
        (END, {"frames": "0"}, "frames"),
        (END, {"first_ms": "1700000009999"}, "first_ms"),
        (END, {"last_ms": None}, "last_ms"),
        (END, {"extra": "x"}, "extra"),
    ],
)
def test_parse_rejects_naming_the_field(base: ObjectEvent, change: dict[str, str | None], field: str) -> None:
    fields = base.to_fields()
    for k, v in change.items():
        if v is None:
            del fields[k]
        else:
            fields[k] = v
    with pytest.raises(ValueError, match=rf"^{field}:"):
        parse_fields(fields)


def test_constructor_rejects_fields_of_another_kind() -> None:
    with pytest.raises(ValueError, match=r"^line:"):
        ObjectEvent("c", 1, "bolt", 0, 0.5, "new", 10, line="L")
    with pytest.raises(ValueError, match=r"^frames:"):
        ObjectEvent("c", 1, "bolt", 0, 0.5, "end", 10, first_ms=1, last_ms=10)
