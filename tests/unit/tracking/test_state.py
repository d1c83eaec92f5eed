"""Where ids and counts continue after a restart: the state file, the merge of the three sources,
and the time-based base when none knows a camera."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from daemon.config.cameras import CameraConfig
from daemon.config.tracking import TrackingConfig
from daemon.core.metrics import Metrics
from daemon.core.objects import ObjectsResume
from daemon.tracking import persist, state
from daemon.tracking.stage import TrackingStage


class FixedClock:
    def monotonic(self) -> float:
        return 100.0

    def time(self) -> float:
        return 1_796_000_000.5


def stage(*camera_ids: str) -> TrackingStage:
    line = {"id": "gate", "start": (0.5, 0.0), "end": (0.5, 1.0)}
    cameras = [CameraConfig.model_validate({"id": c, "url": "rtsp://h/s", "lines": [line]}) for c in camera_ids]
    return TrackingStage(cameras, TrackingConfig(), Metrics())


def test_the_state_file_round_trips_and_is_replaced_whole(tmp_path: Path) -> None:
    saved = {"a": ObjectsResume(41, {("gate", "in"): 7, ("gate", "out"): 1}), "b": ObjectsResume(3, {})}
    state.save(tmp_path, saved)
    assert state.load(tmp_path) == saved
    state.save(tmp_path, {"a": ObjectsResume(50, {("gate", "in"): 9})})
    assert state.load(tmp_path) == {"a": ObjectsResume(50, {("gate", "in"): 9})}
    assert sorted(p.name for p in tmp_path.iterdir()) == [state.FILE_NAME]  # no temporary left behind


def test_no_file_is_none_and_another_format_is_refused(tmp_path: Path) -> None:
    assert state.load(tmp_path) is None
    (tmp_path / state.FILE_NAME).write_text('{"format": 99, "cameras": {}}')
    with pytest.raises(ValueError, match="format"):
        state.load(tmp_path)
    assert persist.load_saved(tmp_path) is None  # logged, not raised: the streams still know


def test_merge_takes_the_highest_id_and_each_highest_count() -> None:
    redis = {"a": ObjectsResume(10, {("gate", "in"): 4}), "b": ObjectsResume(2, {})}
    saved = {"a": ObjectsResume(12, {("gate", "in"): 3, ("gate", "out"): 2})}
    assert state.merge(redis, None, saved) == {
        "a": ObjectsResume(12, {("gate", "in"): 4, ("gate", "out"): 2}),
        "b": ObjectsResume(2, {}),
    }


def test_resume_uses_the_saved_state_when_redis_could_not_be_read(tmp_path: Path) -> None:
    state.save(tmp_path, {"a": ObjectsResume(77, {("gate", "in"): 5})})
    s = stage("a", "b")
    empty = {"a": ObjectsResume(), "b": ObjectsResume()}
    persist.resume(s, empty, False, tmp_path, clock=FixedClock())
    snap = s.snapshot()
    assert snap["a"] == ObjectsResume(77, {("gate", "in"): 5, ("gate", "out"): 0})
    # nobody knows b: ids from the time-based base, counts from 0
    assert snap["b"].next_track_id == 1_796_000_000 * 1000
    assert snap["b"].counts == {("gate", "in"): 0, ("gate", "out"): 0}


def test_resume_trusts_redis_when_it_was_read(tmp_path: Path) -> None:
    s = stage("a")
    persist.resume(s, {"a": ObjectsResume()}, True, tmp_path, clock=FixedClock())
    assert s.snapshot()["a"].next_track_id == 1  # an empty stream: a new camera starts at 1


def test_the_start_up_step_asks_for_every_tracked_line_and_resumes_from_the_answer(tmp_path: Path) -> None:
    """`resume_stage` (the daemon's start-up step): what it asks the sink, what it resumes, and which
    directory's state file is kept from then on; a stage with no camera asks nothing."""
    asked: list[tuple[dict[str, set[tuple[str, str]]], float]] = []

    async def points(
        cameras: dict[str, set[tuple[str, str]]], timeout_s: float
    ) -> tuple[dict[str, ObjectsResume], bool]:
        asked.append((cameras, timeout_s))
        return {"a": ObjectsResume(41, {("gate", "in"): 7})}, True

    s = stage("a")
    assert asyncio.run(persist.resume_stage(s, points, tmp_path)) == tmp_path
    assert asked == [({"a": {("gate", "in"), ("gate", "out")}}, persist.RESUME_TIMEOUT_S)]
    assert s.snapshot()["a"] == ObjectsResume(41, {("gate", "in"): 7, ("gate", "out"): 0})
    assert asyncio.run(persist.resume_stage(stage("a"), points, None)) is None  # no spool: no state file
    assert asyncio.run(persist.resume_stage(stage(), points, tmp_path)) is None
    assert len(asked) == 2
