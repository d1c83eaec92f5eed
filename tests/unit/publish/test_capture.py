"""Frame capture: the strategies (with a fake clock and a seeded draw), their per-camera limits, the
YOLO label format and data.yaml, the size cap, and the writer's queue policy."""

from __future__ import annotations

import random
from functools import partial
from pathlib import Path

import av
import numpy as np
import pytest
import yaml
from PIL import Image

from daemon.config.capture import CaptureConfig, CaptureStrategy
from daemon.config.settings import load_settings
from daemon.core.frames import Detection, Frame, FrameResult, Letterbox
from daemon.core.metrics import Metrics
from daemon.core.objects import ObjectEvent
from daemon.ingest.decoding import scale
from daemon.publish.capture import FrameCapture
from daemon.publish.capture.dataset import data_yaml, image_path, label_of, label_text
from daemon.publish.capture.strategies import Limits, Sampler, Seen, close_to_threshold, weak_track
from daemon.publish.capture.writer import Job
from tests.support.h264_frames import decoded_frames


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return 1_700_000_000.0 + self.now


def det(score: float, box: tuple[float, float, float, float] = (10, 10, 50, 30), track: int | None = None) -> Detection:
    return Detection(0, "bolt", score, box, track)


def result(
    dets: tuple[Detection, ...] = (),
    weak: tuple[Detection, ...] = (),
    objects: tuple[ObjectEvent, ...] = (),
    *,
    camera: str = "cam1",
    mono: float = 1.0,
) -> FrameResult:
    return FrameResult(camera, 0, 1_700_000_000_000 + int(mono * 1000), mono, 320, 240, 640, "m", dets, objects, weak)


def crossed(track: int, score: float = 0.9) -> ObjectEvent:
    return ObjectEvent("cam1", track, "bolt", 0, score, "crossed", 5, "L1", "in", 1, 120.0)


def new(track: int) -> ObjectEvent:
    return ObjectEvent("cam1", track, "bolt", 0, 0.9, "new", 5)


# -- strategies -----------------------------------------------------------------------------------
def test_close_to_threshold_looks_at_both_sides_of_the_threshold() -> None:
    assert close_to_threshold(Seen(result((det(0.55),)), result(), 0.5), 0.1)  # above, within
    assert close_to_threshold(Seen(result(weak=(det(0.42),)), result(), 0.5), 0.1)  # under, a weak one
    assert not close_to_threshold(Seen(result((det(0.9),), (det(0.2),)), result(), 0.5), 0.1)
    assert not close_to_threshold(Seen(result(), result(), 0.5), 0.1)


def test_weak_track_picks_weak_late_and_weakly_seen_crossings() -> None:
    strong = result((det(0.9, track=3),), objects=(crossed(3, 0.9),))
    assert not weak_track(Seen(result((det(0.9),)), strong, 0.5), 0.1)
    weak_score = result((det(0.9, track=3),), objects=(crossed(3, 0.55),))
    assert weak_track(Seen(result(), weak_score, 0.5), 0.1)
    late = result((det(0.9, track=3),), objects=(new(3), crossed(3, 0.9)))
    assert weak_track(Seen(result(), late, 0.5), 0.1)
    on_a_weak_detection = result((), objects=(crossed(3, 0.9),))  # no published box carries track 3
    assert weak_track(Seen(result(), on_a_weak_detection, 0.5), 0.1)


def test_weak_track_picks_a_weak_box_over_a_confirmed_track() -> None:
    box = (100.0, 100.0, 140.0, 130.0)
    after = result((det(0.9, box, track=4),))
    assert weak_track(Seen(result(weak=(det(0.3, (102, 101, 141, 131)),)), after, 0.5), 0.1)
    assert not weak_track(Seen(result(weak=(det(0.3, (200, 200, 230, 220)),)), after, 0.5), 0.1)
    # the part seen only weakly in the frame after it was confirmed
    gone = result()
    assert weak_track(Seen(result(weak=(det(0.3, (104, 100, 144, 130)),)), gone, 0.5, previous=(box,)), 0.1)


