"""`POST /api/models/{size}` on the real daemon (in-process) with a real RTSP camera and Redis: the 640
lane's model swapped for the repo's FP16 file while parts cross a counting line. The detections' `model`
field changes from some frame on and never goes back, every frame decoded is published or counted as
dropped (never `engine_error`), no frame is published twice, the line's count continues; each refused
file (another input size, another class list, not a model, no file) leaves the old model serving with
`model_swap_failed` in `beltsight:events`; writes are refused (403) unless the endpoint is authenticated
(401 without credentials) or loopback-only."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import bcrypt
import onnx
import pytest
from aiohttp.test_utils import make_mocked_request

from daemon.core.metrics import Metrics
from daemon.inference.swap import Swapped
from daemon.ops.http import HealthServer
from daemon.ops.http.api_models import ModelsApi
from tests.support.daemon_harness import MODELS, InProcessDaemon, write_config
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip, RtspServer
from tests.support.http_api import LINE, crossings, events, running
from tests.support.http_api import request as api_request
from tests.support.streams import entries
from tests.support.waits import wait_until

pytestmark = pytest.mark.slow


def request(
    port: int, path: str, method: str = "GET", body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    """A request with time for a model to load and warm up."""
    return api_request(port, path, method, body, headers, timeout_s=60)


def total(metrics: Metrics, name: str, **labels: str) -> float:
    """The sum of a counter's samples whose labels include `labels`."""
    return sum(
        sample.value
        for family in metrics.registry.collect()
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )


def relabelled(target: Path, names: list[str]) -> Path:
    model = onnx.load(str(MODELS[640]))
    for prop in model.metadata_props:
        if prop.key == "names":
            prop.value = json.dumps(names)
    onnx.save(model, str(target))
    return target


def models_of(redis: RedisServer, camera: str) -> list[str]:
    return [f["model"] for f in entries(redis, camera)]


