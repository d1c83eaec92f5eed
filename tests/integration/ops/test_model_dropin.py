"""A model swap that sticks, on the real daemon (in-process, a replayed belt, a real Redis and the repo's
ONNX models): a model swapped through `POST /api/models/640` (with `If-Match`) is persisted in the models
drop-in and serves again after a restart; a reload compares against what serves: a reload that does not
touch `[models.640]` keeps the API's model, an edit of the file back to the original model and a reload
(what SIGHUP does) swap the original back and remove the drop-in's entry."""

from __future__ import annotations

import shutil
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon_harness import MODELS, InProcessDaemon, http_get, run_cli, write_config
from tests.support.fixtures_redis import RedisServer
from tests.support.fixtures_rtsp import Clip
from tests.support.http_api import LINE, running
from tests.support.http_api import request as api_request
from tests.support.streams import entries
from tests.support.waits import wait_until

pytestmark = pytest.mark.slow

FP16 = MODELS[640].parent / "conveyor-640-fp16.onnx"


def request(port: int, path: str, method: str = "GET", body: Any = None, **headers: str) -> tuple[int, Any]:
    """A request with time for a model to load and warm up (`headers`: `If_Match="..."`)."""
    sent = {k.replace("_", "-"): v for k, v in headers.items()}
    return api_request(port, path, method, body, sent, timeout_s=120)


def tag_and_state(port: int) -> tuple[str, dict[str, Any]]:
    """What serves 640 and its ETag."""
    reply = http_get(port, "/api/models/640", timeout_s=30)
    assert reply.status == 200, reply.body
    return reply.headers["ETag"], reply.json()


def tag(port: int) -> str:
    return tag_and_state(port)[0]


def config_for(tmp_path: Path, redis: RedisServer, clip: Clip, model_640: Path, lines: list[Any]) -> Path:
    camera = {"id": "belt", "url": str(clip.path), "loop": True, "realtime": True, "lines": lines}
    config = write_config(
        tmp_path / "beltsight.toml",
        redis_url=redis.url,
        cameras=[camera],
        health={"request_timeout_s": 120},  # a swap on a shared machine can take longer than the default 5 s
        tracking={"lines_dir": str(tmp_path / "lines")},
    )
    text = config.read_text()
    assert f'640 = "{MODELS[640]}"' in text
    config.write_text(text.replace(f'640 = "{MODELS[640]}"', f'640 = "{model_640}"'))
    return config


def serving(redis: RedisServer) -> str:
    """The model of the newest detections entry of the camera ("<size>:<name>")."""
    return entries(redis, "belt")[-1]["model"]


def test_a_model_swapped_through_the_api_serves_again_after_a_restart(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    redis = redis_server()
    clip = clip_factory(640, 480, fps=10, seconds=3.0, seed=21, synthetic=True)
    config = config_for(tmp_path, redis, clip, MODELS[640], [])
    dropin = tmp_path / "models.toml"
    with InProcessDaemon(config) as d:
        port = running(d)
        wait_until(lambda: len(entries(redis, "belt")) >= 3, 60, "detections on the configured model", d)
        before_tag, before = tag_and_state(port)
        assert before["path"] == str(MODELS[640]) and before["source"] == "config"
        assert serving(redis) == f"640:{before['name']}"
        status, listing = request(port, "/api/models")
        assert status == 200 and [m["size"] for m in listing["models"]] == sorted(m for m in MODELS)
        assert next(m for m in listing["models"] if m["size"] == 640)["etag"] == before_tag

        status, body = request(port, "/api/models/640", "POST", {"path": str(FP16)}, If_Match=before_tag)
        assert status == 200, body
        new_tag, state = tag_and_state(port)
        assert state["path"] == str(FP16) and state["source"] == "drop-in" and state["sha256"] == body["sha256"]
        assert new_tag != before_tag
        # persisted before the answer: the drop-in names the new model and the entry it replaced
        kept = tomllib.loads(dropin.read_text())
        assert kept["640"]["model"]["path"] == str(FP16) and kept["640"]["replaces"]["path"] == str(MODELS[640])
        wait_until(lambda: serving(redis) == f"640:{body['new']}", 120, "detections on the swapped model", d)

        # a second writer still holding the first tag: 412 with what serves, nothing swapped
        status, reply = request(port, "/api/models/640", "POST", {"path": str(MODELS[640])}, If_Match=before_tag)
        assert (status, reply) == (412, state)
        assert tomllib.loads(dropin.read_text()) == kept
        served = len(entries(redis, "belt"))

    done = run_cli("check-config", "-c", str(config))
    assert done.returncode == 0 and f"model 640: from drop-in {dropin}" in done.stderr, done.stderr

    with InProcessDaemon(config) as d:  # the restart
        port = running(d)
        assert tag_and_state(port) == (new_tag, state)
        wait_until(lambda: len(entries(redis, "belt")) >= served + 3, 60, "detections after the restart", d)
        assert {e["model"] for e in entries(redis, "belt")[served:]} == {f"640:{body['new']}"}


def test_a_reload_compares_against_what_serves_and_an_edit_back_to_the_original_model_wins(
    tmp_path: Path, redis_server: Callable[..., RedisServer], clip_factory: Callable[..., Clip]
) -> None:
    redis = redis_server()
    clip = clip_factory(640, 480, fps=10, seconds=3.0, seed=21, synthetic=True)
    copy = tmp_path / "conveyor-640-copy.onnx"  # another file with the same classes: another model entry
    shutil.copyfile(MODELS[640], copy)
    dropin = tmp_path / "models.toml"
    config = config_for(tmp_path, redis, clip, MODELS[640], [])
    with InProcessDaemon(config) as d:
        port = running(d)
        original = tag_and_state(port)[1]
        wait_until(lambda: len(entries(redis, "belt")) >= 3, 60, "detections on the original model", d)

        # the operator edits the file to the copy and reloads: it serves
        config_for(tmp_path, redis, clip, copy, [])
        d.reload()
        wait_until(lambda: tag_and_state(port)[1]["path"] == str(copy), 120, "the file's model after a reload", d)
        assert tag_and_state(port)[1]["source"] == "config" and not dropin.exists()

        # someone swaps FP16 in through the API: it replaces the copy
        status, body = request(port, "/api/models/640", "POST", {"path": str(FP16)}, If_Match=tag(port))
        assert status == 200, body
        assert tomllib.loads(dropin.read_text())["640"]["replaces"]["path"] == str(copy)

        # a reload that does not touch [models.640] (the lines changed) keeps the API's model
        config_for(tmp_path, redis, clip, copy, [LINE])
        d.reload()
        wait_until(lambda: request(port, "/api/cameras/belt/lines")[1]["lines"] != [], 60, "the reloaded lines", d)
        assert tag_and_state(port)[1]["path"] == str(FP16) and "640" in tomllib.loads(dropin.read_text())
        wait_until(lambda: serving(redis) == f"640:{body['new']}", 120, "detections on the API's model", d)

        # the file edited back to the original model and reloaded: the original serves, the entry is gone
        config_for(tmp_path, redis, clip, MODELS[640], [LINE])
        d.reload()
        wait_until(lambda: tag_and_state(port)[1]["path"] == str(MODELS[640]), 120, "the original model back", d)
        assert tag_and_state(port)[1] == original
        # the reload prunes the drop-in after the swap it serves (ModelsControl.reload): wait for it
        wait_until(lambda: tomllib.loads(dropin.read_text()) == {}, 30, "the drop-in entry pruned", d)
        wait_until(lambda: serving(redis) == f"640:{original['name']}", 120, "detections on the original model", d)
