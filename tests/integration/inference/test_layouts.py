"""One detector exported in every layout gives the daemon the same detections.

`tests.support.onnx_models.wrap_demo` wraps the committed demo network (models/conveyor-416.onnx) in
thin export layers: the transposed YOLOv8 output, a YOLOv5-style objectness output, a YOLOX
raw head (grid and strides undone) and its decoded form, end-to-end outputs with NMS in the
graph (rows, YOLOv7 batch rows, the four-output form), a segment head with mask coefficients,
and input conventions (BGR, 0..255, top-left padding, a static batch). The daemon's inference
stage (batch tensor, ONNX Runtime session, decode and NMS, mapping to camera pixels) runs
each on the same frames; detections must match the plain demo model's within 1e-3.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from daemon.config.engine import EngineConfig
from daemon.core.frames import Detection, Frame, Letterbox
from daemon.core.metrics import Metrics
from daemon.core.model_spec import ModelOverrides
from daemon.inference.engine import Engine
from daemon.inference.model_file import ModelError, load_model_info
from daemon.inference.stage import InferenceStage, PostprocessConfig
from tests.support.daemon_harness import InProcessDaemon, write_config
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip
from tests.support.onnx_models import DEMO_MODELS, NAMES, WRAPPED_KINDS, wrap_demo
from tests.support.waits import wait_until
from tools.kit.synth.scene import render_scene

SIZE = 416
DEMO = DEMO_MODELS / f"conveyor-{SIZE}.onnx"
CONF, IOU = 0.25, 0.5
POST = PostprocessConfig(CONF, IOU, 300)
TOL = 1e-3


def _frame(seed: int, width: int, height: int, camera: str = "cam") -> Frame:
    img, _ = render_scene(seed, width, height)
    lb = Letterbox.fit(width, height, SIZE)
    scaled = np.asarray(Image.fromarray(img).resize((lb.new_w, lb.new_h), Image.Resampling.BILINEAR))
    planes = tuple(np.ascontiguousarray(scaled[:, :, c]) for c in range(3))
    return Frame(camera, seed, 0, 0.0, lb, planes)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def frames() -> list[Frame]:
    """Three 640x480 scenes (letterboxed to 416x312, 52 px of padding above and below)."""
    return [_frame(1_000_300 + i, 640, 480) for i in range(3)]


def _detect(
    path: Path, frames: list[Frame], overrides: ModelOverrides | None = None, max_batch: int = 4
) -> list[tuple[Detection, ...]]:
    info = load_model_info(path, SIZE, overrides)
    engine = Engine.create(info, EngineConfig(providers=["cpu"], max_batch=max_batch, worker_batch=max_batch))
    try:
        stage = InferenceStage(info, engine, max_batch=engine.max_batch, post=POST, rules={}, metrics=Metrics())
        step = engine.max_batch  # what the batcher hands a lane at most
        return [r.detections for i in range(0, len(frames), step) for r in stage.infer(frames[i : i + step])]
    finally:
        engine.close()


@pytest.fixture(scope="module")
def reference(frames: list[Frame]) -> list[tuple[Detection, ...]]:
    dets = _detect(DEMO, frames)
    assert sum(len(d) for d in dets) >= 6, "the scenes must hold detections to compare"
    return dets


def _assert_same(got: list[tuple[Detection, ...]], want: list[tuple[Detection, ...]], tol: float = TOL) -> None:
    assert len(got) == len(want)
    for image, (g, w) in enumerate(zip(got, want, strict=True)):
        assert [d.cls for d in g] == [d.cls for d in w], f"image {image}: classes differ"
        for a, b in zip(g, w, strict=True):
            assert abs(a.score - b.score) <= tol, (image, a, b)
            assert np.abs(np.subtract(a.box, b.box)).max() <= tol, (image, a, b)
            assert a.label == b.label or a.label == str(a.cls)


@pytest.mark.parametrize("kind", WRAPPED_KINDS)
def test_every_layout_gives_the_same_detections(
    tmp_path: Path, kind: str, frames: list[Frame], reference: list[tuple[Detection, ...]]
) -> None:
    path = wrap_demo(tmp_path / f"{kind}.onnx", kind, SIZE, conf=CONF, iou=IOU)
    info = load_model_info(path, SIZE)
    expected = {
        "yolox-raw": ("yolox", "raw-head"),
        "yolox-decoded": ("yolox", "decoded"),
        "yolov5": ("yolov5", "decoded"),
    }
    if kind in expected:
        assert (info.layout, info.decoding.form) == expected[kind]
    assert info.decoding.extra == (32 if kind == "segment" else 0)
    # a YOLOX file defaults to YOLOX's own input (BGR, 0..255, top-left) and NMS (class-agnostic); this one
    # is fed like the demo, and its NMS is the demo's (class-aware), so that two overlapping boxes of
    # different classes on one part (a bracket the model also scores as a bolt) are kept alike
    demo_input = (
        ModelOverrides(color="rgb", scale=1 / 255, padding="symmetric", nms="class-aware")
        if kind.startswith("yolox")
        else None
    )
    _assert_same(_detect(path, frames, demo_input), reference)


def test_yolox_export_bgr_raw_pixels_top_left_without_metadata(tmp_path: Path, frames: list[Frame]) -> None:
    """An official-style YOLOX export: no metadata, BGR 0..255 padded at the top-left, static batch 1, and
    YOLOX's own class-agnostic NMS: the same detections as the demo model run with class-agnostic NMS."""
    path = wrap_demo(
        tmp_path / "yolox_s.onnx",
        "yolox-raw",
        SIZE,
        bgr=True,
        raw_pixels=True,
        top_left_shift=(0, 52),
        metadata={},
        batch=1,
    )
    info = load_model_info(path, SIZE)
    conv = info.convention
    assert (info.layout, info.decoding.form, info.batch) == ("yolox", "raw-head", 1)
    assert (conv.color, conv.scale, conv.padding, conv.pad_value) == ("bgr", 1.0, "top-left", 114)
    assert info.names == ("0", "1", "2", "3")
    assert info.class_agnostic_nms
    _assert_same(_detect(path, frames), _detect(DEMO, frames, ModelOverrides(nms="class-agnostic")))
    labelled = load_model_info(path, SIZE, ModelOverrides(labels=NAMES))
    assert labelled.names == NAMES