def test_a_model_swapped_under_a_running_camera_serves_from_one_frame_on(
    tmp_path: Path,
    redis_server: Callable[..., RedisServer],
    rtsp_server: Callable[..., RtspServer],
    clip_factory: Callable[..., Clip],
) -> None:
    redis = redis_server()
    clip = clip_factory(640, 480, fps=10, seconds=4.0, seed=21, synthetic=True)
    server = rtsp_server({"belt": clip.path})
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[{"id": "belt", "url": server.url("belt"), "lines": [LINE]}],
        health={"request_timeout_s": 120},  # the endpoint's 5 s deadline cut swaps short on a loaded machine
        tracking={"lines_dir": str(tmp_path / "lines")},
    )
    fp16 = tmp_path / "conveyor-640-fp16.onnx"
    shutil.copyfile(MODELS[640].parent / fp16.name, fp16)
    wrong_size = tmp_path / "conveyor-416.onnx"
    shutil.copyfile(MODELS[416], wrong_size)
    renamed = relabelled(tmp_path / "renamed.onnx", ["bolt", "nut", "washer", "bracket"])
    junk = tmp_path / "junk.onnx"
    junk.write_text("not a model\n")
    with InProcessDaemon(config) as d:
        port = running(d)
        wait_until(lambda: len(crossings(redis, "belt", "count")) >= 1, 90, "a part counted before the swap", d)
        old = models_of(redis, "belt")[0]  # "<size>:<name>"
        assert old.startswith("640:conveyor-640@")

        refusals = [
            (wrong_size, 422, "input size 416, not 640"),
            (renamed, 422, "allow_new_classes"),
            (junk, 422, str(junk)),
            (tmp_path / "missing.onnx", 422, "no such file"),
        ]
        for path, status, reason in refusals:
            got, body = request(port, "/api/models/640", "POST", {"path": str(path)})
            assert (got, reason in body["reason"]) == (status, True), body
        assert request(port, "/api/models/640", "POST", {"path": "relative.onnx"})[0] == 400
        # the audit entries go through the sink: wait for them rather than race it
        wait_until(lambda: len(events(redis, "model_swap_failed")) >= len(refusals), 30, "the refusals' audit", d)
        failed = [json.loads(e["detail"]) for e in events(redis, "model_swap_failed")]
        assert [(f["size"], f["path"]) for f in failed] == [(640, str(p)) for p, _s, _r in refusals]
        served = len(entries(redis, "belt"))
        wait_until(lambda: len(entries(redis, "belt")) > served + 5, 60, "frames after the refusals", d)
        assert set(models_of(redis, "belt")) == {old}  # the old model still serves

        counted = len(crossings(redis, "belt", "count"))
        status, body = request(port, "/api/models/640", "POST", {"path": str(fp16), "allow_new_classes": False})
        assert status == 200, body
        new = f"640:{body['new']}"
        assert f"640:{body['old']}" == old and body["new"].startswith("conveyor-640-fp16@") and body["size"] == 640
        assert len(body["sha256"]) == 64 and body["version"] and body["path"] == str(fp16)
        wait_until(lambda: models_of(redis, "belt")[-1] == new, 60, "a frame on the new model", d)
        wait_until(lambda: len(crossings(redis, "belt", "count")) > counted, 90, "a part counted after the swap", d)
        swapped = [json.loads(e["detail"]) for e in events(redis, "model_swapped")]
        assert [(s["size"], s["old"], s["new"], s["sha256"]) for s in swapped] == [
            (640, body["old"], body["new"], body["sha256"])
        ]

    # the model field changes once and never goes back
    models = models_of(redis, "belt")
    first_new = models.index(new)
    assert set(models[:first_new]) == {old} and set(models[first_new:]) == {new}
    # every frame decoded published or counted as dropped, none twice, none lost to the engine
    got = entries(redis, "belt")
    keys = [(int(f["seq"]), int(f["captured_ms"])) for f in got]
    assert len(set(keys)) == len(keys), "a frame published twice"
    decoded = total(d.metrics, "beltsight_frames_decoded_total", camera="belt")
    dropped = total(d.metrics, "beltsight_frames_dropped_total", camera="belt")
    assert total(d.metrics, "beltsight_frames_dropped_total", reason="engine_error") == 0
    assert total(d.metrics, "beltsight_entries_published_total", camera="belt") == len(got)
    assert decoded == len(got) + dropped
    seqs = [int(f["seq"]) for f in got]
    gaps = sum(b - a - 1 for a, b in itertools.pairwise(seqs) if b > a)
    assert gaps <= dropped  # every seq missing from the stream was a counted drop
    # the line's count continued through the swap: 1, 2, 3, ... never restarted
    counts_in = [c.count for c in crossings(redis, "belt", "count") if c.direction == "in"]
    assert counts_in == list(range(1, len(counts_in) + 1)) and len(counts_in) >= 2


class NotReached:
    """Models the guard must keep requests from (every request here is refused or malformed)."""

    sizes = (640,)

    async def swap(self, size: int, path: Path, **kwargs: Any) -> Swapped:
        raise AssertionError("the guard let a request through")


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_writes_need_authentication_or_a_loopback_only_endpoint() -> None:
    async def scenario() -> None:
        open_server = HealthServer("0.0.0.0", 0, Metrics().registry, lambda: {"ok": True})
        api = ModelsApi(open_server, NotReached())  # type: ignore[arg-type]
        reply = await api.handle(make_mocked_request("POST", "/api/models/640"), {"size": "640"})
        assert reply.status == 403
        hashed = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()
        locked = HealthServer("127.0.0.1", 0, Metrics().registry, lambda: {"ok": True}, users={"ann": hashed})
        ModelsApi(locked, NotReached()).register()  # type: ignore[arg-type]
        await locked.start()
        try:
            loop = asyncio.get_running_loop()
            body = {"path": "relative.onnx"}

            def call(*args: Any) -> tuple[int, Any]:
                return request(locked.port, "/api/models/640", "POST", *args)

            assert (await loop.run_in_executor(None, call, body))[0] == 401
            assert (await loop.run_in_executor(None, call, body, basic("ann", "no")))[0] == 401
            status, reply_body = await loop.run_in_executor(None, call, body, basic("ann", "pw"))
            assert status == 400 and "not absolute" in reply_body["reason"]  # through the guard, to the checks
            get = await loop.run_in_executor(None, lambda: request(locked.port, "/api/models/640", "GET"))
            assert get[0] in (401, 405)
        finally:
            await locked.close()

    asyncio.run(scenario())
