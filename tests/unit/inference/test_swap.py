"""The checks of a model swap (`daemon.inference.swap`) on the repo's real model files: input size,
class names, the cameras' class filters, files that are not models, the canary; and the swapper
itself on real sessions for a lane that has not started (its worker 0 takes the new session)."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from daemon.config.settings import load_settings
from daemon.core.frames import StatusEvent
from daemon.core.metrics import Metrics
from daemon.inference.build import LaneWorkers, prove_models
from daemon.inference.engine import EngineFactory
from daemon.inference.lanes import Lanes
from daemon.inference.model_file import load_model_info
from daemon.inference.swap import ModelSwapper, SwapError, canary, check_model, sha256_of
from daemon.ops.http.api_models import parse
from tools.kit.daemon_config import MODELS, write_config

REPO_MODELS = MODELS[640].parent
NAMES = ("bolt", "hex_nut", "washer", "l_bracket")


def copy(name: str, to: Path) -> Path:
    target = to / name
    shutil.copyfile(REPO_MODELS / name, target)
    return target


def relabelled(src: Path, target: Path, names: list[str]) -> Path:
    """A copy of `src` whose metadata names other classes (same graph)."""
    model = onnx.load(str(src))
    for prop in model.metadata_props:
        if prop.key == "names":
            prop.value = json.dumps(names)
    onnx.save(model, str(target))
    return target


@pytest.fixture(scope="module")
def serving() -> Any:
    return load_model_info(MODELS[640])


def refused(status: int, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(SwapError) as caught:
        check_model(*args, **kwargs)
    assert caught.value.status == status
    return caught.value.reason


def test_a_model_of_the_same_size_and_classes_passes(tmp_path: Path, serving: Any) -> None:
    for name in ("conveyor-640-fp16.onnx", "conveyor-640-int8.onnx"):
        info = check_model(copy(name, tmp_path), 640, serving, [("belt", ["bolt"])])
        assert info.size == 640 and info.names == NAMES and info.name.startswith(name.removesuffix(".onnx"))
    assert len(sha256_of(tmp_path / "conveyor-640-int8.onnx")) == 64


def test_each_refusal_names_its_reason(tmp_path: Path, serving: Any) -> None:
    other = copy("conveyor-416.onnx", tmp_path)
    assert "input size 416, not 640" in refused(422, other, 640, serving, [])
    assert "no such file" in refused(422, tmp_path / "nope.onnx", 640, serving, [])
    assert "not absolute" in refused(400, Path("models/conveyor-640.onnx"), 640, serving, [])
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"this is not an ONNX file\n" * 10)
    assert str(junk) in refused(422, junk, 640, serving, [])

    renamed = relabelled(MODELS[640], tmp_path / "renamed.onnx", ["bolt", "nut", "washer", "bracket"])
    reason = refused(422, renamed, 640, serving, [])
    assert "differ from the serving model's" in reason and "allow_new_classes" in reason
    info = check_model(renamed, 640, serving, [("belt", ["bolt", "washer"])], allow_new_classes=True)
    assert info.names == ("bolt", "nut", "washer", "bracket")
    # a camera's class filter must still name labels the new model knows, allowed or not
    reason = refused(422, renamed, 640, serving, [("belt", ["hex_nut"])], allow_new_classes=True)
    assert "camera 'belt' filters on ['hex_nut']" in reason


class Broken:
    """An engine whose output is wrong in one way (the canary's other side)."""

    max_batch = 2
    providers = ("CPUExecutionProvider",)

    def __init__(self, out: Any) -> None:
        self.out = out

    def run(self, batch: Any) -> Any:
        if isinstance(self.out, Exception):
            raise self.out
        return self.out

    def close(self) -> None:
        pass


def test_the_canary_runs_a_real_session_and_refuses_bad_outputs(tmp_path: Path, serving: Any) -> None:
    engine = EngineFactory(cpu_settings(tmp_path).engine, Metrics()).build(serving, reason="test")
    try:
        canary(engine, serving)  # the real model: [n, 4 + 4, anchors], finite
    finally:
        engine.close()
    nan = np.full((2, 8, 10), np.nan, dtype=np.float32)
    with pytest.raises(SwapError, match="not finite"):
        canary(Broken(nan), serving)
    with pytest.raises(SwapError, match="shape"):
        canary(Broken(np.zeros((1, 8, 10), dtype=np.float32)), serving)
    with pytest.raises(SwapError, match="canary batch failed: boom"):
        canary(Broken(RuntimeError("boom")), serving)


def cpu_settings(folder: Path, cameras: list[dict[str, Any]] | None = None) -> Any:
    """The demo models on the CPU provider (Redis is never reached here)."""
    return load_settings(
        write_config(folder / "beltsight.toml", redis_url="redis://127.0.0.1:1", cameras=cameras or [])
    )


def test_the_request_body_is_checked() -> None:
    assert parse(b'{"path": "/m/a.onnx"}') == (Path("/m/a.onnx"), False)
    assert parse(b'{"path": "/m/a.onnx", "allow_new_classes": true}') == (Path("/m/a.onnx"), True)
    for body, problem in [
        (b"nope", "not JSON"),
        (b"[1]", "expected an object"),
        (b"{}", "path: a model file"),
        (b'{"path": "rel.onnx"}', "not absolute"),
        (b'{"path": "/a.onnx", "allow_new_classes": "yes"}', "true or false"),
        (b'{"path": "/a.onnx", "force": 1}', "unknown keys ['force']"),
    ]:
        with pytest.raises(ValueError, match=re.escape(problem)):
            parse(body)


def test_a_lane_not_started_yet_starts_on_the_swapped_model(tmp_path: Path) -> None:
    camera = {"id": "belt", "url": "rtsp://127.0.0.1:1/belt", "classes": ["bolt"]}
    settings = cpu_settings(tmp_path, [camera])
    metrics = Metrics()
    factory = EngineFactory(settings.engine, metrics)
    workers = LaneWorkers(settings, factory, prove_models(settings, factory), metrics, lambda e: None)
    lanes = Lanes(settings.engine, metrics, build=workers, batching=None, publish=None, observe=None)  # type: ignore[arg-type]
    events: list[StatusEvent] = []
    swapper = ModelSwapper(workers, lanes, on_event=events.append)
    old = workers.models.infos[640].name
    fp16 = copy("conveyor-640-fp16.onnx", tmp_path)
    renamed = relabelled(MODELS[640], tmp_path / "renamed.onnx", ["washer", "nut", "x", "y"])

    async def scenario() -> None:
        with pytest.raises(SwapError, match="no model of size 320"):
            await swapper.swap(320, fp16)
        with pytest.raises(SwapError, match="filters on \\['bolt'\\]"):
            await swapper.swap(640, renamed, allow_new_classes=True)
        done = await swapper.swap(640, fp16)
        assert (done.old, done.new, done.sha256) == (old, workers.models.infos[640].name, sha256_of(fp16))
        assert done.new != old and done.new.startswith("conveyor-640-fp16")

    try:
        asyncio.run(scenario())
        assert workers.models.infos[640].path == fp16
        engine, stage = workers(640, 0)  # worker 0 takes the swap's session
        assert (
            stage.info.path == fp16
            and metrics.registry.get_sample_value("beltsight_session_builds_total", {"model": "640", "reason": "swap"})
            == 1.0
        )
        engine.close()
    finally:
        workers.close()
    kinds = [e.kind for e in events]
    assert kinds == ["model_swap_failed", "model_swap_failed", "model_swapped"]
    failed = json.loads(events[1].detail)
    assert failed["size"] == 640 and failed["path"] == str(renamed) and "bolt" in failed["reason"]
    swapped = json.loads(events[2].detail)
    assert (swapped["size"], swapped["old"], swapped["new"]) == (640, old, workers.models.infos[640].name)
    assert swapped["sha256"] == sha256_of(fp16) and swapped["version"]
