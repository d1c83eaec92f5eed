"""A tracked camera's weak detections (`CameraRules.track_floor`): split from the published ones in
the inference stage, on the demo model over real H.264 frames, and the rules that set the floor."""

from __future__ import annotations

from pathlib import Path

import av
import pytest

from daemon.config.engine import EngineConfig
from daemon.config.settings import load_settings
from daemon.core.frames import Frame, FrameResult, Letterbox
from daemon.core.metrics import Metrics
from daemon.inference.engine import Engine
from daemon.inference.model_check import camera_rules, validate_models
from daemon.inference.model_file import load_model_info
from daemon.inference.stage import CameraRules, InferenceStage, PostprocessConfig
from daemon.ingest.decoding import scale
from tests.support.clips import scene_frames
from tests.support.onnx_models import DEMO_MODELS

MODEL = DEMO_MODELS / "conveyor-640.onnx"
pytestmark = pytest.mark.skipif(not MODEL.is_file(), reason="demo model not built (tools/bootstrap.sh)")
CONF, FLOOR = 0.6, 0.05  # a high threshold, so the scenes' parts leave boxes on both sides of it


@pytest.fixture(scope="module")
def frames(tmp_path_factory: pytest.TempPathFactory) -> list[av.VideoFrame]:
    return scene_frames(tmp_path_factory.mktemp("weak") / "scenes.mp4", (11, 12, 13), crf=30)


def run_batch(frames: list[av.VideoFrame], rules: dict[str, CameraRules]) -> list[FrameResult]:
    """One batch: each frame once as camera "plain" and once as "tracked", interleaved."""
    info = load_model_info(MODEL, 640)
    engine = Engine.create(info, EngineConfig(providers=["cpu"], max_batch=6, worker_batch=6, workers=1))
    post = PostprocessConfig(conf_threshold=CONF, iou_threshold=0.5, max_det=100)
    stage = InferenceStage(info, engine, max_batch=6, post=post, rules=rules, metrics=Metrics())
    lb = Letterbox.fit(960, 540, 640)
    batch = [Frame(cam, i, 0, 0.0, lb, scale(f, lb)) for i, f in enumerate(frames) for cam in ("plain", "tracked")]
    try:
        return stage.infer(batch)
    finally:
        engine.close()


def test_weak_detections_are_split_off_and_the_published_ones_do_not_change(frames: list[av.VideoFrame]) -> None:
    results = run_batch(frames, {"plain": CameraRules(CONF), "tracked": CameraRules(CONF, track_floor=FLOOR)})
    plain, tracked = results[0::2], results[1::2]
    assert all(r.weak == () for r in plain)  # no floor: nothing weak
    for p, t in zip(plain, tracked, strict=True):
        assert t.detections == p.detections  # the lower NMS floor suppresses none of the published boxes
        assert all(d.score >= CONF for d in t.detections)
        assert all(FLOOR <= d.score < CONF for d in t.weak)
    assert sum(len(r.detections) for r in tracked) >= 3 and sum(len(r.weak) for r in tracked) >= 1

    everything = run_batch(frames, {"plain": CameraRules(FLOOR), "tracked": CameraRules(FLOOR)})[1::2]
    for t, e in zip(tracked, everything, strict=True):  # published + weak: what the floor alone keeps
        assert sorted(t.detections + t.weak, key=repr) == sorted(e.detections, key=repr)


def test_the_class_filter_holds_for_the_weak_ones_too(frames: list[av.VideoFrame]) -> None:
    results = run_batch(frames, {"tracked": CameraRules(CONF, frozenset({0}), track_floor=FLOOR)})[1::2]
    assert {d.cls for r in results for d in r.detections + r.weak} <= {0}


def write_config(tmp_path: Path, body: str) -> Path:
    model = tmp_path / "conveyor-640.onnx"
    model.write_bytes(MODEL.read_bytes())
    path = tmp_path / "beltsight.toml"
    path.write_text(f'[models]\n640 = "{model}"\n\n{body}', encoding="utf-8")
    return path


def test_camera_rules_give_tracked_cameras_the_trackers_low_score(tmp_path: Path) -> None:
    body = (
        "[engine]\nconf_threshold = 0.3\n\n[tracking]\nlow_score = 0.12\n\n"
        '[[cameras]]\nid = "a"\nurl = "rtsp://h/a"\n\n'
        '[[cameras]]\nid = "b"\nurl = "rtsp://h/b"\ntracking = false\nconf_threshold = 0.4\n'
    )
    settings = load_settings(write_config(tmp_path, body))
    rules = camera_rules(settings, validate_models(settings)[640])
    assert rules["a"] == CameraRules(0.3, None, 0.12) and rules["a"].floor == pytest.approx(0.12)
    assert rules["b"] == CameraRules(0.4, None, None) and rules["b"].floor == pytest.approx(0.4)

    off = load_settings(write_config(tmp_path, body.replace("low_score = 0.12", "enabled = false")))
    assert camera_rules(off, validate_models(off)[640])["a"].track_floor is None


def test_a_cameras_threshold_of_zero_is_its_own_not_the_engines(tmp_path: Path) -> None:
    body = '[engine]\nconf_threshold = 0.3\n\n[[cameras]]\nid = "a"\nurl = "rtsp://h/a"\nconf_threshold = 0.0\n'
    settings = load_settings(write_config(tmp_path, body))
    assert camera_rules(settings, validate_models(settings)[640])["a"].conf_threshold == 0.0


def test_a_floor_above_the_threshold_keeps_nothing_weak() -> None:
    rules = CameraRules(0.2, track_floor=0.3)
    assert rules.floor == pytest.approx(0.2)  # low_score above a camera's threshold: the tracker sees what is published