def test_limits_hold_per_minute_and_per_hour_on_a_sliding_window() -> None:
    limits = Limits(per_minute=2, per_hour=3)
    assert limits.reached(0.0) is None
    limits.record(0.0)
    limits.record(1.0)
    assert limits.reached(59.9) == "per_minute"
    assert limits.reached(60.0) is None  # the first one left the minute
    limits.record(60.0)
    assert limits.reached(200.0) == "per_hour"
    assert limits.reached(3600.0) is None  # the first one left the hour
    assert Limits(per_minute=0, per_hour=10).reached(0.0) == "per_minute"  # 0: never


def sampler(*strategies: CaptureStrategy, clock: FakeClock, seed: int = 0) -> Sampler:
    return Sampler(strategies, {"cam1": 0.5, "cam2": 0.5}, clock=clock, rng=random.Random(seed))


def test_random_captures_its_share_of_frames() -> None:
    clock = FakeClock()
    s = sampler(CaptureStrategy(type="random", probability=0.2, per_minute=10**6, per_hour=10**6), clock=clock)
    picked = 0
    for _ in range(5000):
        pick, _refused = s.choose(result(), result())
        picked += pick is not None
    assert 850 <= picked <= 1150  # 20 % of 5000, binomial sd ~ 28


def test_per_camera_limits_with_a_fake_clock() -> None:
    clock = FakeClock()
    s = sampler(CaptureStrategy(type="random", per_minute=3, per_hour=5), clock=clock)
    taken = {"cam1": 0, "cam2": 0}
    refusals: list[str] = []
    for step in range(600):  # 10 frames/s for a minute, both cameras
        clock.now = 1000.0 + step / 10
        for camera in taken:
            pick, refused = s.choose(result(camera=camera), result(camera=camera))
            refusals += [r.limit for r in refused]
            if pick is not None:
                s.record(camera, pick)
                taken[camera] += 1
    assert taken == {"cam1": 3, "cam2": 3}  # each camera its own per-minute limit
    assert set(refusals) == {"per_minute"}
    clock.now = 1000.0 + 60.0
    for minute in range(5):
        clock.now += 60.0 * minute
        pick, refused = s.choose(result(), result())
        if pick is not None:
            s.record("cam1", pick)
            taken["cam1"] += 1
    assert taken["cam1"] == 5 and refused[0].limit == "per_hour"


def test_strategies_are_tried_in_order_and_a_limited_one_gives_way() -> None:
    clock = FakeClock()
    close = CaptureStrategy(type="close_to_threshold", epsilon=0.1, per_minute=1)
    s = sampler(close, CaptureStrategy(type="random"), clock=clock)
    unsure = result((det(0.52),))
    first, _ = s.choose(unsure, unsure)
    assert first is not None and first.strategy.type == "close_to_threshold"
    s.record("cam1", first)
    second, refused = s.choose(unsure, unsure)
    assert second is not None and second.strategy.type == "random"
    assert [(r.strategy, r.limit) for r in refused] == [("close_to_threshold", "per_minute")]


def test_probability_zero_never_and_an_unknown_camera_is_skipped() -> None:
    clock = FakeClock()
    s = sampler(CaptureStrategy(type="random", probability=0.0), clock=clock)
    assert s.choose(result(), result())[0] is None
    s = sampler(CaptureStrategy(type="random"), clock=clock)
    assert s.choose(result(camera="other"), result(camera="other"))[0] is None


# -- the dataset ------------------------------------------------------------------------------------
def test_labels_are_class_and_normalised_centre_and_size() -> None:
    dets = (Detection(2, "washer", 0.7, (80.0, 60.0, 160.0, 120.0)), Detection(0, "bolt", 0.9, (0, 0, 320, 240)))
    assert label_text(dets, 320, 240) == (
        "2 0.375000 0.375000 0.250000 0.250000\n0 0.500000 0.500000 1.000000 1.000000\n"
    )
    assert label_text((), 320, 240) == ""


