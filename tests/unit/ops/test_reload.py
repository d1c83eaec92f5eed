"""What a reload applies live and what it names as needing a restart (`daemon.ops.reload`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from daemon.config.settings import Settings, load_settings
from daemon.ops.reload import restart_needed, rules_settings
from tools.kit.daemon_config import write_config

LINE = {"id": "count", "start": [0.5, 0.0], "end": [0.5, 1.0]}


def settings(tmp_path: Path, cameras: list[dict[str, Any]], **keys: Any) -> Settings:
    path = write_config(
        tmp_path / "beltsight.toml",
        redis_url="redis://127.0.0.1:1",
        cameras=cameras,
        tracking={"lines_dir": str(tmp_path / "lines"), **keys.pop("tracking", {})},
        **keys,
    )
    return load_settings(path)


def test_live_keys_need_no_restart_and_the_rest_is_named(tmp_path: Path) -> None:
    cam = {"id": "a", "url": "rtsp://127.0.0.1:1/a", "lines": [LINE]}
    started = settings(tmp_path, [cam])
    live = settings(
        tmp_path,
        [{**cam, "lines": [], "mm_per_px": 0.5, "conf_threshold": 0.7}],
        conf_threshold=0.3,
        tracking={"lost_s": 2.0, "anchor": "bottom_center"},
    )
    assert restart_needed(started, live) == []
    other = settings(
        tmp_path,
        [{**cam, "url": "rtsp://127.0.0.1:2/a"}, {"id": "b", "url": "rtsp://127.0.0.1:1/b"}],
        max_batch=2,
        tracking={"enabled": False},
    )
    assert restart_needed(started, other) == [
        "cameras.a.url",
        "cameras.b added",
        "engine.max_batch",
        "tracking.enabled",
    ]
    assert restart_needed(other, started) == [
        "cameras.a.url",
        "cameras.b removed",
        "engine.max_batch",
        "tracking.enabled",
    ]


def test_the_lanes_rules_take_the_new_thresholds_for_the_cameras_that_run(tmp_path: Path) -> None:
    cam = {"id": "a", "url": "rtsp://127.0.0.1:1/a", "classes": ["part"]}
    started = settings(tmp_path, [cam])
    new = settings(
        tmp_path,
        [{"id": "a", "url": "rtsp://127.0.0.1:1/a", "conf_threshold": 0.9}, {"id": "b", "url": "rtsp://127.0.0.1:1/b"}],
        conf_threshold=0.4,
        tracking={"low_score": 0.2},
    )
    rules = rules_settings(started, new)
    assert [c.id for c in rules.cameras] == ["a"]  # an added camera waits for a restart
    assert rules.cameras[0].conf_threshold == 0.9 and rules.cameras[0].classes == ["part"]  # classes: a restart
    assert rules.engine.conf_threshold == 0.4 and rules.tracking.low_score == 0.2
