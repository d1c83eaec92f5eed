"""Lines changed on a running `CameraTracker` (`set_lines`, between two frames): tracks and ids stay, a kept
line keeps its counts, a new one counts from 0, a removed one stops, and a line moved under a part standing
on it does not count that part."""

from __future__ import annotations

import numpy as np

from daemon.core.objects import ObjectEvent
from daemon.tracking import CameraTracker, LineSpec

W, H = 1280, 720
T0 = 1_700_000_000_000


def vertical(line_id: str, x: float) -> LineSpec:
    return LineSpec(line_id, (x, 0.0), (x, 1.0), (1.0, 0.0))


class Belt:
    """One part 60x40 px riding along +x at y = 360, fed frame by frame at 30 fps."""

    def __init__(self, tracker: CameraTracker, x_px: float = 100.0) -> None:
        self.tracker = tracker
        self.x = x_px
        self.k = 0
        self.events: list[ObjectEvent] = []
        self.ids: set[int | None] = set()

    def run(self, seconds: float, speed_px_s: float, wobble_px: float = 0.0) -> None:
        for _ in range(int(seconds * 30)):
            self.k += 1
            self.x += speed_px_s / 30
            x = self.x + (wobble_px if self.k % 2 else -wobble_px)
            box = np.array([[x - 30, 340, x + 30, 380]], dtype=np.float64)
            update = self.tracker.update(T0 + self.k * 33, W, H, box, np.array([0.9]), np.array([0]), ["part"])
            self.events += update.events
            self.ids.update(i for i in update.track_ids if i is not None)

    def crossings(self, line_id: str) -> list[tuple[str, int | None]]:
        return [(e.direction or "", e.count) for e in self.events if e.event == "crossed" and e.line == line_id]


def test_a_kept_line_keeps_its_count_a_new_one_starts_at_zero_and_the_track_keeps_its_id() -> None:
    tracker = CameraTracker("belt", [vertical("a", 0.2)])
    belt = Belt(tracker)
    belt.run(1.5, 300.0)  # past x = 256
    assert belt.crossings("a") == [("in", 1)]
    ids_before = set(belt.ids)
    tracker.set_lines([vertical("a", 0.2), vertical("b", 0.6)], mm_per_px=None)
    assert tracker.counts == {("a", "in"): 1, ("a", "out"): 0, ("b", "in"): 0, ("b", "out"): 0}
    belt.run(2.0, 300.0)  # past x = 768
    assert belt.crossings("a") == [("in", 1)]  # not counted again
    assert belt.crossings("b") == [("in", 1)]
    assert belt.ids == ids_before and len(belt.ids) == 1


def test_a_removed_line_stops_counting() -> None:
    tracker = CameraTracker("belt", [vertical("a", 0.2), vertical("b", 0.6)])
    belt = Belt(tracker)
    belt.run(1.5, 300.0)
    tracker.set_lines([vertical("b", 0.6)], mm_per_px=0.5)
    assert tracker.counts == {("b", "in"): 0, ("b", "out"): 0}
    belt.run(2.0, 300.0)
    assert belt.crossings("b") == [("in", 1)]
    assert tracker.mm_per_px == 0.5
    assert [e.line for e in belt.events if e.event == "crossed"] == ["a", "b"]


def test_a_line_moved_under_a_standing_part_does_not_count_it_but_one_it_reaches_does() -> None:
    tracker = CameraTracker("belt", [vertical("a", 0.9)])
    belt = Belt(tracker, x_px=400.0)
    belt.run(1.0, 200.0)  # to x = 600, then the belt stops
    belt.run(1.0, 0.0, wobble_px=2.0)  # standing, its box jittering
    # "a" is moved under the part's anchor, and a line "b" is placed ahead of it
    tracker.set_lines([vertical("a", belt.x / W), vertical("b", 0.75)], mm_per_px=None)
    belt.run(1.0, 0.0, wobble_px=2.0)
    belt.run(2.0, 200.0)  # the belt runs again: the part leaves "a" and crosses "b" (x = 960)
    assert belt.crossings("a") == []
    assert belt.crossings("b") == [("in", 1)]


def test_a_line_moved_ahead_of_a_part_counts_it_when_it_gets_there_and_keeps_its_count() -> None:
    tracker = CameraTracker("belt", [vertical("a", 0.2)])
    belt = Belt(tracker)
    belt.run(1.5, 300.0)  # crosses "a" at x = 256
    tracker.set_lines([vertical("a", 0.6)], mm_per_px=None)  # moved ahead of the part
    belt.run(2.0, 300.0)
    assert belt.crossings("a") == [("in", 1), ("in", 2)]