def test_data_yaml_is_what_ultralytics_reads(tmp_path: Path) -> None:
    text = data_yaml(tmp_path, ["bolt", "hex_nut", 'odd: "name"'])
    data = yaml.safe_load(text)
    assert data["path"] == str(tmp_path.resolve())
    assert (data["train"], data["val"]) == ("images", "images")
    assert data["names"] == {0: "bolt", 1: "hex_nut", 2: 'odd: "name"'}


def test_paths_pair_each_image_with_its_labels(tmp_path: Path) -> None:
    assert image_path("cam1", 1_700_000_000_123) == "images/cam1/1700000000123.jpg"
    assert label_of(tmp_path / "images/cam1/17.jpg") == tmp_path / "labels/cam1/17.txt"


def test_config_needs_a_dir_when_strategies_are_listed() -> None:
    with pytest.raises(ValueError, match="dir"):
        CaptureConfig(strategies=[CaptureStrategy(type="random")])
    with pytest.raises(ValueError, match="type"):
        CaptureStrategy(type="sometimes")  # type: ignore[arg-type]
    assert not CaptureConfig().enabled


def test_the_toml_section_reads_as_documented(tmp_path: Path) -> None:
    config = tmp_path / "b.toml"
    config.write_text(
        f'[models]\n640 = "{tmp_path / "m.onnx"}"\n[capture]\ndir = "{tmp_path / "cap"}"\nmax_mb = 64\n'
        '[[capture.strategies]]\ntype = "close_to_threshold"\nepsilon = 0.05\nprobability = 0.5\n'
        "per_minute = 2\nper_hour = 20\n"
        '[[capture.strategies]]\ntype = "random"\nprobability = 0.01\n'
    )
    cfg = load_settings(config).capture
    assert cfg.enabled and cfg.max_mb == 64
    first = cfg.strategies[0]
    assert (first.type, first.epsilon, first.probability, first.per_minute, first.per_hour) == (
        "close_to_threshold", 0.05, 0.5, 2, 20,
    )  # fmt: skip
    assert cfg.strategies[1].type == "random"


# -- the writer -------------------------------------------------------------------------------------
def _vframes(count: int = 3, width: int = 320, height: int = 240) -> list[av.VideoFrame]:
    return decoded_frames(count, width, height, (slice(60, 120), slice(80, 160)))


def _frame(vframe: av.VideoFrame, mono: float) -> Frame:
    lb = Letterbox.fit(vframe.width, vframe.height, 640)
    return Frame("cam1", 0, 1_700_000_000_000 + int(mono * 1000), mono, lb, partial(scale, vframe, lb))


def _capture(tmp_path: Path, **kw: object) -> tuple[FrameCapture, Metrics]:
    metrics = Metrics()
    strategies = [CaptureStrategy(type="random", per_minute=100, per_hour=1000)]
    cfg = CaptureConfig(dir=tmp_path / "cap", strategies=strategies, **kw)  # type: ignore[arg-type]
    capture = FrameCapture(cfg, metrics, names=["bolt", "hex_nut"], thresholds={"cam1": 0.5}, clock=FakeClock())
    return capture, metrics


