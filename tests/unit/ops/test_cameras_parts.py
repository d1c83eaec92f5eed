"""The pieces a live camera change uses: a camera that comes back to the tracking stage continues its ids
and counts, a removed camera's metric series go (the others' stay), the hub forgets a slot and says
whether a frame was left in it, the router takes a camera's size and forgets it, and `InOrder` says how
far its tickets were published."""

from __future__ import annotations

import numpy as np

from daemon.batching.batcher import InOrder
from daemon.batching.hub import FrameHub
from daemon.batching.router import ModelRouter
from daemon.config.cameras import CameraConfig
from daemon.config.tracking import TrackingConfig
from daemon.core.frames import Detection, Frame, FrameResult, Letterbox
from daemon.core.metrics import Metrics
from daemon.core.objects import ObjectsResume
from daemon.tracking.stage import TrackingStage

W, H = 1280, 720
T0 = 1_700_000_000_000
LINE = {"id": "a", "start": [0.2, 0.0], "end": [0.2, 1.0], "direction": [1.0, 0.0]}


def camera(camera_id: str, **keys: object) -> CameraConfig:
    return CameraConfig.model_validate({"id": camera_id, "url": f"rtsp://127.0.0.1:1/{camera_id}", **keys})


def ride(stage: TrackingStage, camera_id: str, start_ms: int) -> list[FrameResult]:
    """One part riding +x across the frame at 300 px/s, 30 fps, through the stage."""
    out = []
    for k in range(150):
        x = 100.0 + 10.0 * k
        det = Detection(0, "part", 0.9, (x - 30, 340.0, x + 30, 380.0))
        result = FrameResult(camera_id, k, start_ms + 33 * k, 0.0, W, H, 640, "m", (det,))
        out.append(stage.process(result))
    return out


def crossings(results: list[FrameResult]) -> list[tuple[int, int | None]]:
    return [(e.track, e.count) for r in results for e in r.objects if e.event == "crossed"]


def test_a_camera_that_comes_back_continues_its_ids_and_counts() -> None:
    metrics = Metrics()
    stage = TrackingStage([camera("a", lines=[LINE])], TrackingConfig(), metrics)
    first = crossings(ride(stage, "a", T0))
    assert [count for _track, count in first] == [1]
    kept = stage.remove_camera("a")
    assert kept is not None and kept.counts[("a", "in")] == 1
    assert "a" not in stage.camera_ids and stage.counts("a") == {}
    untracked = ride(stage, "a", T0 + 10_000)  # a late result of the removed camera passes untracked
    assert all(r.objects == () for r in untracked)

    assert stage.add_camera(camera("a", lines=[LINE]), resume=ObjectsResume(1, {}))  # its own state wins
    again = crossings(ride(stage, "a", T0 + 20_000))
    assert [count for _track, count in again] == [2]
    assert again[0][0] > first[0][0]  # a new track id, after the ones it gave before

    assert stage.add_camera(camera("new", lines=[LINE]), resume=ObjectsResume(500, {("a", "in"): 7}))
    assert crossings(ride(stage, "new", T0)) == [(500, 8)]  # from the objects stream, as after a restart
    assert not stage.add_camera(camera("a", tracking=False))  # untracked now: retired, kept
    assert "a" not in stage.camera_ids


def test_a_removed_camera_s_series_go_and_the_others_stay() -> None:
    metrics = Metrics()
    for cid in ("a", "b"):
        metrics.frames_decoded.labels(camera=cid).inc()
        metrics.dropped(cid, "superseded")
        metrics.latency_seconds.labels(camera=cid).observe(0.05)
        metrics.camera_up.labels(camera=cid).set(1)
    assert metrics.retire_camera("a") == 4
    r = metrics.registry
    assert r.get_sample_value("beltsight_frames_decoded_total", {"camera": "a"}) is None
    assert r.get_sample_value("beltsight_latency_seconds_count", {"camera": "a"}) is None
    assert r.get_sample_value("beltsight_frames_decoded_total", {"camera": "b"}) == 1
    assert r.get_sample_value("beltsight_frames_dropped_total", {"camera": "b", "reason": "superseded"}) == 1
    assert metrics.retire_camera("a") == 0


def test_the_hub_forgets_a_slot_and_the_router_a_size() -> None:
    hub = FrameHub(Metrics())
    planes = np.zeros((3, 240, 320), dtype=np.uint8)
    hub.put(Frame("a", 0, T0, 0.0, Letterbox.fit(320, 240, 416), planes))
    assert hub.holds("a") and not hub.holds("b")
    assert hub.forget("a") and not hub.holds("a") and "a" not in hub.cameras()
    assert not hub.forget("a")

    router = ModelRouter([416, 640], {})
    assert router("a", 320, 240) == 416
    router.set_override("a", 640)
    assert router("a", 320, 240) == 640
    router.set_override("a", None)
    assert router("a", 320, 240) == 416
    router.add_sizes([800])
    assert router.sizes == (416, 640, 800)

    order: InOrder[int] = InOrder()
    t0, t1 = order.ticket(), order.ticket()
    assert (order.issued, order.published) == (2, 0)
    order.complete(t1, [1])
    assert order.published == 0
    order.complete(t0, [0])
    assert order.published == 2