def test_config_sets_the_convention_a_file_does_not_carry(
    tmp_path: Path, frames: list[Frame], reference: list[tuple[Detection, ...]]
) -> None:
    """A YOLOv8-layout file fed BGR 0..255 at the top-left: only the config says so."""
    path = wrap_demo(tmp_path / "v8_bgr.onnx", "yolov8", SIZE, bgr=True, raw_pixels=True, top_left_shift=(0, 52))
    overrides = ModelOverrides(color="bgr", scale=1.0, padding="top-left", pad_value=114)
    assert "config" in load_model_info(path, SIZE, overrides).convention.origin
    _assert_same(_detect(path, frames, overrides), reference)
    wrong = _detect(path, frames)  # the defaults (RGB, 1/255, centred) are not what this file wants
    assert sum(len(d) for d in wrong) < sum(len(d) for d in reference) // 2


@pytest.mark.parametrize("kind", ["yolov8", "end2end"])
def test_static_batch_model_gets_exactly_its_batch(
    tmp_path: Path, kind: str, frames: list[Frame], reference: list[tuple[Detection, ...]]
) -> None:
    path = wrap_demo(tmp_path / f"static4-{kind}.onnx", kind, SIZE, batch=4, conf=CONF, iou=IOU)
    info = load_model_info(path, SIZE)
    assert info.batch == 4 and info.convention.batch == 4
    _assert_same(_detect(path, frames, max_batch=8), reference)  # 3 frames in a padded batch of 4
    _assert_same(_detect(path, frames[:1], max_batch=2), reference[:1])
    engine = Engine.create(info, EngineConfig(providers=["cpu"], max_batch=8, worker_batch=8))
    try:
        assert engine.max_batch == 4
        with pytest.raises(ValueError, match="static"):
            engine.run(np.zeros((3, 3, SIZE, SIZE), np.float32))
    finally:
        engine.close()


def test_float16_input_model(tmp_path: Path, frames: list[Frame], reference: list[tuple[Detection, ...]]) -> None:
    from tools.model.convert_fp16 import convert  # noqa: PLC0415

    path = convert(DEMO, tmp_path / "fp16.onnx", keep_io_types=False)
    info = load_model_info(path, SIZE)
    assert info.convention.dtype == "float16"
    got = _detect(path, frames)
    assert abs(sum(len(d) for d in got) - sum(len(d) for d in reference)) <= 2
    matched = [
        max((_iou(a.box, b.box) for b in want if b.cls == a.cls), default=0.0)
        for have, want in zip(got, reference, strict=True)
        for a in have
    ]
    assert np.mean(np.asarray(matched) > 0.9) >= 0.9


