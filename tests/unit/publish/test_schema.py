"""Schema v1 serialisation and entry-ID generation (pure functions)."""

from __future__ import annotations

import itertools
import json

import pytest

from daemon.core.frames import Detection, FrameResult, StatusEvent
from daemon.publish.schema import (
    ENTRY_FIELDS,
    EntryId,
    decode_entry,
    encode_entry,
    encode_event,
    model_tag,
    next_entry_id,
    same_frame,
)


def make_result(seq: int = 7, dets: tuple[Detection, ...] = ()) -> FrameResult:
    return FrameResult(
        camera_id="line1-infeed",
        seq=seq,
        captured_ms=1_700_000_000_123,
        captured_mono=12.5,
        width=1280,
        height=720,
        model_size=640,
        model_name="conveyor-640@1.0.0",
        detections=dets,
    )


BOLT = Detection(cls=2, label="bolt", score=0.912345, box=(10.04, 20.0, 30.55, 40.0))
NUT = Detection(cls=0, label="nut", score=0.5, box=(0.0, 0.0, 1.0, 1.0))


def test_fields_are_exactly_schema_v1_and_all_strings() -> None:
    fields = encode_entry(make_result(dets=(BOLT,)), published_ms=1_700_000_000_150)
    assert tuple(fields) == ENTRY_FIELDS
    assert set(fields) == {"v", "camera", "seq", "captured_ms", "published_ms", "w", "h", "model", "n", "dets"}
    assert all(isinstance(v, str) for v in fields.values())
    assert fields["v"] == "1"
    assert fields["model"] == "640:conveyor-640@1.0.0" == model_tag(640, "conveyor-640@1.0.0")
    assert fields["published_ms"] == "1700000000150"


def test_dets_is_compact_json_of_as_json() -> None:
    fields = encode_entry(make_result(dets=(BOLT, NUT)), published_ms=1)
    assert " " not in fields["dets"]
    assert json.loads(fields["dets"]) == [BOLT.as_json(), NUT.as_json()]
    assert json.loads(fields["dets"])[0] == {
        "cls": 2,
        "label": "bolt",
        "score": 0.9123,
        "box": [10.0, 20.0, 30.6, 40.0],
    }
    assert fields["n"] == "2"


def test_empty_detections_still_make_an_entry() -> None:
    fields = encode_entry(make_result(dets=()), published_ms=5)
    assert fields["n"] == "0"
    assert fields["dets"] == "[]"


@pytest.mark.parametrize("as_bytes", [False, True])
def test_round_trip(as_bytes: bool) -> None:
    result = make_result(seq=42, dets=(BOLT,))
    fields = encode_entry(result, published_ms=1_700_000_000_200)
    raw = {k.encode(): v.encode() for k, v in fields.items()} if as_bytes else fields
    entry = decode_entry(raw)
    assert entry["v"] == 1
    assert entry["camera"] == "line1-infeed"
    assert entry["seq"] == 42
    assert entry["captured_ms"] == result.captured_ms
    assert entry["published_ms"] == 1_700_000_000_200
    assert (entry["w"], entry["h"]) == (1280, 720)
    assert (entry["model_size"], entry["model_name"]) == (640, "conveyor-640@1.0.0")
    assert entry["n"] == 1
    assert entry["dets"] == [BOLT.as_json()]
    assert same_frame(fields, result)
    assert not same_frame(fields, make_result(seq=43))


def test_decode_rejects_other_versions_and_missing_fields() -> None:
    fields = encode_entry(make_result(), published_ms=1)
    with pytest.raises(ValueError, match="version"):
        decode_entry({**fields, "v": "2"})
    with pytest.raises(ValueError, match="dets"):
        decode_entry({k: v for k, v in fields.items() if k != "dets"})


def test_entry_id_parse_and_order() -> None:
    assert EntryId.parse("1700-3") == EntryId(1700, 3)
    assert EntryId.parse(b"5-0") == EntryId(5, 0)
    assert str(EntryId(1700, 3)) == "1700-3"
    assert EntryId(5, 10) > EntryId(5, 9) > EntryId(4, 99)


def test_entry_ids_strictly_increase() -> None:
    ids = []
    last = None
    # forward, same ms twice, clock going backwards twice, forward again past the old top
    for captured_ms in (1000, 1000, 1000, 999, 500, 1001, 1001):
        last = next_entry_id(last, captured_ms)
        ids.append(last)
    assert [str(i) for i in ids] == ["1000-0", "1000-1", "1000-2", "1000-3", "1000-4", "1001-0", "1001-1"]
    assert all(a < b for a, b in itertools.pairwise(ids))


def test_entry_id_never_zero() -> None:
    assert next_entry_id(None, 0) == EntryId(0, 1)
    assert next_entry_id(None, 1234) == EntryId(1234, 0)


def test_event_fields() -> None:
    assert encode_event(StatusEvent("camera_down", "eof", "cam1", at_ms=5), at_ms=9) == {
        "kind": "camera_down",
        "detail": "eof",
        "at_ms": "5",
        "camera": "cam1",
    }
    assert encode_event(StatusEvent("throttle_on", "85 C"), at_ms=9) == {
        "kind": "throttle_on",
        "detail": "85 C",
        "at_ms": "9",
    }
