"""Random input (irregular, repeated and backward capture times, size changes, empty frames, odd boxes):
nothing raises and the event stream keeps its invariants."""

from __future__ import annotations

import numpy as np
import pytest

from daemon.core.objects import ObjectEvent, parse_fields
from daemon.tracking import CameraTracker, GateSpec, LineSpec


def _check_stream(events: list[ObjectEvent]) -> None:
    born: set[int] = set()
    ended: set[int] = set()
    last_count: dict[tuple[str, str], int] = {}
    for e in events:
        assert parse_fields(e.to_fields()) == e
        if e.event == "new":
            assert e.track not in born
            born.add(e.track)
        elif e.event == "crossed":
            assert e.track in born and e.track not in ended
            key = (e.line or "", e.direction or "")
            assert e.count == last_count.get(key, 0) + 1
            last_count[key] = e.count or 0
        else:
            assert e.track in born and e.track not in ended
            ended.add(e.track)
    assert born == ended  # finish() ended every live track


@pytest.mark.parametrize("seed", range(6))
def test_random_streams_keep_the_invariants(seed: int) -> None:
    rng = np.random.default_rng(seed)
    lines = [
        LineSpec("A", (0.5, 0.0), (0.5, 1.0), gates=(GateSpec("g", 200.0),)),
        LineSpec("B", (0.0, 0.3), (1.0, 0.7), direction=(0.0, 1.0)),
    ]
    tracker = CameraTracker("cam1", lines, mm_per_px=0.4, first_track_id=int(rng.integers(1, 10_000)))
    events: list[ObjectEvent] = []
    t = 1_700_000_000_000
    size = (1280, 720)
    centres = rng.uniform([0, 0], [1280, 720], (25, 2))
    velocity = rng.normal(0, 200, (25, 2))
    for _ in range(400):
        t += int(rng.choice([33, 33, 66, 0, -40, 500, 1500], p=[0.5, 0.2, 0.1, 0.05, 0.05, 0.07, 0.03]))
        if rng.random() < 0.02:
            size = (int(rng.choice([640, 1280, 1920])), int(rng.choice([360, 720, 1080])))
        centres = (centres + velocity * 0.033 + rng.normal(0, 3, centres.shape)) % [size[0], size[1]]
        keep = rng.random(len(centres)) < 0.8
        c = centres[keep]
        wh = rng.uniform(5, 120, (len(c), 2))
        boxes = np.concatenate([c - wh / 2, c + wh / 2], axis=1)
        scores = rng.uniform(0.0, 1.0, len(c))
        classes = rng.integers(0, 4, len(c))
        upd = tracker.update(t, size[0], size[1], boxes, scores, classes, [f"c{k}" for k in classes])
        assert len(upd.track_ids) == len(c)
        live = {i for i in upd.track_ids if i is not None}
        assert len(live) == len([i for i in upd.track_ids if i is not None])  # one detection per track
        events += upd.events
    events += tracker.finish(t)
    _check_stream(events)
    assert sum(tracker.counts.values()) == sum(1 for e in events if e.event == "crossed")