def _iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def _entries(server: RedisServer, camera: str) -> list[list[dict[str, object]]]:
    client = server.client()
    try:
        raw = client.xrange(f"beltsight:detections:{camera}")
    finally:
        client.close()
    out = []
    for _id, fields in raw:
        text = {(k.decode() if isinstance(k, bytes) else k): v for k, v in fields.items()}
        out.append(json.loads(text["dets"]))
    return out


def test_daemon_runs_a_yolox_export_from_a_models_table(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    """The whole daemon (file source -> Redis) with `[models.416]` naming a BGR, 0..255, top-left YOLOX
    file and its labels gives the same detections as the plain demo model on the same clip."""
    clip = clip_factory(640, 480, fps=10, seconds=1.0, seed=31, synthetic=True)
    yolox = wrap_demo(
        tmp_path / "yolox.onnx", "yolox-raw", SIZE, bgr=True, raw_pixels=True, top_left_shift=(0, 52), metadata={}
    )
    results = {}
    for name, table in (
        ("demo", f"[models.416]\npath = {json.dumps(str(DEMO))}\n"),
        (
            "yolox",
            f'[models.416]\npath = {json.dumps(str(yolox))}\nlayout = "yolox"\ncolor = "bgr"\n'
            f'scale = 1.0\npadding = "top-left"\npad_value = 114\nlabels = {json.dumps(list(NAMES))}\n'
            'nms = "class-aware"\n',  # as the demo (a YOLOX file's own default is YOLOX's demo: across classes)
        ),
    ):
        redis = redis_server()
        config = write_config(
            tmp_path / f"{name}.toml",
            redis_url=redis.url,
            cameras=[{"id": "replay", "url": str(clip.path), "realtime": False, "model": SIZE}],
            conf_threshold=CONF,
            iou_threshold=IOU,
        )
        text = config.read_text()
        start = text.index("[models]")
        end = text.index("[engine]")
        config.write_text(text[:start] + table + "\n" + text[end:])
        with InProcessDaemon(config) as d:
            wait_until(lambda r=redis: len(_entries(r, "replay")) >= clip.frames, 120, "every frame in Redis", d)
        results[name] = _entries(redis, "replay")
    assert sum(len(e) for e in results["demo"]) >= 5
    assert len(results["demo"]) == len(results["yolox"])
    for want, got in zip(results["demo"], results["yolox"], strict=True):
        assert [(d["cls"], d["label"]) for d in got] == [(d["cls"], d["label"]) for d in want]
        for a, b in zip(got, want, strict=True):  # published boxes are rounded to 0.1 px, scores to 1e-4
            assert np.abs(np.subtract(a["box"], b["box"])).max() <= 0.1 + TOL
            assert abs(float(a["score"]) - float(b["score"])) <= 1e-4 + TOL  # type: ignore[arg-type]


def test_ultralytics_nms_export_known_by_its_args_metadata(
    tmp_path: Path, frames: list[Frame], reference: list[tuple[Detection, ...]]
) -> None:
    """Ultralytics `nms=True` exports keep `end2end` "False" and say `nms: True` only in `args`; a pose
    one has 51 keypoint values after each row and no prototype output: only `args` tells rows after NMS."""
    names = "{" + ", ".join(f"{i}: {n!r}" for i, n in enumerate(NAMES)) + "}"
    meta = {
        "names": names,
        "stride": "32",
        "task": "pose",
        "batch": "1",
        "imgsz": f"[{SIZE}, {SIZE}]",
        "end2end": "False",
        "kpt_shape": "[17, 3]",
    }
    args = {**meta, "args": "{'batch': 1, 'nms': True, 'dynamic': False}"}
    path = wrap_demo(tmp_path / "pose-nms.onnx", "end2end-pose", SIZE, conf=CONF, iou=IOU, metadata=args)
    info = load_model_info(path, SIZE)
    assert (info.layout, info.decoding.form, info.decoding.extra, info.names) == ("end2end", "rows", 51, NAMES)
    assert "args nms=True" in info.decoding.reason
    _assert_same(_detect(path, frames), reference)
    plain = wrap_demo(tmp_path / "pose-no-args.onnx", "end2end-pose", SIZE, conf=CONF, iou=IOU, metadata=meta)
    with pytest.raises(ModelError, match=r"\[1, 100, 57\]"):
        load_model_info(plain, SIZE)