def _value(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def test_a_captured_frame_is_a_jpeg_with_its_published_detections_as_labels(tmp_path: Path) -> None:
    capture, metrics = _capture(tmp_path)
    frame = _frame(_vframes(1)[0], 1.0)
    box = Detection(1, "hex_nut", 0.8, (80.0, 60.0, 160.0, 120.0), track=2)
    published = result((box,), mono=1.0)
    capture.observe([frame], [published])
    capture.offer(result((box,), (det(0.3),), mono=1.0), published)
    capture.start()
    capture.stop()
    image = capture.root / image_path("cam1", published.captured_ms)
    with Image.open(image) as decoded:
        assert (decoded.format, decoded.size) == ("JPEG", (320, 240))  # the whole frame, no box drawn
        pixels = np.asarray(decoded.convert("L")).astype(int)
    assert pixels[90, 120] > 230 and abs(pixels[10, 10] - 128) < 12
    assert label_of(image).read_text() == "1 0.375000 0.375000 0.250000 0.250000\n"  # the weak one is not a label
    assert yaml.safe_load((capture.root / "data.yaml").read_text())["names"] == {0: "bolt", 1: "hex_nut"}
    assert _value(metrics, "beltsight_capture_written_total", camera="cam1", strategy="random") == 1
    assert _value(metrics, "beltsight_capture_bytes") == image.stat().st_size + label_of(image).stat().st_size
    assert _value(metrics, "beltsight_stage_cpu_seconds_total", stage="capture") > 0


def test_a_full_queue_drops_the_capture_and_counts_it(tmp_path: Path) -> None:
    capture, metrics = _capture(tmp_path, queue=1)  # not started: nothing takes jobs
    frames = [_frame(v, float(i)) for i, v in enumerate(_vframes(3))]
    capture.observe(frames, [result(mono=f.captured_mono) for f in frames])
    for f in frames:
        r = result(mono=f.captured_mono)
        capture.offer(r, r)
    assert _value(metrics, "beltsight_capture_dropped_total", reason="queue_full") == 2
    r = result(mono=99.0)
    capture.offer(r, r)  # its frame was never observed
    assert _value(metrics, "beltsight_capture_dropped_total", reason="no_frame") == 1


def test_the_size_cap_removes_the_oldest_image_with_its_labels(tmp_path: Path) -> None:
    capture, metrics = _capture(tmp_path)
    frames = [_frame(v, float(i)) for i, v in enumerate(_vframes(3))]
    capture._prepare()
    for f in frames:
        capture.write(Job("cam1", f.captured_ms, f, (det(0.9),), 320, 240, "random"))
    written = sorted((capture.root / "images/cam1").glob("*.jpg"))
    assert len(written) == 3
    one = written[0].stat().st_size + label_of(written[0]).stat().st_size
    capped, metrics = _capture(tmp_path, max_mb=(one * 2.5) / 2**20)
    capped._prepare()  # indexes the three already there
    assert _value(metrics, "beltsight_capture_bytes") >= 3 * one * 0.9
    capped._expire(0)
    left = sorted((capped.root / "images/cam1").glob("*.jpg"))
    assert left == written[1:] or left == written[2:]
    assert not label_of(written[0]).exists()  # its labels went with it
    assert all(label_of(p).exists() for p in left)
    assert _value(metrics, "beltsight_capture_removed_total") == 3 - len(left)


def test_a_swapped_models_classes_extend_the_dataset_and_old_ids_keep_their_meaning(tmp_path: Path) -> None:
    """Labels come from the model that served the frame: a swapped-in model whose class 0 is `washer`
    (the dataset's 0 is `bolt`) and which knows `gear` gets ids from the dataset's own list, `gear` is
    appended to data.yaml before its label file is written, and a restart with the old model's names
    keeps every id (data.yaml read back)."""
    capture, _ = _capture(tmp_path)
    frames = [_frame(v, float(i)) for i, v in enumerate(_vframes(3))]
    capture._prepare()
    capture.write(Job("cam1", frames[0].captured_ms, frames[0], (det(0.9),), 320, 240, "random"))
    swapped = (Detection(0, "washer", 0.8, (10, 10, 50, 30)), Detection(1, "gear", 0.7, (60, 10, 90, 30)))
    capture.write(Job("cam1", frames[1].captured_ms, frames[1], swapped, 320, 240, "random"))
    names = yaml.safe_load((capture.root / "data.yaml").read_text())["names"]
    assert names == {0: "bolt", 1: "hex_nut", 2: "washer", 3: "gear"}
    labels = [label_of(p).read_text().split()[::5] for p in sorted((capture.root / "images/cam1").glob("*.jpg"))]
    assert labels == [["0"], ["2", "3"]]

    again, _ = _capture(tmp_path)  # a restart: the served model's names are bolt, hex_nut again
    again._prepare()
    again.write(Job("cam1", frames[2].captured_ms, frames[2], (swapped[1],), 320, 240, "random"))
    assert yaml.safe_load((capture.root / "data.yaml").read_text())["names"] == names
    newest = max((capture.root / "images/cam1").glob("*.jpg"))
    assert label_of(newest).read_text().split()[0] == "3"
